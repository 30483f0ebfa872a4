#include "coordinator/grpc_coordinator_service.h"

#include "absl/strings/str_cat.h"
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

GrpcCoordinatorService::GrpcCoordinatorService(Coordinator* coordinator, Authenticator auth)
    : coordinator_(coordinator), auth_(std::make_shared<const Authenticator>(std::move(auth))) {
  MarkMethodStreamed(MethodIndex("meshrt.v1.Coordinator", "RunStep"),
                     StepFramesHandler(this, &GrpcCoordinatorService::RunStepFrames));
}

void GrpcCoordinatorService::SetAuthenticator(Authenticator auth) {
  auto replacement = std::make_shared<const Authenticator>(std::move(auth));
  absl::MutexLock lock(&mu_);
  auth_ = std::move(replacement);
}

std::shared_ptr<const Authenticator> GrpcCoordinatorService::auth() const {
  absl::MutexLock lock(&mu_);
  return auth_;
}

template <typename Fn>
grpc::Status GrpcCoordinatorService::Member(const char* rpc, grpc::ServerContext* ctx, Fn&& fn) {
  return Counted(rpc, GuardRpc(rpc, [&]() -> grpc::Status {
    if (absl::Status denied = auth()->CheckMember(AuthorizationOf(*ctx)); !denied.ok()) {
      return ToGrpcStatus(denied);
    }
    return fn();
  }));
}

grpc::Status GrpcCoordinatorService::Counted(const char* rpc, grpc::Status status) {
  // gRPC's and Abseil's codes have the same numbers.
  coordinator_->metrics().RpcDone(rpc, static_cast<absl::StatusCode>(status.error_code()));
  return status;
}

template <typename Fn>
grpc::Status GrpcCoordinatorService::Client(const char* rpc, grpc::ServerContext* ctx,
                                            const std::string* session, Fn&& fn) {
  return Counted(rpc, GuardRpc(rpc, [&]() -> grpc::Status {
    absl::StatusOr<Caller> caller = auth()->CheckClient(AuthorizationOf(*ctx));
    if (!caller.ok()) return ToGrpcStatus(caller.status());
    if (session != nullptr) {
      if (absl::Status s = coordinator_->CheckSessionAccess(*session, *caller); !s.ok()) {
        return ToGrpcStatus(s);
      }
    }
    return fn(*caller);
  }));
}

grpc::Status GrpcCoordinatorService::RegisterWorker(grpc::ServerContext* ctx,
                                                    const v1::RegisterWorkerRequest* request,
                                                    v1::RegisterWorkerResponse* response) {
  return Member("RegisterWorker", ctx,
                [&] { return Reply(coordinator_->RegisterWorker(*request), response); });
}

grpc::Status GrpcCoordinatorService::Heartbeat(grpc::ServerContext* ctx,
                                               const v1::HeartbeatRequest* request,
                                               v1::HeartbeatResponse* response) {
  return Member("Heartbeat", ctx,
                [&] { return Reply(coordinator_->Heartbeat(*request), response); });
}

grpc::Status GrpcCoordinatorService::DeregisterWorker(grpc::ServerContext* ctx,
                                                      const v1::DeregisterWorkerRequest* request,
                                                      v1::DeregisterWorkerResponse*) {
  return Member("DeregisterWorker", ctx,
                [&] { return ToGrpcStatus(coordinator_->DeregisterWorker(*request)); });
}

grpc::Status GrpcCoordinatorService::KvSet(grpc::ServerContext* ctx,
                                           const v1::KvSetRequest* request, v1::KvSetResponse*) {
  return Member("KvSet", ctx, [&] {
    return ToGrpcStatus(coordinator_->kv().Set(request->key(), request->value()));
  });
}

grpc::Status GrpcCoordinatorService::KvGet(grpc::ServerContext* ctx,
                                           const v1::KvGetRequest* request,
                                           v1::KvGetResponse* response) {
  return Member("KvGet", ctx, [&] {
    // A negative wait is a malformed request; the store bounds long ones (max_wait).
    if (request->timeout_ms() < 0) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("KvGet: timeout_ms ", request->timeout_ms(), " is negative")));
    }
    absl::StatusOr<std::string> value =
        coordinator_->kv().Get(request->key(), absl::Milliseconds(request->timeout_ms()));
    if (!value.ok()) return ToGrpcStatus(value.status());
    response->set_value(*std::move(value));
    return grpc::Status::OK;
  });
}

grpc::Status GrpcCoordinatorService::ListWorkers(grpc::ServerContext* ctx,
                                                 const v1::ListWorkersRequest*,
                                                 v1::ListWorkersResponse* response) {
  return Client("ListWorkers", ctx, nullptr, [&](const Caller& caller) {
    *response = coordinator_->ListWorkers(caller);
    return grpc::Status::OK;
  });
}

grpc::Status GrpcCoordinatorService::CreateSession(grpc::ServerContext* ctx,
                                                   const v1::CreateSessionRequest* request,
                                                   v1::CreateSessionResponse* response) {
  return Client("CreateSession", ctx, nullptr, [&](const Caller& caller) {
    return Reply(coordinator_->CreateSession(*request, caller), response);
  });
}

grpc::Status GrpcCoordinatorService::RunStepFrames(grpc::ServerContext* ctx,
                                                   StepServerStream* stream) {
  return Client("RunStep", ctx, nullptr, [&](const Caller& caller) {
    v1::RunStepRequest header;
    absl::StatusOr<TensorMap> fed = ReadStep(stream, &header);
    if (!fed.ok()) return ToGrpcStatus(fed.status());
    if (absl::Status s = coordinator_->CheckSessionAccess(header.session(), caller); !s.ok()) {
      return ToGrpcStatus(s);
    }
    std::vector<v1::StepTrace> traces;
    absl::StatusOr<TensorMap> out =
        coordinator_->RunStep(StepRequestOf(header), *std::move(fed), &traces);
    if (!out.ok()) return ToGrpcStatus(out.status());
    return ToGrpcStatus(WriteStepResult(stream, *std::move(out), 0, std::move(traces)));
  });
}

grpc::Status GrpcCoordinatorService::CloseSession(grpc::ServerContext* ctx,
                                                  const v1::CloseSessionRequest* request,
                                                  v1::CloseSessionResponse*) {
  return Client("CloseSession", ctx, &request->session(), [&](const Caller&) {
    return ToGrpcStatus(coordinator_->CloseSession(request->session()));
  });
}

grpc::Status GrpcCoordinatorService::KeepAlive(grpc::ServerContext* ctx,
                                               const v1::KeepAliveRequest* request,
                                               v1::KeepAliveResponse* response) {
  return Client("KeepAlive", ctx, nullptr, [&](const Caller& caller) {
    // Bounded work under the coordinator's lock: no client holds this many sessions.
    constexpr int kMaxSessions = 10000;
    if (request->sessions_size() > kMaxSessions) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("KeepAlive names ", request->sessions_size(), " sessions; at most ",
                       kMaxSessions, " per call")));
    }
    const std::vector<std::string> sessions(request->sessions().begin(), request->sessions().end());
    *response = coordinator_->KeepAlive(sessions, caller);
    return grpc::Status::OK;
  });
}

grpc::Status GrpcCoordinatorService::RecordMetrics(grpc::ServerContext* ctx,
                                                   const v1::RecordMetricsRequest* request,
                                                   v1::RecordMetricsResponse*) {
  return Client("RecordMetrics", ctx, &request->session(), [&](const Caller&) {
    return ToGrpcStatus(coordinator_->RecordMetrics(request->session(), *request));
  });
}

grpc::Status GrpcCoordinatorService::SaveCheckpoint(grpc::ServerContext* ctx,
                                                    const v1::SaveCheckpointRequest* request,
                                                    v1::SaveCheckpointResponse* response) {
  return Client("SaveCheckpoint", ctx, &request->session(), [&](const Caller&) {
    return Reply(coordinator_->SaveCheckpoint(request->session(), request->directory(),
                                             request->keep() == 0 ? 2 : request->keep()), response);
  });
}

grpc::Status GrpcCoordinatorService::RestoreCheckpoint(grpc::ServerContext* ctx,
                                                       const v1::RestoreCheckpointRequest* request,
                                                       v1::RestoreCheckpointResponse* response) {
  return Client("RestoreCheckpoint", ctx, &request->session(), [&](const Caller&) {
    return Reply(coordinator_->RestoreCheckpoint(request->session(), request->directory(),
                                                  request->partial()),
                 response);
  });
}

}  // namespace meshrt
