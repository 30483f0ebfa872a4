// Shape inference and registration of the indexing family (semantics in ops_index.h).
#include "core/ops/ops_index.h"

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/ops/ops_data.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

absl::Status NeedInt32(const v1::Op& op, const std::vector<TensorType>& in, int i,
                       absl::string_view role) {
  if (in[i].dtype != DType::kInt32) {
    return DataOpError(op, absl::StrCat(role, " '", op.inputs(i), "' must be int32, not ",
                                        DTypeName(in[i].dtype)));
  }
  return absl::OkStatus();
}

// The op's `dtype` field (DT_INVALID: float32).
absl::StatusOr<DType> OutDtype(const v1::Op& op) {
  if (op.dtype() == v1::DT_INVALID) return DType::kFloat32;
  auto d = DTypeFromProto(op.dtype());
  if (!d.ok()) return DataOpError(op, d.status().message());
  return *d;
}

// Every dim of input `i` is a dim of input 0 with the same size (`except` may be missing there).
absl::Status DimsAmongX(const v1::Op& op, const std::vector<TensorType>& in, int i,
                        absl::string_view role, const std::string& except = "") {
  for (const Dim& d : in[i].shape.dims()) {
    const int j = in[0].shape.IndexOf(d.name);
    if (d.name == except) {
      return DataOpError(
          op, absl::StrCat(role, " '", op.inputs(i), "' must not have dim '", except, "'"));
    }
    if (j < 0 || in[0].shape.dim(j).size != d.size) {
      return DataOpError(op,
                         absl::StrCat(role, " '", op.inputs(i), "' has dim '", d.name, "' which '",
                                      op.inputs(0), "' ", in[0].shape.ToString(), " lacks"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorType> InferOneHot(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(NeedInt32(op, in, 0, "indices"));
  ASSIGN_OR_RETURN(Shape depth, Shape::FromProto(op.shape(), "one_hot `shape`"));
  if (depth.rank() != 1 || in[0].shape.Contains(depth.dim(0).name)) {
    return DataOpError(op, absl::StrCat("`shape` must be one depth dim not among the indices' ",
                                        in[0].shape.ToString(), ", not ", depth.ToString()));
  }
  ASSIGN_OR_RETURN(DType dtype, OutDtype(op));
  std::vector<Dim> dims = in[0].shape.dims();
  dims.push_back(depth.dim(0));
  return TensorType{Shape(std::move(dims)), dtype};
}

absl::StatusOr<TensorType> InferGather(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(const int di, OpDimIndex(op, in[0].shape));
  RETURN_IF_ERROR(NeedInt32(op, in, 1, "indices"));
  const Dim& d = in[0].shape.dim(di);
  if (in[1].shape.Contains(d.name)) {
    return DataOpError(op, absl::StrCat("indices '", op.inputs(1),
                                        "' must not have the gathered "
                                        "dim '",
                                        d.name, "'"));
  }
  if (in.size() == 3) {
    RETURN_IF_ERROR(NeedInt32(op, in, 2, "row_ids"));
    if (in[2].shape != Shape({d})) {
      return DataOpError(op, absl::StrCat("row_ids '", op.inputs(2), "' must have shape ",
                                          Shape({d}).ToString(), ", not ", in[2].shape.ToString()));
    }
  }
  std::vector<Dim> fresh;
  for (const Dim& x : in[1].shape.dims()) {
    const int j = in[0].shape.IndexOf(x.name);
    if (j < 0) {
      fresh.push_back(x);
    } else if (in[0].shape.dim(j).size != x.size) {
      return DataOpError(op, absl::StrCat("dim '", x.name, "' is ", in[0].shape.dim(j).size,
                                          " in the weights but ", x.size, " in the indices"));
    }
  }
  return TensorType{ReplaceDim(in[0].shape, di, fresh), in[0].dtype};
}

absl::StatusOr<TensorType> InferRange(const v1::Op& op, const std::vector<TensorType>&) {
  ASSIGN_OR_RETURN(Shape shape, Shape::FromProto(op.shape(), "range `shape`"));
  if (shape.rank() != 1) {
    return DataOpError(op, absl::StrCat("`shape` must be one dim, not ", shape.ToString()));
  }
  ASSIGN_OR_RETURN(DType dtype, OutDtype(op));
  return TensorType{shape, dtype};
}

absl::StatusOr<std::string> OutputAttr(const v1::Op& op) {
  const std::string output = StringAttrOr(op, "output", "values");
  if (output != "values" && output != "indices") {
    return DataOpError(
        op, absl::StrCat("attrs.output must be \"values\" or \"indices\", not \"", output, "\""));
  }
  return output;
}

absl::StatusOr<TensorType> InferTopK(const v1::Op& op, const std::vector<TensorType>& in) {
  ASSIGN_OR_RETURN(const int di, OpDimIndex(op, in[0].shape));
  const Dim& d = in[0].shape.dim(di);
  if (in.size() == 2) {
    RETURN_IF_ERROR(NeedInt32(op, in, 1, "ids"));
    RETURN_IF_ERROR(DimsAmongX(op, in, 1, "ids"));
  }
  ASSIGN_OR_RETURN(const std::string output, OutputAttr(op));
  const DType dtype = output == "values" ? in[0].dtype : DType::kInt32;
  if (op.type() == "argmax") return TensorType{WithoutDim(in[0].shape, d.name), DType::kInt32};
  ASSIGN_OR_RETURN(const int64_t k, IntAttr(op, "k"));
  if (k < 1 || k > d.size) {
    return DataOpError(op,
                       absl::StrCat("k = ", k, " is not in 1..", d.size, " (dim '", d.name, "')"));
  }
  ASSIGN_OR_RETURN(std::string name, NewDimName(op, in[0].shape, d.name, d.size, k));
  return TensorType{ReplaceDim(in[0].shape, di, {{name, k}}), dtype};
}

absl::StatusOr<TensorType> InferCumsum(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(OpDimIndex(op, in[0].shape).status());
  if (in.size() == 2) {
    if (in[1].dtype != in[0].dtype) return DataOpError(op, "carry and x have different dtypes");
    RETURN_IF_ERROR(DimsAmongX(op, in, 1, "carry", op.dims(0)));
  }
  return in[0];
}

absl::StatusOr<TensorType> InferSort(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(OpDimIndex(op, in[0].shape).status());
  ASSIGN_OR_RETURN(const std::string output, OutputAttr(op));
  return TensorType{in[0].shape, output == "values" ? in[0].dtype : DType::kInt32};
}

OpInfo Index(std::string type, int min_in, int max_in, bool differentiable, std::string summary,
             std::string collectives, InferFn infer, KernelFn kernel, LowerFn lower) {
  OpInfo info;
  info.type = std::move(type);
  info.family = OpFamily::kIndex;
  info.min_inputs = min_in;
  info.max_inputs = max_in;
  info.differentiable = differentiable;
  info.summary = std::move(summary);
  info.collectives = std::move(collectives);
  info.infer = infer;
  info.reference = kernel;
  info.lower = lower;
  return info;
}

std::vector<OpInfo> IndexOps() {
  OpInfo one_hot =
      Index("one_hot", 1, 1, false, "1 where the index equals the depth position, else 0",
            "none (indices offset by the slice's begin along depth)", InferOneHot, OneHotKernel,
            LowerLocalIndexOp);
  one_hot.needs_slice_begin = true;
  OpInfo range =
      Index("range", 0, 0, false, "0, 1, ..., n-1 along the one dim of `shape`",
            "none (values from the slice's begin)", InferRange, RangeKernel, LowerLocalIndexOp);
  range.family = OpFamily::kSource;
  range.needs_slice_begin = true;
  return {
      one_hot,
      range,
      Index("gather", 2, 3, true, "rows of weights along dims[0] selected by int32 indices",
            "allreduce(sum) over the gathered dim's mesh dim when split (allgather of weights "
            "instead when that mesh dim also splits the output)",
            InferGather, GatherKernel, LowerGatherOp),
      Index("top_k", 1, 2, true, "k largest along dims[0] (attrs.output: values or indices)",
            "allgather of k candidates per slice over the dim's mesh dim when split", InferTopK,
            TopKKernel, LowerTopKOp),
      Index("argmax", 1, 2, false, "int32 index of the largest along dims[0]",
            "allgather of one candidate per slice over the dim's mesh dim when split", InferTopK,
            ArgmaxKernel, LowerTopKOp),
      Index("cumsum", 1, 2, true, "running sum along dims[0] (attrs.exclusive)",
            "allgather of one total per slice over the dim's mesh dim when split", InferCumsum,
            CumsumKernel, LowerCumsumOp),
      Index("sort", 1, 1, true, "sorted along dims[0] (attrs.descending, attrs.output)",
            "allgather over the dim's mesh dim when split", InferSort, SortKernel, LowerSortOp),
  };
}

const bool kRegistered = RegisterOps(IndexOps());

}  // namespace
}  // namespace meshrt
