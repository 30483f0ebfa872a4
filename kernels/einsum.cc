#include "kernels/einsum.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ops/reference_kernels.h"
#include "kernels/blas.h"
#include "kernels/reduce.h"
#include "kernels/transpose.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace kernels {
namespace {

using Names = std::vector<std::string>;

// Below this many multiply-adds a plain loop is cheaper than a BLAS call (call and packing
// overhead), which matters for einsums with large batches of tiny products.
constexpr int64_t kSmallGemm = 4096;

bool In(const Names& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

// The dims of `x` for which `keep(name)` holds, in x's order.
template <typename Pred>
Shape Filter(const Shape& x, Pred keep) {
  std::vector<Dim> dims;
  for (const Dim& d : x.dims()) {
    if (keep(d.name)) dims.push_back(d);
  }
  return Shape(std::move(dims));
}

// `group` in the order its names appear in `x` (names not in x are dropped).
Names OrderIn(const Shape& x, const Names& group) {
  Names out;
  for (const Dim& d : x.dims()) {
    if (In(group, d.name)) out.push_back(d.name);
  }
  return out;
}

// How a stored operand is read as a batch of row-major matrices.
struct MatrixLayout {
  bool trans = false;  // stored [cols, rows]
  int64_t ld = 1;      // row stride of the stored matrix
  std::vector<int64_t> batch_strides;
};

int64_t Extent(const Shape& x, const Names& names) {
  int64_t e = 1;
  for (const std::string& n : names) e *= x.dim(x.IndexOf(n)).size;
  return e;
}

// The layout if `x` (no size-1 dims) holds the matrix [rows, cols] (or its transpose) per batch
// element: each group must be a contiguous run of x's dims in the given order, and one of them must
// be innermost. Batch dims may sit anywhere. nullopt when a copy is needed.
std::optional<MatrixLayout> LayoutOf(const Shape& x, const Names& batch, const Names& rows,
                                     const Names& cols) {
  const std::vector<int64_t> strides = x.Strides();
  auto run_stride = [&](const Names& group, int64_t* stride) {
    if (group.empty()) return true;
    const int first = x.IndexOf(group[0]);
    for (size_t i = 0; i < group.size(); ++i) {
      if (x.IndexOf(group[i]) != first + static_cast<int>(i)) return false;
    }
    *stride = strides[first + group.size() - 1];
    return true;
  };
  int64_t rs = 0, cs = 0;
  if (!run_stride(rows, &rs) || !run_stride(cols, &cs)) return std::nullopt;
  MatrixLayout l;
  for (const std::string& n : batch) l.batch_strides.push_back(strides[x.IndexOf(n)]);
  if (!cols.empty() && cs == 1) {
    l.ld = rows.empty() ? Extent(x, cols) : rs;
  } else if (!rows.empty() && rs == 1) {
    l.trans = true;
    l.ld = cols.empty() ? Extent(x, rows) : cs;
  } else if (cols.empty()) {  // a column vector with strided rows
    l.ld = rows.empty() ? 1 : rs;
  } else if (rows.empty()) {  // a row vector with strided columns: read as a transposed column
    l.trans = true;
    l.ld = cs;
  } else {
    return std::nullopt;
  }
  return l;
}

// A shape listing `groups` in order, sizes taken from `sizes`.
Shape Canonical(const std::map<std::string, int64_t>& sizes,
                std::initializer_list<const Names*> groups) {
  std::vector<Dim> dims;
  for (const Names* g : groups) {
    for (const std::string& n : *g) dims.push_back(Dim{n, sizes.at(n)});
  }
  return Shape(std::move(dims));
}

// C = alpha * op(A) . op(B) + beta * C.
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          EinsumStats* stats) {
  ++stats->gemm_calls;
  if (m * n * k <= kSmallGemm) {
    LoopSgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    GetBlas().Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// Runs `plan` for shapes without size-1 dims (those PlanContraction planned): c = alpha * A.B +
// beta * c. beta != 0 needs a plan without copy_c (CHECKed).
void Execute(const EinsumPlan& p, const float* a, Shape as, const float* b, Shape bs, float* c,
             const Shape& cs, EinsumStats* stats, float alpha = 1.0f, float beta = 0.0f) {
  MESHRT_CHECK(beta == 0.0f || !p.copy_c, "einsum: accumulating through a permuted result");
  std::map<std::string, int64_t> sizes;
  for (const Shape* s : std::initializer_list<const Shape*>{&as, &bs, &cs}) {
    for (const Dim& d : s->dims()) sizes[d.name] = d.size;
  }
  std::vector<float> a_buf, b_buf, c_buf;
  if (p.copy_a) {
    Shape can = Canonical(sizes, {&p.batch, &p.m, &p.k});
    a_buf.resize(can.num_elements());
    PermuteCopy(a, as, a_buf.data(), can);
    a = a_buf.data();
    as = std::move(can);
  }
  if (p.copy_b) {
    Shape can = Canonical(sizes, {&p.batch, &p.k, &p.n});
    b_buf.resize(can.num_elements());
    PermuteCopy(b, bs, b_buf.data(), can);
    b = b_buf.data();
    bs = std::move(can);
  }
  Shape gemm_cs = cs;
  float* gemm_c = c;
  if (p.copy_c) {
    gemm_cs = Canonical(sizes, {&p.batch, &p.m, &p.n});
    c_buf.resize(gemm_cs.num_elements());
    gemm_c = c_buf.data();
  }
  const int64_t bytes = 4 * static_cast<int64_t>(a_buf.size() + b_buf.size() + c_buf.size());
  stats->scratch_bytes += bytes;
  stats->permute_copies += p.copy_a + p.copy_b + p.copy_c;

  const std::optional<MatrixLayout> la = LayoutOf(as, p.batch, p.m, p.k);
  const std::optional<MatrixLayout> lb = LayoutOf(bs, p.batch, p.k, p.n);
  const std::optional<MatrixLayout> lc = LayoutOf(gemm_cs, p.batch, p.m, p.n);
  MESHRT_CHECK(la && lb && lc, "einsum plan does not fit its operands");
  std::vector<int64_t> batch_sizes;
  for (const std::string& n : p.batch) batch_sizes.push_back(sizes.at(n));
  StridedIterator it(batch_sizes, {la->batch_strides, lb->batch_strides, lc->batch_strides});
  if (p.m_size == 1 && p.n_size == 1 && p.k_size == 1) {
    // Every dim is a batch dim: an elementwise product (e.g. a gradient x * dy), not GEMMs.
    for (; !it.done(); it.Next()) {
      float& out = gemm_c[it.offset(2)];
      out = alpha * a[it.offset(0)] * b[it.offset(1)] + (beta == 0.0f ? 0.0f : beta * out);
    }
    if (p.copy_c) PermuteCopy(c_buf.data(), gemm_cs, c, cs);
    return;
  }
  for (; !it.done(); it.Next()) {
    const float* pa = a + it.offset(0);
    const float* pb = b + it.offset(1);
    float* pc = gemm_c + it.offset(2);
    if (!lc->trans) {
      Gemm(la->trans, lb->trans, p.m_size, p.n_size, p.k_size, alpha, pa, la->ld, pb, lb->ld, beta,
           pc, lc->ld, stats);
    } else {  // C stored [N, M]: C^T = B^T . A^T
      Gemm(!lb->trans, !la->trans, p.n_size, p.m_size, p.k_size, alpha, pb, lb->ld, pa, la->ld,
           beta, pc, lc->ld, stats);
    }
  }
  if (p.copy_c) PermuteCopy(c_buf.data(), gemm_cs, c, cs);
}

// dst (laid out as `result`) = sum over dims not in `result` of A . B. Handles dims to pre-sum
// (in one operand only, not in the result) and result dims in neither operand (broadcast).
void Contract(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape,
              float* dst, const Shape& result, EinsumStats* stats) {
  ++stats->contractions;
  Shape as = DropUnitDims(a_shape), bs = DropUnitDims(b_shape);
  const Shape cs = DropUnitDims(result);
  std::vector<float> a_sum, b_sum, core_buf;
  const Shape a_keep =
      Filter(as, [&](const std::string& n) { return bs.Contains(n) || cs.Contains(n); });
  const Shape b_keep =
      Filter(bs, [&](const std::string& n) { return as.Contains(n) || cs.Contains(n); });
  if (a_keep != as) {
    a_sum.resize(a_keep.num_elements());
    ReduceRaw(ReduceKind::kSum, a, as, a_sum.data(), a_keep, &stats->scratch_bytes);
    a = a_sum.data();
    ++stats->presums;
  }
  if (b_keep != bs) {
    b_sum.resize(b_keep.num_elements());
    ReduceRaw(ReduceKind::kSum, b, bs, b_sum.data(), b_keep, &stats->scratch_bytes);
    b = b_sum.data();
    ++stats->presums;
  }
  stats->scratch_bytes += 4 * static_cast<int64_t>(a_sum.size() + b_sum.size());
  const Shape core =
      Filter(cs, [&](const std::string& n) { return a_keep.Contains(n) || b_keep.Contains(n); });
  absl::StatusOr<EinsumPlan> plan = PlanContraction(a_keep, b_keep, core);
  MESHRT_CHECK(plan.ok(), plan.status().ToString());
  if (core == cs) {
    Execute(*plan, a, a_keep, b, b_keep, dst, core, stats);
    return;
  }
  // Broadcast dims. When they all lead, the first slab of dst is the core result: compute it in
  // place and replicate; otherwise compute into scratch and broadcast-permute.
  bool leading = true;
  for (int i = 0; i < core.rank(); ++i)
    leading &= cs.dim(cs.rank() - core.rank() + i) == core.dim(i);
  if (leading) {
    Execute(*plan, a, a_keep, b, b_keep, dst, core, stats);
    const int64_t slab = core.num_elements();
    const int64_t copies = cs.num_elements() / slab;
    for (int64_t i = 1; i < copies; ++i) std::memcpy(dst + i * slab, dst, slab * sizeof(float));
    return;
  }
  core_buf.resize(core.num_elements());
  stats->scratch_bytes += 4 * static_cast<int64_t>(core_buf.size());
  ++stats->permute_copies;
  Execute(*plan, a, a_keep, b, b_keep, core_buf.data(), core, stats);
  PermuteCopy(core_buf.data(), core, dst, cs);
}

// One input: sum out the dims not in the output, then permute/broadcast into it.
void SingleInput(const float* a, const Shape& as, float* dst, const Shape& out,
                 EinsumStats* stats) {
  const Shape keep = Filter(as, [&](const std::string& n) { return out.Contains(n); });
  if (keep.rank() == out.rank()) {  // nothing to broadcast: the reduction permutes as needed
    ReduceRaw(ReduceKind::kSum, a, as, dst, out, &stats->scratch_bytes);
    return;
  }
  std::vector<float> sum;
  if (keep != as) {
    sum.resize(keep.num_elements());
    stats->scratch_bytes += 4 * static_cast<int64_t>(sum.size());
    ReduceRaw(ReduceKind::kSum, a, as, sum.data(), keep, &stats->scratch_bytes);
    a = sum.data();
  }
  ++stats->permute_copies;
  PermuteCopy(a, keep, dst, out);
}

// An operand of a multi-input einsum: an input (borrowed) or an intermediate (owned).
struct Operand {
  const float* data;
  Shape shape;
  std::shared_ptr<std::vector<float>> owned;
};

}  // namespace

absl::StatusOr<EinsumPlan> PlanContraction(const Shape& a_in, const Shape& b_in,
                                           const Shape& c_in) {
  const Shape* all[] = {&a_in, &b_in, &c_in};
  for (int i = 0; i < 3; ++i) {
    for (const Dim& d : all[i]->dims()) {
      int seen = 0;
      for (const Shape* s : all) {
        const int j = s->IndexOf(d.name);
        if (j < 0) continue;
        ++seen;
        if (s->dim(j).size != d.size) {
          return absl::InvalidArgumentError(
              absl::StrCat("dim '", d.name, "' has sizes ", d.size, " and ", s->dim(j).size));
        }
      }
      if (seen < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("dim '", d.name,
                         "' is in one of A, B, C only; sum it out or broadcast "
                         "it before planning the contraction"));
      }
    }
  }
  const Shape a = DropUnitDims(a_in), b = DropUnitDims(b_in), c = DropUnitDims(c_in);
  EinsumPlan p;
  Names m, n, k;
  for (const Dim& d : c.dims()) {
    if (a.Contains(d.name) && b.Contains(d.name)) p.batch.push_back(d.name);
  }
  for (const Dim& d : a.dims()) {
    if (c.Contains(d.name) && !b.Contains(d.name)) m.push_back(d.name);
    if (b.Contains(d.name) && !c.Contains(d.name)) k.push_back(d.name);
  }
  for (const Dim& d : b.dims()) {
    if (c.Contains(d.name) && !a.Contains(d.name)) n.push_back(d.name);
  }
  // Candidate orders: each group as one of the tensors holding it has it. Cost: elements copied.
  const Names m_orders[] = {OrderIn(c, m), OrderIn(a, m)};
  const Names n_orders[] = {OrderIn(c, n), OrderIn(b, n)};
  const Names k_orders[] = {OrderIn(a, k), OrderIn(b, k)};
  int64_t best = std::numeric_limits<int64_t>::max();
  for (const Names& mo : m_orders) {
    for (const Names& no : n_orders) {
      for (const Names& ko : k_orders) {
        const auto la = LayoutOf(a, p.batch, mo, ko);
        const auto lb = LayoutOf(b, p.batch, ko, no);
        const auto lc = LayoutOf(c, p.batch, mo, no);
        const int64_t cost =
            (la ? 0 : a.num_elements()) + (lb ? 0 : b.num_elements()) + (lc ? 0 : c.num_elements());
        if (cost >= best) continue;
        best = cost;
        p.m = mo;
        p.n = no;
        p.k = ko;
        p.copy_a = !la;
        p.copy_b = !lb;
        p.copy_c = !lc;
        p.trans_a = la && la->trans;
        p.trans_b = lb && lb->trans;
        p.swap = lc && lc->trans;
      }
    }
  }
  p.batch_size = Extent(c, p.batch);
  p.m_size = Extent(a, p.m);
  p.k_size = Extent(a, p.k);
  p.n_size = Extent(b, p.n);
  return p;
}

namespace {

// The checks Einsum documents: float32 everywhere, one size per dim name.
absl::Status CheckEinsum(absl::Span<const Tensor* const> inputs, const Tensor& out) {
  if (inputs.empty()) return absl::InvalidArgumentError("einsum needs at least one input");
  if (out.dtype() != DType::kFloat32) {
    return absl::UnimplementedError("the fast einsum takes float32 only");
  }
  std::map<std::string, int64_t> sizes;
  for (const Dim& d : out.shape().dims()) sizes[d.name] = d.size;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i]->dtype() != DType::kFloat32) {
      return absl::UnimplementedError(absl::StrCat("input ", i, " is ",
                                                   DTypeName(inputs[i]->dtype()),
                                                   "; the fast einsum takes float32 only"));
    }
    for (const Dim& d : inputs[i]->shape().dims()) {
      auto [it, inserted] = sizes.emplace(d.name, d.size);
      if (!inserted && it->second != d.size) {
        return absl::InvalidArgumentError(absl::StrCat("dim '", d.name, "' has size ", d.size,
                                                       " in input ", i, " but ", it->second,
                                                       " elsewhere (output or an earlier input)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Einsum(absl::Span<const Tensor* const> inputs, Tensor* out, EinsumStats* stats) {
  EinsumStats local;
  if (stats == nullptr) stats = &local;
  RETURN_IF_ERROR(CheckEinsum(inputs, *out));
  std::vector<Operand> ops;
  for (const Tensor* t : inputs) ops.push_back(Operand{t->f32(), t->shape(), nullptr});
  if (ops.size() == 1) {
    SingleInput(ops[0].data, ops[0].shape, out->f32(), out->shape(), stats);
    return absl::OkStatus();
  }
  while (ops.size() > 2) {
    // Greedy: contract the pair whose result (the dims still needed later) is smallest.
    size_t bi = 0, bj = 1;
    Shape best_result;
    int64_t best_size = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < ops.size(); ++i) {
      for (size_t j = i + 1; j < ops.size(); ++j) {
        auto needed = [&](const std::string& name) {
          if (out->shape().Contains(name)) return true;
          for (size_t q = 0; q < ops.size(); ++q) {
            if (q != i && q != j && ops[q].shape.Contains(name)) return true;
          }
          return false;
        };
        const Shape& a = ops[i].shape;
        const Shape& b = ops[j].shape;
        // [batch, M] in a's order, then N in b's order: the GEMM writes it in place.
        std::vector<Dim> dims;
        for (const Dim& d : a.dims()) {
          if (needed(d.name) && b.Contains(d.name)) dims.push_back(d);
        }
        for (const Dim& d : a.dims()) {
          if (needed(d.name) && !b.Contains(d.name)) dims.push_back(d);
        }
        for (const Dim& d : b.dims()) {
          if (needed(d.name) && !a.Contains(d.name)) dims.push_back(d);
        }
        Shape result(std::move(dims));
        if (result.num_elements() < best_size) {
          best_size = result.num_elements();
          best_result = std::move(result);
          bi = i;
          bj = j;
        }
      }
    }
    auto buf = std::make_shared<std::vector<float>>(best_size);
    stats->scratch_bytes += 4 * best_size;
    Contract(ops[bi].data, ops[bi].shape, ops[bj].data, ops[bj].shape, buf->data(), best_result,
             stats);
    ops.erase(ops.begin() + bj);
    ops.erase(ops.begin() + bi);
    ops.push_back(Operand{buf->data(), std::move(best_result), buf});
  }
  Contract(ops[0].data, ops[0].shape, ops[1].data, ops[1].shape, out->f32(), out->shape(), stats);
  return absl::OkStatus();
}

absl::Status EinsumAccumulate(absl::Span<const Tensor* const> inputs, float alpha, Tensor* out,
                              EinsumStats* stats) {
  EinsumStats local;
  if (stats == nullptr) stats = &local;
  RETURN_IF_ERROR(CheckEinsum(inputs, *out));
  if (inputs.size() == 2) {
    // A plain GEMM shape (nothing to pre-sum or broadcast, result written in place): beta = 1.
    const Shape as = DropUnitDims(inputs[0]->shape()), bs = DropUnitDims(inputs[1]->shape());
    const Shape cs = DropUnitDims(out->shape());
    // PlanContraction refuses dims to pre-sum or broadcast (in one of a, b, c only).
    absl::StatusOr<EinsumPlan> plan = PlanContraction(as, bs, cs);
    if (plan.ok() && !plan->copy_c) {
      ++stats->contractions;
      ++stats->accumulating_gemms;
      Execute(*plan, inputs[0]->f32(), as, inputs[1]->f32(), bs, out->f32(), cs, stats, alpha,
              1.0f);
      return absl::OkStatus();
    }
  }
  Tensor product = Tensor::Uninitialized(DType::kFloat32, out->shape());
  RETURN_IF_ERROR(Einsum(inputs, &product, stats));
  stats->scratch_bytes += 4 * product.num_elements();
  float* o = out->f32();
  const float* p = product.f32();
  for (int64_t i = 0; i < out->num_elements(); ++i) o[i] += alpha * p[i];
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace meshrt
