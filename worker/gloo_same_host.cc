#include "worker/gloo_same_host.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace meshrt {
namespace {

// Gloo's collectives use slot prefixes 0x01..0x08 and PairwiseAllreduce 0x70.
constexpr uint8_t kSameHostSlotPrefix = 0x71;
// Reduction works on pieces this size, so the piece read from the peer is still in cache.
constexpr size_t kReducePiece = 1 << 20;

}  // namespace

SameHostError::SameHostError(absl::Status status)
    : gloo::IoException(status.ToString()), status_(std::move(status)) {}

absl::StatusOr<std::unique_ptr<SameHostPeer>> SameHostPeer::Probe(KeyValueStore* store,
                                                                  const std::string& key_prefix,
                                                                  int rank,
                                                                  absl::Duration timeout) {
  const int peer = 1 - rank;
  std::random_device random;
  std::array<uint64_t, 2> token;
  for (uint64_t& t : token) t = (static_cast<uint64_t>(random()) << 32) ^ random();
  RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/same_host/", rank),
                             absl::StrCat(getpid(), " ", reinterpret_cast<uintptr_t>(token.data()),
                                          " ", token[0], " ", token[1])));
  ASSIGN_OR_RETURN(std::string theirs,
                   store->Get(absl::StrCat(key_prefix, "/same_host/", peer), timeout));
  const std::vector<std::string> parts = absl::StrSplit(theirs, ' ');
  int64_t pid = 0;
  uint64_t address = 0;
  std::array<uint64_t, 2> expected{}, seen{};
  bool ok = parts.size() == 4 && absl::SimpleAtoi(parts[0], &pid) &&
            absl::SimpleAtoi(parts[1], &address) && absl::SimpleAtoi(parts[2], &expected[0]) &&
            absl::SimpleAtoi(parts[3], &expected[1]);
  if (ok) {
    struct iovec local = {seen.data(), sizeof(seen)};
    struct iovec remote = {reinterpret_cast<void*>(address), sizeof(seen)};
    ok = process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) ==
             static_cast<ssize_t>(sizeof(seen)) &&
         seen == expected;
  }
  // Both ranks must take the same path. Our token stays alive until the peer's verdict is in,
  // which it publishes only after reading the token.
  RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/same_host_ok/", rank), ok ? "1" : "0"));
  ASSIGN_OR_RETURN(std::string peer_ok,
                   store->Get(absl::StrCat(key_prefix, "/same_host_ok/", peer), timeout));
  if (!ok || peer_ok != "1") return std::unique_ptr<SameHostPeer>();
  return std::unique_ptr<SameHostPeer>(new SameHostPeer(rank, static_cast<pid_t>(pid)));
}

uint64_t SameHostPeer::Exchange(const std::shared_ptr<gloo::Context>& context, const void* address,
                                size_t bytes, std::chrono::milliseconds timeout) {
  uint64_t mine[2] = {reinterpret_cast<uintptr_t>(address), bytes};
  uint64_t theirs[2] = {0, 0};
  auto out = context->createUnboundBuffer(mine, sizeof(mine));
  auto in = context->createUnboundBuffer(theirs, sizeof(theirs));
  const uint64_t slot = gloo::Slot::build(kSameHostSlotPrefix, 0);
  in->recv(1 - rank_, slot);
  out->send(1 - rank_, slot);
  in->waitRecv(nullptr, timeout);
  out->waitSend(nullptr, timeout);
  if (theirs[1] != bytes) {
    throw SameHostError(absl::InvalidArgumentError(
        absl::StrCat("the peer's buffer has ", theirs[1], " bytes and this one ", bytes,
                     "; every member must make the same calls")));
  }
  return theirs[0];
}

void SameHostPeer::Done(const std::shared_ptr<gloo::Context>& context,
                        std::chrono::milliseconds timeout) {
  uint64_t mine = 0, theirs = 0;
  auto out = context->createUnboundBuffer(&mine, sizeof(mine));
  auto in = context->createUnboundBuffer(&theirs, sizeof(theirs));
  const uint64_t slot = gloo::Slot::build(kSameHostSlotPrefix, 1);
  in->recv(1 - rank_, slot);
  out->send(1 - rank_, slot);
  in->waitRecv(nullptr, timeout);
  out->waitSend(nullptr, timeout);
}

void SameHostPeer::Read(void* local, uint64_t remote, size_t bytes) {
  char* dst = static_cast<char*>(local);
  while (bytes > 0) {
    struct iovec l = {dst, bytes};
    struct iovec r = {reinterpret_cast<void*>(remote), bytes};
    const ssize_t n = process_vm_readv(peer_pid_, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      throw SameHostError(absl::Status(
          error == ESRCH ? absl::StatusCode::kUnavailable : absl::StatusCode::kInternal,
          absl::StrCat("reading ", bytes, " bytes from peer process ", peer_pid_,
                       error == ESRCH ? " (the process is gone)" : "", ": ",
                       std::strerror(error))));
    }
    dst += n;
    remote += n;
    bytes -= n;
  }
}

void SameHostPeer::AllReduce(const std::shared_ptr<gloo::Context>& context, void* data,
                             size_t count, size_t element_size,
                             const gloo::AllreduceOptions::Func& reduce,
                             std::chrono::milliseconds timeout, PairwiseScratch* scratch) {
  const size_t total = count * element_size;
  const uint64_t theirs = Exchange(context, data, total, timeout);
  // As in PairwiseAllreduce: rank 0 owns the first ceil(count / 2) elements and reduces them,
  // rank 1 the rest, so every element is reduced once and both ranks end bitwise equal.
  const size_t first = (count + 1) / 2 * element_size;
  const size_t own_begin = rank_ == 0 ? 0 : first;
  const size_t own_bytes = rank_ == 0 ? first : total - first;
  const size_t other_begin = rank_ == 0 ? first : 0;
  const size_t piece = std::max<size_t>(1, kReducePiece / element_size) * element_size;
  const size_t scratch_bytes = std::min(piece, own_bytes);
  if (scratch->size < scratch_bytes) {
    scratch->data.reset(new char[scratch_bytes]);
    scratch->size = scratch_bytes;
  }
  char* const base = static_cast<char*>(data);
  // Phase 1: reduce our half with the peer's copy of it. The peer reads only the other half of
  // our buffer meanwhile, which we leave alone.
  for (size_t offset = 0; offset < own_bytes; offset += piece) {
    const size_t length = std::min(piece, own_bytes - offset);
    char* mine = base + own_begin + offset;
    Read(scratch->data.get(), theirs + own_begin + offset, length);
    reduce(mine, mine, scratch->data.get(), length / element_size);
  }
  Done(context, timeout);
  // Phase 2: fetch the peer's reduced half into ours; it reads our reduced half.
  Read(base + other_begin, theirs + other_begin, total - own_bytes);
  Done(context, timeout);
}

void SameHostPeer::AllGather(const std::shared_ptr<gloo::Context>& context, const void* in,
                             size_t bytes, void* out, std::chrono::milliseconds timeout) {
  const uint64_t theirs = Exchange(context, in, bytes, timeout);
  std::memcpy(static_cast<char*>(out) + rank_ * bytes, in, bytes);
  Read(static_cast<char*>(out) + (1 - rank_) * bytes, theirs, bytes);
  Done(context, timeout);
}

void SameHostPeer::AllToAll(const std::shared_ptr<gloo::Context>& context, const void* in,
                            void* out, size_t bytes_per_rank, std::chrono::milliseconds timeout) {
  const uint64_t theirs = Exchange(context, in, 2 * bytes_per_rank, timeout);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  std::memcpy(dst + rank_ * bytes_per_rank, src + rank_ * bytes_per_rank, bytes_per_rank);
  // The peer's chunk addressed to us.
  Read(dst + (1 - rank_) * bytes_per_rank, theirs + rank_ * bytes_per_rank, bytes_per_rank);
  Done(context, timeout);
}

}  // namespace meshrt
