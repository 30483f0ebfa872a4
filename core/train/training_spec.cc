#include "core/train/training_spec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/builder.h"
#include "util/status_macros.h"

namespace meshrt {

TrainOptions TrainOptionsOf(const v1::TrainingSpec& spec) {
  TrainOptions o;
  if (!spec.optimizer().empty()) o.optimizer = spec.optimizer();
  if (!spec.learning_rate().kind().empty()) o.learning_rate.kind = spec.learning_rate().kind();
  if (spec.learning_rate().base() != 0) o.learning_rate.base = spec.learning_rate().base();
  o.learning_rate.warmup_steps = spec.learning_rate().warmup_steps();
  if (spec.has_momentum()) o.momentum = spec.momentum();
  if (spec.has_beta1()) o.beta1 = spec.beta1();
  if (spec.has_beta2()) o.beta2 = spec.beta2();
  if (spec.has_epsilon()) o.epsilon = spec.epsilon();
  if (spec.has_weight_decay()) o.weight_decay = spec.weight_decay();
  if (spec.has_adafactor_decay()) o.adafactor_decay = spec.adafactor_decay();
  if (spec.has_adafactor_epsilon()) o.adafactor_epsilon = spec.adafactor_epsilon();
  if (spec.has_adafactor_clip()) o.adafactor_clip = spec.adafactor_clip();
  o.clip_global_norm = spec.clip_global_norm();
  o.microbatches = spec.microbatches() == 0 ? 1 : spec.microbatches();
  return o;
}

v1::TrainingSpec TrainingSpecOf(const TrainOptions& o, const std::string& loss,
                                const std::vector<std::string>& variables,
                                const std::vector<std::string>& keep_gradients) {
  v1::TrainingSpec spec;
  spec.set_loss(loss);
  for (const std::string& v : variables) spec.add_variables(v);
  spec.set_optimizer(o.optimizer);
  spec.mutable_learning_rate()->set_kind(o.learning_rate.kind);
  spec.mutable_learning_rate()->set_base(o.learning_rate.base);
  spec.mutable_learning_rate()->set_warmup_steps(o.learning_rate.warmup_steps);
  spec.set_momentum(o.momentum);
  spec.set_beta1(o.beta1);
  spec.set_beta2(o.beta2);
  spec.set_epsilon(o.epsilon);
  spec.set_weight_decay(o.weight_decay);
  spec.set_adafactor_decay(o.adafactor_decay);
  spec.set_adafactor_epsilon(o.adafactor_epsilon);
  spec.set_adafactor_clip(o.adafactor_clip);
  spec.set_clip_global_norm(o.clip_global_norm);
  spec.set_microbatches(o.microbatches);
  for (const std::string& k : keep_gradients) spec.add_keep_gradients(k);
  return spec;
}

absl::StatusOr<TrainOps> AddTrainingOps(GraphBuilder& b, const TensorRef& loss,
                                        const std::vector<TensorRef>& variables,
                                        const TrainOptions& o,
                                        const std::vector<TensorRef>& keep_gradients) {
  ASSIGN_OR_RETURN(TrainOps ops, Minimize(b, loss, variables, o, keep_gradients));
  for (size_t i = 0; i < keep_gradients.size(); ++i) {
    const TensorRef& x = keep_gradients[i];
    TensorRef kept = b.Variable(x.name + "/grad", x.shape);
    b.Assign(kept, ops.other_gradients[i], "train/keep/" + x.name);
  }
  for (const TensorRef* t : {&ops.loss, &ops.learning_rate, &ops.global_step, &ops.global_norm}) {
    b.MarkOutput(*t);
  }
  RETURN_IF_ERROR(b.status());
  return ops;
}

absl::StatusOr<TrainedGraph> AddTraining(const Graph& graph, const v1::TrainingSpec& spec,
                                         const RequestLimits* limits) {
  auto invalid = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("training: ", what));
  };
  if (spec.loss().empty()) return invalid("TrainingSpec.loss names no tensor; name the scalar loss");
  GraphBuilder b = GraphBuilder::Extending(graph);
  absl::StatusOr<TensorRef> loss = b.Find(spec.loss());
  if (!loss.ok()) return invalid(absl::StrCat("the loss '", spec.loss(), "' is not in the graph"));
  if (loss->shape.rank() != 0 || loss->dtype != DType::kFloat32) {
    return invalid(absl::StrCat("the loss '", spec.loss(), "' must be a scalar float32, not ",
                                DTypeName(loss->dtype), " ", loss->shape.ToString()));
  }
  std::vector<TensorRef> variables;
  if (spec.variables().empty()) {
    for (const v1::Op& op : graph.proto().ops()) {
      if (IsVariable(op) && graph.type(op.name()).dtype == DType::kFloat32) {
        variables.push_back(*b.Find(op.name()));
      }
    }
    if (variables.empty()) return invalid("the graph has no float32 variable to train");
  }
  for (const std::string& name : spec.variables()) {
    const v1::Op* op = graph.FindOp(name);
    if (op == nullptr || !IsVariable(*op)) {
      return invalid(absl::StrCat("TrainingSpec.variables names '", name,
                                  "', which is not a variable of the graph"));
    }
    variables.push_back(*b.Find(name));
  }
  std::vector<TensorRef> keep;
  for (const std::string& name : spec.keep_gradients()) {
    absl::StatusOr<TensorRef> t = b.Find(name);
    if (!t.ok()) {
      return invalid(absl::StrCat("TrainingSpec.keep_gradients names '", name,
                                  "', which is not in the graph"));
    }
    keep.push_back(*t);
  }
  ASSIGN_OR_RETURN(const TrainOps ops,
                   AddTrainingOps(b, *loss, variables, TrainOptionsOf(spec), keep));
  TrainedGraph out;
  out.outputs.set_loss(ops.loss.name);
  out.outputs.set_learning_rate(ops.learning_rate.name);
  out.outputs.set_global_norm(ops.global_norm.name);
  out.outputs.set_global_step(ops.global_step.name);
  ASSIGN_OR_RETURN(out.graph, limits == nullptr ? b.Build() : Graph::Build(b.proto(), *limits));
  return out;
}

}  // namespace meshrt
