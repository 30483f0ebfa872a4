// The gradient facet of the op registry: what an op's gradient rule (OpInfo::gradient) is given,
// and the helpers rules are written with.
//
// A rule adds, to the builder of the graph being differentiated, the ops computing its op's input
// gradients from dy (the gradient of sum(loss) with respect to the op's output), and hands each to
// Backward::Grad. It is called once per op on a path from a variable to the loss, in reverse
// topological order, only with a float32 output (core/train/autodiff.cc). Rules live by family in
// core/ops/gradients_<family>.cc and attach to the ops' records with RegisterGradients (core/ops/ops.h).
// The ops a rule emits, and their order, are the gradient graph: keep them stable (float sums are
// not associative).
//
// Not thread-safe (a Backward borrows one GraphBuilder).
#ifndef MESHRT_CORE_OPS_GRADIENT_H_
#define MESHRT_CORE_OPS_GRADIENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ir/shape.h"
#include "core/ops/builder.h"
#include "core/ops/ops.h"
#include "proto/graph.pb.h"

namespace meshrt {

// What the differentiator (core/train/autodiff.cc) offers every rule.
class GradientContext {
 public:
  virtual ~GradientContext() = default;
  // The builder the gradient ops go to (it also holds the forward graph).
  virtual GraphBuilder& builder() = 0;
  // A tensor of the forward graph.
  virtual TensorRef Ref(const std::string& name) const = 0;
  // Adds `g` (of the tensor's shape) to the gradient of forward tensor `name`; nothing for an
  // integer tensor (indices, conditions and int casts take no gradient).
  virtual void AddGrad(const std::string& name, const TensorRef& g) = 0;
  // A dim name no tensor of the forward graph uses, nor an earlier FreshDim (for temporaries).
  virtual std::string FreshDim(const std::string& base) = 0;
};

// One op's backward step: the op, its tensors and dy, plus builders of the ops rules use. Borrows
// `ctx`, `op` and `dy` for its lifetime.
class Backward {
 public:
  Backward(GradientContext& ctx, const v1::Op& op, const TensorRef& dy);

  const v1::Op& op;
  const TensorRef& dy;
  const TensorRef y;                // the op's output
  const std::vector<TensorRef> in;  // its inputs, in order
  GraphBuilder& b;

  // Adds `g`, summed to input i's shape (over the dims it lacks), to input i's gradient; nothing
  // for a non-float input (g is built either way).
  void Grad(int i, const TensorRef& g);
  // Adds `g`, already of input i's shape, to input i's gradient.
  void GradOfShape(int i, const TensorRef& g);
  std::string FreshDim(const std::string& base) { return ctx_.FreshDim(base); }

  // `dy` summed to `shape` (over dims it lacks) and in its dim order.
  TensorRef SumTo(const TensorRef& g, const Shape& shape);

  // ---- ops ------------------------------------------------------------------------------------
  TensorRef Unary(const std::string& type, const TensorRef& x);
  TensorRef Binary(const std::string& type, const TensorRef& x, const TensorRef& other);
  // x `type` s (s `type` x with `first`), the scalar operand form of a binary op.
  TensorRef WithS(const std::string& type, const TensorRef& x, float s, bool first = false);
  // An op of `type` over the dims of the op being differentiated (its normalised/reduced dims).
  TensorRef OnDims(const std::string& type, const TensorRef& x);
  // An op of `type` on `dim` with integer attrs `ints` (and attrs.new_dim when given).
  TensorRef DimOp(const std::string& type, const TensorRef& x, const std::string& dim,
                  const std::map<std::string, int64_t>& ints, const std::string& new_dim = "");
  // Elements [begin, begin + size) of `dim`, named `new_dim`.
  TensorRef Slice(const TensorRef& x, const std::string& dim, int64_t begin, int64_t size,
                  const std::string& new_dim);
  TensorRef Pad(const TensorRef& x, const std::string& dim, int64_t before, int64_t after,
                const std::string& new_dim);
  // x itself for offset 0.
  TensorRef Shift(const TensorRef& x, const std::string& dim, int64_t offset, bool wrap);
  TensorRef Unstack(const TensorRef& x, const std::string& dim, int64_t index);
  // x itself when from == to.
  TensorRef Rename(const TensorRef& x, const std::string& from, const std::string& to);
  TensorRef OneHot(const TensorRef& indices, const Dim& depth);
  TensorRef Zeros(const Shape& shape);
  // 1 at `index` of a vector over `dim`, else 0 (a constant).
  TensorRef Basis(const Dim& dim, int64_t index);

 private:
  GradientContext& ctx_;
};

// ---- building and reading ops (no builder involved) ---------------------------------------------
namespace gradient {

// An op of `type` with nothing set.
v1::Op Typed(const std::string& type);
// The scalar operand form: attrs {scalar: s [, scalar_first: true]}.
v1::Op WithScalar(const std::string& type, float scalar, bool scalar_first = false);
// An op of `type` over the same `dims` as `like`.
v1::Op WithDims(const std::string& type, const v1::Op& like);
// `op` without its name and inputs, to apply again to other inputs (Apply sets both).
v1::Op Copy(const v1::Op& op);
bool HasScalar(const v1::Op& op);
// attrs.scalar (f, or i) of an op that HasScalar.
float Scalar(const v1::Op& op);
bool ScalarFirst(const v1::Op& op);
// Whether every dim of `s` is one of `op`'s dims.
bool OnlyDimsOf(const Shape& s, const v1::Op& op);

}  // namespace gradient
}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_GRADIENT_H_
