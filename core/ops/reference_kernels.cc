#include "core/ops/reference_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ops/kernel_runner.h"
#include "core/ops/ops.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

std::vector<int64_t> StridesByName(const Shape& tensor, const Shape& index_space) {
  const std::vector<int64_t> strides = tensor.Strides();
  std::vector<int64_t> out(index_space.rank(), 0);
  for (int i = 0; i < index_space.rank(); ++i) {
    const int j = tensor.IndexOf(index_space.dim(i).name);
    if (j >= 0) out[i] = strides[j];
  }
  return out;
}

StridedIterator::StridedIterator(std::vector<int64_t> sizes,
                                 std::vector<std::vector<int64_t>> strides)
    : sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      index_(sizes_.size(), 0),
      offsets_(strides_.size(), 0) {
  for (const auto& s : strides_) {
    MESHRT_CHECK(s.size() == sizes_.size(), "strides rank ", s.size(), " vs ", sizes_.size());
  }
  for (int64_t size : sizes_) {
    if (size <= 0) done_ = true;
  }
}

void StridedIterator::Next() {
  // Odometer: bump the last index; on wrap-around rewind that dim's offsets and carry left.
  for (int d = static_cast<int>(sizes_.size()) - 1; d >= 0; --d) {
    ++index_[d];
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] += strides_[k][d];
    if (index_[d] < sizes_[d]) return;
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] -= strides_[k][d] * sizes_[d];
    index_[d] = 0;
  }
  done_ = true;  // wrapped past the first dim (or the space is a scalar)
}

absl::Status CheckDimsIn(const Shape& sub, absl::string_view sub_what, const Shape& super,
                         absl::string_view super_what) {
  for (const Dim& d : sub.dims()) {
    const int j = super.IndexOf(d.name);
    if (j < 0) {
      return absl::InvalidArgumentError(absl::StrCat(sub_what, " has dim '", d.name, "' which ",
                                                     super_what, " ", super.ToString(), " lacks"));
    }
    if (super.dim(j).size != d.size) {
      return absl::InvalidArgumentError(absl::StrCat("dim '", d.name, "' has size ", d.size, " in ",
                                                     sub_what, " but ", super.dim(j).size, " in ",
                                                     super_what));
    }
  }
  return absl::OkStatus();
}

namespace {

template <typename T>
const T* Data(const Tensor& t);
template <>
const float* Data<float>(const Tensor& t) {
  return t.f32();
}
template <>
const int32_t* Data<int32_t>(const Tensor& t) {
  return t.i32();
}
template <typename T>
T* MutableData(Tensor* t);
template <>
float* MutableData<float>(Tensor* t) {
  return t->f32();
}
template <>
int32_t* MutableData<int32_t>(Tensor* t) {
  return t->i32();
}

absl::Status CheckArity(absl::Span<const Tensor* const> inputs, size_t want) {
  if (inputs.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("takes ", want, " input(s) but got ", inputs.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckDtypes(absl::Span<const Tensor* const> inputs, const Tensor& out) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " is null"));
    if (inputs[i]->dtype() != out.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " is ", DTypeName(inputs[i]->dtype()), " but the output is ",
                       DTypeName(out.dtype())));
    }
  }
  return absl::OkStatus();
}

// ---- einsum -------------------------------------------------------------------------------

// Accumulates in double (float32) or int64 (int32) so the oracle is more precise than the kernels
// it judges.
template <typename T, typename Acc>
void EinsumLoop(absl::Span<const Tensor* const> inputs, const Shape& sum_space, Tensor* out) {
  std::vector<std::vector<int64_t>> outer_strides, inner_strides;
  std::vector<const T*> data;
  for (const Tensor* in : inputs) {
    outer_strides.push_back(StridesByName(in->shape(), out->shape()));
    inner_strides.push_back(StridesByName(in->shape(), sum_space));
    data.push_back(Data<T>(*in));
  }
  T* o = MutableData<T>(out);
  int64_t oi = 0;
  for (StridedIterator outer(out->shape().Sizes(), outer_strides); !outer.done();
       outer.Next(), ++oi) {
    Acc acc = 0;
    for (StridedIterator inner(sum_space.Sizes(), inner_strides); !inner.done(); inner.Next()) {
      Acc product = 1;
      for (size_t k = 0; k < data.size(); ++k) {
        product *= static_cast<Acc>(data[k][outer.offset(k) + inner.offset(k)]);
      }
      acc += product;
    }
    o[oi] = static_cast<T>(acc);
  }
}

absl::Status Einsum(absl::Span<const Tensor* const> inputs, Tensor* out) {
  if (inputs.empty()) return absl::InvalidArgumentError("einsum needs at least one input");
  // Every name must have one size across all inputs and the output.
  std::vector<Dim> all = out->shape().dims();
  std::vector<Dim> summed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Dim& d : inputs[i]->shape().dims()) {
      auto it =
          std::find_if(all.begin(), all.end(), [&](const Dim& a) { return a.name == d.name; });
      if (it == all.end()) {
        all.push_back(d);
        summed.push_back(d);
      } else if (it->size != d.size) {
        return absl::InvalidArgumentError(absl::StrCat("dim '", d.name, "' has size ", d.size,
                                                       " in input ", i, " but ", it->size,
                                                       " elsewhere (output or an earlier input)"));
      }
    }
  }
  const Shape sum_space(summed);
  if (out->dtype() == DType::kFloat32) {
    EinsumLoop<float, double>(inputs, sum_space, out);
  } else {
    EinsumLoop<int32_t, int64_t>(inputs, sum_space, out);
  }
  return absl::OkStatus();
}

// ---- elementwise copy (transpose) ----------------------------------------------------------

template <typename T, typename F>
void UnaryLoop(const Tensor& x, Tensor* out, F f) {
  const T* px = Data<T>(x);
  T* o = MutableData<T>(out);
  int64_t i = 0;
  for (StridedIterator it(out->shape().Sizes(), {StridesByName(x.shape(), out->shape())});
       !it.done(); it.Next(), ++i) {
    o[i] = f(px[it.offset(0)]);
  }
}

// ---- the runner ---------------------------------------------------------------------------

// The built-in ops' reference kernels (their records are ops.cc's; these attach to them).
absl::Status EinsumKernel(const v1::Op&, absl::Span<const Tensor* const> inputs, Tensor* out) {
  RETURN_IF_ERROR(CheckDtypes(inputs, *out));
  return Einsum(inputs, out);
}

// `src`'s elements, row-major, into `out` (reshape, rename_dim, constant).
absl::Status CopyElements(const Tensor& src, Tensor* out) {
  RETURN_IF_ERROR(CheckDtypes({&src}, *out));
  if (src.num_elements() != out->num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the source ", src.shape().ToString(), " has ", src.num_elements(),
        " elements but the output ", out->shape().ToString(), " has ", out->num_elements()));
  }
  const bool f32 = out->dtype() == DType::kFloat32;
  void* dst = f32 ? static_cast<void*>(out->f32()) : static_cast<void*>(out->i32());
  const void* from =
      f32 ? static_cast<const void*>(src.f32()) : static_cast<const void*>(src.i32());
  if (out->num_elements() > 0) std::memcpy(dst, from, out->num_elements() * 4);
  return absl::OkStatus();
}

absl::Status CopyKernel(const v1::Op&, absl::Span<const Tensor* const> inputs, Tensor* out) {
  RETURN_IF_ERROR(CheckArity(inputs, 1));
  return CopyElements(*inputs[0], out);
}

absl::Status ConstantKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                            Tensor* out) {
  RETURN_IF_ERROR(CheckArity(inputs, 0));
  ASSIGN_OR_RETURN(Tensor value, Tensor::FromProto(op.value(), "the constant's value"));
  return CopyElements(value, out);
}

const bool kBuiltinKernels = RegisterReferenceKernels({{"einsum", &EinsumKernel},
                                                       {"reshape", &CopyKernel},
                                                       {"rename_dim", &CopyKernel},
                                                       {"constant", &ConstantKernel}});

absl::Status RunOp(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* out,
                   const KernelContext& context) {
  if (const OpInfo* info = FindOp(op.type()); info != nullptr) {
    if (info->input_dtypes == InputDTypes::kFloating) {  // its dtype rule (core/ops/ops.h)
      for (const Tensor* in : inputs) {
        if (in == nullptr || IsFloating(in->dtype())) continue;
        return absl::InvalidArgumentError(
            absl::StrCat(op.type(), " needs float32, not ", DTypeName(in->dtype())));
      }
    }
    if (info->reference_in_context != nullptr) {
      return info->reference_in_context(op, inputs, out, context);
    }
    if (info->reference != nullptr) return info->reference(op, inputs, out);
  }
  // Every other op's reference kernel is registered by its family (core/ops/ops_*.cc, linked with
  // //core): a program linking only this target knows the built-in ops above.
  return absl::UnimplementedError("no reference kernel for this op type");
}

void ZeroFill(Tensor* t) {
  if (t->dtype() == DType::kFloat32) {
    std::fill(t->f32(), t->f32() + t->num_elements(), 0.0f);
  } else {
    std::fill(t->i32(), t->i32() + t->num_elements(), 0);
  }
}

class ReferenceRunner : public KernelRunner {
 public:
  using KernelRunner::Run;
  absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* output,
                   const KernelContext& context) const override {
    if (output != nullptr) ZeroFill(output);  // the naive kernels may write only some elements
    absl::Status s = output == nullptr ? absl::InvalidArgumentError("output is null")
                                       : RunOp(op, inputs, output, context);
    if (s.ok()) return s;
    return absl::Status(s.code(),
                        absl::StrCat("op '", op.name(), "' (", op.type(), "): ", s.message()));
  }
};

}  // namespace

absl::Status Transpose(const Tensor& in, Tensor* out) {
  RETURN_IF_ERROR(CheckDtypes({&in}, *out));
  RETURN_IF_ERROR(CheckDimsIn(in.shape(), "the input", out->shape(), "the output"));
  if (out->dtype() == DType::kFloat32) {
    UnaryLoop<float>(in, out, [](float v) { return v; });
  } else {
    UnaryLoop<int32_t>(in, out, [](int32_t v) { return v; });
  }
  return absl::OkStatus();
}

const KernelRunner& ReferenceKernels() {
  static const KernelRunner* const runner = new ReferenceRunner();
  return *runner;
}

}  // namespace meshrt
