// The worker's view of the coordinator: registration, heartbeats, and the key-value store Gloo's
// rendezvous runs on. GrpcCoordinatorClient is the real one; tests may use their own.
#ifndef MESHRT_WORKER_COORDINATOR_CLIENT_H_
#define MESHRT_WORKER_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "runtime/kv_store.h"

namespace meshrt {

// The membership calls a worker makes (WorkerAgent, worker/worker_agent.h): each returns within
// `timeout`. Implementations are thread-safe.
class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual absl::StatusOr<v1::RegisterWorkerResponse> Register(
      const v1::RegisterWorkerRequest& request, absl::Duration timeout) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request,
                                                          absl::Duration timeout) = 0;
  virtual absl::Status Deregister(const v1::DeregisterWorkerRequest& request,
                                  absl::Duration timeout) = 0;
  // Replaces the bearer token of later calls (a generated token that appeared after start).
  virtual void set_token(const std::string& token) = 0;
};

// Thread-safe (gRPC stubs are).
class GrpcCoordinatorClient : public CoordinatorClient, public KeyValueStore {
 public:
  // Calls use `security`'s TLS settings and bearer token (the cluster token).
  explicit GrpcCoordinatorClient(const std::string& address, const Security& security = Security());

  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& request,
                                                      absl::Duration timeout) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request,
                                                  absl::Duration timeout) override;
  absl::Status Deregister(const v1::DeregisterWorkerRequest& request,
                          absl::Duration timeout) override;

  // KeyValueStore over the coordinator's KvSet / KvGet (Get blocks on the coordinator).
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

  const std::string& address() const { return address_; }
  void set_token(const std::string& token) override;

 private:
  void Attach(grpc::ClientContext* ctx) const;

  std::string address_;
  mutable absl::Mutex mu_;
  Security security_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_COORDINATOR_CLIENT_H_
