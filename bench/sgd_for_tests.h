// Plain SGD at learning rate 0.1: the training options the bench tests build their graphs with.
#ifndef MESHRT_BENCH_SGD_FOR_TESTS_H_
#define MESHRT_BENCH_SGD_FOR_TESTS_H_

#include "models/train.h"

namespace meshrt {
namespace bench {

inline TrainOptions Sgd() {
  TrainOptions t;
  t.optimizer = "sgd";
  t.learning_rate.base = 0.1f;
  return t;
}

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_SGD_FOR_TESTS_H_
