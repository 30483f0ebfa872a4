// Training graphs: a model (models/mlp.h, models/transformer.h) plus core/train/optimizers.h's Minimize
// (gradients and every variable's update, run on the workers under the model's layout rules).
//
//   TrainOptions opt;                     // core/train/optimizers.h: sgd, adam, ... and the schedule
//   opt.learning_rate.base = 0.1f;
//   absl::StatusOr<TrainGraph> t = BuildTransformerTrainGraph(TransformerOptions{}, opt);
//   // lower t->graph under "batch:rows,heads:cols,d_ff:cols,vocab:cols" on rows:2,cols:2, run
//   // steps fetching t->loss.
//
// Each run of the graph is one training step: it reads its data at "data_step", applies the
// optimizer update and advances both "data_step" and Minimize's "global_step".
#ifndef MESHRT_MODELS_TRAIN_H_
#define MESHRT_MODELS_TRAIN_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/builder.h"
#include "core/ops/graph.h"
#include "core/train/optimizers.h"
#include "models/mlp.h"
#include "models/model.h"
#include "models/transformer.h"
#include "models/transformer_encdec.h"
#include "proto/session.pb.h"

namespace meshrt {
namespace models {

struct TrainGraph {
  Graph graph;
  // The same training as a request: the model's graph before training, and the spec with which
  // the coordinator makes `graph` from it (core/train/training_spec.h AddTraining; op for op equal).
  v1::Graph forward;
  v1::TrainingSpec spec;
  std::string loss;                    // scalar
  std::string learning_rate;           // scalar, this step's
  std::string global_step;             // scalar, at the start of the step
  std::string global_norm;             // scalar, of the gradients before clipping
  std::string data_step;               // the data counter variable ("" when data is fed)
  std::string output;                  // logits (Transformer) / predictions (MLP)
  std::string eval_loss;               // scalar held-out loss, not a graph output ("": none)
  std::vector<std::string> trainable;  // the model's variables, in creation order
  std::vector<std::string> variables;  // every variable of the graph (checkpoint contents:
                                       // trainable, data_step, global_step, optimizer slots, ...)
};

// Adds a model with `build`, then Minimize(loss, its variables, `train`), keeps the gradients of
// the model's keep_gradients in variables "<name>/grad", marks loss, learning rate, global step
// and global norm as graph outputs (core/train/training_spec.h AddTrainingOps), and builds the graph. Errors: the model's, Minimize's
// (e.g. Unimplemented naming an op without a gradient), Graph::Build's.
absl::StatusOr<TrainGraph> BuildTrainGraph(
    const std::function<absl::StatusOr<ModelOutputs>(GraphBuilder&)>& build,
    const TrainOptions& train);

absl::StatusOr<TrainGraph> BuildMlpTrainGraph(const MlpOptions& model, const TrainOptions& train);
absl::StatusOr<TrainGraph> BuildTransformerTrainGraph(const TransformerOptions& model,
                                                      const TrainOptions& train);
absl::StatusOr<TrainGraph> BuildEncDecTrainGraph(const EncDecOptions& model,
                                                 const TrainOptions& train);

// The names of every variable op of `graph`, in graph order.
std::vector<std::string> VariableNames(const Graph& graph);

}  // namespace models
}  // namespace meshrt

#endif  // MESHRT_MODELS_TRAIN_H_
