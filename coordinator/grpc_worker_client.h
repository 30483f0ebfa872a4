// WorkerClient over gRPC (proto/worker.proto), with tensors streamed in ~1 MiB chunks.
#ifndef MESHRT_COORDINATOR_GRPC_WORKER_CLIENT_H_
#define MESHRT_COORDINATOR_GRPC_WORKER_CLIENT_H_

#include "coordinator/worker_client.h"

namespace meshrt {

class GrpcWorkerClientFactory : public WorkerClientFactory {
 public:
  std::unique_ptr<WorkerClient> Connect(const std::string& address) override;
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_GRPC_WORKER_CLIENT_H_
