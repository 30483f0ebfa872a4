#include "coordinator/grpc_coordinator_service.h"

#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"

namespace meshrt {
namespace {

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status GrpcCoordinatorService::RegisterWorker(grpc::ServerContext* ctx,
                                                    const v1::RegisterWorkerRequest* request,
                                                    v1::RegisterWorkerResponse* response) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return Reply(coordinator_->RegisterWorker(*request), response);
}

grpc::Status GrpcCoordinatorService::Heartbeat(grpc::ServerContext* ctx,
                                               const v1::HeartbeatRequest* request,
                                               v1::HeartbeatResponse* response) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return Reply(coordinator_->Heartbeat(*request), response);
}

grpc::Status GrpcCoordinatorService::DeregisterWorker(grpc::ServerContext* ctx,
                                                      const v1::DeregisterWorkerRequest* request,
                                                      v1::DeregisterWorkerResponse*) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return ToGrpcStatus(coordinator_->DeregisterWorker(*request));
}

grpc::Status GrpcCoordinatorService::KvSet(grpc::ServerContext* ctx,
                                           const v1::KvSetRequest* request, v1::KvSetResponse*) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return ToGrpcStatus(coordinator_->kv().Set(request->key(), request->value()));
}

grpc::Status GrpcCoordinatorService::KvGet(grpc::ServerContext* ctx,
                                           const v1::KvGetRequest* request,
                                           v1::KvGetResponse* response) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  absl::StatusOr<std::string> value =
      coordinator_->kv().Get(request->key(), absl::Milliseconds(request->timeout_ms()));
  if (!value.ok()) return ToGrpcStatus(value.status());
  response->set_value(*std::move(value));
  return grpc::Status::OK;
}

grpc::Status GrpcCoordinatorService::ListWorkers(grpc::ServerContext* ctx,
                                                 const v1::ListWorkersRequest*,
                                                 v1::ListWorkersResponse* response) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  *response = coordinator_->ListWorkers();
  return grpc::Status::OK;
}

grpc::Status GrpcCoordinatorService::CreateSession(grpc::ServerContext* ctx,
                                                   const v1::CreateSessionRequest* request,
                                                   v1::CreateSessionResponse* response) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return Reply(coordinator_->CreateSession(*request), response);
}

grpc::Status GrpcCoordinatorService::RunStep(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::RunStepResponse, v1::RunStepRequest>* stream) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  v1::RunStepRequest header;
  absl::StatusOr<TensorMap> fed = ReadStep(stream, &header);
  if (!fed.ok()) return ToGrpcStatus(fed.status());
  std::vector<std::string> fetches(header.fetches().begin(), header.fetches().end());
  absl::StatusOr<TensorMap> out = coordinator_->RunStep(header.session(), *fed, fetches, header.num_steps());
  if (!out.ok()) return ToGrpcStatus(out.status());
  return ToGrpcStatus(WriteStepResult(stream, *out, 0));
}

grpc::Status GrpcCoordinatorService::CloseSession(grpc::ServerContext* ctx,
                                                  const v1::CloseSessionRequest* request,
                                                  v1::CloseSessionResponse*) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return ToGrpcStatus(coordinator_->CloseSession(request->session()));
}

grpc::Status GrpcCoordinatorService::SaveCheckpoint(grpc::ServerContext* ctx,
                                                    const v1::SaveCheckpointRequest* request,
                                                    v1::SaveCheckpointResponse* response) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return Reply(coordinator_->SaveCheckpoint(request->session(), request->directory()), response);
}

grpc::Status GrpcCoordinatorService::RestoreCheckpoint(grpc::ServerContext* ctx,
                                                       const v1::RestoreCheckpointRequest* request,
                                                       v1::RestoreCheckpointResponse* response) {
  if (grpc::Status auth = CheckToken(*ctx, security_); !auth.ok()) return auth;
  return Reply(coordinator_->RestoreCheckpoint(request->session(), request->directory()),
               response);
}

}  // namespace meshrt
