// The coordinator's gRPC adapter: authenticates the caller (rpc/auth.h: member RPCs need the
// cluster token, client RPCs a client or operator token, session RPCs the session's owner), converts
// messages and delegates to Coordinator. An exception thrown below a handler becomes an Internal
// error carrying its message; it never ends the process.
#ifndef MESHRT_COORDINATOR_GRPC_COORDINATOR_SERVICE_H_
#define MESHRT_COORDINATOR_GRPC_COORDINATOR_SERVICE_H_

#include <memory>

#include "absl/synchronization/mutex.h"
#include "coordinator/coordinator.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"

namespace meshrt {

class GrpcCoordinatorService final : public v1::Coordinator::Service {
 public:
  // `coordinator` is borrowed and must outlive the service.
  GrpcCoordinatorService(Coordinator* coordinator, Authenticator auth);

  // Replaces the credentials (main sets the generated ones once the port is bound: until then
  // the service is built with none and refuses every call). Thread-safe.
  void SetAuthenticator(Authenticator auth);

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status DeregisterWorker(grpc::ServerContext*, const v1::DeregisterWorkerRequest* request,
                                v1::DeregisterWorkerResponse* response) override;
  grpc::Status KvSet(grpc::ServerContext*, const v1::KvSetRequest* request,
                     v1::KvSetResponse* response) override;
  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;
  grpc::Status CreateSession(grpc::ServerContext*, const v1::CreateSessionRequest* request,
                             v1::CreateSessionResponse* response) override;
  // RunStep, served on raw frames (rpc/step_stream.h) in place of the generated RunStep.
  grpc::Status RunStepFrames(grpc::ServerContext*, StepServerStream* stream);
  grpc::Status CloseSession(grpc::ServerContext*, const v1::CloseSessionRequest* request,
                            v1::CloseSessionResponse* response) override;
  // A client renews its own sessions only (Coordinator::KeepAlive checks the owner per session).
  grpc::Status KeepAlive(grpc::ServerContext*, const v1::KeepAliveRequest* request,
                         v1::KeepAliveResponse* response) override;
  grpc::Status SaveCheckpoint(grpc::ServerContext*, const v1::SaveCheckpointRequest* request,
                              v1::SaveCheckpointResponse* response) override;
  grpc::Status RestoreCheckpoint(grpc::ServerContext*, const v1::RestoreCheckpointRequest* request,
                                 v1::RestoreCheckpointResponse* response) override;
  // A client records metrics of its own sessions only.
  grpc::Status RecordMetrics(grpc::ServerContext*, const v1::RecordMetricsRequest* request,
                             v1::RecordMetricsResponse*) override;

 private:
  // Runs `fn` (returning grpc::Status) for a member of the cluster, inside GuardRpc.
  template <typename Fn>
  grpc::Status Member(const char* rpc, grpc::ServerContext* ctx, Fn&& fn);
  // Runs `fn(const Caller&)` for an authenticated client, inside GuardRpc; with `session`, only
  // for a caller that may use that session.
  template <typename Fn>
  grpc::Status Client(const char* rpc, grpc::ServerContext* ctx, const std::string* session,
                      Fn&& fn);

  std::shared_ptr<const Authenticator> auth() const;
  // Counts `status` in the coordinator's metrics (meshrt_coordinator_rpc_errors_total) as the
  // answer to `rpc`, and returns it.
  grpc::Status Counted(const char* rpc, grpc::Status status);

  Coordinator* coordinator_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Authenticator> auth_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_GRPC_COORDINATOR_SERVICE_H_
