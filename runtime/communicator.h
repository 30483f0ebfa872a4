// Communicator: the collectives one processor of a mesh uses while executing an SPMD program.
//
// Collectives are addressed by mesh axes. A call over `mesh_axes` involves the *group* of
// processors whose coordinates differ from this one only in those axes; within the group a
// processor's rank is Mesh::RankInGroup(mesh_axes, coordinate) (row-major over the axes, in mesh
// order), and g = Mesh::GroupSize(mesh_axes). `mesh_axes` may be given in any order; an empty list
// (g = 1) makes every collective a local copy. Buffers are contiguous and row-major; byte counts
// are per rank.
//
// Contract for callers:
//   - One call at a time per communicator, from any thread: the thread that created it need not
//     be the one that calls (the executor calls from its communication thread, and at times from
//     its step thread, never both at once; executor.h). Implementations may allow more; the
//     in-memory one allows concurrent calls on *different* groups, see local_communicator.h.
//   - Every member of a group calls the same collectives on that group in the same order, with the
//     same sizes, dtype and reduce op. Collectives on different groups are independent.
//   - Buffers are borrowed for the duration of the call only. `in` and `out` must not overlap.
//
// Errors (every method returns absl::Status and never blocks forever):
//   - InvalidArgument: an axis out of range or repeated, a negative size, an invalid reduce op or
//     root, or group members that disagree on the call (when the implementation can detect it).
//   - DeadlineExceeded: the group did not complete within the implementation's timeout; the message
//     names the collective, the mesh axes and this processor's coordinate.
//   - Any other code: the communicator was aborted (e.g. a peer failed), or a transport error
//     (Unavailable for a closed peer). After an error the group's state is undefined; the session
//     should be torn down.
//
// Implementations: LocalCollectiveHub (in-memory, threads in one process, for tests and the
// simulated mesh) and GlooCommunicator (worker/; Permute by point-to-point send/recv).
#ifndef MESHRT_RUNTIME_COMMUNICATOR_H_
#define MESHRT_RUNTIME_COMMUNICATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/ir/mesh.h"
#include "core/ir/tensor.h"
#include "proto/program.pb.h"

namespace meshrt {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // The mesh and this processor's coordinate in it.
  virtual const Mesh& mesh() const = 0;
  virtual const std::vector<int64_t>& coordinate() const = 0;

  // In place: `data` (count elements of `dtype`) becomes the elementwise `op` of every member's
  // `data`.
  virtual absl::Status AllReduce(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                                 void* data, int64_t count) = 0;

  // `out` (g * bytes) receives every member's `in` (bytes each) in rank order.
  virtual absl::Status AllGather(const std::vector<int>& mesh_axes, const void* in, int64_t bytes,
                                 void* out) = 0;

  // `in` holds g chunks of bytes_per_rank: chunk k goes to rank k. `out` (g * bytes_per_rank)
  // receives the chunk every member addressed to this rank, in sender rank order.
  virtual absl::Status AllToAll(const std::vector<int>& mesh_axes, const void* in, void* out,
                                int64_t bytes_per_rank) = 0;

  // `in` holds g chunks of count_per_rank elements of `dtype`. `out` (count_per_rank elements)
  // receives the elementwise `op` over members of their chunk number <this rank>.
  virtual absl::Status ReduceScatter(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                     DType dtype, const void* in, int64_t count_per_rank,
                                     void* out) = 0;

  // `data` (bytes) on every member becomes the `data` of the member with rank `root_rank`.
  virtual absl::Status Broadcast(const std::vector<int>& mesh_axes, int root_rank, void* data,
                                 int64_t bytes) = 0;

  // Collective permute along one mesh axis (a point-to-point exchange with mesh neighbours). Over
  // the group of {mesh_axis} (size g), the member of rank r sends its `in` (bytes) to rank r +
  // shift; with `wrap` the target is (r + shift) mod g, otherwise a target outside [0, g) drops the
  // data. `out` (bytes) receives what rank r - shift sent, or zeros when no member sends to this
  // one (only possible without `wrap`). `shift` may be negative or exceed g. Every member of the
  // group must call with the same mesh_axis, shift, wrap and bytes, also those that send or receive
  // nothing. InvalidArgument for an axis out of range or a negative size.
  virtual absl::Status Permute(int mesh_axis, int shift, bool wrap, const void* in, void* out,
                               int64_t bytes) = 0;

  // Returns once every member of the group has called Barrier.
  virtual absl::Status Barrier(const std::vector<int>& mesh_axes) = 0;

  // Out of place: `out` (count elements) becomes the elementwise `op` of every member's `in`; `in`
  // is only read (an input the caller must keep need not be copied first). The same result, bit
  // for bit, as copying `in` to `out` and calling AllReduce on `out`, which the default does.
  virtual absl::Status AllReduceInto(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                     DType dtype, const void* in, void* out, int64_t count);

  // Blocked forms: AllToAll, AllGather and ReduceScatter on chunks that lie *blocked* in the
  // caller's buffers (runtime/blocked_chunks.h): a buffer of g chunks in B blocks is a row-major
  // [B, g, run] array, chunk k being the runs [:, k, :] in order (run = chunk bytes / B). That is
  // how the g pieces of a tensor cut along an axis that is not outermost lie in its storage
  // (B = the product of the dims before the axis, BlocksBefore), so the collective reads or writes
  // the pieces in place instead of the caller packing them. Each chunk is the same byte stream as
  // in the contiguous call, so results equal packing, the plain call and unpacking, bit for bit
  // (which the defaults do, through temporary buffers); B = 1 is the plain call. Every member
  // passes the same blockings. InvalidArgument, besides the plain call's cases, for a blocking
  // below 1 or one that does not divide the chunk's bytes.
  //
  // AllToAll with `in`'s g chunks in `in_blocks` and `out`'s in `out_blocks`.
  virtual absl::Status AllToAllBlocked(const std::vector<int>& mesh_axes, const void* in,
                                       int64_t in_blocks, void* out, int64_t out_blocks,
                                       int64_t bytes_per_rank);
  // AllGather with `out`'s g chunks in `out_blocks` (`in` is one contiguous chunk).
  virtual absl::Status AllGatherBlocked(const std::vector<int>& mesh_axes, const void* in,
                                        int64_t bytes, void* out, int64_t out_blocks);
  // ReduceScatter with `in`'s g chunks in `in_blocks`, which must divide count_per_rank (runs of
  // whole elements); `out` is one contiguous chunk.
  virtual absl::Status ReduceScatterBlocked(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                            DType dtype, const void* in, int64_t in_blocks,
                                            int64_t count_per_rank, void* out);
};

// Forwards every call to a borrowed communicator (which must outlive it): a communicator handed
// out without ownership, and the base of wrappers that observe some calls (a test counting the
// elements reduced overrides AllReduce, records, then calls ForwardingCommunicator::AllReduce).
// AllReduceInto and the blocked calls are not forwarded: they run Communicator's defaults on this
// object's plain calls, so a wrapper that observes AllReduce or AllToAll sees them too.
class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(Communicator* inner) : inner_(inner) {}
  const Mesh& mesh() const override { return inner_->mesh(); }
  const std::vector<int64_t>& coordinate() const override { return inner_->coordinate(); }
  absl::Status AllReduce(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                         void* data, int64_t count) override {
    return inner_->AllReduce(mesh_axes, op, dtype, data, count);
  }
  absl::Status AllGather(const std::vector<int>& mesh_axes, const void* in, int64_t bytes,
                         void* out) override {
    return inner_->AllGather(mesh_axes, in, bytes, out);
  }
  absl::Status AllToAll(const std::vector<int>& mesh_axes, const void* in, void* out,
                        int64_t bytes_per_rank) override {
    return inner_->AllToAll(mesh_axes, in, out, bytes_per_rank);
  }
  absl::Status ReduceScatter(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                             const void* in, int64_t count_per_rank, void* out) override {
    return inner_->ReduceScatter(mesh_axes, op, dtype, in, count_per_rank, out);
  }
  absl::Status Broadcast(const std::vector<int>& mesh_axes, int root_rank, void* data,
                         int64_t bytes) override {
    return inner_->Broadcast(mesh_axes, root_rank, data, bytes);
  }
  absl::Status Permute(int mesh_axis, int shift, bool wrap, const void* in, void* out,
                       int64_t bytes) override {
    return inner_->Permute(mesh_axis, shift, wrap, in, out, bytes);
  }
  absl::Status Barrier(const std::vector<int>& mesh_axes) override {
    return inner_->Barrier(mesh_axes);
  }

 private:
  Communicator* inner_;
};

// Helpers shared by implementations.

// The rank that sends to `rank` in a Permute over a group of `g` (see Communicator::Permute), or -1
// when nobody does; and the rank `rank` sends to, or -1 when its data is dropped.
int PermuteSource(int rank, int g, int shift, bool wrap);
int PermuteTarget(int rank, int g, int shift, bool wrap);

// "(1,0)".
std::string CoordinateString(const std::vector<int64_t>& coord);
// "[rows,cols]" using the mesh's dim names ("[]" for none).
std::string MeshAxesString(const Mesh& mesh, const std::vector<int>& axes);
// Checks that `axes` are in range for `mesh` and distinct; returns them sorted. InvalidArgument
// naming `collective` otherwise.
absl::Status NormalizeMeshAxes(const Mesh& mesh, absl::string_view collective,
                               const std::vector<int>& axes, std::vector<int>* sorted);
// InvalidArgument naming `collective` and `buffer` unless 1 <= blocks and `blocks` divides
// `chunk_size` (bytes, or elements for ReduceScatterBlocked: `unit`), the blocked calls'
// precondition on a blocking.
absl::Status CheckBlocks(absl::string_view collective, const char* buffer, int64_t blocks,
                         int64_t chunk_size, const char* unit = "bytes");
// Applies `op` elementwise: acc[i] = op(acc[i], in[i]) for `count` elements of `dtype`.
// InvalidArgument for REDUCE_INVALID or an unknown op.
absl::Status ReduceInto(v1::ReduceOp op, DType dtype, const void* in, void* acc, int64_t count);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_COMMUNICATOR_H_
