// WorkerClient over gRPC (proto/worker.proto), with tensors streamed in ~4 MiB chunks.
#ifndef MESHRT_COORDINATOR_GRPC_WORKER_CLIENT_H_
#define MESHRT_COORDINATOR_GRPC_WORKER_CLIENT_H_

#include "coordinator/worker_client.h"
#include "rpc/grpc_util.h"

namespace meshrt {

// Connects with `security`'s TLS settings (presenting the coordinator's certificate to workers that
// require client certificates); every call carries the worker's own secret as its bearer token.
class GrpcWorkerClientFactory : public WorkerClientFactory {
 public:
  explicit GrpcWorkerClientFactory(Security security = Security())
      : security_(std::move(security)) {}
  std::unique_ptr<WorkerClient> Connect(const std::string& address,
                                        const std::string& secret) override;

 private:
  const Security security_;
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_GRPC_WORKER_CLIENT_H_
