#include "core/training_spec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/builder.h"
#include "core/status_macros.h"

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

absl::StatusOr<TrainedGraph> AddTraining(const Graph& graph, const v1::TrainingSpec& spec) {
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
      if (op.type() == "variable" && graph.type(op.name()).dtype == DType::kFloat32) {
        variables.push_back(*b.Find(op.name()));
      }
    }
    if (variables.empty()) return invalid("the graph has no float32 variable to train");
  }
  for (const std::string& name : spec.variables()) {
    const v1::Op* op = graph.FindOp(name);
    if (op == nullptr || op->type() != "variable") {
      return invalid(absl::StrCat("TrainingSpec.variables names '", name,
                                  "', which is not a variable of the graph"));
    }
    variables.push_back(*b.Find(name));
  }
  ASSIGN_OR_RETURN(const TrainOps ops, Minimize(b, *loss, variables, TrainOptionsOf(spec)));
  TrainedGraph out;
  for (const TensorRef* t : {&ops.loss, &ops.learning_rate, &ops.global_norm, &ops.global_step}) {
    b.MarkOutput(*t);
  }
  out.outputs.set_loss(ops.loss.name);
  out.outputs.set_learning_rate(ops.learning_rate.name);
  out.outputs.set_global_norm(ops.global_norm.name);
  out.outputs.set_global_step(ops.global_step.name);
  ASSIGN_OR_RETURN(out.graph, b.Build());
  return out;
}

}  // namespace meshrt
