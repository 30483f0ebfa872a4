#include "coordinator/grpc_coordinator_service.h"

#include "rpc/grpc_util.h"
#include "rpc/tensor_chunks.h"

namespace meshrt {
namespace {

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status GrpcCoordinatorService::RegisterWorker(grpc::ServerContext*,
                                                    const v1::RegisterWorkerRequest* request,
                                                    v1::RegisterWorkerResponse* response) {
  return Reply(coordinator_->RegisterWorker(*request), response);
}

grpc::Status GrpcCoordinatorService::Heartbeat(grpc::ServerContext*,
                                               const v1::HeartbeatRequest* request,
                                               v1::HeartbeatResponse* response) {
  return Reply(coordinator_->Heartbeat(*request), response);
}

grpc::Status GrpcCoordinatorService::KvSet(grpc::ServerContext*, const v1::KvSetRequest* request,
                                           v1::KvSetResponse*) {
  return ToGrpcStatus(coordinator_->kv().Set(request->key(), request->value()));
}

grpc::Status GrpcCoordinatorService::KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                                           v1::KvGetResponse* response) {
  absl::StatusOr<std::string> value =
      coordinator_->kv().Get(request->key(), absl::Milliseconds(request->timeout_ms()));
  if (!value.ok()) return ToGrpcStatus(value.status());
  response->set_value(*std::move(value));
  return grpc::Status::OK;
}

grpc::Status GrpcCoordinatorService::ListWorkers(grpc::ServerContext*,
                                                 const v1::ListWorkersRequest*,
                                                 v1::ListWorkersResponse* response) {
  *response = coordinator_->ListWorkers();
  return grpc::Status::OK;
}

grpc::Status GrpcCoordinatorService::CreateSession(grpc::ServerContext*,
                                                   const v1::CreateSessionRequest* request,
                                                   v1::CreateSessionResponse* response) {
  return Reply(coordinator_->CreateSession(*request), response);
}

grpc::Status GrpcCoordinatorService::RunStep(
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
  absl::StatusOr<TensorMap> out = coordinator_->RunStep(header.session(), *fed, fetches);
  if (!out.ok()) return ToGrpcStatus(out.status());
  for (const auto& [name, tensor] : *out) {
    absl::Status s = ForEachChunk(name, tensor, [&](v1::TensorChunk& chunk) {
      v1::RunStepResponse r;
      r.mutable_fetch()->Swap(&chunk);
      return stream->Write(r) ? absl::OkStatus()
                              : absl::UnavailableError("client went away mid-response");
    });
    if (!s.ok()) return ToGrpcStatus(s);
  }
  v1::RunStepResponse done;
  done.set_done(true);
  stream->Write(done);
  return grpc::Status::OK;
}

grpc::Status GrpcCoordinatorService::CloseSession(grpc::ServerContext*,
                                                  const v1::CloseSessionRequest* request,
                                                  v1::CloseSessionResponse*) {
  return ToGrpcStatus(coordinator_->CloseSession(request->session()));
}

}  // namespace meshrt
