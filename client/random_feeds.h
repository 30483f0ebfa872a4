// Reproducible random values for a graph's placeholders (`meshrt run --random_feeds SEED`).
//
// Element i (row-major global index) of placeholder `name` is a pure function of
// (seed, name, i): a counter-based generator (splitmix64 finalizer over a key made from the seed
// and a 64-bit FNV-1a hash of the name, advanced by the index), with no state carried between
// elements or placeholders. So the values do not depend on the op order of the graph, on other
// placeholders, on the mesh or layout, or on which process makes them: a worker could generate its
// own slice and get exactly the corresponding part of the whole tensor.
//
// float32 elements are uniform in [-1, 1) on a 2^-23 grid; int32 elements are uniform in [0, 16).
// Thread-safe (pure functions).
#ifndef MESHRT_CLIENT_RANDOM_FEEDS_H_
#define MESHRT_CLIENT_RANDOM_FEEDS_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "core/ir/tensor.h"
#include "core/ops/graph.h"
#include "core/reference/interpreter.h"

namespace meshrt {

// The raw 64 random bits of element `index` of tensor `name` for `seed`.
uint64_t RandomBits(uint64_t seed, absl::string_view name, int64_t index);

// A whole tensor of `type` named `name`, filled as described above.
Tensor RandomTensor(const TensorType& type, absl::string_view name, uint64_t seed);

// One RandomTensor for every placeholder of `graph`, keyed by placeholder name.
TensorMap RandomFeeds(const Graph& graph, uint64_t seed);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_RANDOM_FEEDS_H_
