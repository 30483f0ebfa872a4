// What every model in //models adds to a GraphBuilder, and small op helpers the models share.
//
// A model is a function `absl::StatusOr<ModelOutputs> BuildX(GraphBuilder& b, const XOptions&)`
// that adds its forward pass and loss to `b`: variables (core/ops/ops_state.h), the worker-side data
// source (core/ops/ops_dataset.h: text_windows, or random ops keyed by a step) and a scalar loss. It
// adds no optimizer: models/train.h puts a model and core/train/optimizers.h's Minimize together.
//
// The data stream position is the model's own variable "data_step" (float32 scalar, +1 per step by
// assign_add), so it is saved in checkpoints and a resumed run continues the stream where it was;
// every read in a step sees its value at the start of the step (core/ops/ops_state.h).
#ifndef MESHRT_MODELS_MODEL_H_
#define MESHRT_MODELS_MODEL_H_

#include <string>
#include <vector>

#include "core/ir/shape.h"
#include "core/ops/builder.h"

namespace meshrt {
namespace models {

// The name of the data counter variable every model with worker-side data owns.
inline constexpr char kDataStep[] = "data_step";

struct ModelOutputs {
  TensorRef loss;                    // scalar float32: the mean loss of the step's batch
  std::vector<TensorRef> variables;  // trainable variables, in creation order
  TensorRef data_step;               // the "data_step" variable (empty name when data is fed)
  TensorRef inputs;                  // the step's inputs (x, or the token ids)
  TensorRef targets;                 // the step's targets (regression targets, or next-byte ids)
  TensorRef output;                  // predictions (MLP) or logits (Transformer)
  // Tensors whose loss gradients a training graph computes and keeps in a variable
  // "<name>/grad" (not trainable), as a layer passes its input gradient back to the one before.
  std::vector<TensorRef> keep_gradients;
  // A scalar loss on held-out data that training does not read (empty name: none), e.g. the
  // Transformer's "eval/loss"; fetched when wanted.
  TensorRef eval_loss;
};

// ---- op helpers (each adds one op through GraphBuilder::Apply) ---------------------------------

// Adds the "data_step" variable (float32 scalar, zeros) and its assign_add of 1; returns the
// variable (its value at the start of the step).
TensorRef DataStep(GraphBuilder& b);
// A float32 op `type` of `x` with attrs {scalar: s} (e.g. "mul", "add", "sub").
TensorRef ScalarOp(GraphBuilder& b, const std::string& type, const TensorRef& x, float s,
                   const std::string& name = "");
// Elementwise op `type` on `inputs` (broadcast by name).
TensorRef Elementwise(GraphBuilder& b, const std::string& type,
                      const std::vector<TensorRef>& inputs, const std::string& name = "");
// one_hot(ids) with depth dim `depth` (float32).
TensorRef OneHot(GraphBuilder& b, const TensorRef& ids, const Dim& depth,
                 const std::string& name = "");
// range over `dim` (float32 0..n-1).
TensorRef Range(GraphBuilder& b, const Dim& dim, const std::string& name = "");
// cast to `dtype` ("float32" or "int32").
TensorRef Cast(GraphBuilder& b, const TensorRef& x, const std::string& dtype,
               const std::string& name = "");
// An op normalising over `dims` (softmax, layer_norm, rms_norm, softmax_cross_entropy, ...) with
// optional attrs {epsilon}.
TensorRef Normalize(GraphBuilder& b, const std::string& type, const std::vector<TensorRef>& inputs,
                    const std::vector<std::string>& dims, float epsilon = 0,
                    const std::string& name = "");
// random_uniform / random_normal of `shape` with the step input `step` (empty name: none).
TensorRef RandomUniform(GraphBuilder& b, const Shape& shape, const TensorRef& step, int64_t seed,
                        float minval, float maxval, const std::string& name);
TensorRef RandomNormal(GraphBuilder& b, const Shape& shape, const TensorRef& step, int64_t seed,
                       float mean, float stddev, const std::string& name);

// `s` with dim `from` renamed `to` (same size).
Shape RenameIn(const Shape& s, const std::string& from, const std::string& to);
// `s` without dim `name`.
Shape Drop(const Shape& s, const std::string& name);
// The dims of `a` followed by `more`.
Shape Concat(const Shape& a, const std::vector<Dim>& more);

}  // namespace models
}  // namespace meshrt

#endif  // MESHRT_MODELS_MODEL_H_
