// Optimizers as graph ops: Minimize adds the gradients of a loss (core/autodiff.h) and the update
// of every variable to the graph, so updates run on the workers, on each processor's slices, under
// the same layout rules as the model (Mesh-TensorFlow's approach). Nothing here communicates by
// itself: a global-norm or a factored second moment over a split dim gets its allreduce from the
// lowering of the reductions it is made of.
//
//   GraphBuilder b;
//   ... build `loss` from variables w1, w2 ...
//   TrainOptions opt;
//   opt.optimizer = "adam";
//   opt.learning_rate = {.kind = "rsqrt_decay", .base = 1e-2f, .warmup_steps = 100};
//   absl::StatusOr<TrainOps> train = Minimize(b, loss, {w1, w2}, opt);
//
// Every session step that runs the graph is one (micro)batch. State the optimizer adds, all
// variables (so checkpoints save them): "global_step" (float32 scalar: steps run), the slots
// "<var>/<slot>" of each variable (momentum "m"; Adam "m", "v"; Adafactor "vr", "vc" for factored
// rank >= 2 variables, else "v"), and with microbatches > 1 "<var>/acc" and "micro_step".
#ifndef MESHRT_CORE_OPTIMIZERS_H_
#define MESHRT_CORE_OPTIMIZERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/builder.h"

namespace meshrt {

struct LearningRate {
  // constant:      base
  // linear_warmup: base * min(1, t / warmup_steps)
  // rsqrt_decay:   base * min(1, t / warmup_steps) * rsqrt(max(t, warmup_steps) / warmup_steps)
  //                (warm up linearly, then decay as 1/sqrt(t); the Transformer's schedule)
  // where t = the number of the update being applied, counting from 1.
  std::string kind = "constant";
  float base = 0.01f;
  int64_t warmup_steps = 0;
};

struct TrainOptions {
  std::string optimizer = "sgd";  // sgd, momentum, adam, adamw, adafactor
  LearningRate learning_rate;
  float momentum = 0.9f;                  // momentum
  float beta1 = 0.9f, beta2 = 0.999f;     // adam, adamw
  float epsilon = 1e-8f;                  // adam, adamw
  float weight_decay = 0.0f;              // adamw (decoupled), others ignore it
  float adafactor_decay = 0.8f;           // adafactor: beta2_t = 1 - t^-decay
  float adafactor_epsilon = 1e-30f;       // adafactor: added to squared gradients
  float adafactor_clip = 1.0f;            // adafactor: update RMS clipping threshold (0: off)
  float clip_global_norm = 0.0f;          // > 0: scale gradients so their global norm <= this
  int microbatches = 1;                   // > 1: accumulate this many steps' gradients, then
                                          // apply their mean once (the other steps only add)
};

struct TrainOps {
  TensorRef loss;
  std::vector<TensorRef> gradients;  // one per variable, in order (after clipping)
  TensorRef global_norm;             // of the gradients before clipping (scalar)
  TensorRef learning_rate;           // this step's (scalar)
  TensorRef global_step;             // value at the start of the step (scalar)
};

// Adds gradients of `loss` (a scalar) w.r.t. `variables` (Variable handles) and their updates.
// InvalidArgument for an unknown optimizer or schedule, a non-scalar loss, a handle that is not a
// variable, or bad hyper-parameters (naming them); Unimplemented naming an op without a gradient.
absl::StatusOr<TrainOps> Minimize(GraphBuilder& b, const TensorRef& loss,
                                  const std::vector<TensorRef>& variables,
                                  const TrainOptions& options);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPTIMIZERS_H_
