// GlooCommunicator: the worker's Communicator (runtime/communicator.h) over Gloo's TCP transport.
//
// One Gloo TCP device per communicator (one listening address, one event-loop thread), and one
// gloo::rendezvous::Context per *group* this processor takes part in: the group over mesh axes A
// is every processor whose coordinate differs from this one only in A, with rank
// Mesh::RankInGroup(A, coordinate) and size Mesh::GroupSize(A). A group's context is created on the
// first collective over it, or up front by Connect(). Its rendezvous keys live under
//     <options.prefix>/<axis names joined by ','>/<processor number of the group's rank 0>/
// so groups (and sessions with distinct prefixes) never collide in the write-once KeyValueStore.
// A group of size 1 (including an empty axis list) never touches Gloo: every collective is a local
// copy.
//
// Collectives use Gloo's options-style API with our own reduce functions for sum/max/min/prod on
// float32 and int32 (int32 sum and product wrap, as in ReduceInto): AllReduce is, for groups of
// three or more, PipelinedReduceScatter (gloo_reduce_scatter.h) then Gloo's ring allgather in
// place when the count divides by the group size (Gloo's ring allreduce otherwise), and
// PairwiseAllreduce (gloo_pairwise.h: the same traffic, pipelined, faster on loopback) for groups
// of two; allgather, alltoall, broadcast and barrier are Gloo's, and Permute is point-to-point
// send/recv on Gloo unbound buffers.
// Groups of two whose members are processes on one host (the local cluster) bypass Gloo after
// connecting: data moves by one direct cross-process copy and the handshakes go through a
// shared-memory mailbox (gloo_same_host.h; Options::same_host_copy).
// ReduceScatter moves what an alltoall would (half the traffic of allreduce-then-copy) and reduces
// each member's copy of this rank's chunk in rank order, piece by piece as it arrives, without a
// whole-size scratch: read from the peer in place on the same-host path, PipelinedReduceScatter
// (gloo_reduce_scatter.h) otherwise. Results of AllReduce are bitwise equal on every member, but
// the combination order differs from LocalCollectiveHub's where Gloo's ring runs (groups of three
// or more whose count does not divide by g); elsewhere elements combine in rank order, as there
// (for two members, up to the operands' order in the one operation). AllReduceInto gives the same
// bits as AllReduce on a copy.
//
// Errors: this class is the only place Gloo's exceptions are caught; none escapes. Every call
// returns a Status whose message names the collective, the mesh axes, this processor's coordinate,
// the group's members (the peer, for a group of two) and Gloo's own text:
//   - DeadlineExceeded: Gloo timed out (options.timeout per collective; connecting waits up to
//     options.timeout for the group's members to publish their addresses).
//   - Unavailable: a peer closed or reset its connection (e.g. it exited or failed).
//   - The KeyValueStore's own code when rendezvous fails there (e.g. AlreadyExists for a reused
//     prefix, or the abort status of an aborted store).
//   - InvalidArgument for bad arguments (see communicator.h); Internal for anything else.
// Members that disagree on a call (sizes, kinds, order) are *not* detected: the group times out,
// or Gloo's event-loop thread aborts the process when a message is larger than the receive posted
// for it. The lowered program guarantees agreement; this class does not check it.
// After a Gloo failure the group's context is unusable: later calls on that group return the same
// error at once (other groups carry on until they hit the failure themselves). Tear the session
// down and build a new communicator with a fresh prefix.
//
// AllReduceInto reads its input in place on every path (same host: from the peer's input; TCP:
// PairwiseAllreduceInto, the reduce-scatter, or Gloo's ring with separate input and output). The blocked calls
// (communicator.h) read and write the interleaved pieces in place: on the same-host path the
// peer's runs are read straight into ours (gloo_same_host.h); over TCP, AllToAllBlocked packs and
// sends chunk by chunk (gloo_blocked.h), AllGatherBlocked gathers into a scratch and unpacks, and
// ReduceScatterBlocked packs into a scratch for PipelinedReduceScatter.
//
// Memory: each group keeps a receive scratch once used: up to 8 MiB for AllReduce in a group of
// two, 2 (g - 1) MiB for ReduceScatter and AllReduce in a group of g >= 3; and over TCP the largest
// of: for the blocked calls, the packing scratch used (up to two g-chunk buffers' worth for
// AllToAllBlocked, one for the others; never on the same-host path or for contiguous chunks), and
// one chunk (count / g elements) for an in-place AllReduce in a group of g >= 3.
//
// Thread-safety: all methods are thread-safe. Calls on the same group are serialised (so the
// "same order on every member" contract is the caller's business); calls on *different* groups from
// different threads run concurrently, e.g. row and column allreduces of a 2-D mesh. The destructor
// must not run while a call is in flight.
//
// Process note: Create() sets SIGPIPE to ignored (if it was at its default) so that writing to a
// peer that died yields an error instead of killing the process.
#ifndef MESHRT_WORKER_GLOO_COMMUNICATOR_H_
#define MESHRT_WORKER_GLOO_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/ir/mesh.h"
#include "runtime/communicator.h"
#include "runtime/kv_store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace meshrt {

class GlooStore;

class GlooCommunicator : public Communicator {
 public:
  struct Options {
    // The whole mesh and this processor's coordinate in it (validated by Create).
    Mesh mesh;
    std::vector<int64_t> coordinate;
    // Address the TCP device binds to and advertises to peers, e.g. "127.0.0.1" or this pod's IP.
    // When empty, `interface` is used instead.
    std::string hostname = "127.0.0.1";
    // Network interface to bind to (e.g. "eth0"); only used when `hostname` is empty.
    std::string interface;
    // For groups of two whose members turn out to be processes on one host (probed once per
    // group), run every collective by direct cross-process copies (process_vm_readv) and a
    // shared-memory mailbox instead of TCP. See gloo_same_host.h.
    bool same_host_copy = true;
    // Namespace of this communicator's rendezvous keys. Must be identical on every processor of
    // the mesh and fresh for every session/epoch (KeyValueStore keys are write-once). Non-empty.
    std::string prefix;
    // Limit for each collective, and for the rendezvous of a group. Positive.
    absl::Duration timeout = absl::Seconds(30);
    // Rendezvous store shared by every processor of the mesh. Borrowed: must be non-null and
    // outlive the communicator.
    KeyValueStore* store = nullptr;
  };

  // Validates `options` (InvalidArgument naming the bad field) and creates the TCP device
  // (Unavailable when it cannot bind `hostname`/`interface`). Connects no group yet.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(Options options);

  ~GlooCommunicator() override;
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  // Connects the groups over each of `axis_sets` now, in the order given (groups of size 1 are
  // skipped; already connected groups are kept). Every processor of the mesh must pass the same
  // list in the same order, as every member of a group blocks until the whole group has arrived.
  // Optional: collectives connect their group on first use anyway. Errors as for collectives.
  absl::Status Connect(const std::vector<std::vector<int>>& axis_sets);

  // Coordinated end: a barrier over the whole mesh (within options.timeout), then closes every
  // group's connections. Call it on every processor before exiting, so that no process exits while
  // a peer still reads its last message (Gloo would report "Connection closed by peer"). Afterwards
  // every collective returns FailedPrecondition. Returns the barrier's error, if any.
  absl::Status Shutdown();

  // Communicator. See communicator.h for the semantics and the class comment for errors.
  const Mesh& mesh() const override { return options_.mesh; }
  const std::vector<int64_t>& coordinate() const override { return options_.coordinate; }
  absl::Status AllReduce(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                         void* data, int64_t count) override;
  absl::Status AllGather(const std::vector<int>& mesh_axes, const void* in, int64_t bytes,
                         void* out) override;
  absl::Status AllToAll(const std::vector<int>& mesh_axes, const void* in, void* out,
                        int64_t bytes_per_rank) override;
  absl::Status ReduceScatter(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                             const void* in, int64_t count_per_rank, void* out) override;
  absl::Status Broadcast(const std::vector<int>& mesh_axes, int root_rank, void* data,
                         int64_t bytes) override;
  absl::Status Permute(int mesh_axis, int shift, bool wrap, const void* in, void* out,
                       int64_t bytes) override;
  absl::Status Barrier(const std::vector<int>& mesh_axes) override;
  absl::Status AllReduceInto(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                             const void* in, void* out, int64_t count) override;
  absl::Status AllToAllBlocked(const std::vector<int>& mesh_axes, const void* in,
                               int64_t in_blocks, void* out, int64_t out_blocks,
                               int64_t bytes_per_rank) override;
  absl::Status AllGatherBlocked(const std::vector<int>& mesh_axes, const void* in, int64_t bytes,
                                void* out, int64_t out_blocks) override;
  absl::Status ReduceScatterBlocked(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                    DType dtype, const void* in, int64_t in_blocks,
                                    int64_t count_per_rank, void* out) override;

 private:
  struct Group;
  struct Call;

  GlooCommunicator(Options options, std::shared_ptr<gloo::transport::Device> device);

  // Validates the arguments common to every collective and fills `call`.
  absl::Status Begin(const char* kind, const std::vector<int>& mesh_axes, int64_t size,
                     const void* buffer, Call* call) const;
  // The group over `call.axes`, created (not connected) on first use.
  Group* FindGroup(const Call& call);
  // Runs `body` on the group's connected context with the group's lock held; connects first if
  // needed. Catches every exception from Gloo or the store and converts it (see class comment);
  // the first failure sticks to the group.
  absl::Status RunOnGroup(const Call& call, const std::function<void(Group* group)>& body);
  // Both with group->mu held.
  absl::Status AwaitMembersLocked(const Call& call, const Group& group);
  absl::Status ConnectLocked(const Call& call, Group* group);
  void PublishSocketAddresses(Group* group);
  // "; [127.0.0.1]:40123 is processor (1)" when `message` names a connection of the group.
  std::string NamePeer(const Group& group, absl::string_view message) const;

  const Options options_;
  const std::shared_ptr<gloo::transport::Device> device_;
  const std::unique_ptr<GlooStore> gloo_store_;  // declared before groups_: outlives them

  mutable absl::Mutex mu_;
  // By sorted mesh axes. Groups are never removed before destruction, so Group* stays valid.
  std::map<std::vector<int>, std::unique_ptr<Group>> groups_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GLOO_COMMUNICATOR_H_
