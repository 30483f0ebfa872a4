// Optimizers as graph ops: Minimize adds the gradients of a loss (core/train/autodiff.h) and the update
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
// variables (so checkpoints save them): "global_step" (float32 scalar: steps run; a float32 scalar
// variable of that name the model already made, e.g. for text_windows, is reused), the slots
// "<var>/<slot>" of each variable, all starting at zero (momentum "m"; Adam "m", "v"; Adafactor
// "vr", "vc" for rank >= 2 variables, else "v"), and with microbatches > 1 "<var>/acc" and
// "micro_step" (0..K-1).
//
// Update rules (g: the gradient after microbatch averaging and clipping; lr: the schedule's rate at
// update t; every slot update and w's are computed from the values at the step's start):
//   sgd        w -= lr * g
//   momentum   m = momentum * m + g;  w -= lr * m
//   adam       m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//              w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + epsilon)
//   adamw      adam's step + weight_decay * w (decoupled: w -= lr * wd * w, not through m and v)
//   adafactor  (Shazeer & Stern 2018, Mesh-TensorFlow/T5's form) beta2_t = 1 - t^-decay,
//              G = g^2 + adafactor_epsilon. Rank >= 2, factored over the last two dims [.., R, C]:
//              vr[.., R] = beta2_t vr + (1-beta2_t) mean_C G;  vc[.., C] = same with mean_R;
//              v_hat = vr (x) vc / mean_R(vr) (leading dims kept). Rank < 2: v = beta2_t v +
//              (1-beta2_t) G, v_hat = v. u = g / sqrt(v_hat); with adafactor_clip > 0,
//              u /= max(1, rms(u) / adafactor_clip); w -= lr * u. No first moment (beta1 = 0).
//              Decisions: the step is scaled by the learning rate only — no parameter-scale
//              ("relative step") multiplier, so the schedule means the same for every optimizer;
//              every rank >= 2 variable is factored over its last two dims, whatever their sizes
//              (Mesh-TensorFlow factors the two largest dims only when both are >= 128).
//   Global-norm clipping (clip_global_norm > 0): norm = sqrt(sum over variables of sum(g^2)),
//   g *= clip / max(norm, clip) — exactly 1 when not active. The norm is computed (a scalar
//   allreduce per split variable) even without clipping, for TrainOps::global_norm.
//
// Microbatches (K > 1): each step adds its gradient to "<var>/acc"; the step with micro_step == K-1
// applies the mean (acc + g) / K — with a loss that is a mean over equal-sized microbatches, the
// gradient of the whole batch's mean loss — through clipping and the optimizer, and zeroes the
// accumulators; on the other steps weights and slots are assigned their own values (where(apply,
// new, old): each variable is assigned once per graph). t counts applied updates from 1: at the
// applying step t = (global_step - micro_step) / K + 1 = floor(global_step / K) + 1 (global_step
// read at the step's start, so steps 0..K-1 apply update 1); exact in float32.
//
// Distributed, "<var>/acc" is marked as an accumulator (core/ops/ops_state.h): where the gradient is a
// partial sum (data parallelism) the accumulator stays one on the workers and the accumulated
// gradient is allreduced once per K steps, on the applying step; a step that fetches a tensor
// computed from it (the gradients, the global norm) still gets its exact value.
//
// Op names: "train/learning_rate", "train/global_norm", "train/t" (t as above), "train/apply"
// (K > 1: 1 on applying steps), and "train/update/<variable>" for each assignment; the backward
// pass's ops after the op each differentiates ("<op>/grad/...", core/train/autodiff.h); each
// variable's own ops after it: "<variable>/<optimizer>/...", "<variable>/accumulate/...",
// "<variable>/grad_norm/...", "<variable>/clip/..." (GraphBuilder::NameScopeAt).
#ifndef MESHRT_CORE_TRAIN_OPTIMIZERS_H_
#define MESHRT_CORE_TRAIN_OPTIMIZERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/builder.h"

namespace meshrt {

struct LearningRate {
  // constant:      base
  // linear_warmup: base * min(1, t / warmup_steps)
  // rsqrt_decay:   base * min(1, t / warmup_steps) * rsqrt(max(t, warmup_steps) / warmup_steps)
  //                (warm up linearly, then decay as 1/sqrt(t); the Transformer's schedule)
  // where t = the number of the update being applied, counting from 1. warmup_steps 0 behaves as 1
  // (t >= 1, so no warmup; rsqrt_decay is then base / sqrt(t)); constant ignores warmup_steps.
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
  float weight_decay = 0.0f;              // adamw (decoupled); others refuse a nonzero value
  float adafactor_decay = 0.8f;           // adafactor: beta2_t = 1 - t^-decay
  float adafactor_epsilon = 1e-30f;       // adafactor: added to squared gradients
  float adafactor_clip = 1.0f;            // adafactor: update RMS clipping threshold (0: off)
  float clip_global_norm = 0.0f;          // > 0: scale gradients so their global norm <= this
  int microbatches = 1;                   // > 1: accumulate this many steps' gradients, then
                                          // apply their mean once (the other steps only add)
};

// With microbatches > 1, gradients and global_norm are of the accumulated mean (acc + g) / K:
// meaningful on the applying steps only.
struct TrainOps {
  TensorRef loss;
  std::vector<TensorRef> gradients;  // one per variable, in order (after clipping)
  TensorRef global_norm;             // of the gradients before clipping (scalar)
  TensorRef learning_rate;           // this step's (scalar)
  TensorRef global_step;             // value at the start of the step (scalar)
  std::vector<TensorRef> other_gradients;  // of Minimize's `also`, in order (not applied)
};

// Adds gradients of `loss` (a scalar) w.r.t. `variables` (Variable handles) and their updates.
// InvalidArgument for an unknown optimizer or schedule, a non-scalar loss, a handle that is not a
// float32 variable (or is listed twice), or bad hyper-parameters, naming the field
// ("TrainOptions.beta1: ..."): learning_rate.base <= 0; warmup_steps < 0 (warmup schedules);
// momentum, beta1, beta2 outside [0, 1); epsilon, weight_decay, adafactor_epsilon, adafactor_clip,
// clip_global_norm < 0; adafactor_decay outside (0, 1]; microbatches < 1. Only the fields of the
// chosen optimizer are checked. Unimplemented naming an op without a gradient. Options are
// checked before anything is added to `b`.
//
// `also`: float32 tensors (not variables) whose gradients the same backward pass computes and
// returns in TrainOps::other_gradients without applying them, e.g. a layer's input gradient that
// a layer before it would take. Nothing is clipped or counted in the global norm for them.
absl::StatusOr<TrainOps> Minimize(GraphBuilder& b, const TensorRef& loss,
                                  const std::vector<TensorRef>& variables,
                                  const TrainOptions& options,
                                  const std::vector<TensorRef>& also = {});

// Whether optimizer `name` scales its steps by a running estimate of the gradients' size (adam,
// adamw, adafactor: a smaller learning rate suits them), as its registry record says; false for
// an unknown name. The registry (optimizers.cc) holds one record per optimizer: its name, its
// options' checks, the scalars its variables share and a variable's step.
bool IsAdaptiveOptimizer(const std::string& name);

}  // namespace meshrt

#endif  // MESHRT_CORE_TRAIN_OPTIMIZERS_H_
