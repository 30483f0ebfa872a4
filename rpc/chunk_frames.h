// The RunStep streams' messages as raw gRPC byte buffers ("frames"), so that tensor bytes go from
// tensor storage onto the wire and from the wire into tensor storage without passing through
// protobuf `bytes` strings. The bytes are exactly proto/session.proto's RunStepRequest and
// RunStepResponse: a peer using the generated classes reads and writes the same messages.
//
// Sending: a chunk's data are references to the source tensor's storage when the caller shares
// its ownership (FrameSource::owner) and its runs are long, else one copy into the frame. gRPC
// may hold such references after the call that sent them returns (until its transport has
// written them); each holds a reference to `owner`, which keeps the storage alive until then.
// Receiving: DecodeRequest / DecodeResponse parse everything but the data and return the data as
// views into the received buffer, which TensorAssembler copies into place (the one copy of the
// receive side).
#ifndef MESHRT_RPC_CHUNK_FRAMES_H_
#define MESHRT_RPC_CHUNK_FRAMES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/session.pb.h"
#include "rpc/tensor_region.h"

namespace meshrt {

// The field of the chunk in each message: RunStepRequest.feed, RunStepResponse.fetch.
inline constexpr int kFeedField = 4;
inline constexpr int kFetchField = 1;

// Runs at least this long are sent by reference; shorter ones are gathered into one copy per
// frame (a frame of thousands of tiny references would cost more than the copy).
inline constexpr int64_t kMinReferencedRun = 64 << 10;

// A tensor (or a slice of one) to send.
struct FrameSource {
  // The whole tensor's storage (region.whole_bytes() long) and where the slice to send lies in it.
  const char* whole = nullptr;
  TensorRegion region;
  // Shares ownership of `whole`'s storage: frames may then reference it instead of copying it,
  // each reference keeping `owner` alive. Null: borrowed for the call only, every byte is copied.
  std::shared_ptr<const void> owner;
};

// `message` serialised as one frame (a header, or a `done` message).
grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& message);

// Calls `write` with each frame of tensor `name` from `source`, in order: messages whose field
// `chunk_field` is a TensorChunk holding at most `chunk_bytes` of the slice's bytes (name on each;
// dtype and shape on the first; offset; last on the final one; a zero-byte slice is one frame).
// Stops when `write` returns false and returns false then.
bool ForEachFrame(const std::string& name, const FrameSource& source, int chunk_field,
                  int64_t chunk_bytes, const std::function<bool(const grpc::ByteBuffer&)>& write);

// The data of a received frame's chunk: `pieces`, views into `slices` (references to the received
// buffer's memory, kept for as long as this lives).
struct FrameData {
  std::vector<grpc::Slice> slices;
  std::vector<absl::string_view> pieces;
};

// Parse a frame into `*request` / `*response`, except for the data of its chunk (the feed /
// fetch), which go to `*data` (no pieces when the frame has no chunk data). Fields may come in any
// order and repeat, with protobuf's meaning (the last data wins). InvalidArgument naming the
// message when the bytes are not one.
absl::Status DecodeRequest(const grpc::ByteBuffer& buffer, v1::RunStepRequest* request,
                           FrameData* data);
absl::Status DecodeResponse(const grpc::ByteBuffer& buffer, v1::RunStepResponse* response,
                            FrameData* data);

}  // namespace meshrt

#endif  // MESHRT_RPC_CHUNK_FRAMES_H_
