// SameHostPeer: the data path for a two-rank Gloo group whose members are processes on one host.
//
// Over loopback TCP every byte is copied twice by the kernel (into and out of a socket) and the
// Gloo event-loop thread does the copying; on a 2-core machine that caps a 2-rank allreduce at
// about 1.5 GB/s. When the peer is a process on this host whose memory we may read
// (process_vm_readv: same user, and Yama ptrace_scope 0 or CAP_SYS_PTRACE), each rank instead
// copies what it needs straight out of the peer's buffer, once, and the group's Gloo context only
// carries tiny handshakes (buffer addresses and sizes, and "done" messages). Those handshakes keep
// Gloo's timeouts and failure detection: a peer that dies or hangs fails the handshake as usual.
//
// Probe() decides, once per group, whether this path is usable: each rank publishes its pid and
// the address and value of a random token in the KeyValueStore, reads the peer's token through
// process_vm_readv, then both publish and read the verdict, so both ranks always agree on the path.
// In-process peers (threads in tests) qualify too: the "peer process" is then this process.
//
// The collectives follow the Communicator semantics (communicator.h) for g = 2. Preconditions: the
// caller holds the group's lock, and both ranks make the same calls in the same order. Like Gloo,
// they throw: gloo::IoException from the handshakes, SameHostError for everything detected here
// (sizes that differ between the ranks: InvalidArgument; a peer process that is gone: Unavailable).
// GlooCommunicator converts both. Thread-compatible; the object is tied to one Gloo context.
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
#include "gloo/context.h"
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
  // Returns null when the peer's memory cannot be read (another host or namespace, no ptrace
  // permission), or the store's error (e.g. DeadlineExceeded after `timeout`).
  static absl::StatusOr<std::unique_ptr<SameHostPeer>> Probe(KeyValueStore* store,
                                                             const std::string& key_prefix,
                                                             int rank, absl::Duration timeout);

  // In place on `data` (count elements of element_size); `reduce` as for gloo::allreduce.
  // Reuses `scratch` (grown to at most 1 MiB).
  void AllReduce(const std::shared_ptr<gloo::Context>& context, void* data, size_t count,
                 size_t element_size, const gloo::AllreduceOptions::Func& reduce,
                 std::chrono::milliseconds timeout, PairwiseScratch* scratch);
  // `out` (2 * bytes) receives both ranks' `in`, in rank order.
  void AllGather(const std::shared_ptr<gloo::Context>& context, const void* in, size_t bytes,
                 void* out, std::chrono::milliseconds timeout);
  // `in` holds 2 chunks; `out` receives chunk <rank> of both ranks, in rank order.
  void AllToAll(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                size_t bytes_per_rank, std::chrono::milliseconds timeout);

 private:
  SameHostPeer(int rank, pid_t peer_pid) : rank_(rank), peer_pid_(peer_pid) {}

  // Sends {address, bytes} to the peer and returns the peer's address, after checking that the
  // peer announced the same size. Doubles as "both ranks have entered the collective".
  uint64_t Exchange(const std::shared_ptr<gloo::Context>& context, const void* address,
                    size_t bytes, std::chrono::milliseconds timeout);
  // Returns once the peer has also called Done: it no longer reads our buffers.
  void Done(const std::shared_ptr<gloo::Context>& context, std::chrono::milliseconds timeout);
  // Copies `bytes` at the peer's address `remote` to `local`.
  void Read(void* local, uint64_t remote, size_t bytes);

  const int rank_;
  const pid_t peer_pid_;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_SAME_HOST_H_
