#include "worker/gloo_pairwise.h"

#include <algorithm>

#include "gloo/common/logging.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace meshrt {
namespace {

// Gloo's own collectives use slot prefixes 0x01..0x08; ours must not match theirs.
constexpr uint8_t kPairwiseSlotPrefix = 0x70;

// One half of the buffer cut into segments, in bytes.
struct Half {
  size_t begin = 0;    // byte offset of the half
  size_t bytes = 0;    // length of the half
  size_t segment = 1;  // bytes per segment (the last one may be shorter)

  size_t count() const { return (bytes + segment - 1) / segment; }
  size_t offset(size_t k) const { return begin + k * segment; }
  size_t length(size_t k) const { return std::min(segment, bytes - k * segment); }
};

}  // namespace

void PairwiseAllreduce(const std::shared_ptr<gloo::Context>& context, void* data, size_t count,
                       size_t element_size, const gloo::AllreduceOptions::Func& reduce,
                       std::chrono::milliseconds timeout, const PairwiseAllreduceOptions& options,
                       PairwiseScratch* scratch_space) {
  PairwiseAllreduceInto(context, data, data, count, element_size, reduce, timeout, options,
                        scratch_space);
}

void PairwiseAllreduceInto(const std::shared_ptr<gloo::Context>& context, const void* in,
                           void* data, size_t count, size_t element_size,
                           const gloo::AllreduceOptions::Func& reduce,
                           std::chrono::milliseconds timeout,
                           const PairwiseAllreduceOptions& options,
                           PairwiseScratch* scratch_space) {
  if (context->size != 2 || element_size == 0 || options.window == 0) {
    throw gloo::EnforceNotMet(__FILE__, __LINE__, "size == 2 && element_size > 0 && window > 0",
                              "PairwiseAllreduce: bad context size or options");
  }
  if (count == 0) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  // Gloo treats some non-positive timeouts specially; never pass one.
  auto remaining = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };

  const int rank = context->rank;
  const int peer = 1 - rank;
  const size_t segment = std::max<size_t>(1, options.segment_bytes / element_size) * element_size;
  // Rank 0 owns the first ceil(count / 2) elements, rank 1 the rest (possibly none).
  const size_t first = (count + 1) / 2 * element_size;
  const Half halves[2] = {{0, first, segment}, {first, count * element_size - first, segment}};
  const Half& own = halves[rank];
  const Half& other = halves[peer];
  const size_t window = options.window;
  char* const base = static_cast<char*>(data);

  PairwiseScratch temporary;
  if (scratch_space == nullptr) scratch_space = &temporary;
  const size_t scratch_bytes = std::min(window, own.count()) * segment;
  if (scratch_space->size < scratch_bytes) {
    scratch_space->data.reset(new char[scratch_bytes]);  // uninitialised: only received into
    scratch_space->size = scratch_bytes;
  }
  char* const scratch_memory = scratch_space->data.get();
  // Separate buffers on the same memory, so each one's completions come in posting order.
  auto scratch = context->createUnboundBuffer(scratch_memory, scratch_bytes);
  // Gloo only reads what it sends; its API is not const-correct.
  auto rs_send = context->createUnboundBuffer(const_cast<void*>(in), count * element_size);
  auto ag_send = context->createUnboundBuffer(data, count * element_size);
  auto ag_recv = context->createUnboundBuffer(data, count * element_size);
  const uint64_t rs_slot = gloo::Slot::build(kPairwiseSlotPrefix, 0);
  const uint64_t ag_slot = gloo::Slot::build(kPairwiseSlotPrefix, 1);
  auto scratch_offset = [&](size_t k) { return (k % window) * segment; };

  // Reduce-scatter: receive the peer's copy of our half (a window ahead), send ours of theirs.
  for (size_t k = 0; k < std::min(window, own.count()); ++k) {
    scratch->recv(peer, rs_slot, scratch_offset(k), own.length(k));
  }
  for (size_t k = 0; k < other.count(); ++k) {
    rs_send->send(peer, rs_slot, other.offset(k), other.length(k));
  }
  for (size_t k = 0; k < std::max(own.count(), other.count()); ++k) {
    if (k < other.count()) {
      // Our copy of the peer's segment k has left; its reduced version may now overwrite it
      // (in place; out of place `in` is never written).
      rs_send->waitSend(nullptr, remaining());
      ag_recv->recv(peer, ag_slot, other.offset(k), other.length(k));
    }
    if (k < own.count()) {
      scratch->waitRecv(nullptr, remaining());
      reduce(base + own.offset(k), static_cast<const char*>(in) + own.offset(k),
             scratch_memory + scratch_offset(k), own.length(k) / element_size);
      if (k + window < own.count()) {
        scratch->recv(peer, rs_slot, scratch_offset(k), own.length(k + window));
      }
      ag_send->send(peer, ag_slot, own.offset(k), own.length(k));
    }
  }
  // Allgather: the peer's reduced half arrives in place; our reduced half must have left.
  for (size_t k = 0; k < other.count(); ++k) ag_recv->waitRecv(nullptr, remaining());
  for (size_t k = 0; k < own.count(); ++k) ag_send->waitSend(nullptr, remaining());
}

}  // namespace meshrt
