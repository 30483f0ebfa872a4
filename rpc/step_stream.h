// Both ends of the RunStep stream (proto/session.proto), shared by client -> coordinator and
// coordinator -> worker: a header message, then tensors as ~1 MiB chunks one way, chunks and a
// final `done` message back.
#ifndef MESHRT_RPC_STEP_STREAM_H_
#define MESHRT_RPC_STEP_STREAM_H_

#include "absl/status/statusor.h"
#include "core/interpreter.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/session.pb.h"

namespace meshrt {

using StepClientStream = grpc::ClientReaderWriter<v1::RunStepRequest, v1::RunStepResponse>;
using StepServerStream = grpc::ServerReaderWriter<v1::RunStepResponse, v1::RunStepRequest>;

// Client side: sends `header` and `feeds`, half-closes, reads the fetched tensors, finishes the
// call. Returns the call's status, or the fetched tensors.
absl::StatusOr<TensorMap> CallStep(StepClientStream* stream, const v1::RunStepRequest& header,
                                   const TensorMap& feeds);

// Server side: reads the header into `*header` and every feed chunk. InvalidArgument for a stream
// without a header or with malformed chunks.
absl::StatusOr<TensorMap> ReadStep(StepServerStream* stream, v1::RunStepRequest* header);

// Server side: writes `fetches` as chunks, then the `done` message.
absl::Status WriteStepResult(StepServerStream* stream, const TensorMap& fetches, int64_t step);

}  // namespace meshrt

#endif  // MESHRT_RPC_STEP_STREAM_H_
