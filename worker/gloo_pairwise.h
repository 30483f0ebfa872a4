// PairwiseAllreduce: allreduce for a Gloo context of exactly two ranks, pipelined over segments.
//
// Why: Gloo's ring allreduce keeps only two segments in flight and runs reduce-scatter and
// allgather as two phases. For two ranks on one host that leaves the TCP connection idle much of
// the time. Here each rank owns one half of the buffer: it streams its copy of the *other* half to
// the peer (all segments posted at once), reduces each incoming segment of its own half as soon as
// it lands, and immediately sends the reduced segment back, which the peer receives straight into
// its buffer. Traffic per rank is the same as the ring (count * element_size bytes each way, half
// of it reduced here), but every stage overlaps and up to `window` segments are in flight.
//
// Every element is reduced exactly once, by the rank owning its half, so both ranks end with
// bitwise-identical results.
//
// Contract: both ranks call it with the same count, element size, reduce function semantics,
// segment size and window, in the same order relative to other operations on the context. `data`
// (count * element_size bytes) is reduced in place. `reduce(c, a, b, n)` writes op(a[i], b[i]) to
// c[i] for n elements, where c == a. Runs on the calling thread; the context must not be used by
// another thread at the same time.
//
// Errors: like every Gloo call, it throws gloo::IoException (timeouts, closed peers) or
// gloo::EnforceNotMet; callers convert them (GlooCommunicator does). `timeout` bounds the whole
// call.
#ifndef MESHRT_WORKER_GLOO_PAIRWISE_H_
#define MESHRT_WORKER_GLOO_PAIRWISE_H_

#include <chrono>
#include <cstddef>
#include <memory>

#include "gloo/allreduce.h"
#include "gloo/context.h"

namespace meshrt {

struct PairwiseAllreduceOptions {
  // Bytes per message (rounded down to whole elements, at least one element).
  size_t segment_bytes = 1 << 20;
  // Segments of this rank's half that may be in flight towards it (the scratch buffer holds
  // window * segment_bytes). At least 1.
  size_t window = 8;
};

// Receive space reused across calls (allocating and faulting in fresh pages on every call costs
// several percent at large sizes). Grows to at most window * segment_bytes; never shrinks.
// Not thread-safe: one per context, used under the same lock as the context.
struct PairwiseScratch {
  std::unique_ptr<char[]> data;
  size_t size = 0;
};

// `scratch` may be null (a temporary one is used).
void PairwiseAllreduce(const std::shared_ptr<gloo::Context>& context, void* data, size_t count,
                       size_t element_size, const gloo::AllreduceOptions::Func& reduce,
                       std::chrono::milliseconds timeout,
                       const PairwiseAllreduceOptions& options = PairwiseAllreduceOptions(),
                       PairwiseScratch* scratch = nullptr);

// Out of place: `out` becomes the reduction of both ranks' `in`, which is only read (`in` == `out`
// is the in-place call above; otherwise they must not overlap). The same traffic and results.
// `reduce(c, a, b, n)` may then be called with c != a.
void PairwiseAllreduceInto(const std::shared_ptr<gloo::Context>& context, const void* in,
                           void* out, size_t count, size_t element_size,
                           const gloo::AllreduceOptions::Func& reduce,
                           std::chrono::milliseconds timeout,
                           const PairwiseAllreduceOptions& options = PairwiseAllreduceOptions(),
                           PairwiseScratch* scratch = nullptr);

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_PAIRWISE_H_
