// Test helpers for the runtime: training graphs of the MLP and the Transformer LM small enough for
// unit tests (tens of KiB of weights), built with `train`'s optimizer. Test-only.
#ifndef MESHRT_RUNTIME_TEST_TRAINING_GRAPHS_H_
#define MESHRT_RUNTIME_TEST_TRAINING_GRAPHS_H_

#include "absl/status/statusor.h"
#include "core/train/optimizers.h"
#include "models/train.h"

namespace meshrt {

// MLP: batch 16, d_model 32, d_ff 64, biases, fixed data, with the input gradient.
inline absl::StatusOr<models::TrainGraph> TinyMlpTrainGraph(const TrainOptions& train) {
  models::MlpOptions mlp;
  mlp.batch = 16;
  mlp.d_model = 32;
  mlp.d_ff = 64;
  mlp.biases = true;
  mlp.fixed_data = true;
  mlp.input_gradient = true;
  return models::BuildMlpTrainGraph(mlp, train);
}

// Transformer LM: batch 4 x length 8, d_model 16, 2 heads x 8, d_ff 32, 1 layer, vocab 32.
inline absl::StatusOr<models::TrainGraph> TinyTransformerTrainGraph(const TrainOptions& train) {
  models::TransformerOptions tf;
  tf.batch = 4;
  tf.length = 8;
  tf.d_model = 16;
  tf.heads = 2;
  tf.d_kv = 8;
  tf.d_ff = 32;
  tf.layers = 1;
  tf.vocab = 32;
  return models::BuildTransformerTrainGraph(tf, train);
}

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_TEST_TRAINING_GRAPHS_H_
