// BlockedAllToAll: alltoall over a Gloo context on chunks that lie blocked in the caller's buffers
// (runtime/blocked_chunks.h; runtime/communicator.h AllToAllBlocked), point to point.
//
// Why: a tensor cut along an axis that is not outermost has its pieces interleaved in storage.
// Packing all of them, then Gloo's alltoall, then unpacking costs a whole-size copy on each side
// before anything moves. Here every receive is posted first (straight into `out` when its chunks
// are contiguous), then `in` is packed band by band (1 MiB of every chunk at a time, one
// sequential pass over the band: reading it chunk by chunk would stride through it g times) and
// each band's pieces are sent to their peers as soon as it is packed, so packing overlaps the
// transfer; this rank's own chunk is copied to `out`, and a received chunk is unpacked into `out`
// once its pieces have landed. Traffic is Gloo's alltoall's: (g - 1) chunks each way.
//
// Contract: every member calls with the same blockings, bytes_per_rank and order relative to other
// operations on the context. `in` and `out` (g * bytes_per_rank each) must not overlap; blockings
// are >= 1 and divide bytes_per_rank (the caller checks). `scratch` (may be null: a temporary one)
// grows to g chunks when `in` is blocked plus g - 1 when `out` is. Runs on the calling thread; the
// context must not be used by another thread meanwhile.
//
// Errors: throws gloo::IoException (timeouts, closed peers) or gloo::EnforceNotMet, like every
// Gloo call; callers convert them (GlooCommunicator does). `timeout` bounds the whole call.
#ifndef MESHRT_WORKER_GLOO_BLOCKED_H_
#define MESHRT_WORKER_GLOO_BLOCKED_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "gloo/context.h"
#include "worker/gloo_pairwise.h"

namespace meshrt {

void BlockedAllToAll(const std::shared_ptr<gloo::Context>& context, const void* in,
                     int64_t in_blocks, void* out, int64_t out_blocks, size_t bytes_per_rank,
                     std::chrono::milliseconds timeout, PairwiseScratch* scratch = nullptr);

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_BLOCKED_H_
