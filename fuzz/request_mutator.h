// Structure-aware mutations of a v1::CreateSessionRequest for the graph fuzzer: the changes byte
// flips rarely make while keeping the request well formed — new layout rules over the graph's own
// dim names, another mesh, a small dim size, another op type, a rewired input, a small attribute
// value, a copied op. Lowering's interesting paths (resharding between layouts, partial sums,
// halo exchanges) sit behind requests that validate, which these keep reaching.
//
// Thread-compatible; deterministic for a given seed.
#ifndef MESHRT_FUZZ_REQUEST_MUTATOR_H_
#define MESHRT_FUZZ_REQUEST_MUTATOR_H_

#include <cstdint>

#include "proto/session.pb.h"

namespace meshrt {
namespace fuzz {

// Applies one to three random mutations to `request`.
void MutateRequest(uint32_t seed, v1::CreateSessionRequest* request);

}  // namespace fuzz
}  // namespace meshrt

#endif  // MESHRT_FUZZ_REQUEST_MUTATOR_H_
