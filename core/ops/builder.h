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
// made from the op type. Ops are named by scope, as Mesh-TensorFlow names them
// ("decoder/layer_0/self_attention/q"): see NameScope. Not thread-safe.
#ifndef MESHRT_CORE_OPS_BUILDER_H_
#define MESHRT_CORE_OPS_BUILDER_H_

#include <map>
#include <string>
#include <utility>
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
  // While it lives, the names of new ops are in its scope (GraphBuilder::NameScope); its end
  // restores the scope before it. Not copyable or movable: a block-scoped guard.
  class [[nodiscard]] ScopeGuard {
   public:
    ScopeGuard(GraphBuilder& b, std::string scope) : b_(b), outer_(std::move(b.scope_)) {
      b_.scope_ = std::move(scope);
    }
    ~ScopeGuard() { b_.scope_ = std::move(outer_); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

   private:
    GraphBuilder& b_;
    std::string outer_;
  };

  GraphBuilder() = default;

  // Within the returned guard's life, an op named N is called "<scope>/N", and an op without a
  // name "<scope>/<type>" (then "<scope>/<type>_1", ...); scopes nest ("layer_0" then
  // "attention": "layer_0/attention/q"). Variables and placeholders keep the names given
  // (checkpoints and feeds refer to them). E.g.
  //   { auto s = b.NameScope("layer_0/ffn"); h = b.Relu(b.Einsum({x, w1}, shape)); }
  // names "layer_0/ffn/einsum" and "layer_0/ffn/relu".
  ScopeGuard NameScope(const std::string& scope) {
    return ScopeGuard(*this, scope.empty() ? scope_ : scope_ + scope + "/");
  }
  // The same, but replacing the current scope instead of nesting in it ("" = no scope): for ops
  // that belong to another op or tensor wherever they are built (a gradient under
  // "<op>/grad", an optimizer's update under the variable's name).
  ScopeGuard NameScopeAt(const std::string& scope) {
    return ScopeGuard(*this, scope.empty() ? std::string() : scope + "/");
  }
  // The current scope's prefix ("" or ending in '/').
  const std::string& name_scope() const { return scope_; }
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
  std::map<std::string, int> counters_;  // scope + op type -> next automatic name suffix
  std::string scope_;                     // NameScope's prefix: "" or "a/b/"
  std::map<std::string, TensorType> types_;
  absl::Status status_;
};

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_BUILDER_H_
