// The op registry: every op type the language knows, its arity, and its shape inference.
//
// Op types (issue-2 set; the full Mesh-TensorFlow set grows here one family at a time):
//   placeholder   0 inputs   shape, dtype (DT_INVALID means float32)     fed at run time
//   constant      0 inputs   value                                        shape/dtype from value
//   einsum        >= 1       shape = output shape; every other input dim is summed; an output
//                            dim in no input is a broadcast
//   add sub mul div minimum maximum
//                 2          broadcast by dim name; output = x's dims, then y's new dims
//   relu exp neg  1          same shape
//   scale         1          attrs {scalar: f}; x * scalar
//   reduce_sum reduce_max reduce_mean
//                 1          dims = reduced dims (none listed: all dims)
//   reshape       1          shape = new shape, same number of elements (row-major)
//   rename_dim    1          attrs {old: s, new: s}
// Thread-safe (the registry is immutable after static initialisation).
#ifndef MESHRT_CORE_OPS_H_
#define MESHRT_CORE_OPS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "proto/graph.pb.h"

namespace meshrt {

enum class OpFamily { kSource, kEinsum, kElementwise, kReduce, kReshape };

struct OpInfo {
  std::string type;
  OpFamily family;
  int min_inputs;
  int max_inputs;  // -1: any number
  bool differentiable;
  std::string summary;
};

// Every registered op, sorted by type.
const std::vector<OpInfo>& AllOps();
// The registered op called `type`, or nullptr.
const OpInfo* FindOp(absl::string_view type);

struct TensorType {
  Shape shape;
  DType dtype = DType::kFloat32;
};

// Output type of `op` given its inputs' types (in input order). Errors are InvalidArgument and name
// the op, its type, and what is wrong (unknown type, wrong input count, unknown dim, mismatched
// dtypes or element counts, a bad attribute).
absl::StatusOr<TensorType> InferOutputType(const v1::Op& op, const std::vector<TensorType>& inputs);

// Attribute access with errors naming the op.
absl::StatusOr<float> FloatAttr(const v1::Op& op, absl::string_view name);
absl::StatusOr<std::string> StringAttr(const v1::Op& op, absl::string_view name);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_H_
