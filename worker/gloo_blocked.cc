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
// Bytes of each chunk packed (and sent) at a time.
constexpr size_t kBandBytes = 1 << 20;

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
  // With `pack`, `in` is packed band by band (kBandBytes of every chunk, one sequential pass over
  // the band) into the send scratch, all g chunks at k * chunk, and each band's pieces are sent as
  // soon as it is packed. Without, each chunk goes in one message from `in`.
  const size_t in_run = chunk / in_blocks;
  const size_t band_blocks =
      pack ? std::max<size_t>(1, kBandBytes / in_run) : static_cast<size_t>(in_blocks);
  const size_t bands = (in_blocks + band_blocks - 1) / band_blocks;
  auto piece_offset = [&](size_t b) { return b * band_blocks * in_run; };
  auto piece_length = [&](size_t b) {
    return std::min(band_blocks, static_cast<size_t>(in_blocks) - b * band_blocks) * in_run;
  };
  // With `unpack`, chunks arrive in a receive scratch (peer i's in slot i - 1) and are unpacked.
  const size_t send_bytes = pack ? g * chunk : 0;
  const size_t scratch_bytes = send_bytes + (unpack ? peers * chunk : 0);
  PairwiseScratch temporary;
  if (scratch_space == nullptr) scratch_space = &temporary;
  if (scratch_space->size < scratch_bytes) {
    scratch_space->data.reset(new char[scratch_bytes]);  // uninitialised: written before read
    scratch_space->size = scratch_bytes;
  }
  char* const send_scratch = scratch_space->data.get();
  char* const recv_scratch = scratch_space->data.get() + send_bytes;
  auto tag = [](size_t b) {
    return gloo::Slot::build(kBlockedAllToAllSlotPrefix, static_cast<uint32_t>(b));
  };
  auto peer_of = [&](size_t i) { return static_cast<int>((rank + i) % g); };
  auto index_of = [&](int r) { return static_cast<size_t>((r - rank + g) % g); };

  // Receives first: Gloo moves a message once its receive is posted. One buffer per peer, so that
  // waiting for a peer's pieces counts only its own.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs(g);
  for (size_t i = 1; i < static_cast<size_t>(g); ++i) {
    const int src = peer_of(g - i);  // in the order the peers send to us
    recvs[i] = context->createUnboundBuffer(
        unpack ? recv_scratch + (index_of(src) - 1) * chunk : output + src * chunk, chunk);
    for (size_t b = 0; b < bands; ++b) recvs[i]->recv(src, tag(b), piece_offset(b), piece_length(b));
  }
  // Gloo only reads what it sends; its API is not const-correct.
  auto send = context->createUnboundBuffer(pack ? send_scratch : const_cast<char*>(input),
                                           g * chunk);
  for (size_t b = 0; b < bands; ++b) {
    if (pack) {
      PackBlockedRange(input, in_blocks, g, chunk, b * band_blocks, piece_length(b) / in_run,
                       send_scratch);
    }
    for (size_t i = 1; i < static_cast<size_t>(g); ++i) {
      const int dst = peer_of(i);
      send->send(dst, tag(b), dst * chunk + piece_offset(b), piece_length(b));
    }
  }
  if (pack) {
    CopyChunk({send_scratch + rank * chunk, 1, 1, 0}, own_out, chunk);
  } else {
    CopyChunk(own_in, own_out, chunk);
  }
  for (size_t i = 1; i < static_cast<size_t>(g); ++i) {
    for (size_t b = 0; b < bands; ++b) recvs[i]->waitRecv(nullptr, remaining());
    const int src = peer_of(g - i);
    if (unpack) {
      CopyChunk({recv_scratch + (index_of(src) - 1) * chunk, 1, 1, 0},
                {output, out_blocks, g, src}, chunk);
    }
  }
  for (size_t k = 0; k < peers * bands; ++k) send->waitSend(nullptr, remaining());
}

}  // namespace meshrt
