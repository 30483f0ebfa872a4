#include "core/train/autodiff.h"

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/ops/gradient.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// The registry's gradient facets are complete and consistent (checked once, after static
// initialisation: a facet may be registered before its op).
void CheckFacetsOnce() {
  static const bool checked = [] {
    const absl::Status s = CheckGradientFacets();
    MESHRT_CHECK(s.ok(), s.message());
    return true;
  }();
  (void)checked;
}

// Runs the ops' gradient rules (OpInfo::gradient) in reverse topological order, accumulating each
// tensor's gradient.
class Differentiator : public GradientContext {
 public:
  Differentiator(GraphBuilder& b, const Graph& graph) : b_(b), graph_(graph) {
    for (int i = 0; i < graph.proto().ops_size(); ++i) {
      for (const Dim& d : graph.type(graph.op(i).name()).shape.dims()) used_dims_.insert(d.name);
    }
  }

  GraphBuilder& builder() override { return b_; }

  TensorRef Ref(const std::string& name) const override {
    const TensorType& t = graph_.type(name);
    return TensorRef{name, t.shape, t.dtype};
  }

  void AddGrad(const std::string& name, const TensorRef& g) override {
    if (graph_.type(name).dtype != DType::kFloat32) return;
    auto it = grads_.find(name);
    if (it == grads_.end()) {
      grads_[name] = g;
    } else {
      it->second = b_.Add(it->second, g);
    }
  }

  std::string FreshDim(const std::string& base) override {
    std::string name;
    do {
      name = absl::StrCat(base, "_grad", fresh_++);
    } while (used_dims_.count(name));
    used_dims_.insert(name);
    return name;
  }

  absl::StatusOr<std::vector<TensorRef>> Run(const TensorRef& loss,
                                             const std::vector<TensorRef>& xs) {
    // Ops on a path from some x to the loss.
    std::set<std::string> from_x;
    for (const TensorRef& x : xs) from_x.insert(x.name);
    for (int i : graph_.topological_order()) {
      const v1::Op& op = graph_.op(i);
      for (const std::string& in : op.inputs()) {
        if (from_x.count(in)) from_x.insert(op.name());
      }
    }
    std::set<std::string> to_loss = {loss.name};
    const std::vector<int>& order = graph_.topological_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const v1::Op& op = graph_.op(*it);
      if (!to_loss.count(op.name())) continue;
      for (const std::string& in : op.inputs()) to_loss.insert(in);
    }
    {
      auto scope = b_.NameScopeAt(loss.name + "/grad");
      grads_[loss.name] = b_.Apply(ShapedOp("ones", loss.shape), {});
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const v1::Op& op = graph_.op(*it);
      if (!from_x.count(op.name()) || !to_loss.count(op.name()) || op.inputs_size() == 0) continue;
      // Integer outputs and piecewise-constant ops pass back nothing.
      const OpInfo* info = FindOp(op.type());  // non-null: the graph is valid
      if (graph_.type(op.name()).dtype != DType::kFloat32 || info->zero_gradient) continue;
      auto g = grads_.find(op.name());
      if (g == grads_.end()) continue;
      if (info->gradient == nullptr) {
        return absl::UnimplementedError(
            absl::StrCat("no gradient yet for op '", op.name(), "' (", op.type(), ")"));
      }
      // The rule's ops are named after the op they differentiate: "<op>/grad/<type>", so a
      // trace or an error ties each to the layer it serves.
      auto scope = b_.NameScopeAt(op.name() + "/grad");
      Backward backward(*this, op, g->second);
      RETURN_IF_ERROR(info->gradient(backward));
    }
    std::vector<TensorRef> out;
    for (const TensorRef& x : xs) {
      auto g = grads_.find(x.name);
      if (g != grads_.end()) {
        out.push_back(g->second);
      } else {
        auto scope = b_.NameScopeAt(x.name + "/grad");
        out.push_back(b_.Apply(ShapedOp("zeros", x.shape), {}));
      }
    }
    RETURN_IF_ERROR(b_.status());
    return out;
  }

 private:
  static v1::Op ShapedOp(const std::string& type, const Shape& shape) {
    v1::Op op = gradient::Typed(type);
    *op.mutable_shape() = shape.ToProto();
    return op;
  }

  GraphBuilder& b_;
  const Graph& graph_;
  std::map<std::string, TensorRef> grads_;
  std::set<std::string> used_dims_;
  int fresh_ = 0;
};

}  // namespace

bool HasGradient(const std::string& type) {
  CheckFacetsOnce();
  const OpInfo* info = FindOp(type);
  return info != nullptr && info->gradient != nullptr;
}

absl::StatusOr<std::vector<TensorRef>> Gradients(GraphBuilder& b, const TensorRef& loss,
                                                 const std::vector<TensorRef>& xs) {
  CheckFacetsOnce();
  ASSIGN_OR_RETURN(Graph graph, b.Build());
  if (!graph.HasTensor(loss.name)) {
    return absl::InvalidArgumentError(absl::StrCat("loss '", loss.name, "' is not in the graph"));
  }
  for (const TensorRef& x : xs) {
    if (!graph.HasTensor(x.name)) {
      return absl::InvalidArgumentError(absl::StrCat("'", x.name, "' is not in the graph"));
    }
  }
  return Differentiator(b, graph).Run(loss, xs);
}

}  // namespace meshrt
