// The coordinator's gRPC adapter: checks the bearer token (when one is configured), converts
// messages and delegates to Coordinator. No logic.
#ifndef MESHRT_COORDINATOR_GRPC_COORDINATOR_SERVICE_H_
#define MESHRT_COORDINATOR_GRPC_COORDINATOR_SERVICE_H_

#include "coordinator/coordinator.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/grpc_util.h"

namespace meshrt {

class GrpcCoordinatorService final : public v1::Coordinator::Service {
 public:
  // `coordinator` is borrowed and must outlive the service. With a token in `security`, every
  // RPC (workers' and clients' alike) must carry it, or fails with Unauthenticated.
  explicit GrpcCoordinatorService(Coordinator* coordinator, Security security = Security())
      : coordinator_(coordinator), security_(std::move(security)) {}

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
  grpc::Status RunStep(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::RunStepResponse, v1::RunStepRequest>* stream) override;
  grpc::Status CloseSession(grpc::ServerContext*, const v1::CloseSessionRequest* request,
                            v1::CloseSessionResponse* response) override;
  grpc::Status SaveCheckpoint(grpc::ServerContext*, const v1::SaveCheckpointRequest* request,
                              v1::SaveCheckpointResponse* response) override;
  grpc::Status RestoreCheckpoint(grpc::ServerContext*, const v1::RestoreCheckpointRequest* request,
                                 v1::RestoreCheckpointResponse* response) override;

 private:
  Coordinator* coordinator_;
  const Security security_;
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_GRPC_COORDINATOR_SERVICE_H_
