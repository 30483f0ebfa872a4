// Internal to //core: the control op family (ops_control.cc, lower_control.cc).
//
//   while_loop(init_1..init_k)   body: a Graph (Op.body); attrs {trip_count: i >= 0,
//                                carried: strings (k names), output: i}
//     The body's placeholders named in `carried` receive the loop-carried values, in the order of
//     the op's inputs (same shape and dtype as the inputs); the body may have no other
//     placeholders. The body's `outputs` list the next values of the carried tensors (the first
//     k, each the shape and dtype of its placeholder), then any number of accumulators.
//     The op's result is body output `output`: for output < k, the carried value after
//     `trip_count` iterations; for output >= k, the accumulator summed over the iterations (zeros
//     when trip_count is 0). One output per op, as everywhere: a loop whose several results are
//     wanted is written as several while_loop ops (each runs the loop).
//     Random ops in the body draw the same values in every iteration (their stream is keyed on the
//     op's name).
//   Lowering: the body is lowered `trip_count` times in a row (a fixed trip count needs no
//   control flow in the program). An accumulator made by an einsum keeps its partial sums across
//   the iterations (summed locally) and is reduced once after the loop, as Mesh-TensorFlow's
//   LazyAllreduceSum does for microbatch gradient accumulation.
#ifndef MESHRT_CORE_LOWERING_OPS_CONTROL_H_
#define MESHRT_CORE_LOWERING_OPS_CONTROL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "proto/graph.pb.h"

namespace meshrt {

// The parsed and checked attributes of a while_loop op.
struct LoopSpec {
  Graph body;
  int64_t trip_count = 0;
  std::vector<std::string> carried;  // body placeholder names, in input order
  std::vector<std::string> outputs;  // the body's outputs: carried next values, then accumulators
  int output = 0;
};

// InvalidArgument naming the op when the body or the attributes are malformed, or do not fit the
// input types (`inputs` may be empty to skip that check).
absl::StatusOr<LoopSpec> ParseLoop(const v1::Op& op, const std::vector<TensorType>& inputs);

// The lowering (lower_control.cc).
absl::StatusOr<LaidOutTensor> LowerLoop(LoweringContext& ctx, const v1::Op& op,
                                        const std::vector<LaidOutTensor>& inputs);

}  // namespace meshrt

#endif  // MESHRT_CORE_LOWERING_OPS_CONTROL_H_
