// Tensors on the wire: split into ~1 MiB TensorChunk messages and reassembled (proto/session.proto).
#ifndef MESHRT_RPC_TENSOR_CHUNKS_H_
#define MESHRT_RPC_TENSOR_CHUNKS_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "core/interpreter.h"
#include "core/tensor.h"
#include "proto/session.pb.h"

namespace meshrt {

inline constexpr int64_t kChunkBytes = 1 << 20;

// Calls `emit` with each chunk of `tensor` in order (one chunk for an empty tensor). Stops at, and
// returns, the first error `emit` returns. `emit` may move the chunk.
absl::Status ForEachChunk(const std::string& name, const Tensor& tensor,
                          const std::function<absl::Status(v1::TensorChunk&)>& emit,
                          int64_t chunk_bytes = kChunkBytes);

// Reassembles chunks of any number of tensors, arriving tensor after tensor. Errors
// (InvalidArgument naming the tensor): a chunk of an unknown or already complete tensor, a gap or
// overlap, more bytes than the shape holds, a bad dtype or shape, a tensor left incomplete.
// Not thread-safe.
class TensorAssembler {
 public:
  // `max_bytes` bounds the total a peer may make us allocate.
  explicit TensorAssembler(int64_t max_bytes = int64_t{16} << 30) : max_bytes_(max_bytes) {}

  absl::Status Add(v1::TensorChunk& chunk);
  // Every tensor, once each is complete; FailedPrecondition naming an incomplete one otherwise.
  absl::StatusOr<TensorMap> Finish();

 private:
  struct Partial {
    Tensor tensor;
    int64_t received = 0;
    bool done = false;
  };
  std::map<std::string, Partial> partial_;
  int64_t total_ = 0;
  int64_t max_bytes_;
};

}  // namespace meshrt

#endif  // MESHRT_RPC_TENSOR_CHUNKS_H_
