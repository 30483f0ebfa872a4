// SameHostPeer: the data path for a two-rank group whose members are processes on one host.
//
// Over loopback TCP every byte is copied twice by the kernel (into and out of a socket), by Gloo's
// event-loop thread, and each handshake costs two thread wakeups per side; on a 2-core machine that
// caps a 2-rank allreduce near 1.5 GB/s. When the peer is a process on this host whose memory we
// may read (process_vm_readv: same user, and no Yama restriction or CAP_SYS_PTRACE), each rank
// instead copies what it needs straight out of the peer's buffer (or, process_vm_writev, into it),
// once. The two ranks synchronise through a small shared-memory mailbox (one page, futex waits),
// so a handshake costs about a microsecond when both are running.
//
// Probe() decides, once per group, whether this path is usable: each rank publishes its pid and
// the address and value of a random token in the KeyValueStore and reads the peer's token through
// process_vm_readv; rank 0 then creates the mailbox (shm_open), rank 1 maps it, and rank 0 unlinks
// its name at once, so nothing is left in /dev/shm. Every step's verdict goes through the store, so
// both ranks always agree on the path. In-process peers (threads in tests) qualify too.
//
// Failure detection (nothing waits forever): every wait ends after its timeout (DeadlineExceeded);
// a peer that closes its side (its SameHostPeer is destroyed, or one of its calls failed) is
// noticed at once, and a peer process that died within a few milliseconds (Unavailable). After an
// error this side is closed too, so the peer stops waiting.
//
// The collectives follow the Communicator semantics (communicator.h) for g = 2. Preconditions: one
// caller at a time (GlooCommunicator holds the group's lock), and both ranks make the same calls in
// the same order; a size disagreement is detected (InvalidArgument on both). Errors are thrown as
// SameHostError (a gloo::IoException carrying the status), like Gloo's own exceptions, and
// GlooCommunicator converts them.
#ifndef MESHRT_WORKER_GLOO_SAME_HOST_H_
#define MESHRT_WORKER_GLOO_SAME_HOST_H_

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/allreduce.h"
#include "gloo/common/error.h"
#include "runtime/kv_store.h"
#include "worker/gloo_pairwise.h"

namespace meshrt {

// Thrown by SameHostPeer with the status GlooCommunicator should return.
class SameHostError : public gloo::IoException {
 public:
  explicit SameHostError(absl::Status status);
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

class SameHostPeer {
 public:
  // Both ranks of a two-rank group call this at the same point; keys go under `key_prefix`.
  // Returns null when the path is not usable (another host or pid namespace, no permission, no
  // /dev/shm), or the store's error (e.g. DeadlineExceeded after `timeout`).
  static absl::StatusOr<std::unique_ptr<SameHostPeer>> Probe(KeyValueStore* store,
                                                             const std::string& key_prefix,
                                                             int rank, absl::Duration timeout);
  // Closes this side (the peer's waits fail with Unavailable) and unmaps the mailbox.
  ~SameHostPeer();
  SameHostPeer(const SameHostPeer&) = delete;
  SameHostPeer& operator=(const SameHostPeer&) = delete;

  // `data` (count elements of element_size) becomes the reduction of both ranks' `in`, which is
  // only read and may be `data` itself (in place); `reduce` as for gloo::allreduce. Reuses
  // `scratch` (grown to at most 1 MiB).
  void AllReduce(const void* in, void* data, size_t count, size_t element_size,
                 const gloo::AllreduceOptions::Func& reduce, std::chrono::milliseconds timeout,
                 PairwiseScratch* scratch);
  // `out` (2 * bytes) receives both ranks' `in`, in rank order.
  void AllGather(const void* in, size_t bytes, void* out, std::chrono::milliseconds timeout);
  // `in` holds 2 chunks; `out` receives chunk <rank> of both ranks, in rank order.
  void AllToAll(const void* in, void* out, size_t bytes_per_rank,
                std::chrono::milliseconds timeout);
  // `in` holds 2 chunks of `count` elements; `out` (count elements) receives op(rank 0's chunk
  // <rank>, rank 1's chunk <rank>), read straight from the peer in pieces of at most 1 MiB into
  // `scratch` (grown to at most 1 MiB). `reduce` as for gloo::allreduce (c may differ from a).
  void ReduceScatter(const void* in, void* out, size_t count, size_t element_size,
                     const gloo::AllreduceOptions::Func& reduce, std::chrono::milliseconds timeout,
                     PairwiseScratch* scratch);
  // The blocked forms (runtime/communicator.h "Blocked", runtime/blocked_chunks.h): chunks move
  // straight between the two ranks' buffers run by run (process_vm_readv / writev with one iovec
  // per run: pulled from the peer's buffer, or pushed into it when the peer's side has the longer
  // runs), and our own chunk is copied run by run, so neither side packs. Both ranks must pass the
  // same blockings (a disagreement is InvalidArgument on both).
  //   AllToAllBlocked: `in`'s 2 chunks blocked in `in_blocks`, `out`'s in `out_blocks`.
  void AllToAllBlocked(const void* in, int64_t in_blocks, void* out, int64_t out_blocks,
                       size_t bytes_per_rank, std::chrono::milliseconds timeout);
  //   AllGatherBlocked: `out`'s 2 chunks blocked in `out_blocks`.
  void AllGatherBlocked(const void* in, size_t bytes, void* out, int64_t out_blocks,
                        std::chrono::milliseconds timeout);
  //   ReduceScatterBlocked: `in`'s 2 chunks of `count` elements blocked in `in_blocks` (which
  //   divides `count`); otherwise as ReduceScatter. Each rank pushes its copy of the peer's chunk
  //   into the peer's `out`, then reduces its own copy into `out` (the same rank order).
  void ReduceScatterBlocked(const void* in, int64_t in_blocks, void* out, size_t count,
                            size_t element_size, const gloo::AllreduceOptions::Func& reduce,
                            std::chrono::milliseconds timeout, PairwiseScratch* scratch);
  // `data` becomes rank `root`'s.
  void Broadcast(int root, void* data, size_t bytes, std::chrono::milliseconds timeout);
  // `out` receives `in` of rank `src` (this rank or the peer); with src < 0 `out` is left alone.
  void Permute(int src, const void* in, void* out, size_t bytes, std::chrono::milliseconds timeout);
  void Barrier(std::chrono::milliseconds timeout);

 private:
  struct Mailbox;

  SameHostPeer(int rank, pid_t peer_pid, Mailbox* mailbox);

  // False once the peer process has exited (or unmapped the mailbox).
  bool PeerAlive() const;

  // One handshake: publishes {address, bytes}, waits until the peer has published its own for the
  // same handshake and returns the peer's address after checking that the sizes agree. Closes
  // this side and throws on any failure.
  // `extra` travels with the payload (more addresses, blockings to compare); the peer's lands in
  // `*their_extra` when that is non-null.
  using Extra = std::array<uint64_t, 3>;
  uint64_t Exchange(const void* address, size_t bytes, std::chrono::milliseconds timeout,
                    const Extra& extra = Extra{}, Extra* their_extra = nullptr);
  // A handshake without payload: returns once the peer reached the same point.
  void Done(std::chrono::milliseconds timeout) { Exchange(nullptr, 0, timeout); }
  // Copies `bytes` at the peer's address `remote` to `local`.
  void Read(void* local, uint64_t remote, size_t bytes);
  // A chunk's byte stream in a buffer: byte p of the chunk lies at
  // base + (p / run) * stride + p % run (runtime/blocked_chunks.h).
  struct Runs {
    uint64_t base;
    size_t run;
    size_t stride;
  };
  // Copies bytes [offset, offset + bytes) of the peer's chunk `remote` to the same bytes of our
  // chunk `local` (ReadRuns), or the other way (WriteRuns). The kernel pins the peer's pages
  // one iovec at a time, which costs far more than walking our own: callers make the peer's side
  // the one with the longer runs (pull from a contiguous chunk, push into one).
  void ReadRuns(const Runs& local, const Runs& remote, size_t offset, size_t bytes) {
    TransferRuns(false, local, remote, offset, bytes);
  }
  void WriteRuns(const Runs& local, const Runs& remote, size_t offset, size_t bytes) {
    TransferRuns(true, local, remote, offset, bytes);
  }
  void TransferRuns(bool write, const Runs& local, const Runs& remote, size_t offset,
                    size_t bytes);
  // Closes this side and throws for a failed process_vm_readv (or, with `write`, writev) of
  // `bytes` (errno `error`).
  [[noreturn]] void FailCopy(bool write, int error, size_t bytes);
  // Throws InvalidArgument (both ranks) unless the peer's blocking `theirs` equals `mine`.
  void CheckSameBlocking(const char* what, int64_t mine, uint64_t theirs);
  // Marks this side closed and wakes the peer.
  void Close();
  [[noreturn]] void Fail(absl::Status status);

  const int rank_;
  const pid_t peer_pid_;
  Mailbox* const mailbox_;  // shared with the peer; unmapped by the destructor
  uint32_t handshakes_ = 0;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_SAME_HOST_H_
