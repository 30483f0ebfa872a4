#include "worker/grpc_worker_service.h"

#include "rpc/grpc_util.h"
#include "rpc/tensor_chunks.h"

namespace meshrt {

grpc::Status GrpcWorkerService::LoadSession(grpc::ServerContext*, const v1::SessionSpec* request,
                                            v1::LoadSessionResponse*) {
  return ToGrpcStatus(worker_->LoadSession(*request));
}

grpc::Status GrpcWorkerService::RunStep(
    grpc::ServerContext*, grpc::ServerReaderWriter<v1::RunStepResponse, v1::RunStepRequest>* stream) {
  v1::RunStepRequest header;
  if (!stream->Read(&header)) {
    return ToGrpcStatus(absl::InvalidArgumentError("RunStep stream ended before its header"));
  }
  TensorAssembler feeds;
  v1::RunStepRequest msg;
  while (stream->Read(&msg)) {
    absl::Status s = feeds.Add(*msg.mutable_feed());
    if (!s.ok()) return ToGrpcStatus(s);
  }
  absl::StatusOr<TensorMap> fed = feeds.Finish();
  if (!fed.ok()) return ToGrpcStatus(fed.status());
  std::vector<std::string> fetches(header.fetches().begin(), header.fetches().end());
  absl::StatusOr<TensorMap> out = worker_->RunStep(header.session(), header.step(), *fed, fetches);
  if (!out.ok()) return ToGrpcStatus(out.status());
  for (const auto& [name, tensor] : *out) {
    absl::Status s = ForEachChunk(name, tensor, [&](v1::TensorChunk& chunk) {
      v1::RunStepResponse r;
      r.mutable_fetch()->Swap(&chunk);
      return stream->Write(r) ? absl::OkStatus()
                              : absl::UnavailableError("coordinator went away mid-response");
    });
    if (!s.ok()) return ToGrpcStatus(s);
  }
  v1::RunStepResponse done;
  done.set_done(true);
  done.set_step(header.step());
  stream->Write(done);
  return grpc::Status::OK;
}

grpc::Status GrpcWorkerService::CloseSession(grpc::ServerContext*,
                                             const v1::CloseSessionRequest* request,
                                             v1::CloseSessionResponse*) {
  return ToGrpcStatus(worker_->CloseSession(request->session()));
}

}  // namespace meshrt
