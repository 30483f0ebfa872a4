// MLP regression on synthetic data, drawn on the workers (a benchmark and test model).
//
//   x       = random_normal [batch, d_model], keyed by the "data_step" variable: fresh data every
//             step, drawn on each processor for its own slice, the same on every layout
//   target  = tanh(x · teacher) (or without tanh), teacher a fixed random [d_model, d_teacher]
//             matrix (a non-trainable variable "teacher", N(0, 1/d_model), renamed back to
//             d_model), plus optional N(0, teacher_noise²) noise keyed by the step
//   y       = relu(x · w1 [+ b1]) · w2 [+ b2]   variables "w1" [d_model, d_ff], "w2" [d_ff,
//   d_model]
//             (glorot_uniform), optional "b1" [d_ff], "b2" [d_model] (zeros)
//   loss    = mean((y - target)²) over every element (scalar)
//
// With `fixed_data`, x and the target are non-trainable variables "x", "target" drawn once from
// N(0, 1) (the peer benchmark's fixed batch). With `feed_data`, x and the target are placeholders "x" and "target" [batch, d_model] instead
// (no data_step, no teacher), for benchmarks that feed their data.
//
// Dim names: batch, d_model, d_ff (d_teacher only inside the teacher). Layouts: `batch:rows` (DP),
// `d_ff:cols` (MP), or both.
#ifndef MESHRT_MODELS_MLP_H_
#define MESHRT_MODELS_MLP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/ops/builder.h"
#include "models/model.h"

namespace meshrt {
namespace models {

struct MlpOptions {
  int64_t batch = 256;
  int64_t d_model = 1024;
  int64_t d_ff = 4096;
  int64_t seed = 1;            // initializers, the teacher and the data stream
  bool teacher_tanh = true;    // target = tanh(x · teacher) rather than x · teacher
  float teacher_noise = 0.0f;  // stddev of noise added to the target (0: none)
  bool biases = false;         // b1, b2
  bool feed_data = false;      // x and target are placeholders
  bool fixed_data = false;     // x and target are N(0, 1) variables drawn once (not trained):
                               // the same batch every step, like the PyTorch peer's benchmark
  bool input_gradient = false;  // training also computes d loss / d x and keeps it in "x/grad",
                                // as a layer inside a deeper network passes it back (the
                                // peer's model-parallel mode does)
};

// Adds the MLP and its loss to `b`. `output` = y; `inputs` = x; `targets` = the target.
// InvalidArgument for non-positive sizes, or the builder's first error.
absl::StatusOr<ModelOutputs> BuildMlp(GraphBuilder& b, const MlpOptions& options);

}  // namespace models
}  // namespace meshrt

#endif  // MESHRT_MODELS_MLP_H_
