// Test helpers shared by the models' tests: a tiny Transformer and plain SGD.
#ifndef MESHRT_MODELS_TEST_UTIL_H_
#define MESHRT_MODELS_TEST_UTIL_H_

#include "core/train/optimizers.h"
#include "models/transformer.h"

namespace meshrt {
namespace models {

// batch 4, length 8, d_model 16, heads 2 x d_kv 8, d_ff 32, 1 layer, seed 5; synthetic data.
inline TransformerOptions TinyTransformerOptions() {
  TransformerOptions o;
  o.batch = 4;
  o.length = 8;
  o.d_model = 16;
  o.heads = 2;
  o.d_kv = 8;
  o.d_ff = 32;
  o.layers = 1;
  o.seed = 5;
  return o;
}

// Plain gradient descent at learning rate `lr`.
inline TrainOptions Sgd(float lr) {
  TrainOptions t;
  t.optimizer = "sgd";
  t.learning_rate.base = lr;
  return t;
}

}  // namespace models
}  // namespace meshrt

#endif  // MESHRT_MODELS_TEST_UTIL_H_
