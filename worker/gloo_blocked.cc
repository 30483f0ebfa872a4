#include "worker/gloo_blocked.h"

#include <algorithm>
#include <vector>

#include "gloo/common/logging.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "runtime/blocked_chunks.h"

namespace meshrt {
namespace {

// Gloo's collectives use slot prefixes 0x01..0x08; ours 0x70 and up (gloo_pairwise.cc, ...).
constexpr uint8_t kBlockedAllToAllSlotPrefix = 0x75;

}  // namespace

void BlockedAllToAll(const std::shared_ptr<gloo::Context>& context, const void* in,
                     int64_t in_blocks, void* out, int64_t out_blocks, size_t bytes_per_rank,
                     std::chrono::milliseconds timeout, PairwiseScratch* scratch_space) {
  if (in_blocks < 1 || out_blocks < 1 || bytes_per_rank % in_blocks != 0 ||
      bytes_per_rank % out_blocks != 0) {
    throw gloo::EnforceNotMet(__FILE__, __LINE__, "blockings >= 1 that divide the chunk",
                              "BlockedAllToAll: bad blocking");
  }
  const int g = context->size;
  const int rank = context->rank;
  const size_t chunk = bytes_per_rank;
  const char* const input = static_cast<const char*>(in);
  char* const output = static_cast<char*>(out);
  if (chunk == 0) return;
  const ChunkRef own_in{input, in_blocks, g, rank};
  const MutableChunkRef own_out{output, out_blocks, g, rank};
  if (g == 1) {
    CopyChunk(own_in, own_out, chunk);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  auto remaining = [&] {  // Gloo treats some non-positive timeouts specially; never pass one
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  const size_t peers = g - 1;
  const bool pack = in_blocks > 1, unpack = out_blocks > 1;
  // Peer i (1 <= i < g) is rank (rank + i) % g; its chunks sit in scratch slot i - 1 of a side.
  const size_t side = peers * chunk;
  const size_t scratch_bytes = (pack ? side : 0) + (unpack ? side : 0);
  PairwiseScratch temporary;
  if (scratch_space == nullptr) scratch_space = &temporary;
  if (scratch_space->size < scratch_bytes) {
    scratch_space->data.reset(new char[scratch_bytes]);  // uninitialised: written before read
    scratch_space->size = scratch_bytes;
  }
  char* const send_scratch = scratch_space->data.get();
  char* const recv_scratch = scratch_space->data.get() + (pack ? side : 0);
  const uint64_t slot = gloo::Slot::build(kBlockedAllToAllSlotPrefix, 0);
  auto peer_of = [&](size_t i) { return static_cast<int>((rank + i) % g); };
  auto index_of = [&](int r) { return static_cast<size_t>((r - rank + g) % g); };

  // Receives first: Gloo moves a message once its receive is posted. One buffer per peer: a
  // buffer's waitRecv reports only the rank of its latest completion, so several receives on one
  // buffer could not be told apart when unpacking.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs(g);
  for (size_t i = 1; i < static_cast<size_t>(g); ++i) {
    const int src = peer_of(g - i);  // in the order the peers send to us
    recvs[i] = context->createUnboundBuffer(
        unpack ? recv_scratch + (index_of(src) - 1) * chunk : output + src * chunk, chunk);
    recvs[i]->recv(src, slot);
  }
  // Gloo only reads what it sends; its API is not const-correct.
  auto send = pack ? context->createUnboundBuffer(send_scratch, side)
                   : context->createUnboundBuffer(const_cast<char*>(input), g * chunk);
  for (size_t i = 1; i < static_cast<size_t>(g); ++i) {
    const int dst = peer_of(i);
    if (pack) {
      CopyChunk({input, in_blocks, g, dst}, {send_scratch + (i - 1) * chunk, 1, 1, 0}, chunk);
      send->send(dst, slot, (i - 1) * chunk, chunk);
    } else {
      send->send(dst, slot, dst * chunk, chunk);
    }
  }
  CopyChunk(own_in, own_out, chunk);
  for (size_t i = 1; i < static_cast<size_t>(g); ++i) {
    recvs[i]->waitRecv(nullptr, remaining());
    const int src = peer_of(g - i);
    if (unpack) {
      CopyChunk({recv_scratch + (index_of(src) - 1) * chunk, 1, 1, 0},
                {output, out_blocks, g, src}, chunk);
    }
  }
  for (size_t k = 0; k < peers; ++k) send->waitSend(nullptr, remaining());
}

}  // namespace meshrt
