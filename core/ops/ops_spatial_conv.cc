// The windowed ops of the spatial family: conv1d, conv2d, max_pool, avg_pool. Geometry
// (WindowSpec), shape inference, naive reference kernels, registration; conventions in
// core/ops/ops_spatial.h.
//
// The kernels find the spatial dims by name in x and take the output's spatial dims by position
// (the output keeps x's dim order), so a lowered slice — whose output dims keep their names but
// whose input may be a halo-extended block of another size — runs through the same loops. They
// accumulate in double and round once.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/ops/op_cost.h"
#include "core/ops/ops_spatial.h"
#include "util/status_macros.h"

namespace meshrt {
namespace spatial {
namespace {

absl::StatusOr<std::vector<int64_t>> IntsOr(const v1::Op& op, const std::string& name, size_t n,
                                            int64_t fallback) {
  if (!op.attrs().count(name)) return std::vector<int64_t>(n, fallback);
  ASSIGN_OR_RETURN(std::vector<int64_t> v, IntListAttr(op, name));
  if (v.size() != n) {
    return OpError(op,
                   absl::StrCat("attrs.", name, " needs ", n, " entries (one per spatial dim)"));
  }
  return v;
}

std::vector<std::string> OutputDimNames(const v1::Op& op) {
  auto it = op.attrs().find("output_dims");
  if (it == op.attrs().end() || it->second.value_case() != v1::AttrValue::kStrings) return {};
  return {it->second.strings().values().begin(), it->second.strings().values().end()};
}

// Fills output_dim and the output shape (x's dims with the spatial ones replaced in place, and
// in_channels renamed to out_channels for a conv; the caller sets its size) once output_size is
// known.
absl::Status FinishSpec(const v1::Op& op, const Shape& x, WindowSpec* spec) {
  const std::vector<std::string> names = OutputDimNames(op);
  if (!names.empty() && names.size() != spec->x_spatial.size()) {
    return OpError(op, absl::StrCat("attrs.output_dims needs ", spec->x_spatial.size(), " names"));
  }
  std::vector<Dim> dims = x.dims();
  for (size_t i = 0; i < spec->x_spatial.size(); ++i) {
    const Dim& in = x.dim(spec->x_spatial[i]);
    std::string name = !names.empty()                    ? names[i]
                       : spec->output_size[i] == in.size ? in.name
                                                         : in.name + "_out";
    spec->output_dim.push_back(name);
    dims[spec->x_spatial[i]] = Dim{name, spec->output_size[i]};
  }
  if (spec->x_in >= 0) dims[spec->x_in].name = spec->out_channels;
  auto shape = Shape::Make(dims, "output");
  if (!shape.ok()) {
    return OpError(op, absl::StrCat("output dims clash: ", shape.status().message(),
                                    " (choose attrs.output_dims)"));
  }
  spec->output = *std::move(shape);
  return absl::OkStatus();
}

absl::Status FindSpatial(const v1::Op& op, const Shape& x, WindowSpec* spec) {
  if (op.dims_size() == 0) return OpError(op, "needs its spatial dims in `dims`");
  for (const std::string& d : op.dims()) {
    const int i = x.IndexOf(d);
    if (i < 0) {
      return OpError(
          op, absl::StrCat("spatial dim '", d, "' is not a dim of the input ", x.ToString()));
    }
    if (std::count(spec->x_spatial.begin(), spec->x_spatial.end(), i)) {
      return OpError(op, absl::StrCat("spatial dim '", d, "' is listed twice"));
    }
    spec->x_spatial.push_back(i);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WindowSpec> ConvSpec(const v1::Op& op, const Shape& x, const Shape& filter) {
  WindowSpec spec;
  RETURN_IF_ERROR(FindSpatial(op, x, &spec));
  const int ns = static_cast<int>(spec.x_spatial.size());
  const int want = op.type() == "conv1d" ? 1 : 2;
  if (ns != want) return OpError(op, absl::StrCat("needs ", want, " spatial dim(s) in `dims`"));
  if (filter.rank() != ns + 2) {
    return OpError(op, absl::StrCat("filter ", filter.ToString(), " needs ", ns + 2,
                                    " dims: window dims, in_channels, out_channels"));
  }
  const Dim& in_ch = filter.dim(ns);
  spec.x_in = x.IndexOf(in_ch.name);
  if (spec.x_in < 0 || x.dim(spec.x_in).size != in_ch.size ||
      std::count(spec.x_spatial.begin(), spec.x_spatial.end(), spec.x_in)) {
    return OpError(op, absl::StrCat("the filter's in_channels dim '", in_ch.name,
                                    "' must be a non-spatial dim of the input ", x.ToString(),
                                    " of the same size"));
  }
  spec.out_channels = filter.dim(ns + 1).name;
  const std::string padding = StringAttrOr(op, "padding", "SAME");
  if (padding != "SAME" && padding != "VALID") {
    return OpError(op, absl::StrCat("attrs.padding is '", padding, "'; use SAME or VALID"));
  }
  ASSIGN_OR_RETURN(spec.stride, IntsOr(op, "strides", ns, 1));
  for (int i = 0; i < ns; ++i) {
    const int64_t n = x.dim(spec.x_spatial[i]).size, k = filter.dim(i).size, s = spec.stride[i];
    if (s < 1) return OpError(op, "strides must be >= 1");
    spec.window.push_back(k);
    if (padding == "SAME") {
      const int64_t o = (n + s - 1) / s;
      spec.output_size.push_back(o);
      spec.pad_before.push_back(std::max<int64_t>(0, (o - 1) * s + k - n) / 2);
    } else {
      if (n < k) {
        return OpError(op, absl::StrCat("VALID needs the window (", k, ") within spatial dim '",
                                        x.dim(spec.x_spatial[i]).name, "' (", n, ")"));
      }
      spec.output_size.push_back((n - k) / s + 1);
      spec.pad_before.push_back(0);
    }
  }
  RETURN_IF_ERROR(FinishSpec(op, x, &spec));
  std::vector<Dim> dims = spec.output.dims();
  dims[spec.x_in].size = filter.dim(ns + 1).size;
  spec.output = Shape(std::move(dims));
  return spec;
}

absl::StatusOr<WindowSpec> PoolSpec(const v1::Op& op, const Shape& x) {
  WindowSpec spec;
  RETURN_IF_ERROR(FindSpatial(op, x, &spec));
  const size_t ns = spec.x_spatial.size();
  if (!op.attrs().count("ksize")) return OpError(op, "needs attrs.ksize (one per spatial dim)");
  ASSIGN_OR_RETURN(spec.window, IntsOr(op, "ksize", ns, 1));
  ASSIGN_OR_RETURN(spec.stride, IntsOr(op, "strides", ns, 0));
  for (size_t i = 0; i < ns; ++i) {
    const int64_t n = x.dim(spec.x_spatial[i]).size, k = spec.window[i];
    if (spec.stride[i] == 0) spec.stride[i] = k;
    if (k < 1 || k > n || spec.stride[i] != k) {
      return OpError(op, absl::StrCat("window ", k, " over '", x.dim(spec.x_spatial[i]).name, "' (",
                                      n, "): needs 1 <= ksize <= size and strides = ksize",
                                      " (non-overlapping windows only)"));
    }
    spec.output_size.push_back(n / k);
    spec.pad_before.push_back(0);
  }
  RETURN_IF_ERROR(FinishSpec(op, x, &spec));
  return spec;
}

namespace {

absl::StatusOr<TensorType> InferConv(const v1::Op& op, const std::vector<TensorType>& in) {
  if (in[0].dtype != DType::kFloat32 || in[1].dtype != DType::kFloat32) {
    return OpError(op, "needs float32 inputs");
  }
  ASSIGN_OR_RETURN(WindowSpec spec, ConvSpec(op, in[0].shape, in[1].shape));
  return TensorType{spec.output, DType::kFloat32};
}

absl::StatusOr<TensorType> InferPool(const v1::Op& op, const std::vector<TensorType>& in) {
  if (in[0].dtype != DType::kFloat32) return OpError(op, "needs a float32 input");
  ASSIGN_OR_RETURN(WindowSpec spec, PoolSpec(op, in[0].shape));
  return TensorType{spec.output, DType::kFloat32};
}

// Per output element: the x offset of its window's origin (without the spatial part) and the
// spatial output index, by walking the output with an odometer.
struct OutputWalk {
  std::vector<int64_t> sizes, idx;
  explicit OutputWalk(const Shape& out) : sizes(out.Sizes()), idx(out.rank(), 0) {}
  void Next() {
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0 && ++idx[d] == sizes[d]; --d) idx[d] = 0;
  }
};

absl::Status CheckOutputMatches(const v1::Op& op, const Shape& x, const Shape& out,
                                const WindowSpec& spec, const std::vector<int64_t>& pad) {
  if (out.rank() != x.rank()) return OpError(op, "output rank differs from the input's");
  for (int d = 0; d < x.rank(); ++d) {
    const auto sp = std::find(spec.x_spatial.begin(), spec.x_spatial.end(), d);
    if (sp != spec.x_spatial.end()) {
      const size_t i = sp - spec.x_spatial.begin();
      // Every window must start within the padded input.
      if ((out.dim(d).size - 1) * spec.stride[i] - pad[i] >= x.dim(d).size) {
        return OpError(
            op, absl::StrCat("output ", out.ToString(), " does not fit input ", x.ToString()));
      }
    } else if (d != spec.x_in && out.dim(d) != x.dim(d)) {
      return OpError(op, absl::StrCat("output ", out.ToString(), " and input ", x.ToString(),
                                      " differ in batch dim ", d));
    }
  }
  return absl::OkStatus();
}

// The padding the kernel applies: attrs._pad_before (set by lowerings) or the spec's.
absl::StatusOr<std::vector<int64_t>> KernelPad(const v1::Op& op, const WindowSpec& spec) {
  if (!op.attrs().count("_pad_before")) return spec.pad_before;
  ASSIGN_OR_RETURN(std::vector<int64_t> pad, IntListAttr(op, "_pad_before"));
  if (pad.size() != spec.x_spatial.size()) return OpError(op, "_pad_before: one per spatial dim");
  return pad;
}

absl::Status ConvKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() != 2) return OpError(op, "takes x and filter");
  const Tensor& x = *in[0];
  const Tensor& f = *in[1];
  if (x.dtype() != DType::kFloat32 || f.dtype() != DType::kFloat32 ||
      out->dtype() != DType::kFloat32) {
    return absl::UnimplementedError("conv supports float32 only");
  }
  // Geometry from the slice shapes; only the spatial index mapping, windows and strides are used
  // (sizes come from the tensors), so a halo-extended slice is fine.
  WindowSpec spec;
  RETURN_IF_ERROR(FindSpatial(op, x.shape(), &spec));
  const int ns = static_cast<int>(spec.x_spatial.size());
  if (f.shape().rank() != ns + 2) return OpError(op, "filter rank must be spatial dims + 2");
  spec.x_in = x.shape().IndexOf(f.shape().dim(ns).name);
  if (spec.x_in < 0 || x.shape().dim(spec.x_in).size != f.shape().dim(ns).size) {
    return OpError(op, "the filter's in_channels must match a dim of x");
  }
  if (out->shape().dim(spec.x_in).name != f.shape().dim(ns + 1).name ||
      out->shape().dim(spec.x_in).size != f.shape().dim(ns + 1).size) {
    return OpError(op, "the output's channel dim must be the filter's out_channels");
  }
  ASSIGN_OR_RETURN(spec.stride, IntsOr(op, "strides", ns, 1));
  for (int i = 0; i < ns; ++i) spec.window.push_back(f.shape().dim(i).size);
  if (!op.attrs().count("_pad_before")) {
    // As ConvSpec, from the whole tensors (the interpreter's case).
    ASSIGN_OR_RETURN(WindowSpec whole, ConvSpec(op, x.shape(), f.shape()));
    spec.pad_before = whole.pad_before;
  }
  ASSIGN_OR_RETURN(const std::vector<int64_t> pad, KernelPad(op, spec));
  RETURN_IF_ERROR(CheckOutputMatches(op, x.shape(), out->shape(), spec, pad));

  const std::vector<int64_t> xs = x.shape().Strides(), fs = f.shape().Strides();
  const int64_t channels = f.shape().dim(ns).size;
  std::vector<int64_t> window_sizes(spec.window.begin(), spec.window.end());
  const float* xp = x.f32();
  const float* fp = f.f32();
  float* op_out = out->f32();
  OutputWalk walk(out->shape());
  for (int64_t e = 0; e < out->num_elements(); ++e, walk.Next()) {
    int64_t x_base = 0;  // batch dims
    for (int d = 0; d < x.shape().rank(); ++d) {
      if (d != spec.x_in && !std::count(spec.x_spatial.begin(), spec.x_spatial.end(), d)) {
        x_base += walk.idx[d] * xs[d];
      }
    }
    const int64_t oc = walk.idx[spec.x_in];
    double acc = 0;
    std::vector<int64_t> j(ns, 0);
    for (bool more = true; more;) {
      int64_t x_off = x_base, f_off = oc * fs[ns + 1];
      bool inside = true;
      for (int i = 0; i < ns && inside; ++i) {
        const int d = spec.x_spatial[i];
        const int64_t pos = walk.idx[d] * spec.stride[i] + j[i] - pad[i];
        inside = pos >= 0 && pos < x.shape().dim(d).size;
        x_off += pos * xs[d];
        f_off += j[i] * fs[i];
      }
      if (inside) {
        for (int64_t c = 0; c < channels; ++c) {
          acc += static_cast<double>(xp[x_off + c * xs[spec.x_in]]) * fp[f_off + c * fs[ns]];
        }
      }
      more = false;
      for (int i = ns - 1; i >= 0; --i) {
        if (++j[i] < window_sizes[i]) {
          more = true;
          break;
        }
        j[i] = 0;
      }
    }
    op_out[e] = static_cast<float>(acc);
  }
  return absl::OkStatus();
}

absl::Status PoolKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out) {
  if (in.size() != 1) return OpError(op, "takes one input");
  const Tensor& x = *in[0];
  if (x.dtype() != DType::kFloat32 || out->dtype() != DType::kFloat32) {
    return absl::UnimplementedError("pooling supports float32 only");
  }
  WindowSpec spec;
  RETURN_IF_ERROR(FindSpatial(op, x.shape(), &spec));
  const size_t ns = spec.x_spatial.size();
  ASSIGN_OR_RETURN(spec.window, IntsOr(op, "ksize", ns, 1));
  spec.stride = spec.window;
  spec.pad_before.assign(ns, 0);
  RETURN_IF_ERROR(CheckOutputMatches(op, x.shape(), out->shape(), spec, spec.pad_before));
  for (size_t i = 0; i < ns; ++i) {
    if (out->shape().dim(spec.x_spatial[i]).size * spec.window[i] >
        x.shape().dim(spec.x_spatial[i]).size) {
      return OpError(op, "output windows run past the input");
    }
  }
  const bool is_max = op.type() == "max_pool";
  int64_t count = 1;
  for (int64_t k : spec.window) count *= k;
  const std::vector<int64_t> xs = x.shape().Strides();
  OutputWalk walk(out->shape());
  for (int64_t e = 0; e < out->num_elements(); ++e, walk.Next()) {
    int64_t base = 0;
    for (int d = 0; d < x.shape().rank(); ++d) {
      const auto sp = std::find(spec.x_spatial.begin(), spec.x_spatial.end(), d);
      const int64_t scale =
          sp == spec.x_spatial.end() ? 1 : spec.window[sp - spec.x_spatial.begin()];
      base += walk.idx[d] * scale * xs[d];
    }
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    std::vector<int64_t> j(ns, 0);
    for (bool more = true; more;) {
      int64_t off = base;
      for (size_t i = 0; i < ns; ++i) off += j[i] * xs[spec.x_spatial[i]];
      const double v = x.f32()[off];
      acc = is_max ? std::max(acc, v) : acc + v;
      more = false;
      for (int i = static_cast<int>(ns) - 1; i >= 0; --i) {
        if (++j[i] < spec.window[i]) {
          more = true;
          break;
        }
        j[i] = 0;
      }
    }
    out->f32()[e] = static_cast<float>(is_max ? acc : acc / count);
  }
  return absl::OkStatus();
}

// Costs (core/ops/op_cost.h): the spatial family default counts no FLOPs (shift, halo exchange).
std::vector<OpInfo> WithCosts(std::vector<OpInfo> ops) {
  for (OpInfo& op : ops) {
    op.cost = op.type == "conv1d" || op.type == "conv2d" ? &ConvCost : &PerInputElementCost<1>;
  }
  return ops;
}

const bool kRegistered = RegisterOps(WithCosts({
    {"conv1d", OpFamily::kSpatial, 2, 2, true,
     "1-D convolution of x [batch.., dims[0], in] with filter [k, in, out]; SAME or VALID",
     "permute of halos (split spatial); allreduce/reduce-scatter (split in); allgather (VALID)",
     false, InferConv, ConvKernel, LowerConv},
    {"conv2d", OpFamily::kSpatial, 2, 2, true,
     "2-D convolution of x [batch.., dims[0], dims[1], in] with filter [kh, kw, in, out]",
     "permute of halos (split spatial); allreduce/reduce-scatter (split in); allgather (VALID)",
     false, InferConv, ConvKernel, LowerConv},
    {"max_pool", OpFamily::kSpatial, 1, 1, true,
     "max over non-overlapping windows attrs.ksize of the spatial `dims`",
     "none (split into whole windows), else allgather", false, InferPool, PoolKernel, LowerPool},
    {"avg_pool", OpFamily::kSpatial, 1, 1, true,
     "mean over non-overlapping windows attrs.ksize of the spatial `dims`",
     "none (split into whole windows), else allgather", false, InferPool, PoolKernel, LowerPool},
}));

}  // namespace
}  // namespace spatial
}  // namespace meshrt
