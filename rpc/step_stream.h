// Both ends of the RunStep stream (proto/session.proto), shared by client -> coordinator and
// coordinator -> worker: a header message, then tensors as ~4 MiB chunks one way, chunks and a
// final `done` message back.
//
// The streams carry raw frames (rpc/chunk_frames.h) rather than generated message classes, so
// tensor bytes are written from and read into tensor storage directly; the bytes on the wire are
// the proto's messages, so peers using the generated stubs interoperate. gRPC's generated code has
// no synchronous raw form of a method, hence StepMethod (client) and StepFramesHandler (server),
// built from the same gRPC classes the generated code uses (gRPC 1.51, Debian 12).
#ifndef MESHRT_RPC_STEP_STREAM_H_
#define MESHRT_RPC_STEP_STREAM_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/reference/interpreter.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/method_handler.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/session.pb.h"
#include "rpc/chunk_frames.h"
#include "rpc/tensor_chunks.h"
#include "runtime/step_request.h"

namespace meshrt {

using StepClientStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
using StepServerStream = grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// Full names of the two RunStep methods.
inline constexpr char kWorkerRunStep[] = "/meshrt.v1.Worker/RunStep";
inline constexpr char kCoordinatorRunStep[] = "/meshrt.v1.Coordinator/RunStep";

// One RunStep method on one channel. Thread-safe.
class StepMethod {
 public:
  // `name`: kWorkerRunStep or kCoordinatorRunStep (a string that outlives this).
  StepMethod(const char* name, std::shared_ptr<grpc::ChannelInterface> channel);
  // A new call of the method under `ctx` (borrowed; must outlive the stream).
  std::unique_ptr<StepClientStream> Open(grpc::ClientContext* ctx) const;

 private:
  std::shared_ptr<grpc::ChannelInterface> channel_;
  grpc::internal::RpcMethod method_;
};

// Tensors to send, by name.
using FrameSources = std::map<std::string, FrameSource>;
// The whole of each tensor of `tensors`, borrowed for the call (its bytes are copied into the
// frames).
FrameSources BorrowedSources(const TensorMap& tensors);
// The whole of each tensor of `tensors`, shared with the wire (frames reference its storage).
FrameSources SharedSources(const std::shared_ptr<const TensorMap>& tensors);

// A worker's step request as the wire's header and back (both directions carry every field).
v1::RunStepRequest StepHeader(const StepRequest& request);
StepRequest StepRequestOf(const v1::RunStepRequest& header);

// Client side: sends `header` and `feeds`, half-closes, reads the fetched tensors into `*fetched`
// (into their places where PlaceInto gave one), finishes the call. Returns the call's status, or
// else the first error decoding or assembling the response; the caller then calls
// fetched->Finish().
// With `traces`, the `done` message's step timelines are appended to it.
absl::Status CallStep(StepClientStream* stream, const v1::RunStepRequest& header,
                      const FrameSources& feeds, TensorAssembler* fetched,
                      std::vector<v1::StepTrace>* traces = nullptr);

// Server side: reads the header into `*header` and every feed chunk. InvalidArgument for a stream
// without a header, with a message that is not a RunStepRequest, or with malformed chunks.
absl::StatusOr<TensorMap> ReadStep(StepServerStream* stream, v1::RunStepRequest* header);

// Server side: writes `fetches` as chunks, then the `done` message (carrying `traces`). The frames
// reference the tensors' storage, which they keep alive until gRPC has sent them.
absl::Status WriteStepResult(StepServerStream* stream, TensorMap fetches, int64_t step,
                             std::vector<v1::StepTrace> traces = {});

// Serving RunStep with frames: the index of method `method` in the generated service `service`
// (full proto name, e.g. "meshrt.v1.Worker"), for grpc::Service::MarkMethodStreamed, and a handler
// that calls `(service->*fn)(context, stream)`. CHECKs that the method exists.
int MethodIndex(absl::string_view service, absl::string_view method);
template <typename Service>
grpc::internal::MethodHandler* StepFramesHandler(
    Service* service, grpc::Status (Service::*fn)(grpc::ServerContext*, StepServerStream*)) {
  return new grpc::internal::BidiStreamingHandler<Service, grpc::ByteBuffer, grpc::ByteBuffer>(
      [fn](Service* s, grpc::ServerContext* context, StepServerStream* stream) {
        return (s->*fn)(context, stream);
      },
      service);
}

}  // namespace meshrt

#endif  // MESHRT_RPC_STEP_STREAM_H_
