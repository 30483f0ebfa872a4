#include "worker/grpc_worker_service.h"

#include "absl/strings/str_cat.h"
#include "rpc/auth.h"
#include "rpc/error_origin.h"
#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"

namespace meshrt {

GrpcWorkerService::GrpcWorkerService(Worker* worker, std::string secret)
    : worker_(worker), secret_(std::move(secret)) {
  MarkMethodStreamed(MethodIndex("meshrt.v1.Worker", "RunStep"),
                     StepFramesHandler(this, &GrpcWorkerService::RunStepFrames));
}

grpc::Status GrpcWorkerService::CheckCaller(const grpc::ServerContext& ctx) const {
  return ToGrpcStatus(CheckSecret(AuthorizationOf(ctx), secret_, "this worker"));
}

bool GrpcWorkerService::Admit() {
  absl::MutexLock lock(&mu_);
  if (draining_) return false;
  ++in_flight_;
  return true;
}

void GrpcWorkerService::Done() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

bool GrpcWorkerService::Drain(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

grpc::Status GrpcWorkerService::LoadSession(grpc::ServerContext* ctx,
                                            const v1::SessionSpec* request,
                                            v1::LoadSessionResponse*) {
  return GuardRpc("LoadSession", [&]() -> grpc::Status {
    if (grpc::Status auth = CheckCaller(*ctx); !auth.ok()) return auth;
    // Marked as this worker's own error (rpc/error_origin.h), as Worker::LoadSession's are.
    if (!Admit()) {
      return ToGrpcStatus(MarkWorkerReported(absl::UnavailableError(
          absl::StrCat("loading session ", request->session(),
                       ": this worker is shutting down (SIGTERM)"))));
    }
    const Admitted admitted{this};  // Done() however the handler ends
    return ToGrpcStatus(worker_->LoadSession(*request));
  });
}

grpc::Status GrpcWorkerService::RunStepFrames(grpc::ServerContext* ctx,
                                              StepServerStream* stream) {
  return GuardRpc("RunStep", [&]() -> grpc::Status {
    if (grpc::Status auth = CheckCaller(*ctx); !auth.ok()) return auth;
    v1::RunStepRequest header;
    absl::StatusOr<TensorMap> fed = ReadStep(stream, &header);
    if (!fed.ok()) return ToGrpcStatus(fed.status());
    // Marked as this worker's own error (rpc/error_origin.h): the coordinator must not take it
    // for a transport failure.
    if (!Admit()) {
      return ToGrpcStatus(MarkWorkerReported(absl::UnavailableError(
          absl::StrCat("step ", header.step(),
                       ": this worker is shutting down (SIGTERM) and starts no new steps"))));
    }
    const Admitted admitted{this};  // Done() however the handler ends
    std::vector<v1::StepTrace> traces;
    absl::StatusOr<TensorMap> out =
        worker_->RunStep(StepRequestOf(header), *std::move(fed), &traces);
    grpc::Status status =
        out.ok() ? ToGrpcStatus(WriteStepResult(stream, *std::move(out), header.step(),
                                                std::move(traces)))
                 : ToGrpcStatus(out.status());
    return status;
  });
}

grpc::Status GrpcWorkerService::CloseSession(grpc::ServerContext* ctx,
                                             const v1::CloseSessionRequest* request,
                                             v1::CloseSessionResponse*) {
  return GuardRpc("CloseSession", [&]() -> grpc::Status {
    if (grpc::Status auth = CheckCaller(*ctx); !auth.ok()) return auth;
    return ToGrpcStatus(worker_->CloseSession(request->session()));
  });
}

grpc::Status GrpcWorkerService::SaveCheckpoint(grpc::ServerContext* ctx,
                                               const v1::WorkerSaveCheckpointRequest* request,
                                               v1::WorkerSaveCheckpointResponse* response) {
  return GuardRpc("SaveCheckpoint", [&]() -> grpc::Status {
    if (grpc::Status auth = CheckCaller(*ctx); !auth.ok()) return auth;
    if (!Admit()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("saving a checkpoint of session ", request->session(),
                                       ": this worker is shutting down (SIGTERM)"));
    }
    const Admitted admitted{this};  // Done() however the handler ends
    absl::StatusOr<std::vector<v1::CheckpointShard>> shards =
        worker_->SaveCheckpoint(request->session(), request->directory());
    if (!shards.ok()) return ToGrpcStatus(shards.status());
    for (v1::CheckpointShard& s : *shards) *response->add_shards() = std::move(s);
    return grpc::Status::OK;
  });
}

grpc::Status GrpcWorkerService::RestoreCheckpoint(grpc::ServerContext* ctx,
                                                  const v1::WorkerRestoreCheckpointRequest* request,
                                                  v1::WorkerRestoreCheckpointResponse*) {
  return GuardRpc("RestoreCheckpoint", [&]() -> grpc::Status {
    if (grpc::Status auth = CheckCaller(*ctx); !auth.ok()) return auth;
    if (!Admit()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("restoring a checkpoint into session ", request->session(),
                                       ": this worker is shutting down (SIGTERM)"));
    }
    const Admitted admitted{this};  // Done() however the handler ends
    grpc::Status status = ToGrpcStatus(worker_->RestoreCheckpoint(*request));
    return status;
  });
}

}  // namespace meshrt
