// The worker's gRPC adapter: converts messages and delegates to Worker. No logic of its own.
#ifndef MESHRT_WORKER_GRPC_WORKER_SERVICE_H_
#define MESHRT_WORKER_GRPC_WORKER_SERVICE_H_

#include "proto/worker.grpc.pb.h"
#include "worker/worker.h"

namespace meshrt {

class GrpcWorkerService final : public v1::Worker::Service {
 public:
  // `worker` is borrowed and must outlive the service.
  explicit GrpcWorkerService(Worker* worker) : worker_(worker) {}

  grpc::Status LoadSession(grpc::ServerContext* context, const v1::SessionSpec* request,
                           v1::LoadSessionResponse* response) override;
  grpc::Status RunStep(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::RunStepResponse, v1::RunStepRequest>* stream) override;
  grpc::Status CloseSession(grpc::ServerContext* context, const v1::CloseSessionRequest* request,
                            v1::CloseSessionResponse* response) override;

 private:
  Worker* worker_;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_GRPC_WORKER_SERVICE_H_
