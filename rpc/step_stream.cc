#include "rpc/step_stream.h"

#include "rpc/grpc_util.h"
#include "rpc/tensor_chunks.h"

namespace meshrt {

absl::StatusOr<TensorMap> CallStep(StepClientStream* stream, const v1::RunStepRequest& header,
                                   const TensorMap& feeds) {
  bool ok = stream->Write(header);
  for (auto it = feeds.begin(); ok && it != feeds.end(); ++it) {
    ok = ForEachChunk(it->first, it->second, [&](v1::TensorChunk& chunk) {
           v1::RunStepRequest msg;
           msg.mutable_feed()->Swap(&chunk);
           return stream->Write(msg) ? absl::OkStatus() : absl::UnavailableError("stream broken");
         }).ok();
  }
  stream->WritesDone();
  TensorAssembler fetched;
  absl::Status assemble;
  v1::RunStepResponse response;
  while (stream->Read(&response)) {
    if (response.has_fetch() && assemble.ok()) assemble = fetched.Add(*response.mutable_fetch());
  }
  absl::Status status = FromGrpcStatus(stream->Finish());
  if (!status.ok()) return status;
  if (!assemble.ok()) return assemble;
  return fetched.Finish();
}

absl::StatusOr<TensorMap> ReadStep(StepServerStream* stream, v1::RunStepRequest* header) {
  if (!stream->Read(header)) {
    return absl::InvalidArgumentError("RunStep stream ended before its header");
  }
  TensorAssembler feeds;
  v1::RunStepRequest msg;
  absl::Status status;
  while (stream->Read(&msg)) {
    if (status.ok()) status = feeds.Add(*msg.mutable_feed());
  }
  if (!status.ok()) return status;
  return feeds.Finish();
}

absl::Status WriteStepResult(StepServerStream* stream, const TensorMap& fetches, int64_t step) {
  for (const auto& [name, tensor] : fetches) {
    absl::Status s = ForEachChunk(name, tensor, [&](v1::TensorChunk& chunk) {
      v1::RunStepResponse r;
      r.mutable_fetch()->Swap(&chunk);
      return stream->Write(r) ? absl::OkStatus()
                 : absl::UnavailableError("the caller went away mid-response");
    });
    if (!s.ok()) return s;
  }
  v1::RunStepResponse done;
  done.set_done(true);
  done.set_step(step);
  stream->Write(done);
  return absl::OkStatus();
}

}  // namespace meshrt
