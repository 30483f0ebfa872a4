#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/reference_kernels.h"
#include "kernels/elementwise.h"
#include "kernels/fast_math.h"
#include "kernels/transpose.h"
#include "util/status_macros.h"

namespace meshrt {
namespace kernels {
namespace {

// Each reduction's identity, pairwise combine and whole-row fold (kernels/fast_math.h, in
// independent vector lanes).
struct SumOp {
  static float Init() { return 0.0f; }
  static float Combine(float a, float b) { return a + b; }
  static float FoldRow(const float* p, int64_t n) { return SumArray(p, n); }
};
struct MaxOp {
  static float Init() { return -std::numeric_limits<float>::infinity(); }
  static float Combine(float a, float b) { return std::max(a, b); }
  static float FoldRow(const float* p, int64_t n) { return MaxArray(p, n); }
};
struct MinOp {
  static float Init() { return std::numeric_limits<float>::infinity(); }
  static float Combine(float a, float b) { return std::min(a, b); }
  static float FoldRow(const float* p, int64_t n) { return MinArray(p, n); }
};

template <typename Op>
void FoldIntoRow(const float* p, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = Op::Combine(out[j], p[j]);
}

// Reduces into `out`, whose dims are the kept dims of `in_shape` in the input's order.
template <typename Op>
void ReduceInOrder(const float* in, const Shape& in_shape, float* out, const Shape& kept) {
  std::fill(out, out + kept.num_elements(), Op::Init());
  // Out strides are 0 on reduced dims, so fusing merges runs of reduced dims and runs of kept dims.
  const FusedSpace f = Fuse(in_shape.Sizes(), {in_shape.Strides(), StridesByName(kept, in_shape)});
  const int r = static_cast<int>(f.sizes.size());
  if (r == 0) {
    out[0] = Op::Combine(out[0], in[0]);
    return;
  }
  const int64_t n = f.sizes[r - 1];
  const bool last_reduced = f.strides[1][r - 1] == 0;
  std::vector<int64_t> outer_sizes(f.sizes.begin(), f.sizes.end() - 1);
  std::vector<std::vector<int64_t>> outer_strides = {
      std::vector<int64_t>(f.strides[0].begin(), f.strides[0].end() - 1),
      std::vector<int64_t>(f.strides[1].begin(), f.strides[1].end() - 1)};
  for (StridedIterator it(outer_sizes, outer_strides); !it.done(); it.Next()) {
    const float* row = in + it.offset(0);
    float* o = out + it.offset(1);
    if (last_reduced) {
      *o = Op::Combine(*o, Op::FoldRow(row, n));
    } else {
      FoldIntoRow<Op>(row, n, o);
    }
  }
}

// `in_shape` restricted to the dims of `out_shape`, in the input's order.
Shape Kept(const Shape& in_shape, const Shape& out_shape) {
  std::vector<Dim> dims;
  for (const Dim& d : in_shape.dims()) {
    if (out_shape.Contains(d.name)) dims.push_back(d);
  }
  return Shape(std::move(dims));
}

// A buffer of `to`'s size holding `src` (shape `from`, dims a subset of `to`'s) broadcast by name.
std::vector<float> Broadcast(const float* src, const Shape& from, const Shape& to) {
  std::vector<float> out(to.num_elements());
  PermuteCopy(src, from, out.data(), to);
  return out;
}

// Output order = kept order, or a temporary and a permutation.
template <typename Fn>
void IntoOrder(const Shape& kept, float* out, const Shape& out_shape, int64_t* scratch, Fn fill) {
  if (DropUnitDims(kept) == DropUnitDims(out_shape)) {
    fill(out);
    return;
  }
  std::vector<float> tmp(kept.num_elements());
  if (scratch != nullptr) *scratch += tmp.size() * sizeof(float);
  fill(tmp.data());
  PermuteCopy(tmp.data(), kept, out, out_shape);
}

absl::Status CheckFloat(const Tensor& t, absl::string_view what) {
  if (t.dtype() != DType::kFloat32) {
    return absl::UnimplementedError(absl::StrCat("the fast reductions take float32 only; ", what,
                                                 " is ", DTypeName(t.dtype())));
  }
  return absl::OkStatus();
}

// Checks x and out (float32, same shape) and dims (non-empty, dims of x). Returns x's other dims.
absl::StatusOr<Shape> KeptForNormalize(const Tensor& x, const std::vector<std::string>& dims,
                                       const Tensor& out) {
  RETURN_IF_ERROR(CheckFloat(x, "the input"));
  RETURN_IF_ERROR(CheckFloat(out, "the output"));
  if (x.shape() != out.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the output ", out.shape().ToString(), " differs from the input ", x.shape().ToString()));
  }
  if (dims.empty()) return absl::InvalidArgumentError("no dims to normalise over");
  std::set<std::string> names;
  for (const std::string& d : dims) {
    if (!x.shape().Contains(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalises dim '", d, "' but the input is ", x.shape().ToString()));
    }
    names.insert(d);
  }
  std::vector<Dim> kept;
  for (const Dim& d : x.shape().dims()) {
    if (!names.count(d.name)) kept.push_back(d);
  }
  return Shape(std::move(kept));
}

// True when `dims` are exactly the innermost dims of `x` (in any order): then each normalised
// group is one contiguous row.
bool TrailingDims(const Shape& x, const std::vector<std::string>& dims) {
  const int r = static_cast<int>(dims.size());
  if (r > x.rank()) return false;
  for (int i = x.rank() - r; i < x.rank(); ++i) {
    if (std::find(dims.begin(), dims.end(), x.dim(i).name) == dims.end()) return false;
  }
  return true;
}

// Softmax (or log-softmax) of each contiguous row of `row` elements: max, exp and sum, scale —
// no scratch tensors.
MESHRT_EXACT_VECTOR_CLONES
void SoftmaxRows(const float* p, int64_t n, int64_t row, bool log, float* o) {
  if (row == 0) return;
  for (int64_t start = 0; start < n; start += row) {
    const float* x = p + start;
    float* y = o + start;
    const float m = MaxArray(x, row);
    ExpArray(x, m, y, row);  // masked logits (-1e9) give exactly 0
    const float sum = SumArray(y, row);
    if (log) {
      const float shift = m + std::log(sum);
      for (int64_t j = 0; j < row; ++j) y[j] = x[j] - shift;
    } else {
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < row; ++j) y[j] *= inv;
    }
  }
}

// True when `t` is absent or holds exactly x's last `r` dims in x's order: then element j of a
// contiguous row of x pairs with t's element j.
bool RowAligned(const Tensor* t, const Shape& x, int r) {
  if (t == nullptr) return true;
  if (t->shape().rank() != r) return false;
  for (int i = 0; i < r; ++i) {
    if (t->shape().dim(i) != x.dim(x.rank() - r + i)) return false;
  }
  return true;
}

// Layer / RMS norm of each contiguous row: mean, centred sum of squares, then one pass that
// scales and shifts. Same arithmetic as the general path, without its scratch tensors.
MESHRT_EXACT_VECTOR_CLONES
void NormalizeRows(const float* p, int64_t n, int64_t row, const float* scale, const float* bias,
                   float epsilon, bool rms, float* o) {
  for (int64_t start = 0; start < n; start += row) {
    const float* x = p + start;
    float* y = o + start;
    const float mean = rms ? 0.0f : SumArray(x, row) / static_cast<float>(row);
    for (int64_t j = 0; j < row; ++j) y[j] = x[j] - mean;
    const float inv = 1.0f / std::sqrt(DotArray(y, y, row) / static_cast<float>(row) + epsilon);
    if (scale != nullptr && bias != nullptr) {
      for (int64_t j = 0; j < row; ++j) y[j] = y[j] * inv * scale[j] + bias[j];
    } else if (scale != nullptr) {
      for (int64_t j = 0; j < row; ++j) y[j] = y[j] * inv * scale[j];
    } else if (bias != nullptr) {
      for (int64_t j = 0; j < row; ++j) y[j] = y[j] * inv + bias[j];
    } else {
      for (int64_t j = 0; j < row; ++j) y[j] *= inv;
    }
  }
}

// One addend of AddSoftmax, read one row of x at a time: its values with its dims in x's order
// (permuted once into `copy` when the tensor's own order differs), its strides over x's outer
// dims (those before the row), and the row's dims fused ({its strides, the row's own}).
struct RowAddend {
  std::vector<float> copy;
  const float* data = nullptr;
  std::vector<int64_t> outer;
  FusedSpace row;
};

RowAddend MakeRowAddend(const Tensor& t, const Shape& xs, int outer_rank) {
  RowAddend r;
  const Shape ordered = Kept(xs, t.shape());
  const bool permute = DropUnitDims(ordered) != DropUnitDims(t.shape());
  if (permute) {
    r.copy.resize(t.num_elements());
    PermuteCopy(t.f32(), t.shape(), r.copy.data(), ordered);
  }
  r.data = permute ? r.copy.data() : t.f32();
  const std::vector<int64_t> strides = StridesByName(permute ? ordered : t.shape(), xs);
  const std::vector<int64_t> sizes = xs.Sizes(), own = xs.Strides();
  r.outer.assign(strides.begin(), strides.begin() + outer_rank);
  r.row =
      Fuse({sizes.begin() + outer_rank, sizes.end()},
           {{strides.begin() + outer_rank, strides.end()}, {own.begin() + outer_rank, own.end()}});
  return r;
}

// The addend's elements of the row starting at r.data + offset: there when contiguous (or a row
// of one element), else gathered into `tmp` (one row).
const float* RowOf(const RowAddend& r, int64_t offset, float* tmp) {
  const float* p = r.data + offset;
  if (r.row.sizes.empty() || (r.row.sizes.size() == 1 && r.row.strides[0][0] == 1)) return p;
  if (r.row.sizes.size() == 1) {  // one stride (0: one value broadcast along the row)
    const int64_t s = r.row.strides[0][0];
    for (int64_t j = 0; j < r.row.sizes[0]; ++j) tmp[j] = p[j * s];
    return tmp;
  }
  int64_t j = 0;
  for (StridedIterator it(r.row.sizes, {r.row.strides[0]}); !it.done(); it.Next()) {
    tmp[j++] = p[it.offset(0)];
  }
  return tmp;
}

}  // namespace

void ReduceRaw(ReduceKind kind, const float* in, const Shape& in_shape, float* out,
               const Shape& out_shape, int64_t* scratch_bytes) {
  const Shape kept = Kept(in_shape, out_shape);
  const int64_t in_n = in_shape.num_elements();
  const int64_t out_n = out_shape.num_elements();
  if (in_n == 0 || out_n == 0) return;
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean:
      IntoOrder(kept, out, out_shape, scratch_bytes,
                [&](float* o) { ReduceInOrder<SumOp>(in, in_shape, o, kept); });
      break;
    case ReduceKind::kMax:
      IntoOrder(kept, out, out_shape, scratch_bytes,
                [&](float* o) { ReduceInOrder<MaxOp>(in, in_shape, o, kept); });
      break;
    case ReduceKind::kMin:
      IntoOrder(kept, out, out_shape, scratch_bytes,
                [&](float* o) { ReduceInOrder<MinOp>(in, in_shape, o, kept); });
      break;
    case ReduceKind::kAny:
    case ReduceKind::kAll: {
      std::vector<float> flags(in_n);
      if (scratch_bytes != nullptr) *scratch_bytes += in_n * sizeof(float);
      for (int64_t i = 0; i < in_n; ++i) flags[i] = in[i] != 0.0f ? 1.0f : 0.0f;
      ReduceRaw(kind == ReduceKind::kAny ? ReduceKind::kMax : ReduceKind::kMin, flags.data(),
                in_shape, out, out_shape, scratch_bytes);
      break;
    }
    case ReduceKind::kLogSumExp: {
      // max, then sum of exp(x - max), then log + max: stable for large |x|.
      std::vector<float> m(kept.num_elements()), s(kept.num_elements());
      ReduceInOrder<MaxOp>(in, in_shape, m.data(), kept);
      std::vector<float> e = Broadcast(m.data(), kept, in_shape);
      if (scratch_bytes != nullptr) *scratch_bytes += (in_n + 2 * m.size()) * sizeof(float);
      ExpDiffArray(in, e.data(), e.data(), in_n);
      ReduceInOrder<SumOp>(e.data(), in_shape, s.data(), kept);
      for (size_t k = 0; k < s.size(); ++k) s[k] = std::log(s[k]) + m[k];
      PermuteCopy(s.data(), kept, out, out_shape);
      break;
    }
  }
  if (kind == ReduceKind::kMean) {
    const float count = static_cast<float>(in_n / out_n);
    for (int64_t i = 0; i < out_n; ++i) out[i] /= count;
  }
}

absl::Status Reduce(ReduceKind kind, const Tensor& in, Tensor* out) {
  RETURN_IF_ERROR(CheckFloat(in, "the input"));
  RETURN_IF_ERROR(CheckFloat(*out, "the output"));
  RETURN_IF_ERROR(CheckDimsIn(out->shape(), "the output", in.shape(), "the input"));
  ReduceRaw(kind, in.f32(), in.shape(), out->f32(), out->shape());
  return absl::OkStatus();
}

absl::Status Softmax(const Tensor& x, const std::vector<std::string>& dims, bool log, Tensor* out) {
  ASSIGN_OR_RETURN(Shape kept, KeptForNormalize(x, dims, *out));
  const Shape& xs = x.shape();
  const int64_t n = x.num_elements();
  const float* p = x.f32();
  float* o = out->f32();
  if (TrailingDims(xs, dims)) {
    SoftmaxRows(p, n, kept.num_elements() == 0 ? 0 : n / kept.num_elements(), log, o);
    return absl::OkStatus();
  }
  std::vector<float> stat(kept.num_elements());
  ReduceInOrder<MaxOp>(p, xs, stat.data(), kept);
  std::vector<float> buf = Broadcast(stat.data(), kept, xs);
  if (!log) {
    ExpDiffArray(p, buf.data(), o, n);
    ReduceInOrder<SumOp>(o, xs, stat.data(), kept);
    PermuteCopy(stat.data(), kept, buf.data(), xs);
    for (int64_t i = 0; i < n; ++i) o[i] /= buf[i];
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < n; ++i) o[i] = p[i] - buf[i];
  ExpArray(o, 0.0f, buf.data(), n);
  ReduceInOrder<SumOp>(buf.data(), xs, stat.data(), kept);
  for (float& v : stat) v = std::log(v);
  PermuteCopy(stat.data(), kept, buf.data(), xs);
  for (int64_t i = 0; i < n; ++i) o[i] -= buf[i];
  return absl::OkStatus();
}

absl::Status AddSoftmax(const Tensor& a, const Tensor& b, const std::vector<std::string>& dims,
                        bool log, Tensor* out) {
  RETURN_IF_ERROR(CheckFloat(a, "addend a"));
  RETURN_IF_ERROR(CheckFloat(b, "addend b"));
  ASSIGN_OR_RETURN(Shape kept, KeptForNormalize(*out, dims, *out));
  const Shape& xs = out->shape();
  RETURN_IF_ERROR(CheckDimsIn(a.shape(), "addend a", xs, "the output"));
  RETURN_IF_ERROR(CheckDimsIn(b.shape(), "addend b", xs, "the output"));
  const int64_t n = xs.num_elements();
  if (n == 0) return absl::OkStatus();
  if (!TrailingDims(xs, dims)) {  // no contiguous rows: the sum, then the softmax
    Tensor sum = Tensor::Uninitialized(DType::kFloat32, xs);
    RETURN_IF_ERROR(Binary(BinaryOp::kAdd, a, b, &sum));
    return Softmax(sum, dims, log, out);
  }
  // Each row's sum goes to a scratch row (in cache) right before that row's softmax: the same
  // floats Binary writes (a's element + b's, rounded), then the same SoftmaxRows.
  const int outer_rank = kept.rank();
  const int64_t row = n / kept.num_elements();
  const RowAddend ra = MakeRowAddend(a, xs, outer_rank), rb = MakeRowAddend(b, xs, outer_rank);
  std::vector<float> sum(row), ta(row), tb(row);
  const std::vector<int64_t> sizes = xs.Sizes();
  float* o = out->f32();
  int64_t start = 0;
  for (StridedIterator it({sizes.begin(), sizes.begin() + outer_rank}, {ra.outer, rb.outer});
       !it.done(); it.Next(), start += row) {
    const float* pa = RowOf(ra, it.offset(0), ta.data());
    const float* pb = RowOf(rb, it.offset(1), tb.data());
    for (int64_t j = 0; j < row; ++j) sum[j] = pa[j] + pb[j];
    SoftmaxRows(sum.data(), row, row, log, o + start);
  }
  return absl::OkStatus();
}

absl::Status SoftmaxGrad(const Tensor& y, const Tensor& dy, const std::vector<std::string>& dims,
                         Tensor* out) {
  ASSIGN_OR_RETURN(Shape kept, KeptForNormalize(y, dims, *out));
  RETURN_IF_ERROR(CheckFloat(dy, "dy"));
  if (dy.shape() != y.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("dy ", dy.shape().ToString(),
                                                   " must have the shape of y ",
                                                   y.shape().ToString()));
  }
  const Shape& ys = y.shape();
  const int64_t n = y.num_elements();
  const float* py = y.f32();
  const float* pd = dy.f32();
  float* o = out->f32();
  if (TrailingDims(ys, dims)) {  // each row contiguous: one dot, one pass
    const int64_t row = kept.num_elements() == 0 ? 0 : n / kept.num_elements();
    for (int64_t start = 0; row > 0 && start < n; start += row) {
      float s = 0;
      for (int64_t j = start; j < start + row; ++j) s += py[j] * pd[j];
      for (int64_t j = start; j < start + row; ++j) o[j] = py[j] * (pd[j] - s);
    }
    return absl::OkStatus();
  }
  std::vector<float> prod(n);
  for (int64_t i = 0; i < n; ++i) prod[i] = py[i] * pd[i];
  std::vector<float> stat(kept.num_elements());
  ReduceInOrder<SumOp>(prod.data(), ys, stat.data(), kept);
  std::vector<float> s = Broadcast(stat.data(), kept, ys);
  for (int64_t i = 0; i < n; ++i) o[i] = py[i] * (pd[i] - s[i]);
  return absl::OkStatus();
}

absl::Status Normalize(const Tensor& x, const Tensor* scale, const Tensor* bias,
                       const std::vector<std::string>& dims, float epsilon, bool rms, Tensor* out) {
  ASSIGN_OR_RETURN(Shape kept, KeptForNormalize(x, dims, *out));
  for (const Tensor* t : {scale, bias}) {
    if (t == nullptr) continue;
    RETURN_IF_ERROR(CheckFloat(*t, t == scale ? "scale" : "bias"));
    RETURN_IF_ERROR(CheckDimsIn(t->shape(), t == scale ? "scale" : "bias", x.shape(), "x"));
  }
  const Shape& xs = x.shape();
  const int64_t n = x.num_elements();
  if (n == 0) return absl::OkStatus();
  const float count = static_cast<float>(n / kept.num_elements());
  const float* p = x.f32();
  float* o = out->f32();
  const int r = static_cast<int>(dims.size());
  if (TrailingDims(xs, dims) && out->shape() == xs && RowAligned(scale, xs, r) &&
      RowAligned(bias, xs, r)) {
    NormalizeRows(p, n, n / kept.num_elements(), scale != nullptr ? scale->f32() : nullptr,
                  bias != nullptr ? bias->f32() : nullptr, epsilon, rms, o);
    return absl::OkStatus();
  }
  std::vector<float> stat(kept.num_elements());
  std::vector<float> buf(n);
  if (rms) {
    std::copy(p, p + n, o);
  } else {
    ReduceInOrder<SumOp>(p, xs, stat.data(), kept);
    for (float& v : stat) v /= count;
    PermuteCopy(stat.data(), kept, buf.data(), xs);
    for (int64_t i = 0; i < n; ++i) o[i] = p[i] - buf[i];
  }
  for (int64_t i = 0; i < n; ++i) buf[i] = o[i] * o[i];
  ReduceInOrder<SumOp>(buf.data(), xs, stat.data(), kept);
  for (float& v : stat) v = 1.0f / std::sqrt(v / count + epsilon);
  PermuteCopy(stat.data(), kept, buf.data(), xs);
  for (int64_t i = 0; i < n; ++i) o[i] *= buf[i];
  if (scale != nullptr) {
    PermuteCopy(scale->f32(), scale->shape(), buf.data(), xs);
    for (int64_t i = 0; i < n; ++i) o[i] *= buf[i];
  }
  if (bias != nullptr) {
    PermuteCopy(bias->f32(), bias->shape(), buf.data(), xs);
    for (int64_t i = 0; i < n; ++i) o[i] += buf[i];
  }
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropy(const Tensor& logits, const Tensor& targets, Tensor* out) {
  RETURN_IF_ERROR(CheckFloat(logits, "the logits"));
  RETURN_IF_ERROR(CheckFloat(targets, "the targets"));
  RETURN_IF_ERROR(CheckFloat(*out, "the output"));
  const Shape& ls = logits.shape();
  RETURN_IF_ERROR(CheckDimsIn(ls, "the logits", targets.shape(), "the targets"));
  RETURN_IF_ERROR(CheckDimsIn(targets.shape(), "the targets", ls, "the logits"));
  RETURN_IF_ERROR(CheckDimsIn(out->shape(), "the output", ls, "the logits"));
  const int64_t n = logits.num_elements();
  if (n == 0) return absl::OkStatus();
  const Shape kept = Kept(ls, out->shape());
  const float* l = logits.f32();
  std::vector<float> stat(kept.num_elements());
  ReduceInOrder<MaxOp>(l, ls, stat.data(), kept);
  std::vector<float> z = Broadcast(stat.data(), kept, ls);
  std::vector<float> buf(n);
  for (int64_t i = 0; i < n; ++i) z[i] = l[i] - z[i];
  ExpArray(z.data(), 0.0f, buf.data(), n);
  ReduceInOrder<SumOp>(buf.data(), ls, stat.data(), kept);
  for (float& v : stat) v = std::log(v);
  PermuteCopy(stat.data(), kept, buf.data(), ls);  // buf = log of the sum, per row
  std::vector<float> permuted;
  const float* t = targets.f32();
  if (targets.shape() != ls) {
    permuted = Broadcast(t, targets.shape(), ls);
    t = permuted.data();
  }
  for (int64_t i = 0; i < n; ++i) buf[i] = -t[i] * (z[i] - buf[i]);
  ReduceRaw(ReduceKind::kSum, buf.data(), ls, out->f32(), out->shape());
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace meshrt
