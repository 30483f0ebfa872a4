// The worker's gRPC adapter: checks the bearer token (when one is configured), converts messages
// and delegates to Worker. No logic of its own.
#ifndef MESHRT_WORKER_GRPC_WORKER_SERVICE_H_
#define MESHRT_WORKER_GRPC_WORKER_SERVICE_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "worker/worker.h"

namespace meshrt {

class GrpcWorkerService final : public v1::Worker::Service {
 public:
  // `worker` is borrowed and must outlive the service. With a token in `security`, every RPC
  // must carry it (the coordinator sends it), or fails with Unauthenticated.
  explicit GrpcWorkerService(Worker* worker, Security security = Security())
      : worker_(worker), security_(std::move(security)) {}

  grpc::Status LoadSession(grpc::ServerContext* context, const v1::SessionSpec* request,
                           v1::LoadSessionResponse* response) override;
  grpc::Status RunStep(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::RunStepResponse, v1::RunStepRequest>* stream) override;
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

  Worker* worker_;
  const Security security_;
  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GRPC_WORKER_SERVICE_H_
