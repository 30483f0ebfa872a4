// LocalCluster: an embedded cluster on loopback — one coordinator and N worker processes, started
// as child processes and stopped (SIGTERM, then SIGKILL) when the LocalCluster is destroyed. Used by
// `meshrt local`, `meshrt run --local N`, the demo and the end-to-end tests.
//
// Thread-compatible.
#ifndef MESHRT_CLIENT_LOCAL_CLUSTER_H_
#define MESHRT_CLIENT_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "rpc/grpc_util.h"

namespace meshrt {

struct LocalClusterOptions {
  int workers = 4;
  // Coordinator port; 0 picks a free one.
  int port = 0;
  // argv prefixes that start the daemons; flags are appended. Defaults: the `meshrt` binary's own
  // hidden subcommands (`/proc/self/exe coordinator`, `/proc/self/exe worker`).
  std::vector<std::string> coordinator_command = {"/proc/self/exe", "coordinator"};
  std::vector<std::string> worker_command = {"/proc/self/exe", "worker"};
  // Extra flags for every worker / the coordinator (e.g. "--heartbeat_timeout_ms=3000").
  std::vector<std::string> worker_flags;
  std::vector<std::string> coordinator_flags;
  // How long Start waits for the coordinator to answer and all workers to register.
  absl::Duration startup_timeout = absl::Seconds(30);
  // Where daemon stderr goes; empty = inherit.
  std::string log_dir;
  // Where the coordinator generates the cluster's tokens (`<dir>/<port>/`, rpc/auth.h) and the
  // workers find theirs. Empty = a private directory of this cluster's own, removed with it; the
  // default credentials dir (DefaultCredentialsDir) lets other `meshrt` commands on this machine
  // find them (`meshrt local`).
  std::string credentials_dir;
  // When coordinator_flags give the coordinator token files of their own (so it generates none):
  // the operator token file this LocalCluster waits for the workers with.
  std::string operator_token_file;
  // Directories whose files the graphs may read (text_windows): one --data_dir each for every
  // worker. Empty: the workers read no file.
  std::vector<std::string> data_dirs;
  // --checkpoint_root of the coordinator and every worker: checkpoints are named relative to it.
  // Empty: checkpoints are refused.
  std::string checkpoint_root;
  // The coordinator and every worker serve their HTTP side door (rpc/http_server.h) on a free
  // loopback port each (--metrics_port -1): the coordinator's dashboard and every daemon's
  // /metrics, behind the coordinator's operator token (a worker's: the cluster token).
  bool http = true;
  // With http: the coordinator's HTTP port, the workers' the next ones (worker i: base + 1 + i,
  // in start order); 0 = a free port each. Known ports let a Prometheus scrape config name them.
  int http_port_base = 0;
  // With http: a token file (one token a line, rpc/auth.h) every daemon's HTTP side door also
  // accepts (--metrics_token_file), so one scrape credential reads every /metrics.
  std::string metrics_token_file;
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();  // stops every process it started

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  // What a client of this cluster connects with: its generated client token (client.token) /
  // operator token.
  SecurityOptions client_security() const;
  SecurityOptions operator_security() const;
  // The generated cluster (member) token file: the workers' HTTP side doors accept it.
  std::string cluster_token_file() const;
  // A ClientOptions for address() with client_security().
  ClientOptions client_options() const;
  // The coordinator's HTTP port (options.http), else 0.
  int http_port() const { return http_port_; }
  // "http://127.0.0.1:PORT/?token=OPERATOR_TOKEN": the dashboard with the operator token in it,
  // as Jupyter prints its address (the server turns the token into a cookie and the page drops
  // it from the address). For the user's own terminal only: it is the credential. "" when
  // options.http is off or the token cannot be read.
  std::string dashboard_url() const;
  // Worker i's HTTP port (options.http; its /metrics), 0 when unknown or off.
  int worker_http_port(int i) const;
  int num_workers() const { return static_cast<int>(workers_.size()); }
  pid_t worker_pid(int i) const { return workers_[i]; }
  // kill -9 of worker i (it stays dead).
  absl::Status KillWorker(int i);
  // SIGTERM to worker i (a graceful shutdown: it drains and deregisters), then waits up to
  // `timeout` for it to exit. Returns its exit code (128 + N when killed by signal N);
  // DeadlineExceeded (and the worker is killed) when it did not exit in time.
  absl::StatusOr<int> TerminateWorker(int i, absl::Duration timeout);
  // Starts one more worker process and waits until `expected_alive` workers are registered.
  absl::Status AddWorker(int expected_alive);
  // kill -9 of the coordinator; after `down`, a new one on the same port with the same flags (and
  // the same generated tokens, kept in the credentials dir). Workers re-register by themselves.
  absl::Status RestartCoordinator(absl::Duration down = absl::ZeroDuration());
  // Waits until the coordinator lists `n` live workers.
  absl::Status WaitForWorkers(int n, absl::Duration timeout);

 private:
  LocalCluster() = default;
  absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_name);
  // Starts the coordinator on `port` (0: any) and waits until it listens; sets port_, address_.
  absl::Status StartCoordinator(int port, absl::Time deadline);

  LocalClusterOptions options_;
  std::string credentials_dir_;
  std::string own_dir_;  // the temp dir holding credentials_dir_, removed with us; "" = none
  std::string port_file_;  // where the coordinator writes the port it listens on
  std::string http_port_file_;  // ... and its HTTP port (options.http)
  int port_ = 0;
  int http_port_ = 0;  // the coordinator's HTTP port, 0 = none
  std::string address_;
  pid_t coordinator_ = -1;
  std::vector<pid_t> workers_;
};

}  // namespace meshrt

#endif  // MESHRT_CLIENT_LOCAL_CLUSTER_H_
