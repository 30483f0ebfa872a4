#include "worker/gloo_reduce_scatter.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "gloo/common/logging.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace meshrt {
namespace {

// Gloo's own collectives use slot prefixes 0x01..0x08; pairwise 0x70, permute 0x72.
constexpr uint8_t kReduceScatterSlotPrefix = 0x74;

}  // namespace

void PipelinedReduceScatter(const std::shared_ptr<gloo::Context>& context, const void* in,
                            void* out, size_t count, size_t element_size,
                            const gloo::AllreduceOptions::Func& reduce,
                            std::chrono::milliseconds timeout,
                            const PipelinedReduceScatterOptions& options,
                            PairwiseScratch* scratch_space) {
  if (element_size == 0 || options.window == 0) {
    throw gloo::EnforceNotMet(__FILE__, __LINE__, "element_size > 0 && window > 0",
                              "PipelinedReduceScatter: bad element size or options");
  }
  const int g = context->size;
  const int rank = context->rank;
  const size_t chunk = count * element_size;
  const char* const input = static_cast<const char*>(in);
  char* const output = static_cast<char*>(out);
  if (chunk == 0) return;
  if (g == 1) {
    std::memcpy(output, input, chunk);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  // Gloo treats some non-positive timeouts specially; never pass one.
  auto remaining = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };

  const size_t piece = std::max<size_t>(1, options.piece_bytes / element_size) * element_size;
  const size_t pieces = (chunk + piece - 1) / piece;
  auto length = [&](size_t p) { return std::min(piece, chunk - p * piece); };
  const size_t window = std::min(options.window, pieces);
  const size_t peers = g - 1;
  // Window slot w holds one piece from every peer: peer j (the j-th other rank) at j * piece.
  const size_t slot_bytes = peers * piece;
  PairwiseScratch temporary;
  if (scratch_space == nullptr) scratch_space = &temporary;
  if (scratch_space->size < window * slot_bytes) {
    scratch_space->data.reset(new char[window * slot_bytes]);  // uninitialised: received into
    scratch_space->size = window * slot_bytes;
  }
  char* const scratch = scratch_space->data.get();
  // One buffer per window slot, so a slot's completions count only its own receives.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> slots;
  for (size_t w = 0; w < window; ++w) {
    slots.push_back(context->createUnboundBuffer(scratch + w * slot_bytes, slot_bytes));
  }
  auto tag = [](size_t p) {
    return gloo::Slot::build(kReduceScatterSlotPrefix, static_cast<uint32_t>(p));
  };
  auto peer = [&](size_t j) { return static_cast<int>(j < static_cast<size_t>(rank) ? j : j + 1); };
  auto post = [&](size_t p) {
    for (size_t j = 0; j < peers; ++j) {
      slots[p % window]->recv(peer(j), tag(p), j * piece, length(p));
    }
  };
  for (size_t p = 0; p < window; ++p) post(p);
  // Every piece of every other rank's chunk, at once: Gloo sends each when its receive is posted.
  auto send = context->createUnboundBuffer(const_cast<char*>(input), g * chunk);
  for (size_t p = 0; p < pieces; ++p) {
    for (size_t j = 0; j < peers; ++j) {
      const int r = peer(j);
      send->send(r, tag(p), r * chunk + p * piece, length(p));
    }
  }
  const char* const own = input + rank * chunk;
  for (size_t p = 0; p < pieces; ++p) {
    for (size_t j = 0; j < peers; ++j) slots[p % window]->waitRecv(nullptr, remaining());
    const char* received = scratch + (p % window) * slot_bytes;
    // Member r's copy of this piece: ours from `in`, the others' from the slot.
    auto copy_of = [&](int r) -> const char* {
      if (r == rank) return own + p * piece;
      return received + (r < rank ? r : r - 1) * piece;
    };
    char* const dst = output + p * piece;
    const size_t n = length(p) / element_size;
    reduce(dst, copy_of(0), copy_of(1), n);
    for (int r = 2; r < g; ++r) reduce(dst, dst, copy_of(r), n);
    if (p + window < pieces) post(p + window);
  }
  for (size_t k = 0; k < pieces * peers; ++k) send->waitSend(nullptr, remaining());
}

}  // namespace meshrt
