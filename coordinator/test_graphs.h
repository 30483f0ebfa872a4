// Graphs the coordinator's tests share.
#ifndef MESHRT_COORDINATOR_TEST_GRAPHS_H_
#define MESHRT_COORDINATOR_TEST_GRAPHS_H_

#include "core/ops/builder.h"
#include "core/ops/graph.h"

namespace meshrt {

// A regression graph with state and a scalar loss, as a client in any language would send it
// (no gradients): loss = mean((relu(x . w1) . w2 - t)^2), x and t fixed. Its loss falls under
// training (a TrainingSpec naming "loss").
inline Graph RegressionGraph() {
  GraphBuilder b;
  auto init = [](int64_t seed) {
    Initializer i;
    i.kind = "normal";
    i.stddev = 0.5f;
    i.seed = seed;
    return i;
  };
  TensorRef x = b.Variable("x", Shape({{"batch", 8}, {"d_in", 6}}), init(1));
  TensorRef t = b.Variable("t", Shape({{"batch", 8}, {"d_out", 4}}), init(2));
  TensorRef w1 = b.Variable("w1", Shape({{"d_in", 6}, {"hidden", 8}}), init(3));
  TensorRef w2 = b.Variable("w2", Shape({{"hidden", 8}, {"d_out", 4}}), init(4));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 8}})), "h");
  TensorRef d = b.Sub(b.Einsum({h, w2}, Shape({{"batch", 8}, {"d_out", 4}})), t, "d");
  b.MarkOutput(b.ReduceMean(b.Mul(d, d), {}, "loss"));
  return b.Build().value();
}

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_TEST_GRAPHS_H_
