// WorkerServer: a running worker daemon — the gRPC service over a Worker, the optional health and
// metrics servers, and the WorkerAgent that keeps it registered with the coordinator.
//
//   WorkerServerOptions   what `meshrt-worker`'s flags say, typed (worker_main.cc fills it).
//   CheckWorkerServerOptions   the checks that need no file and no network.
//   WorkerServer::Start   loads the credentials, listens, registers; returns a running server.
//   Wait / Shutdown       serve until told to stop; then drain (worker_agent.h) and stop, bounded.
//
// Thread-safety: Start once; Wait and Shutdown from one thread (the daemon's main), the stop flag
// from any (a signal handler).
#ifndef MESHRT_WORKER_WORKER_SERVER_H_
#define MESHRT_WORKER_WORKER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/grpc_util.h"
#include "rpc/http_server.h"
#include "worker/worker.h"

namespace meshrt {

struct WorkerServerOptions {
  // --coordinator: the coordinator's HOST:PORT. Required.
  std::string coordinator;
  // --host / --port: where the gRPC service listens; port 0 picks a free one.
  std::string host = "127.0.0.1";
  int64_t port = 0;
  // --advertise_address: how the coordinator and peers reach this worker; "" = --host, or
  // 127.0.0.1 when --host is loopback or a wildcard.
  std::string advertise_address;
  // --gloo_address: what Gloo binds and advertises; "" = the advertised address.
  std::string gloo_address;
  // --register_timeout_s: give up when the coordinator has not answered for this long.
  absl::Duration register_timeout = absl::Seconds(120);
  // --drain_timeout_s: on shutdown, how long the step in flight may take to finish.
  absl::Duration drain_timeout = absl::Seconds(20);
  // --health_port: the plaintext health service alone on this port; 0 = off.
  int64_t health_port = 0;
  // --metrics_port and friends: Prometheus metrics on HTTP; port 0 = off.
  HttpFlags http;
  // --rank, parsed (ParseRank): the worker's stable rank; none = unranked.
  std::optional<int> rank;
  // --data_dir: the directories the graphs' ops may read under; none = no file.
  std::vector<std::string> data_dirs;
  // --checkpoint_root: checkpoints are written and read under it only; "" = none.
  std::string checkpoint_root;
  // --overlap_comm, parsed (ParseOverlap).
  Worker::Overlap overlap = Worker::Overlap::kChoose;
  // --debug_freeze_at_step / --debug_freeze_at_instruction (tests only): 0 = off.
  int64_t debug_freeze_at_step = 0;
  int64_t debug_freeze_at_instruction = -1;
  // --debug_spin_at_step / --debug_spin_at_instruction / --debug_spin_seconds (tests only).
  int64_t debug_spin_at_step = 0;
  int64_t debug_spin_at_instruction = -1;
  double debug_spin_seconds = 4;
  // --tls_*: transport security (AddSecurityFlags).
  SecurityOptions security;
  // --cluster_token_file: the token presented to the coordinator; "" = the one a coordinator on
  // this machine's loopback generated in `credentials_dir`.
  std::string cluster_token_file;
  // --credentials_dir: where such a coordinator keeps its tokens; "" = DefaultCredentialsDir().
  std::string credentials_dir;
  // --insecure: may listen beyond loopback without TLS or a token.
  bool insecure = false;
};

// --rank: an integer N >= 0, or a name ending in "-N" (a StatefulSet pod name: its ordinal N);
// empty = none. InvalidArgument naming the flag otherwise.
absl::StatusOr<std::optional<int>> ParseRank(const std::string& text);

// --overlap_comm's value: auto (kChoose), true / on / 1 (kOn), false / off / 0 (kOff);
// InvalidArgument naming the flag otherwise.
absl::StatusOr<Worker::Overlap> ParseOverlap(const std::string& text);

// The MemAvailable line of /proc/meminfo-format text ("MemAvailable:  123456 kB"), in bytes; 0
// when absent or malformed (unknown: the coordinator then does not check the memory limit).
int64_t MemAvailableBytes(const std::string& meminfo);

// InvalidArgument naming the flag for options no worker can start with: no coordinator, a
// --debug_spin_seconds outside [0, 3600]. Reads no file.
absl::Status CheckWorkerServerOptions(const WorkerServerOptions& options);

class WorkerServer {
 public:
  // Checks `options`, loads the credentials, listens, serves health and metrics and registers with
  // the coordinator (retrying for up to register_timeout). `stop` (borrowed, may be null; e.g. a
  // signal handler's flag) ends the registration retries and, later, Wait(). Errors: usage errors
  // (rpc/daemon_exit.h: options, credentials, --data_dir, --checkpoint_root, the metrics flags)
  // naming the flag; Unavailable when a port cannot be bound; the last registration error.
  // Logs what it serves, as `meshrt-worker`.
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Start(WorkerServerOptions options,
                                                             const std::atomic<bool>* stop);
  ~WorkerServer();  // Shutdown(2 s) unless done; joins the stopping thread

  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  // "HOST:PORT" the coordinator knows this worker by, and the bound gRPC port.
  const std::string& address() const;
  int port() const;
  // The id the coordinator gave at the latest registration.
  int worker_id() const;

  // Returns once `stop` is set (polled every 20 ms) or `timeout` passed; whether `stop` was set.
  bool Wait(absl::Duration timeout = absl::InfiniteDuration());

  // Leaves the cluster gracefully (WorkerAgent::Drain: up to drain_timeout for the step in
  // flight), then stops the servers. Returns whether they stopped within `timeout` after the
  // drain; if not, a step stuck in a collective still holds the gRPC server: the daemon exits
  // anyway, which closes this worker's Gloo connections so its peers fail fast. Call once.
  bool Shutdown(absl::Duration timeout);

 private:
  struct Parts;
  explicit WorkerServer(std::unique_ptr<Parts> parts);
  // The steps of Start, in order.
  absl::Status Prepare();
  absl::Status MakeWorker();
  absl::Status Listen();
  absl::Status StartMetrics();
  absl::Status Register();

  std::unique_ptr<Parts> parts_;
  std::thread stopper_;
  bool shut_down_ = false;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_WORKER_SERVER_H_
