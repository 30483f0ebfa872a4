// Internal to //core: the random and fill source ops (ops_random.cc, lower_random.cc). Users see
// them through the registry (core/ops/ops.h, `meshrt ops`); the conventions are listed here once.
//
//   random_uniform    [step]; shape; dtype float32 (or unset); attrs {seed: i = 0,
//                     minval: f = 0, maxval: f = 1}: minval + (maxval - minval) * u, u in [0, 1)
//   random_normal     [step]; shape; dtype float32 (or unset); attrs {seed: i = 0,
//                     mean: f = 0, stddev: f = 1}: Box-Muller on two uniforms of the element
//   dropout(x)        x float32; attrs {rate: f in [0, 1), seed: i = 0, stream: s = the op's
//                     name}: x / (1 - rate) where the element's uniform u >= rate, else 0. The
//                     stream keys the mask in place of the op's name, so another dropout op with
//                     the same seed, rate, stream and shape applies the same mask (dropout's
//                     gradient, core/train/autodiff.cc, is such an op on the upstream gradient).
//   zeros, ones       0 inputs; shape; dtype float32 (or unset) or int32
//
// Layout invariance: element values depend only on (seed, the op's name, the element's global
// row-major index) through a counter-based generator, so a random tensor is bitwise the same on
// every mesh and layout and in the interpreter, with no communication. The kernels read where their
// slice sits from attrs `_slice_begin` and `_global_sizes` (set by the executor, see
// OpInfo::needs_slice_begin); without them the output is the whole tensor.
//
// The generator: key = Mix(Mix(seed) ^ FNV-1a(op name)); the c-th 64-bit draw of element i is
// Mix(key + (2i + c + 1) * 0x9E3779B97F4A7C15), where Mix is the SplitMix64 finaliser (Steele, Lea
// and Flood, 2014) — i.e. a SplitMix64 stream keyed on the op, indexed by element. A uniform takes
// the draw's top 24 bits (exact in float32).
//
// Synthetic data per training step: random_uniform and random_normal take an optional input
// `step`, a scalar float32 or int32 (a float32 must be a whole number; see core/ops/ops_dataset.h).
// With it the key becomes StepKey(key, s) = Mix(key ^ Mix(uint64(s) + 0x9E3779B97F4A7C15)), s the
// step as int64 (two's complement as uint64), and draws are as above on that key: each step gets a
// fresh stream that is still keyed only on global indices, so still layout-invariant. Without the
// input the key (and every value) is unchanged.
//
// Thread-compatible pure functions.
#ifndef MESHRT_CORE_OPS_OPS_RANDOM_H_
#define MESHRT_CORE_OPS_OPS_RANDOM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/program_builder.h"
#include "proto/graph.pb.h"

namespace meshrt {

struct LoweringContext;

namespace rng {

uint64_t StreamKey(int64_t seed, const std::string& op_name);
// The stream key of training step `step` (the random ops' optional step input).
uint64_t StepKey(uint64_t key, int64_t step);
// Draw `counter` (0 or 1) of element `index` of the stream `key`.
uint64_t Draw(uint64_t key, uint64_t index, int counter);
// Uniform in [0, 1) from a draw's top 24 bits.
float Uniform(uint64_t draw);
// A standard normal from two draws (Box-Muller, computed in double).
double Normal(uint64_t draw0, uint64_t draw1);

// The global row-major index of every element of a kernel's output `slice`, in slice order, from
// the op's `_slice_begin` / `_global_sizes` (the whole tensor when they are absent).
// InvalidArgument naming the op when they do not fit the slice.
absl::StatusOr<std::vector<uint64_t>> GlobalIndices(const v1::Op& op, const Shape& slice);

// Lowering of every op of this file: one local op per processor in the output's rule layout.
absl::StatusOr<LaidOutTensor> LowerRandom(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs);

}  // namespace rng
}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_RANDOM_H_
