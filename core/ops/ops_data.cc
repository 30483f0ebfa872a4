// Shape inference and registration of the data-movement family (conventions in ops_data.h).
#include "core/ops/ops_data.h"

#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "util/status_macros.h"

namespace meshrt {

Shape WithoutDim(const Shape& shape, const std::string& name) {
  std::vector<Dim> dims;
  for (const Dim& d : shape.dims()) {
    if (d.name != name) dims.push_back(d);
  }
  return Shape(std::move(dims));
}

Shape ReplaceDim(const Shape& shape, int i, const std::vector<Dim>& dims) {
  std::vector<Dim> out(shape.dims().begin(), shape.dims().begin() + i);
  out.insert(out.end(), dims.begin(), dims.end());
  out.insert(out.end(), shape.dims().begin() + i + 1, shape.dims().end());
  return Shape(std::move(out));
}

absl::Status DataOpError(const v1::Op& op, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("op '", op.name(), "' (", op.type(), "): ", msg));
}

absl::StatusOr<int> OpDimIndex(const v1::Op& op, const Shape& in, int input) {
  if (op.dims_size() < 1) return DataOpError(op, "needs the dim it works on in `dims`");
  const int i = in.IndexOf(op.dims(0));
  if (i < 0) {
    return DataOpError(op, absl::StrCat("works on dim '", op.dims(0), "' but input '",
                                        input < op.inputs_size() ? op.inputs(input) : "",
                                        "' has shape ", in.ToString()));
  }
  return i;
}

absl::StatusOr<std::string> NewDimName(const v1::Op& op, const Shape& in, const std::string& old,
                                       int64_t old_size, int64_t new_size) {
  const std::string name = StringAttrOr(op, "new_dim", old);
  if (name.empty()) return DataOpError(op, "attrs.new_dim is empty");
  if (name == old && old_size != new_size) {
    return DataOpError(
        op, absl::StrCat("makes dim '", old, "' of size ", new_size, " from one of size ", old_size,
                         "; a dim name means one size in a graph, so name the "
                         "output dim with attrs {new_dim: ...}"));
  }
  if (name != old && in.Contains(name)) {
    return DataOpError(
        op, absl::StrCat("new_dim '", name, "' is already a dim of the input ", in.ToString()));
  }
  return name;
}

absl::StatusOr<DimRange> KeptRange(const v1::Op& op, int64_t n) {
  DimRange r;
  if (op.type() == "slice") {
    r.begin = IntAttrOr(op, "begin", 0);
    ASSIGN_OR_RETURN(r.size, IntAttr(op, "size"));
    if (r.begin < 0 || r.size < 1 || r.begin + r.size > n) {
      return DataOpError(op,
                         absl::StrCat("slice [", r.begin, ", ", r.begin + r.size,
                                      ") does not fit in a dim of size ", n,
                                      " (need 0 <= begin, 1 <= size, begin + size <= ", n, ")"));
    }
    return r;
  }
  // split
  ASSIGN_OR_RETURN(const int64_t index, IntAttr(op, "index"));
  std::vector<int64_t> sizes;
  if (op.attrs().count("sizes")) {
    ASSIGN_OR_RETURN(sizes, IntListAttr(op, "sizes"));
    if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != n) {
      return DataOpError(op, absl::StrCat("sizes [", absl::StrJoin(sizes, ", "),
                                          "] do not sum to the dim's size ", n));
    }
  } else {
    ASSIGN_OR_RETURN(const int64_t num, IntAttr(op, "num"));
    if (num < 1 || n % num != 0) {
      return DataOpError(op, absl::StrCat("cannot split a dim of size ", n, " into ", num,
                                          " equal pieces; give attrs.sizes instead"));
    }
    sizes.assign(num, n / num);
  }
  if (index < 0 || index >= static_cast<int64_t>(sizes.size())) {
    return DataOpError(
        op, absl::StrCat("index ", index, " is not one of the ", sizes.size(), " pieces"));
  }
  for (int64_t i = 0; i < index; ++i) r.begin += sizes[i];
  r.size = sizes[index];
  if (r.size < 1) return DataOpError(op, absl::StrCat("piece ", index, " is empty"));
  return r;
}

namespace {

absl::Status SameDtypes(const v1::Op& op, const std::vector<TensorType>& in) {
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype) {
      return DataOpError(
          op, absl::StrCat("inputs '", op.inputs(0), "' (", DTypeName(in[0].dtype), ") and '",
                           op.inputs(i), "' (", DTypeName(in[i].dtype), ") have different dtypes"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorType> InferReplaceDims(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(const int i, OpDimIndex(op, in[0].shape));
  ASSIGN_OR_RETURN(Shape repl, Shape::FromProto(op.shape(), "replace_dims `shape`"));
  if (repl.rank() == 0 || repl.num_elements() != in[0].shape.dim(i).size) {
    return DataOpError(op, absl::StrCat("replaces dim '", op.dims(0), "' (size ",
                                        in[0].shape.dim(i).size, ") by ", repl.ToString(), " (",
                                        repl.num_elements(), " elements); the sizes must match"));
  }
  const Shape rest = WithoutDim(in[0].shape, op.dims(0));
  for (const Dim& d : repl.dims()) {
    if (rest.Contains(d.name)) {
      return DataOpError(
          op, absl::StrCat("new dim '", d.name, "' is already a dim of ", in[0].shape.ToString()));
    }
  }
  return TensorType{ReplaceDim(in[0].shape, i, repl.dims()), in[0].dtype};
}

// slice and split.
absl::StatusOr<TensorType> InferSlice(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(const int i, OpDimIndex(op, in[0].shape));
  const Dim& d = in[0].shape.dim(i);
  ASSIGN_OR_RETURN(const DimRange r, KeptRange(op, d.size));
  ASSIGN_OR_RETURN(std::string name, NewDimName(op, in[0].shape, d.name, d.size, r.size));
  return TensorType{ReplaceDim(in[0].shape, i, {{name, r.size}}), in[0].dtype};
}

absl::StatusOr<TensorType> InferPad(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(const int i, OpDimIndex(op, in[0].shape));
  const Dim& d = in[0].shape.dim(i);
  const int64_t before = IntAttrOr(op, "before", 0), after = IntAttrOr(op, "after", 0);
  if (before < 0 || after < 0) {
    return DataOpError(op,
                       absl::StrCat("before (", before, ") and after (", after, ") must be >= 0"));
  }
  const int64_t size = d.size + before + after;
  ASSIGN_OR_RETURN(std::string name, NewDimName(op, in[0].shape, d.name, d.size, size));
  return TensorType{ReplaceDim(in[0].shape, i, {{name, size}}), in[0].dtype};
}

absl::StatusOr<TensorType> InferConcat(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(SameDtypes(op, in));
  const int k = static_cast<int>(in.size());
  if (op.dims_size() != 1 && op.dims_size() != k) {
    return DataOpError(op, absl::StrCat("needs one dim name in `dims`, or one per input (", k,
                                        "), not ", op.dims_size()));
  }
  int64_t total = 0;
  Shape first_rest;
  int pos = -1;
  for (int j = 0; j < k; ++j) {
    const std::string& name = op.dims(op.dims_size() == 1 ? 0 : j);
    const int i = in[j].shape.IndexOf(name);
    if (i < 0) {
      return DataOpError(op, absl::StrCat("concatenates along '", name, "' but input '",
                                          op.inputs(j), "' has shape ", in[j].shape.ToString()));
    }
    total += in[j].shape.dim(i).size;
    const Shape rest = WithoutDim(in[j].shape, name);
    if (j == 0) {
      first_rest = rest;
      pos = i;
      continue;
    }
    bool same = rest.rank() == first_rest.rank();
    for (const Dim& d : rest.dims()) {
      const int f = first_rest.IndexOf(d.name);
      same = same && f >= 0 && first_rest.dim(f).size == d.size;
    }
    if (!same) {
      return DataOpError(op, absl::StrCat("input '", op.inputs(j), "' has dims ", rest.ToString(),
                                          " besides its concat dim but input '", op.inputs(0),
                                          "' has ", first_rest.ToString()));
    }
  }
  const Dim& d0 = in[0].shape.dim(pos);
  ASSIGN_OR_RETURN(std::string name, NewDimName(op, in[0].shape, d0.name, d0.size, total));
  return TensorType{ReplaceDim(in[0].shape, pos, {{name, total}}), in[0].dtype};
}

absl::StatusOr<TensorType> InferStack(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(SameDtypes(op, in));
  for (size_t j = 1; j < in.size(); ++j) {
    if (in[j].shape != in[0].shape) {
      return DataOpError(op, absl::StrCat("stacks inputs of different shapes: '", op.inputs(0),
                                          "' is ", in[0].shape.ToString(), " but '", op.inputs(j),
                                          "' is ", in[j].shape.ToString()));
    }
  }
  ASSIGN_OR_RETURN(std::string name, StringAttr(op, "new_dim"));
  if (in[0].shape.Contains(name)) {
    return DataOpError(op, absl::StrCat("new_dim '", name, "' is already a dim of the inputs ",
                                        in[0].shape.ToString()));
  }
  const int64_t axis = IntAttrOr(op, "axis", 0);
  if (axis < 0 || axis > in[0].shape.rank()) {
    return DataOpError(
        op, absl::StrCat("axis ", axis, " is not a position in 0..", in[0].shape.rank()));
  }
  std::vector<Dim> dims = in[0].shape.dims();
  dims.insert(dims.begin() + axis, Dim{name, static_cast<int64_t>(in.size())});
  return TensorType{Shape(std::move(dims)), in[0].dtype};
}

absl::StatusOr<TensorType> InferUnstack(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(const int i, OpDimIndex(op, in[0].shape));
  ASSIGN_OR_RETURN(const int64_t index, IntAttr(op, "index"));
  if (index < 0 || index >= in[0].shape.dim(i).size) {
    return DataOpError(op, absl::StrCat("index ", index, " is outside dim '", op.dims(0),
                                        "' of size ", in[0].shape.dim(i).size));
  }
  return TensorType{WithoutDim(in[0].shape, op.dims(0)), in[0].dtype};
}

const char kGatherIfSplit[] = "none if the dim is not split; else allgather over its mesh dim";

OpInfo Data(std::string type, int min_in, int max_in, std::string summary, std::string collectives,
            InferFn infer, KernelFn kernel, LowerFn lower) {
  OpInfo info;
  info.type = std::move(type);
  info.family = OpFamily::kData;
  info.min_inputs = min_in;
  info.max_inputs = max_in;
  info.differentiable = true;
  info.summary = std::move(summary);
  info.collectives = std::move(collectives);
  info.infer = infer;
  info.reference = kernel;
  info.lower = lower;
  return info;
}

std::vector<OpInfo> DataOps() {
  OpInfo replace = Data("replace_dims", 1, 1, "replace dims[0] by the dims in `shape` (a reshape)",
                        "allgather / alltoall / local slice, as reshape", InferReplaceDims,
                        ReplaceDimsKernel, nullptr);
  replace.family = OpFamily::kReshape;  // lowered by LowerReshape
  replace.linear = &LinearInItsInput;
  return {
      replace,
      Data("slice", 1, 1, "attrs.begin, attrs.size of dims[0] (renamed attrs.new_dim)",
           absl::StrCat(kGatherIfSplit, " (broadcast of the range, when one processor holds it)"),
           InferSlice, SliceKernel, LowerSliceOp),
      Data("split", 1, 1, "piece attrs.index of dims[0] cut in attrs.num or attrs.sizes",
           absl::StrCat(kGatherIfSplit, " (broadcast of the range, when one processor holds it)"),
           InferSlice, SliceKernel, LowerSliceOp),
      Data("pad", 1, 1, "attrs.before / attrs.after zeros around dims[0]", kGatherIfSplit, InferPad,
           PadKernel, LowerPadOp),
      Data("concat", 1, -1, "inputs joined along dims (one per input) into attrs.new_dim",
           "none if the concat dims are not split; else allgather over their mesh dims",
           InferConcat, ConcatKernel, LowerConcatOp),
      Data("stack", 1, -1, "inputs stacked along a new dim attrs.new_dim at attrs.axis",
           "none (local slice when the new dim is split)", InferStack, StackKernel, LowerStackOp),
      Data("unstack", 1, 1, "element attrs.index of dims[0], without that dim",
           "none if the dim is not split; else broadcast of the element from its holder",
           InferUnstack, UnstackKernel, LowerUnstackOp),
  };
}

const bool kRegistered = RegisterOps(DataOps());

}  // namespace
}  // namespace meshrt
