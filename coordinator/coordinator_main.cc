// The coordinator daemon: flags -> options -> gRPC server (with the standard health service).
#include "coordinator/coordinator_main.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/grpc_coordinator_service.h"
#include "coordinator/grpc_worker_client.h"
#include "core/limits.h"
#include "core/logging.h"
#include "grpcpp/health_check_service_interface.h"
#include "rpc/grpc_util.h"
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
  SecurityOptions security_options;
  CoordinatorOptions options;
  RequestLimits& limits = options.limits;
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
  flags.Int(kMaxGraphBytesFlag, &limits.max_graph_bytes,
            "largest CreateSession request (serialised graph, mesh and layout rules), in bytes");
  flags.Int(kMaxOpsFlag, &limits.max_ops, "most ops in one graph, counting every while_loop body");
  flags.Int(kMaxInputsPerOpFlag, &limits.max_inputs_per_op, "most inputs of one op");
  flags.Int(kMaxNameLengthFlag, &limits.max_name_length,
            "longest op, tensor, dim, attr or mesh dim name, in bytes");
  flags.Int(kMaxDimsPerShapeFlag, &limits.max_dims_per_shape, "most dims of one tensor shape");
  flags.Int(kMaxMeshDimsFlag, &limits.max_mesh_dims, "most dims of a session's mesh");
  flags.Int(kMaxMeshProcessorsFlag, &limits.max_mesh_processors,
            "most processors (= workers) of a session's mesh");
  flags.Int(kMaxElementsPerTensorFlag, &limits.max_elements_per_tensor,
            "most elements of one (whole, unsliced) tensor of a graph");
  flags.Int(kMaxWhileLoopDepthFlag, &limits.max_while_loop_depth,
            "deepest nesting of while_loop bodies");
  flags.Int(kMaxAttrListLengthFlag, &limits.max_attr_list_length,
            "most values of one list attr of an op");
  flags.Int("max_kv_keys_per_processor", &options.kv_keys_per_processor,
            "KV store quota of a session: keys per processor of its mesh");
  flags.Int("max_kv_bytes_per_processor", &options.kv_bytes_per_processor,
            "KV store quota of a session: bytes per processor of its mesh");
  flags.Int("max_kv_value_bytes", &options.kv.max_value_bytes, "largest value in the KV store");
  flags.Int("max_kv_keys", &options.kv.max_keys,
            "most keys in the KV store, all sessions together");
  flags.Int("max_kv_bytes", &options.kv.max_bytes,
            "most bytes in the KV store, all sessions together (keys, values and 64 bytes of "
            "overhead per key)");
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
  if (absl::Status s = CheckRequestLimits(limits); !s.ok()) {
    std::fprintf(stderr, "meshrt-coordinator: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  for (const auto& [value, flag] :
       {std::pair<int64_t, const char*>{options.kv_keys_per_processor, "max_kv_keys_per_processor"},
        {options.kv_bytes_per_processor, "max_kv_bytes_per_processor"},
        {options.kv.max_value_bytes, "max_kv_value_bytes"},
        {options.kv.max_keys, "max_kv_keys"},
        {options.kv.max_bytes, "max_kv_bytes"}}) {
    if (value < 1) {
      std::fprintf(stderr, "meshrt-coordinator: --%s is %lld; it must be >= 1\n", flag,
                   static_cast<long long>(value));
      return 2;
    }
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
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  signal(SIGPIPE, SIG_IGN);

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
