// GraphBuilder: the C++ API for writing mesh graphs (what //client exposes to users).
//
//   GraphBuilder b;
//   auto x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
//   auto w = b.Placeholder("w", Shape({{"d_in", 16}, {"hidden", 32}}));
//   auto h = b.Relu(b.Einsum({x, w}, Shape({{"batch", 8}, {"hidden", 32}})));
//   b.MarkOutput(b.ReduceSum(h, {"hidden"}, "s"));
//   absl::StatusOr<Graph> g = b.Build();
//
// Each method adds one op and returns a handle to its output. Shapes are inferred as ops are added;
// the first error is remembered and returned by Build() (later calls are then no-ops returning an
// empty handle), so call sites need no per-op error checks. `name` may be empty: a unique name is
// made from the op type. Not thread-safe.
#ifndef MESHRT_CORE_OPS_BUILDER_H_
#define MESHRT_CORE_OPS_BUILDER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ir/tensor.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "proto/graph.pb.h"

namespace meshrt {

// A handle to a tensor in a GraphBuilder: its name and inferred shape.
struct TensorRef {
  std::string name;
  Shape shape;
  DType dtype = DType::kFloat32;
};

// How a variable starts (core/ops/ops_state.h lists the kinds and their parameters).
struct Initializer {
  std::string kind = "zeros";  // zeros, ones, constant, uniform, normal, truncated_normal,
                               // glorot_uniform, glorot_normal
  float value = 0;             // constant
  float minval = 0, maxval = 1;  // uniform
  float mean = 0, stddev = 1;    // normal, truncated_normal
  int64_t seed = 0;
  std::vector<std::string> fan_in;  // glorot: fan-in dims (default: all but the last)
};

class GraphBuilder {
 public:
  GraphBuilder() = default;
  // A builder that goes on from `graph` (its ops, outputs and inferred types): new ops may read
  // its tensors (Find), and automatic names avoid its names.
  static GraphBuilder Extending(const Graph& graph);
  // A handle to tensor `name` of this builder's graph; NotFound naming it when there is none.
  absl::StatusOr<TensorRef> Find(const std::string& name) const;

  // A variable (state kept on the workers between steps; core/ops/ops_state.h).
  TensorRef Variable(const std::string& name, const Shape& shape, const Initializer& init = {},
                     DType dtype = DType::kFloat32);
  // After the step, `var` (a Variable's handle) holds `value` / var + `delta`. Returns the new value.
  TensorRef Assign(const TensorRef& var, const TensorRef& value, const std::string& name = "");
  TensorRef AssignAdd(const TensorRef& var, const TensorRef& delta, const std::string& name = "");

  TensorRef Placeholder(const std::string& name, const Shape& shape,
                        DType dtype = DType::kFloat32);
  TensorRef Constant(const Tensor& value, const std::string& name = "");

  // Product of `inputs`, summed over every dim not in `output`.
  TensorRef Einsum(const std::vector<TensorRef>& inputs, const Shape& output,
                   const std::string& name = "");

  TensorRef Add(const TensorRef& x, const TensorRef& y, const std::string& name = "");
  TensorRef Sub(const TensorRef& x, const TensorRef& y, const std::string& name = "");
  TensorRef Mul(const TensorRef& x, const TensorRef& y, const std::string& name = "");
  TensorRef Div(const TensorRef& x, const TensorRef& y, const std::string& name = "");
  TensorRef Relu(const TensorRef& x, const std::string& name = "");
  TensorRef Exp(const TensorRef& x, const std::string& name = "");
  TensorRef Neg(const TensorRef& x, const std::string& name = "");
  TensorRef Scale(const TensorRef& x, float scalar, const std::string& name = "");

  // Reduce over `dims` (all dims when empty).
  TensorRef ReduceSum(const TensorRef& x, const std::vector<std::string>& dims,
                      const std::string& name = "");
  TensorRef ReduceMax(const TensorRef& x, const std::vector<std::string>& dims,
                      const std::string& name = "");
  TensorRef ReduceMean(const TensorRef& x, const std::vector<std::string>& dims,
                       const std::string& name = "");

  TensorRef Reshape(const TensorRef& x, const Shape& shape, const std::string& name = "");
  TensorRef RenameDim(const TensorRef& x, const std::string& old_name,
                      const std::string& new_name, const std::string& name = "");

  // Any registered op: `op` carries the type and attributes (its name and inputs are set here).
  // For ops without a method of their own.
  TensorRef Apply(v1::Op op, const std::vector<TensorRef>& inputs, const std::string& name = "");

  // Marks a tensor as a graph output (what tools fetch by default); once, however often asked.
  void MarkOutput(const TensorRef& t);

  // The first error so far, or OK.
  const absl::Status& status() const { return status_; }
  // The graph so far (even if invalid), e.g. to write it out as text.
  const v1::Graph& proto() const { return graph_; }
  // Validates and returns the graph, or the first error.
  absl::StatusOr<Graph> Build() const;

 private:
  TensorRef Unary(const std::string& type, const TensorRef& x, const std::string& name);
  TensorRef Binary(const std::string& type, const TensorRef& x, const TensorRef& y,
                   const std::string& name);
  TensorRef Reduce(const std::string& type, const TensorRef& x,
                   const std::vector<std::string>& dims, const std::string& name);

  v1::Graph graph_;
  std::map<std::string, int> counters_;  // op type -> next automatic name suffix
  std::map<std::string, TensorType> types_;
  absl::Status status_;
};

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_BUILDER_H_
