// CoordinatorServer: a running coordinator daemon — the Coordinator (coordinator.h) behind its gRPC
// adapter, with the standard health service, the optional plaintext health port, and the HTTP
// side door (Prometheus metrics and the dashboard).
//
//   CoordinatorServerOptions   what `meshrt-coordinator`'s flags say, typed (coordinator_main.cc).
//   CheckCoordinatorServerOptions   the checks that need no file and no network.
//   CoordinatorServer::Start   loads the credentials, listens, returns a running server.
//   Wait / Shutdown            serve until told to stop; then stop, bounded.
//
// Thread-safety: Start once; Wait and Shutdown from one thread (the daemon's main), the stop flag
// from any (a signal handler).
#ifndef MESHRT_COORDINATOR_COORDINATOR_SERVER_H_
#define MESHRT_COORDINATOR_COORDINATOR_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "rpc/auth.h"
#include "rpc/grpc_util.h"
#include "rpc/http_server.h"

namespace meshrt {

struct CoordinatorServerOptions {
  // --host / --port: where the gRPC service listens; port 0 picks a free one.
  std::string host = "127.0.0.1";
  int64_t port = 7070;
  // --port_file: the bound port is written here once serving; "" = nowhere.
  std::string port_file;
  // --health_port: the plaintext health service alone on this port; 0 = off.
  int64_t health_port = 0;
  // --tls_*: transport security (AddSecurityFlags).
  SecurityOptions security;
  // --auth_token_file, --operator_token_file, --cluster_token_file, --credentials_dir, --insecure.
  CoordinatorCredentialFlags credentials;
  // --metrics_port and friends: metrics and the dashboard on HTTP; port 0 = off.
  HttpFlags http;
  // The logic's options: timeouts, leases, limits, quotas, the memory limit, the planner's
  // profile, the checkpoint root (each from its flag).
  CoordinatorOptions coordinator;
};

// --session_lease: "10s", "2500ms", "1m"; "0" = sessions never expire. InvalidArgument naming the
// flag for something else or for less than 1s.
absl::StatusOr<absl::Duration> ParseSessionLease(const std::string& text);

// InvalidArgument naming the flag for options no coordinator can start with: a negative
// --stuck_step_min_ms or a --stuck_step_factor below 1, request limits CheckRequestLimits refuses,
// a KV quota or cap below 1. Reads no file.
absl::Status CheckCoordinatorServerOptions(const CoordinatorServerOptions& options);

class CoordinatorServer {
 public:
  // Checks `options`, loads the TLS files, checks the checkpoint root exists, listens, loads or
  // generates the credentials (for the bound port) and serves. `stop` (borrowed, may be null;
  // e.g. a signal handler's flag) ends Wait(). Errors: usage errors (rpc/daemon_exit.h: options,
  // TLS, credentials, --checkpoint_root, the metrics flags) naming the flag; Unavailable when a
  // port cannot be bound. Logs what it serves, as `meshrt-coordinator`.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      CoordinatorServerOptions options, const std::atomic<bool>* stop);
  ~CoordinatorServer();  // Shutdown() unless done

  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // The bound gRPC port.
  int port() const;
  // The logic; lives as long as this server.
  Coordinator& coordinator();

  // Returns once `stop` is set (polled every 50 ms) or `timeout` passed; whether `stop` was set.
  bool Wait(absl::Duration timeout = absl::InfiniteDuration());

  // Reports NOT_SERVING, stops the health and HTTP servers, and the gRPC server with a 2 s
  // deadline for the calls in flight (then they are cancelled). Idempotent.
  void Shutdown();

 private:
  struct Parts;
  explicit CoordinatorServer(std::unique_ptr<Parts> parts);
  // The steps of Start, in order.
  absl::Status Prepare();
  absl::Status Listen();
  absl::Status Authenticate();
  absl::Status StartHttp();
  absl::Status Serve();

  std::unique_ptr<Parts> parts_;
  bool shut_down_ = false;
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_COORDINATOR_SERVER_H_
