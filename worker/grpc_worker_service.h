// The worker's gRPC adapter: accepts only its coordinator (every call must carry the worker's own
// secret, which it gave the coordinator at registration: rpc/auth.h), converts messages and
// delegates to Worker. No logic of its own; an exception below a handler becomes an error.
#ifndef MESHRT_WORKER_GRPC_WORKER_SERVICE_H_
#define MESHRT_WORKER_GRPC_WORKER_SERVICE_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"
#include "worker/worker.h"

namespace meshrt {

class GrpcWorkerService final : public v1::Worker::Service {
 public:
  // `worker` is borrowed and must outlive the service. Every RPC must carry `secret` as its
  // bearer token, or fails with PermissionDenied.
  GrpcWorkerService(Worker* worker, std::string secret);

  grpc::Status LoadSession(grpc::ServerContext* context, const v1::SessionSpec* request,
                           v1::LoadSessionResponse* response) override;
  // RunStep, served on raw frames (rpc/step_stream.h) in place of the generated RunStep.
  grpc::Status RunStepFrames(grpc::ServerContext* context, StepServerStream* stream);
  grpc::Status CloseSession(grpc::ServerContext* context, const v1::CloseSessionRequest* request,
                            v1::CloseSessionResponse* response) override;
  grpc::Status SaveCheckpoint(grpc::ServerContext* context,
                              const v1::WorkerSaveCheckpointRequest* request,
                              v1::WorkerSaveCheckpointResponse* response) override;
  grpc::Status RestoreCheckpoint(grpc::ServerContext* context,
                                 const v1::WorkerRestoreCheckpointRequest* request,
                                 v1::WorkerRestoreCheckpointResponse* response) override;

  // For a graceful shutdown: from now on refuses new sessions, steps and checkpoint saves and
  // restores (Unavailable, "shutting down"), then waits up to `timeout` for those calls in flight. Returns
  // whether none is left. Thread-safe; call once.
  bool Drain(absl::Duration timeout);

 private:
  // Counts a LoadSession or RunStep call in flight; false (and nothing counted) when draining.
  bool Admit();
  void Done();
  // Calls Done() when it goes out of scope, also when a handler throws.
  struct Admitted {
    GrpcWorkerService* service;
    ~Admitted() { service->Done(); }
  };

  grpc::Status CheckCaller(const grpc::ServerContext& ctx) const;

  Worker* worker_;
  const std::string secret_;
  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GRPC_WORKER_SERVICE_H_
