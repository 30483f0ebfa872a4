#include "models/train.h"

#include "core/train/training_spec.h"

namespace meshrt {
namespace models {

std::vector<std::string> VariableNames(const Graph& graph) {
  std::vector<std::string> names;
  for (const v1::Op& op : graph.proto().ops()) {
    if (IsVariable(op)) names.push_back(op.name());
  }
  return names;
}

absl::StatusOr<TrainGraph> BuildTrainGraph(
    const std::function<absl::StatusOr<ModelOutputs>(GraphBuilder&)>& build,
    const TrainOptions& train) {
  GraphBuilder b;
  absl::StatusOr<ModelOutputs> m = build(b);
  if (!m.ok()) return m.status();
  const v1::Graph forward = b.proto();
  absl::StatusOr<TrainOps> ops = AddTrainingOps(b, m->loss, m->variables, train, m->keep_gradients);
  if (!ops.ok()) return ops.status();
  absl::StatusOr<Graph> g = b.Build();
  if (!g.ok()) return g.status();
  TrainGraph t{std::move(*g)};
  t.forward = forward;
  std::vector<std::string> trainable, keep;
  for (const TensorRef& v : m->variables) trainable.push_back(v.name);
  for (const TensorRef& k : m->keep_gradients) keep.push_back(k.name);
  t.spec = TrainingSpecOf(train, m->loss.name, trainable, keep);
  t.loss = ops->loss.name;
  t.learning_rate = ops->learning_rate.name;
  t.global_step = ops->global_step.name;
  t.global_norm = ops->global_norm.name;
  t.data_step = m->data_step.name;
  t.output = m->output.name;
  t.eval_loss = m->eval_loss.name;
  for (const TensorRef& v : m->variables) t.trainable.push_back(v.name);
  t.variables = VariableNames(t.graph);
  return t;
}

absl::StatusOr<TrainGraph> BuildMlpTrainGraph(const MlpOptions& model, const TrainOptions& train) {
  return BuildTrainGraph([&](GraphBuilder& b) { return BuildMlp(b, model); }, train);
}

absl::StatusOr<TrainGraph> BuildTransformerTrainGraph(const TransformerOptions& model,
                                                      const TrainOptions& train) {
  return BuildTrainGraph([&](GraphBuilder& b) { return BuildTransformer(b, model); }, train);
}

absl::StatusOr<TrainGraph> BuildEncDecTrainGraph(const EncDecOptions& model,
                                                 const TrainOptions& train) {
  return BuildTrainGraph([&](GraphBuilder& b) { return BuildEncDec(b, model); }, train);
}

}  // namespace models
}  // namespace meshrt
