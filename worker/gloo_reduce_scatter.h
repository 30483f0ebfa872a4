// PipelinedReduceScatter: reduce-scatter over a Gloo context of any size, point to point, with a
// receive scratch of a few pieces instead of the whole input.
//
// Why: the obvious reduce-scatter (an alltoall of every member's chunk for this rank into a
// g-chunk buffer, then a local reduction) needs a scratch as large as the whole input; allocated
// per call that is page-faulted in on every call (64 MiB for a 64 MiB tensor), kept it costs that
// memory for good. Here chunk <rank> is cut into pieces of `piece_bytes`; every member posts all
// its sends at once (Gloo only moves a message once its receive is posted), and each rank
// receives the other members' copies of `window` pieces at a time into its scratch, reducing a
// piece into `out` as soon as all its copies have landed. Traffic is the alltoall's: each rank
// sends (g - 1) / g of its input and receives as much.
//
// Combination order: out = op(...op(op(c_0, c_1), c_2)..., c_{g-1}) where c_r is member r's copy
// of chunk <rank>: rank order, as ReduceInto applied member after member (so results equal the
// alltoall-then-reduce path's bit for bit).
//
// Contract: every member calls with the same count, element size and options, in the same order
// relative to other operations on the context. `in` holds size() chunks of `count` elements;
// `out` (count elements) must not overlap `in`. `reduce(c, a, b, n)` writes op(a[i], b[i]) to c[i]
// (c may alias a or b). Runs on the calling thread; the context must not be used by another thread
// meanwhile. `scratch` (may be null: a temporary one) grows to window * (size - 1) pieces.
//
// Errors: throws gloo::IoException (timeouts, closed peers) or gloo::EnforceNotMet, like every
// Gloo call; callers convert them (GlooCommunicator does). `timeout` bounds the whole call.
#ifndef MESHRT_WORKER_GLOO_REDUCE_SCATTER_H_
#define MESHRT_WORKER_GLOO_REDUCE_SCATTER_H_

#include <chrono>
#include <cstddef>
#include <memory>

#include "gloo/allreduce.h"
#include "gloo/context.h"
#include "worker/gloo_pairwise.h"

namespace meshrt {

struct PipelinedReduceScatterOptions {
  // Bytes per received message (rounded down to whole elements, at least one element).
  size_t piece_bytes = 1 << 20;
  // Pieces of chunk <rank> in flight towards this rank at once (each from every other member).
  // At least 1.
  size_t window = 2;
};

void PipelinedReduceScatter(
    const std::shared_ptr<gloo::Context>& context, const void* in, void* out, size_t count,
    size_t element_size, const gloo::AllreduceOptions::Func& reduce,
    std::chrono::milliseconds timeout,
    const PipelinedReduceScatterOptions& options = PipelinedReduceScatterOptions(),
    PairwiseScratch* scratch = nullptr);

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_REDUCE_SCATTER_H_
