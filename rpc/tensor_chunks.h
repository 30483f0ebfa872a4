// Tensors on the wire: split into ~4 MiB TensorChunk messages and reassembled
// (proto/session.proto).
// No gRPC here (rpc/chunk_frames.h puts chunks in gRPC byte buffers).
#ifndef MESHRT_RPC_TENSOR_CHUNKS_H_
#define MESHRT_RPC_TENSOR_CHUNKS_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/ir/tensor.h"
#include "core/reference/interpreter.h"
#include "proto/session.pb.h"
#include "rpc/tensor_region.h"
#include "rpc/wire_buffers.h"

namespace meshrt {

inline constexpr int64_t kChunkBytes = 4 << 20;

// Calls `emit` with each chunk of `tensor` in order (one chunk for an empty tensor), the data
// copied into the message. Stops at, and returns, the first error `emit` returns. `emit` may move
// the chunk. (The step streams build their messages with rpc/chunk_frames.h instead, which does
// not copy; this form is for tests and tools that use the generated stubs.)
absl::Status ForEachChunk(const std::string& name, const Tensor& tensor,
                          const std::function<absl::Status(v1::TensorChunk&)>& emit,
                          int64_t chunk_bytes = kChunkBytes);

// One chunk's data as the pieces it arrived in (e.g. the slices of a gRPC message), in order.
using ChunkData = absl::Span<const absl::string_view>;

// Reassembles chunks of any number of tensors, arriving tensor after tensor. Each tensor goes into
// a tensor of its own (NewTensorForWire), or (PlaceInto) straight into its place in a caller's
// tensor. Errors
// (InvalidArgument naming the tensor): a chunk of an unknown or already complete tensor, a gap or
// overlap, more bytes than the shape holds, a bad dtype or shape, a placed tensor whose dtype or
// shape is not its place's, a tensor left incomplete. Not thread-safe.
class TensorAssembler {
 public:
  // `max_bytes` bounds the total a peer may make us allocate (placed tensors, which the caller
  // allocated, do not count).
  explicit TensorAssembler(int64_t max_bytes = int64_t{16} << 30) : max_bytes_(max_bytes) {}

  // Tensor `name` is to be written into `region` of `whole` (the whole tensor's storage,
  // region.whole_bytes() long; borrowed until the last Add) rather than into a tensor of its own:
  // its first chunk must declare the region's dtype and slice shape. Finish leaves it out of its
  // map; Complete(name) says whether every byte of it arrived. Call before the first Add.
  void PlaceInto(const std::string& name, char* whole, const TensorRegion& region);

  // Adds a chunk whose data is `data` (chunk.data() is ignored).
  absl::Status Add(const v1::TensorChunk& chunk, ChunkData data);
  // Adds a chunk with its data in chunk.data().
  absl::Status Add(const v1::TensorChunk& chunk);

  // Whether every byte of tensor `name` arrived.
  bool Complete(const std::string& name) const;
  // Every tensor not placed, once each is complete; FailedPrecondition naming an incomplete one
  // (placed or not) otherwise.
  absl::StatusOr<TensorMap> Finish();

 private:
  struct Place {
    char* whole = nullptr;
    TensorRegion region;
  };
  struct Partial {
    Tensor tensor;               // unless placed
    const Place* place = nullptr;
    int64_t size = 0;            // bytes
    int64_t received = 0;
    bool done = false;
  };
  absl::StatusOr<Partial*> Start(const v1::TensorChunk& chunk);

  std::map<std::string, Place> places_;
  std::map<std::string, Partial> partial_;
  int64_t total_ = 0;
  int64_t max_bytes_;
};

}  // namespace meshrt

#endif  // MESHRT_RPC_TENSOR_CHUNKS_H_
