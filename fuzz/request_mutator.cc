#include "fuzz/request_mutator.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/ops.h"

namespace meshrt {
namespace fuzz {
namespace {

class Mutator {
 public:
  Mutator(uint32_t seed, v1::CreateSessionRequest* request) : rng_(seed), request_(request) {
    Collect(request_->mutable_graph());
    for (const v1::Dim& d : request_->mesh().dims()) mesh_names_.insert(d.name());
  }

  void MutateOnce() {
    switch (Below(9)) {
      case 0:
        NewRules();
        break;
      case 1:
        NewMesh();
        break;
      case 2:
        DimSize();
        break;
      case 3:
        OpType();
        break;
      case 4:
        Rewire();
        break;
      case 5:
        IntAttr();
        break;
      case 6:
        StringAttr();
        break;
      case 7:
        CopyOp();
        break;
      default:  // layouts matter most to lowering: a new mesh and new rules together
        NewMesh();
        NewRules();
        break;
    }
  }

 private:
  int Below(int n) { return n <= 0 ? 0 : std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(static_cast<int>(v.size()))];
  }
  template <typename T>
  const T& Pick(const std::set<T>& s) {
    auto it = s.begin();
    std::advance(it, Below(static_cast<int>(s.size())));
    return *it;
  }
  int64_t SmallSize() { return Pick(std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12, 16}); }

  // Every op and declared dim of `graph`, loop bodies included, and the names of dims.
  void Collect(v1::Graph* graph) {
    graphs_.push_back(graph);
    for (v1::Op& op : *graph->mutable_ops()) {
      ops_.push_back(&op);
      for (v1::Dim& d : *op.mutable_shape()->mutable_dims()) {
        dims_.push_back(&d);
        dim_names_.insert(d.name());
      }
      for (const std::string& d : op.dims()) dim_names_.insert(d);
      for (const auto& [name, value] : op.attrs()) {
        if (value.value_case() == v1::AttrValue::kS && !value.s().empty()) {
          dim_names_.insert(value.s());
        }
      }
      if (op.has_body()) Collect(op.mutable_body());
    }
  }

  void NewRules() {
    if (dim_names_.empty() || mesh_names_.empty()) return;
    v1::LayoutRules* rules = request_->mutable_rules();
    rules->Clear();
    std::set<std::string> used;
    for (int i = 0, n = 1 + Below(3); i < n; ++i) {
      const std::string& dim = Pick(dim_names_);
      if (!used.insert(dim).second) continue;
      v1::LayoutRule* rule = rules->add_rules();
      rule->set_tensor_dim(dim);
      rule->set_mesh_dim(Pick(mesh_names_));
    }
  }

  void NewMesh() {
    static const std::vector<std::string> kNames = {"rows", "cols", "x", "y", "p"};
    v1::Mesh* mesh = request_->mutable_mesh();
    mesh->Clear();
    mesh_names_.clear();
    int64_t processors = 1;
    for (int i = 0, n = 1 + Below(3); i < n; ++i) {
      const std::string& name = Pick(kNames);
      if (!mesh_names_.insert(name).second) continue;
      const int64_t size = Pick(std::vector<int64_t>{1, 2, 2, 3, 4});
      if (processors * size > 16) break;
      processors *= size;
      v1::Dim* d = mesh->add_dims();
      d->set_name(name);
      d->set_size(size);
    }
  }

  void DimSize() {
    if (!dims_.empty()) Pick(dims_)->set_size(SmallSize());
  }

  void OpType() {
    static const std::vector<std::string>* types = [] {
      auto* t = new std::vector<std::string>();
      for (const OpInfo& op : AllOps()) t->push_back(op.type);
      return t;
    }();
    if (!ops_.empty() && !types->empty()) Pick(ops_)->set_type(Pick(*types));
  }

  // Replaces, adds or drops one input, naming another op of the same graph.
  void Rewire() {
    v1::Graph* graph = Pick(graphs_);
    if (graph->ops_size() < 2) return;
    v1::Op* op = graph->mutable_ops(Below(graph->ops_size()));
    const std::string& other = graph->ops(Below(graph->ops_size())).name();
    const int choice = Below(3);
    if (choice == 0 && op->inputs_size() > 0) {
      op->set_inputs(Below(op->inputs_size()), other);
    } else if (choice == 1 && op->inputs_size() > 0) {
      op->mutable_inputs()->RemoveLast();
    } else {
      op->add_inputs(other);
    }
  }

  void IntAttr() {
    if (ops_.empty()) return;
    v1::Op* op = Pick(ops_);
    for (auto& [name, value] : *op->mutable_attrs()) {
      if (Below(2) == 0) continue;
      if (value.value_case() == v1::AttrValue::kI) {
        value.set_i(Below(10) - 2);
      } else if (value.value_case() == v1::AttrValue::kInts && value.ints().values_size() > 0) {
        v1::IntList* ints = value.mutable_ints();
        ints->set_values(Below(ints->values_size()), Below(10) - 2);
      }
      return;
    }
  }

  void StringAttr() {
    if (ops_.empty() || dim_names_.empty()) return;
    v1::Op* op = Pick(ops_);
    for (auto& [name, value] : *op->mutable_attrs()) {
      if (value.value_case() == v1::AttrValue::kS) {
        value.set_s(Pick(dim_names_));
        return;
      }
    }
    if (op->dims_size() > 0) op->set_dims(Below(op->dims_size()), Pick(dim_names_));
  }

  // A copy of an op under a new name, also fetched: one graph with two users of the same inputs.
  void CopyOp() {
    v1::Graph* graph = Pick(graphs_);
    if (graph->ops_size() == 0 || graph->ops_size() > 200) return;
    v1::Op copy = graph->ops(Below(graph->ops_size()));
    copy.set_name(absl::StrCat(copy.name(), "_copy", Below(100)));
    graph->add_outputs(copy.name());
    *graph->add_ops() = std::move(copy);
  }

  std::mt19937 rng_;
  v1::CreateSessionRequest* request_;
  // Into *request_, collected at construction (each Mutator makes one mutation).
  std::vector<v1::Graph*> graphs_;
  std::vector<v1::Op*> ops_;
  std::vector<v1::Dim*> dims_;
  std::set<std::string> dim_names_;
  std::set<std::string> mesh_names_;
};

}  // namespace

void MutateRequest(uint32_t seed, v1::CreateSessionRequest* request) {
  const int n = 1 + static_cast<int>(seed % 3);
  for (int i = 0; i < n; ++i) {
    // Collected afresh each time: a previous mutation may have added ops or dims.
    Mutator mutator(seed + i * 7919u, request);
    mutator.MutateOnce();
  }
}

}  // namespace fuzz
}  // namespace meshrt
