// Training as a request (proto/session.proto TrainingSpec): the gradient and update ops a
// CreateSession asks for, added to a graph with the same autodiff and optimizers as the C++
// builder's Minimize (core/train/optimizers.h), so that any gRPC client, in any language, can train.
//
// Thread-safety: pure functions.
#ifndef MESHRT_CORE_TRAIN_TRAINING_SPEC_H_
#define MESHRT_CORE_TRAIN_TRAINING_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/limits.h"
#include "core/ops/builder.h"
#include "core/ops/graph.h"
#include "core/train/optimizers.h"
#include "proto/session.pb.h"

namespace meshrt {

// The spec's optimizer options: unset fields keep TrainOptions' defaults (an empty optimizer is
// sgd, an empty schedule constant, a zero base rate 0.01, microbatches 0 one). Not checked here:
// Minimize checks them and names the field.
TrainOptions TrainOptionsOf(const v1::TrainingSpec& spec);

// The spec that TrainOptionsOf reads back as `o` (every hyper-parameter set explicitly), for
// `loss`, `variables` and `keep_gradients` named.
v1::TrainingSpec TrainingSpecOf(const TrainOptions& o, const std::string& loss,
                                const std::vector<std::string>& variables,
                                const std::vector<std::string>& keep_gradients = {});

// What both AddTraining and the C++ models (models/train.h BuildTrainGraph) add, so that a graph
// trained on the coordinator is the one built in the client: Minimize(loss, variables, o,
// keep_gradients), a variable "<name>/grad" assigned each kept gradient (op "train/keep/<name>"),
// and the loss, learning rate, global step and global norm marked as outputs.
absl::StatusOr<TrainOps> AddTrainingOps(GraphBuilder& b, const TensorRef& loss,
                                        const std::vector<TensorRef>& variables,
                                        const TrainOptions& o,
                                        const std::vector<TensorRef>& keep_gradients = {});

struct TrainedGraph {
  Graph graph;                  // the request's graph with the gradients and updates
  v1::TrainingOutputs outputs;  // the training tensors (loss, learning rate, norm, step), outputs
};

// `graph` trained as `spec` says: AddTrainingOps(loss, variables, TrainOptionsOf(spec),
// keep_gradients) applied to it. InvalidArgument,
// naming the field and the tensor: no loss named, a loss that is not in the graph or not a scalar
// float32, a listed variable that is not a float32 variable of the graph (or listed twice), a
// graph with no variable to train, a kept gradient's tensor not in the graph, or Minimize's own refusals (an unknown optimizer, bad
// hyper-parameters: "TrainOptions.beta1: ..."); Unimplemented for an op without a gradient.
// With `limits` (borrowed for the call) the trained graph is built under them (Graph::Build's
// caps: a request's graph grows by its backward pass); null: no caps.
absl::StatusOr<TrainedGraph> AddTraining(const Graph& graph, const v1::TrainingSpec& spec,
                                         const RequestLimits* limits = nullptr);

}  // namespace meshrt

#endif  // MESHRT_CORE_TRAIN_TRAINING_SPEC_H_
