// The coordinator daemon: flags -> options -> gRPC server (with the standard health service).
#include "coordinator/coordinator_main.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/grpc_coordinator_service.h"
#include "coordinator/grpc_worker_client.h"
#include "core/logging.h"
#include "grpcpp/health_check_service_interface.h"
#include "rpc/grpc_util.h"
#include "runtime/checkpoint_store.h"
#include "util/flags.h"

namespace meshrt {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

}  // namespace

int CoordinatorMain(int argc, char** argv) {
  int64_t port = 7070;
  std::string host = "0.0.0.0";
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 5000;
  int64_t collective_timeout_ms = 30000;
  int64_t worker_wait_ms = 10000;
  std::string port_file;
  int64_t health_port = 0;
  std::string checkpoint_root;
  SecurityOptions security_options;
  FlagSet flags("meshrt-coordinator [flags]",
                "Runs the meshrt coordinator: workers register with it; clients create sessions "
                "(graph + mesh + layout rules) and run steps through it.\n"
                "Example: meshrt-coordinator --port 7070");
  flags.Int("port", &port, "gRPC port to listen on; 0 picks a free one");
  flags.String("host", &host, "address to listen on");
  flags.Int("heartbeat_interval_ms", &heartbeat_interval_ms, "how often workers heartbeat");
  flags.Int("heartbeat_timeout_ms", &heartbeat_timeout_ms,
            "a worker silent this long is dropped and its session fails");
  flags.Int("collective_timeout_ms", &collective_timeout_ms,
            "timeout of every collective (Gloo operation) on the workers");
  flags.Int("worker_wait_ms", &worker_wait_ms,
            "how long a new session waits for enough free workers");
  flags.String("port_file", &port_file,
               "write the bound port to this file once serving (for --port 0)");
  flags.Int("health_port", &health_port,
            "also serve the standard gRPC health service, alone and in plaintext, on this port "
            "(for Kubernetes' gRPC probes, which cannot speak TLS); 0 = off");
  flags.String("checkpoint_root", &checkpoint_root,
               "clients name checkpoints relative to this directory (on a filesystem shared with "
               "every worker, which needs the same --checkpoint_root), and no checkpoint is "
               "written or read outside it; empty = checkpoints are refused");
  AddSecurityFlags(&flags, &security_options, /*server=*/true);
  auto positional = flags.Parse(argc, argv);
  if (!positional.ok()) {
    std::fprintf(stderr, "meshrt-coordinator: %s\n",
                 std::string(positional.status().message()).c_str());
    return 2;
  }
  if (flags.help()) {
    std::cout << flags.Help();
    return 0;
  }
  absl::StatusOr<Security> security = LoadSecurity(security_options);
  if (!security.ok()) {
    std::fprintf(stderr, "meshrt-coordinator: %s\n",
                 std::string(security.status().message()).c_str());
    return 2;
  }
  if (security->server_tls() && security->ca_pem.empty()) {
    std::fprintf(stderr,
                 "meshrt-coordinator: --tls_cert needs --tls_ca too: the coordinator verifies the "
                 "workers it calls with it\n");
    return 2;
  }
  if (!checkpoint_root.empty()) {
    // Refuse a root that does not exist now, rather than at the first save.
    absl::StatusOr<CheckpointRoot> root = CheckpointRoot::Open(checkpoint_root);
    if (!root.ok()) {
      std::fprintf(stderr, "meshrt-coordinator: %s\n",
                   std::string(root.status().message()).c_str());
      return 2;
    }
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  signal(SIGPIPE, SIG_IGN);

  CoordinatorOptions options;
  options.checkpoint_root = checkpoint_root;
  options.heartbeat_interval = absl::Milliseconds(heartbeat_interval_ms);
  options.heartbeat_timeout = absl::Milliseconds(heartbeat_timeout_ms);
  options.collective_timeout = absl::Milliseconds(collective_timeout_ms);
  options.default_worker_wait = absl::Milliseconds(worker_wait_ms);
  GrpcWorkerClientFactory factory(*security);
  Coordinator coordinator(options, &factory);
  GrpcCoordinatorService service(&coordinator, *security);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServer(&builder);
  int bound = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", port), MakeServerCredentials(*security), &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    std::fprintf(stderr, "meshrt-coordinator: cannot listen on %s:%lld\n", host.c_str(),
                 static_cast<long long>(port));
    return 1;
  }
  std::unique_ptr<grpc::Server> health;
  if (health_port > 0) {
    health = StartHealthServer(host, static_cast<int>(health_port));
    if (health == nullptr) {
      std::fprintf(stderr, "meshrt-coordinator: cannot listen on %s:%lld (--health_port)\n",
                   host.c_str(), static_cast<long long>(health_port));
      return 1;
    }
  }
  SetHealth({server.get(), health.get()}, "meshrt.v1.Coordinator", true);
  if (!port_file.empty()) {
    std::string tmp = port_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d\n", bound);
      std::fclose(f);
      std::rename(tmp.c_str(), port_file.c_str());
    }
  }
  LogInfo("meshrt-coordinator: serving on ", host, ":", bound, " (", security->Describe(), ")");
  while (!g_stop.load()) absl::SleepFor(absl::Milliseconds(50));
  LogInfo("meshrt-coordinator: stopping");
  SetHealth({server.get(), health.get()}, "meshrt.v1.Coordinator", false);
  if (health != nullptr) health->Shutdown(std::chrono::system_clock::now());
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace meshrt
