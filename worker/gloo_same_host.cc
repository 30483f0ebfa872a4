#include "worker/gloo_same_host.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/blocked_chunks.h"
#include "util/status_macros.h"

namespace meshrt {

// One page shared by the two ranks. Side r is written only by rank r. Handshake n publishes its
// payload in slot n % 2 before bumping `handshakes` to n: the peer cannot reach handshake n + 2
// before this rank has read slot n % 2, so two slots suffice.
struct SameHostPeer::Mailbox {
  struct alignas(64) Side {
    std::atomic<uint32_t> handshakes;  // futex word
    std::atomic<uint32_t> closed;
    std::atomic<uint64_t> mapped_at;  // the mailbox's address in the owner's process
    std::atomic<uint64_t> address[2];
    std::atomic<uint64_t> bytes[2];
    std::atomic<uint64_t> extra[2][3];  // more addresses or blockings, per call
  };
  Side side[2];
};

namespace {

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "the mailbox relies on address-free atomics");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32 bits");

constexpr size_t kMailboxBytes = 4096;
// Reduction works on pieces this size, so the piece read from the peer is still in cache.
constexpr size_t kReducePiece = 1 << 20;
// Busy-wait iterations before sleeping on the futex (tens of microseconds).
constexpr int kDefaultSpins = 2000;
// Busy-waiting pays only when the peer runs on another core meanwhile. On a machine with two cores
// or fewer, the workers (two or more) and their peers compete for them, and a spinning waiter
// delays the very peer it waits for: sleep at once (bench/train_bench, two interleaved runs each
// way on 2 cores: Transformer steps as fast or faster, within this machine's noise).
// MESHRT_SAME_HOST_SPINS overrides.
int Spins() {
  static const int spins = [] {
    if (const char* v = std::getenv("MESHRT_SAME_HOST_SPINS")) return std::atoi(v);
    return std::thread::hardware_concurrency() > 2 ? kDefaultSpins : 0;
  }();
  return spins;
}
// Longest futex sleep between checks of the deadline and of the peer's liveness.
constexpr std::chrono::milliseconds kWaitSlice(10);

// Not FUTEX_PRIVATE: the word lives in memory shared with another process.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  struct timespec ts;
  ts.tv_sec = timeout.count() / 1000000000;
  ts.tv_nsec = timeout.count() % 1000000000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void* MapMailbox(int fd) {
  void* p = mmap(nullptr, kMailboxBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Whether `pid`'s token at `address` holds `expected`, read through process_vm_readv.
bool CanReadPeer(pid_t pid, uint64_t address, const std::array<uint64_t, 2>& expected) {
  std::array<uint64_t, 2> seen{};
  struct iovec local = {seen.data(), sizeof(seen)};
  struct iovec remote = {reinterpret_cast<void*>(address), sizeof(seen)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(seen)) &&
         seen == expected;
}

}  // namespace

SameHostError::SameHostError(absl::Status status)
    : gloo::IoException(status.ToString()), status_(std::move(status)) {}

absl::StatusOr<std::unique_ptr<SameHostPeer>> SameHostPeer::Probe(KeyValueStore* store,
                                                                  const std::string& key_prefix,
                                                                  int rank,
                                                                  absl::Duration timeout) {
  static_assert(sizeof(Mailbox) <= kMailboxBytes, "the mailbox must fit in a page");
  const int peer = 1 - rank;
  auto key = [&](absl::string_view what, int r) {
    return absl::StrCat(key_prefix, "/same_host/", what, r < 0 ? "" : absl::StrCat("/", r));
  };
  std::random_device random;
  std::array<uint64_t, 2> token;
  for (uint64_t& t : token) t = (static_cast<uint64_t>(random()) << 32) ^ random();
  RETURN_IF_ERROR(store->Set(key("token", rank),
                             absl::StrCat(getpid(), " ", reinterpret_cast<uintptr_t>(token.data()),
                                          " ", token[0], " ", token[1])));
  ASSIGN_OR_RETURN(std::string theirs, store->Get(key("token", peer), timeout));
  const std::vector<std::string> parts = absl::StrSplit(theirs, ' ');
  int64_t pid = 0;
  uint64_t address = 0;
  std::array<uint64_t, 2> expected{};
  const bool ok = parts.size() == 4 && absl::SimpleAtoi(parts[0], &pid) &&
                  absl::SimpleAtoi(parts[1], &address) &&
                  absl::SimpleAtoi(parts[2], &expected[0]) &&
                  absl::SimpleAtoi(parts[3], &expected[1]) &&
                  CanReadPeer(static_cast<pid_t>(pid), address, expected);
  // Our token stays alive until the peer's verdict is in: it publishes it after reading ours.
  RETURN_IF_ERROR(store->Set(key("readable", rank), ok ? "1" : "0"));
  ASSIGN_OR_RETURN(std::string peer_ok, store->Get(key("readable", peer), timeout));
  if (!ok || peer_ok != "1") return std::unique_ptr<SameHostPeer>();

  // The mailbox: rank 0 creates it, rank 1 maps it, rank 0 unlinks the name.
  void* mailbox = nullptr;
  if (rank == 0) {
    const std::string name =
        absl::StrCat("/meshrt-", getpid(), "-", (static_cast<uint64_t>(random()) << 32) ^ random());
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      if (ftruncate(fd, kMailboxBytes) == 0) mailbox = MapMailbox(fd);
      close(fd);
    }
    if (mailbox != nullptr) new (mailbox) Mailbox();
    absl::Status status = store->Set(key("mailbox", -1), mailbox != nullptr ? name : "-");
    bool mapped = false;
    if (status.ok() && mailbox != nullptr) {
      absl::StatusOr<std::string> verdict = store->Get(key("mapped", -1), timeout);
      status = verdict.status();
      mapped = verdict.ok() && *verdict == "1";
    }
    if (fd >= 0) shm_unlink(name.c_str());  // both mapped it, or it is not used: nothing leaks
    if (mailbox != nullptr && !mapped) munmap(mailbox, kMailboxBytes);
    RETURN_IF_ERROR(status);
    if (!mapped) return std::unique_ptr<SameHostPeer>();
  } else {
    ASSIGN_OR_RETURN(std::string name, store->Get(key("mailbox", -1), timeout));
    if (name == "-") return std::unique_ptr<SameHostPeer>();
    const int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd >= 0) {
      mailbox = MapMailbox(fd);
      close(fd);
    }
    absl::Status published = store->Set(key("mapped", -1), mailbox != nullptr ? "1" : "0");
    if (!published.ok() && mailbox != nullptr) munmap(mailbox, kMailboxBytes);
    RETURN_IF_ERROR(published);
    if (mailbox == nullptr) return std::unique_ptr<SameHostPeer>();
  }
  return std::unique_ptr<SameHostPeer>(
      new SameHostPeer(rank, static_cast<pid_t>(pid), static_cast<Mailbox*>(mailbox)));
}

SameHostPeer::SameHostPeer(int rank, pid_t peer_pid, Mailbox* mailbox)
    : rank_(rank), peer_pid_(peer_pid), mailbox_(mailbox) {
  mailbox_->side[rank_].mapped_at.store(reinterpret_cast<uintptr_t>(mailbox_),
                                        std::memory_order_release);
}

bool SameHostPeer::PeerAlive() const {
  const uint64_t address = mailbox_->side[1 - rank_].mapped_at.load(std::memory_order_acquire);
  if (address == 0) return true;  // not constructed yet on the peer's side
  // Fails for a process that exited (even an unreaped zombie) or unmapped the mailbox.
  uint64_t word;
  struct iovec local = {&word, sizeof(word)};
  struct iovec remote = {reinterpret_cast<void*>(address), sizeof(word)};
  return process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(sizeof(word));
}

SameHostPeer::~SameHostPeer() {
  Close();
  munmap(mailbox_, kMailboxBytes);
}

void SameHostPeer::Close() {
  Mailbox::Side& mine = mailbox_->side[rank_];
  mine.closed.store(1, std::memory_order_release);
  FutexWake(&mine.handshakes);
}

void SameHostPeer::Fail(absl::Status status) {
  Close();
  throw SameHostError(std::move(status));
}

uint64_t SameHostPeer::Exchange(const void* address, size_t bytes,
                                std::chrono::milliseconds timeout, const Extra& extra,
                                Extra* their_extra) {
  using Clock = std::chrono::steady_clock;
  Mailbox::Side& mine = mailbox_->side[rank_];
  Mailbox::Side& theirs = mailbox_->side[1 - rank_];
  const uint32_t n = ++handshakes_;
  const int slot = n & 1;
  mine.address[slot].store(reinterpret_cast<uintptr_t>(address), std::memory_order_relaxed);
  mine.bytes[slot].store(bytes, std::memory_order_relaxed);
  for (size_t i = 0; i < extra.size(); ++i) {
    mine.extra[slot][i].store(extra[i], std::memory_order_relaxed);
  }
  // Release: the peer that sees `n` also sees the payload and our earlier writes to our buffers.
  mine.handshakes.store(n, std::memory_order_release);
  FutexWake(&mine.handshakes);

  const Clock::time_point deadline = Clock::now() + timeout;
  // The peer may complete handshake n and then close or exit at once (e.g. after the last
  // barrier): look at its counter again before treating "closed" or "gone" as a failure.
  auto reached = [&] {
    return static_cast<int32_t>(theirs.handshakes.load(std::memory_order_acquire) - n) >= 0;
  };
  for (int spins = 0;; ++spins) {
    const uint32_t seen = theirs.handshakes.load(std::memory_order_acquire);
    if (static_cast<int32_t>(seen - n) >= 0) break;
    if (theirs.closed.load(std::memory_order_acquire) != 0) {
      if (reached()) break;
      Fail(absl::UnavailableError(
          absl::StrCat("the peer process ", peer_pid_,
                       " closed its side of the group (a call of its failed, or its communicator "
                       "was shut down or destroyed)")));
    }
    if (spins < Spins()) {
      __builtin_ia32_pause();
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      Fail(absl::DeadlineExceededError(absl::StrCat("timed out after ", timeout.count(),
                                                    " ms waiting for the peer process ", peer_pid_,
                                                    " (same-host handshake ", n, ")")));
    }
    if (!PeerAlive()) {
      if (reached()) break;
      Fail(absl::UnavailableError(absl::StrCat("the peer process ", peer_pid_, " is gone")));
    }
    FutexWait(&theirs.handshakes, seen,
              std::min<std::chrono::nanoseconds>(deadline - now, kWaitSlice));
  }
  const uint64_t their_bytes = theirs.bytes[slot].load(std::memory_order_relaxed);
  if (their_bytes != bytes) {
    Fail(absl::InvalidArgumentError(absl::StrCat("the peer's buffer has ", their_bytes,
                                                 " bytes and this one ", bytes,
                                                 "; every member must make the same calls")));
  }
  if (their_extra != nullptr) {
    for (size_t i = 0; i < their_extra->size(); ++i) {
      (*their_extra)[i] = theirs.extra[slot][i].load(std::memory_order_relaxed);
    }
  }
  return theirs.address[slot].load(std::memory_order_relaxed);
}

void SameHostPeer::Read(void* local, uint64_t remote, size_t bytes) {
  char* dst = static_cast<char*>(local);
  while (bytes > 0) {
    struct iovec l = {dst, bytes};
    struct iovec r = {reinterpret_cast<void*>(remote), bytes};
    const ssize_t n = process_vm_readv(peer_pid_, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) FailCopy(false, n < 0 ? errno : EIO, bytes);
    dst += n;
    remote += n;
    bytes -= n;
  }
}

void SameHostPeer::FailCopy(bool write, int error, size_t bytes) {
  Fail(absl::Status(error == ESRCH ? absl::StatusCode::kUnavailable : absl::StatusCode::kInternal,
                    absl::StrCat(write ? "writing " : "reading ", bytes,
                                 write ? " bytes to peer process " : " bytes from peer process ",
                                 peer_pid_,
                                 error == ESRCH ? " (the process is gone)" : "", ": ",
                                 std::strerror(error))));
}

void SameHostPeer::CheckSameBlocking(const char* what, int64_t mine, uint64_t theirs) {
  if (theirs == static_cast<uint64_t>(mine)) return;
  Fail(absl::InvalidArgumentError(absl::StrCat("the peer's ", what, " is blocked in ", theirs,
                                               " blocks and this one's in ", mine,
                                               "; every member must make the same calls")));
}

namespace {

// process_vm_readv takes at most this many iovecs a side (UIO_MAXIOV).
constexpr int kMaxIovecs = 1024;

// Fills `iov` with the spans of stream bytes [pos, pos + limit) of a chunk laid out as `runs`
// (at most kMaxIovecs); returns how many bytes they cover.
template <typename Runs>
size_t FillIovecs(const Runs& runs, size_t pos, size_t limit, struct iovec* iov, int* count) {
  size_t covered = 0;
  *count = 0;
  while (covered < limit && *count < kMaxIovecs) {
    const size_t p = pos + covered;
    const size_t within = p % runs.run;
    const size_t n = std::min(runs.run - within, limit - covered);
    iov[*count].iov_base = reinterpret_cast<void*>(runs.base + (p / runs.run) * runs.stride + within);
    iov[*count].iov_len = n;
    ++*count;
    covered += n;
  }
  return covered;
}

}  // namespace

void SameHostPeer::TransferRuns(bool write, const Runs& local, const Runs& remote, size_t offset,
                                size_t bytes) {
  std::vector<struct iovec> l(kMaxIovecs), r(kMaxIovecs);
  for (size_t pos = offset, end = offset + bytes; pos < end;) {
    int nl = 0, nr = 0;
    size_t span = FillIovecs(local, pos, end - pos, l.data(), &nl);
    span = FillIovecs(remote, pos, span, r.data(), &nr);
    FillIovecs(local, pos, span, l.data(), &nl);  // both sides cover the same bytes
    const ssize_t n = write ? process_vm_writev(peer_pid_, l.data(), nl, r.data(), nr, 0)
                            : process_vm_readv(peer_pid_, l.data(), nl, r.data(), nr, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) FailCopy(write, n < 0 ? errno : EIO, span);
    pos += static_cast<size_t>(n);
  }
}

void SameHostPeer::AllReduce(const void* in, void* data, size_t count, size_t element_size,
                             const gloo::AllreduceOptions::Func& reduce,
                             std::chrono::milliseconds timeout, PairwiseScratch* scratch) {
  const size_t total = count * element_size;
  // The peer's input (read in phase 1) and output (read in phase 2): the same buffer in place.
  Extra their_extra;
  const uint64_t theirs =
      Exchange(data, total, timeout, {reinterpret_cast<uintptr_t>(in), 0, 0}, &their_extra);
  const uint64_t their_in = their_extra[0];
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
  const char* const input = static_cast<const char*>(in);
  // Phase 1: reduce our half of both inputs into our output. Meanwhile the peer reads only the
  // other half of our input, which we leave alone (in place, our output is our input).
  for (size_t offset = 0; offset < own_bytes; offset += piece) {
    const size_t length = std::min(piece, own_bytes - offset);
    Read(scratch->data.get(), their_in + own_begin + offset, length);
    reduce(base + own_begin + offset, input + own_begin + offset, scratch->data.get(),
           length / element_size);
  }
  Done(timeout);
  // Phase 2: fetch the peer's reduced half into ours while it fetches our reduced half.
  Read(base + other_begin, theirs + other_begin, total - own_bytes);
  Done(timeout);  // neither buffer is read any more
}

void SameHostPeer::AllGather(const void* in, size_t bytes, void* out,
                             std::chrono::milliseconds timeout) {
  const uint64_t theirs = Exchange(in, bytes, timeout);
  std::memcpy(static_cast<char*>(out) + rank_ * bytes, in, bytes);
  Read(static_cast<char*>(out) + (1 - rank_) * bytes, theirs, bytes);
  Done(timeout);
}

void SameHostPeer::AllToAll(const void* in, void* out, size_t bytes_per_rank,
                            std::chrono::milliseconds timeout) {
  const uint64_t theirs = Exchange(in, 2 * bytes_per_rank, timeout);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  std::memcpy(dst + rank_ * bytes_per_rank, src + rank_ * bytes_per_rank, bytes_per_rank);
  // The peer's chunk addressed to us.
  Read(dst + (1 - rank_) * bytes_per_rank, theirs + rank_ * bytes_per_rank, bytes_per_rank);
  Done(timeout);
}

void SameHostPeer::AllToAllBlocked(const void* in, int64_t in_blocks, void* out,
                                   int64_t out_blocks, size_t bytes_per_rank,
                                   std::chrono::milliseconds timeout) {
  Extra theirs_extra;
  const uint64_t theirs =
      Exchange(in, 2 * bytes_per_rank, timeout,
               {static_cast<uint64_t>(in_blocks), static_cast<uint64_t>(out_blocks),
                reinterpret_cast<uintptr_t>(out)},
               &theirs_extra);
  CheckSameBlocking("input", in_blocks, theirs_extra[0]);
  CheckSameBlocking("output", out_blocks, theirs_extra[1]);
  const size_t in_run = bytes_per_rank / in_blocks, out_run = bytes_per_rank / out_blocks;
  CopyChunk({static_cast<const char*>(in), in_blocks, 2, rank_},
            {static_cast<char*>(out), out_blocks, 2, rank_}, bytes_per_rank);
  if (out_run >= in_run) {
    // Push our chunk for the peer into its output, whose runs are the longer ones.
    const Runs local = {reinterpret_cast<uintptr_t>(in) + (1 - rank_) * in_run, in_run,
                        2 * in_run};
    const Runs remote = {theirs_extra[2] + rank_ * out_run, out_run, 2 * out_run};
    WriteRuns(local, remote, 0, bytes_per_rank);
  } else {
    // Pull the peer's chunk for us out of its input.
    const Runs local = {reinterpret_cast<uintptr_t>(out) + (1 - rank_) * out_run, out_run,
                        2 * out_run};
    const Runs remote = {theirs + rank_ * in_run, in_run, 2 * in_run};
    ReadRuns(local, remote, 0, bytes_per_rank);
  }
  Done(timeout);  // both chunks have landed; neither buffer is touched any more
}

void SameHostPeer::AllGatherBlocked(const void* in, size_t bytes, void* out, int64_t out_blocks,
                                    std::chrono::milliseconds timeout) {
  const uint64_t theirs = Exchange(in, bytes, timeout);
  const size_t run = bytes / out_blocks;
  CopyChunk({static_cast<const char*>(in), 1, 1, 0}, {static_cast<char*>(out), out_blocks, 2, rank_},
            bytes);
  const Runs local = {reinterpret_cast<uintptr_t>(out) + (1 - rank_) * run, run, 2 * run};
  ReadRuns(local, {theirs, bytes, bytes}, 0, bytes);
  Done(timeout);
}

void SameHostPeer::ReduceScatterBlocked(const void* in, int64_t in_blocks, void* out, size_t count,
                                        size_t element_size,
                                        const gloo::AllreduceOptions::Func& reduce,
                                        std::chrono::milliseconds timeout,
                                        PairwiseScratch* scratch) {
  const size_t chunk = count * element_size;
  Extra theirs_extra;
  Exchange(in, 2 * chunk, timeout,
           {static_cast<uint64_t>(in_blocks), reinterpret_cast<uintptr_t>(out), 0}, &theirs_extra);
  CheckSameBlocking("input", in_blocks, theirs_extra[0]);
  const size_t run = chunk / in_blocks;  // whole elements: in_blocks divides count
  // Our copy of the peer's chunk into its output (contiguous there: the kernel pins few pages).
  WriteRuns({reinterpret_cast<uintptr_t>(in) + (1 - rank_) * run, run, 2 * run},
            {theirs_extra[1], chunk, chunk}, 0, chunk);
  Done(timeout);  // the peer's copy of our chunk is in `out`; nobody touches our buffers now
  // out = op(rank 0's copy, rank 1's copy), as ReduceScatter: our copy gathered a few blocks at a
  // time into the scratch (still in cache when reduced), one reduce call per piece however short
  // the runs.
  const size_t per_piece = std::max<size_t>(1, kReducePiece / run);  // blocks
  const size_t scratch_bytes = std::min<size_t>(per_piece, in_blocks) * run;
  if (scratch->size < scratch_bytes) {
    scratch->data.reset(new char[scratch_bytes]);
    scratch->size = scratch_bytes;
  }
  const char* const input = static_cast<const char*>(in);
  char* const dst = static_cast<char*>(out);
  char* const mine = scratch->data.get();
  for (size_t o = 0; o < static_cast<size_t>(in_blocks); o += per_piece) {
    const size_t blocks = std::min(per_piece, static_cast<size_t>(in_blocks) - o);
    CopyChunk({input + o * 2 * run, static_cast<int64_t>(blocks), 2, rank_}, {mine, 1, 1, 0},
              blocks * run);
    char* d = dst + o * run;
    reduce(d, rank_ == 0 ? mine : d, rank_ == 0 ? d : mine, blocks * run / element_size);
  }
}

void SameHostPeer::ReduceScatter(const void* in, void* out, size_t count, size_t element_size,
                                 const gloo::AllreduceOptions::Func& reduce,
                                 std::chrono::milliseconds timeout, PairwiseScratch* scratch) {
  const size_t chunk = count * element_size;
  const uint64_t theirs = Exchange(in, 2 * chunk, timeout);
  const size_t piece = std::max<size_t>(1, kReducePiece / element_size) * element_size;
  const size_t scratch_bytes = std::min(piece, chunk);
  if (scratch->size < scratch_bytes) {
    scratch->data.reset(new char[scratch_bytes]);
    scratch->size = scratch_bytes;
  }
  const char* const own = static_cast<const char*>(in) + rank_ * chunk;
  char* const dst = static_cast<char*>(out);
  char* const peer = scratch->data.get();
  for (size_t offset = 0; offset < chunk; offset += piece) {
    const size_t length = std::min(piece, chunk - offset);
    Read(peer, theirs + rank_ * chunk + offset, length);
    // Rank order, as the alltoall-then-reduce path: op(rank 0's copy, rank 1's copy).
    const char* first = rank_ == 0 ? own + offset : peer;
    const char* second = rank_ == 0 ? peer : own + offset;
    reduce(dst + offset, first, second, length / element_size);
  }
  Done(timeout);  // the peer no longer reads our input
}

void SameHostPeer::Broadcast(int root, void* data, size_t bytes,
                             std::chrono::milliseconds timeout) {
  const uint64_t theirs = Exchange(data, bytes, timeout);
  if (rank_ != root) Read(data, theirs, bytes);
  Done(timeout);
}

void SameHostPeer::Permute(int src, const void* in, void* out, size_t bytes,
                           std::chrono::milliseconds timeout) {
  const uint64_t theirs = Exchange(in, bytes, timeout);
  if (src == rank_) {
    std::memcpy(out, in, bytes);
  } else if (src >= 0) {
    Read(out, theirs, bytes);
  }
  Done(timeout);
}

void SameHostPeer::Barrier(std::chrono::milliseconds timeout) { Done(timeout); }

}  // namespace meshrt
