// The coordinator daemon: flags -> options -> gRPC server (with the standard health service).
#include "coordinator/coordinator_main.h"

#include <malloc.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/dashboard.h"
#include "coordinator/grpc_coordinator_service.h"
#include "coordinator/grpc_worker_client.h"
#include "core/ir/limits.h"
#include "grpcpp/health_check_service_interface.h"
#include "monitoring/metrics.h"
#include "monitoring/metrics_http.h"
#include "monitoring/process_metrics.h"
#include "rpc/auth.h"
#include "rpc/grpc_util.h"
#include "rpc/http_server.h"
#include "runtime/checkpoint_store.h"
#include "util/flags.h"
#include "util/logging.h"

namespace meshrt {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// --session_lease: "10s", "2500ms", "1m"; "0" = sessions never expire.
absl::StatusOr<absl::Duration> ParseSessionLease(const std::string& text) {
  absl::Duration d;
  if (!absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--session_lease=", text, " is not a duration; give one with a unit, e.g. 10s or 2500ms "
        "(0 = sessions never expire)"));
  }
  if (d != absl::ZeroDuration() && d < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--session_lease=", text, " is below 1s: a client that pauses briefly (a busy machine) "
        "would lose its sessions; give 1s or more, or 0 for sessions that never expire"));
  }
  return d;
}

}  // namespace

int CoordinatorMain(int argc, char** argv) {
  int64_t port = 7070;
  std::string host = "127.0.0.1";
  CoordinatorCredentialFlags credentials;
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 5000;
  int64_t collective_timeout_ms = 30000;
  int64_t worker_wait_ms = 10000;
  int64_t stuck_step_min_ms = 10000;
  double stuck_step_factor = 5;
  std::string port_file;
  int64_t health_port = 0;
  std::string checkpoint_root;
  std::string log_format = "text";
  std::string session_lease = "10s";
  std::string memory_limit = "auto";
  std::string profile_path;
  SecurityOptions security_options;
  HttpFlags http_flags;
  CoordinatorOptions options;
  RequestLimits& limits = options.limits;
  FlagSet flags("meshrt-coordinator [flags]",
                "Runs the meshrt coordinator: workers register with it; clients create sessions "
                "(graph + mesh + layout rules) and run steps through it.\n"
                "Example: meshrt-coordinator --port 7070");
  flags.Int("port", &port, "gRPC port to listen on; 0 picks a free one");
  flags.String("host", &host,
               "address to listen on; anything but loopback needs TLS or the token flags, or "
               "--insecure (0.0.0.0 = every interface)");
  flags.Int("heartbeat_interval_ms", &heartbeat_interval_ms, "how often workers heartbeat");
  flags.Int("heartbeat_timeout_ms", &heartbeat_timeout_ms,
            "a worker silent this long is dropped and its session fails");
  flags.Int("collective_timeout_ms", &collective_timeout_ms,
            "timeout of every collective (Gloo operation) on the workers");
  flags.Int("worker_wait_ms", &worker_wait_ms,
            "how long a new session waits for enough free workers");
  flags.String("session_lease", &session_lease,
               "a session whose client renewed nothing for this long (the client was killed, or "
               "lost its network) expires: its step in flight is cancelled, its workers are freed, "
               "and it is listed as expired for 10 minutes; clients renew every quarter of it. A "
               "duration with a unit (10s, 2500ms, 1m), at least 1s; 0 = sessions never expire");
  flags.String("memory_limit", &memory_limit,
               "the most bytes one worker may hold at a step's peak (the program's memory model: "
               "variables, feeds, live activations, for a step fetching the graph's outputs); a "
               "session over it is refused before any worker loads, naming the tensors that "
               "dominate and a layout that fits. A byte count (8G, 512M, 1048576), auto = each "
               "worker's available memory as it reported it at registration, or none");
  flags.String("profile", &profile_path,
               "hardware profile file (`meshrt calibrate --out FILE` writes one) the planner uses "
               "for sessions created with auto_layout (`--layout auto`); default: built-in "
               "figures with placeholder collective costs");
  flags.Int("stuck_step_min_ms", &stuck_step_min_ms,
            "a step that runs longer than this and than --stuck_step_factor times the session's "
            "median step time is stuck: its session fails naming the rank the others wait for "
            "(from the workers' heartbeats), unless that rank is still computing (its step "
            "thread used >= 25% of a core over the last second): then it is only slow, logged "
            "once as a WARNING, and fails once the rank has not computed for this long; "
            "0 = never");
  flags.Double("stuck_step_factor", &stuck_step_factor,
               "see --stuck_step_min_ms: how many times its session's median step time a step "
               "may take");
  flags.String("port_file", &port_file,
               "write the bound port to this file once serving (for --port 0)");
  flags.Int("health_port", &health_port,
            "also serve the standard gRPC health service, alone and in plaintext, on this port "
            "(for Kubernetes' gRPC probes, which cannot speak TLS); 0 = off");
  flags.String("checkpoint_root", &checkpoint_root,
               "clients name checkpoints relative to this directory (on a filesystem shared with "
               "every worker, which needs the same --checkpoint_root), and no checkpoint is "
               "written or read outside it; empty = checkpoints are refused");
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
  flags.String("auth_token_file", &credentials.auth_token_file,
               "file of client tokens, one per line: \"NAME TOKEN\" (NAME owns the sessions the "
               "token creates) or \"TOKEN\"; default: none given = generate all three tokens in "
               "--credentials_dir/<port>/");
  flags.String("operator_token_file", &credentials.operator_token_file,
               "file with the operator token: may list and close every session");
  flags.String("cluster_token_file", &credentials.cluster_token_file,
               "file with the cluster token the workers present (worker registration, heartbeats, "
               "the KV store); the same file on every worker");
  flags.String("credentials_dir", &credentials.credentials_dir,
               "where generated tokens are written (<dir>/<port>/client.token, operator.token, "
               "cluster.token; mode 0600) and found by the CLI and workers on this machine "
               "(default: $MESHRT_HOME, else ~/.meshrt)");
  flags.Bool("insecure", &credentials.insecure,
             "allow listening beyond loopback without TLS or tokens, and accept any caller for "
             "every role that has no token: anyone who reaches the port can read sessions and "
             "models and register workers");
  AddHttpFlags(&flags, &http_flags,
               "Prometheus metrics at /metrics and the dashboard at / (open "
               "http://HOST:PORT/?token=OPERATOR_TOKEN)");
  AddLogFormatFlag(&flags, &log_format);
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
  if (std::optional<int> done = HandleVersionAndLogFormat(flags, "meshrt-coordinator", log_format)) {
    return *done;
  }
  absl::StatusOr<absl::Duration> lease = ParseSessionLease(session_lease);
  if (!lease.ok()) {
    std::fprintf(stderr, "meshrt-coordinator: %s\n", std::string(lease.status().message()).c_str());
    return 2;
  }
  options.session_lease = *lease;
  absl::StatusOr<int64_t> limit = ParseMemoryLimitFlag(memory_limit);
  if (!limit.ok()) {
    std::fprintf(stderr, "meshrt-coordinator: %s\n", std::string(limit.status().message()).c_str());
    return 2;
  }
  options.memory_limit = *limit;
  if (!profile_path.empty()) {
    absl::StatusOr<HardwareProfile> profile = LoadHardwareProfile(profile_path);
    if (!profile.ok()) {
      std::fprintf(stderr, "meshrt-coordinator: --profile: %s\n",
                   std::string(profile.status().message()).c_str());
      return 2;
    }
    options.profile = *std::move(profile);
    options.profile_path = profile_path;
  }
  if (stuck_step_min_ms < 0 || !(stuck_step_factor >= 1)) {
    std::fprintf(stderr,
                 "meshrt-coordinator: --stuck_step_min_ms must be >= 0 (0 = no watchdog) and "
                 "--stuck_step_factor >= 1\n");
    return 2;
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
  if (absl::Status s = ServeCheck("meshrt-coordinator", host, security->server_tls(),
                                  credentials.any_token(), credentials.insecure);
      !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
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
  SetDaemonLogName("coordinator");
  // As in the worker (worker_main.cc): every step passes the whole feeds and fetches through
  // here, in gRPC's read buffers and the assembled tensors; by default glibc returns big freed
  // blocks to the kernel and the next step pays the page faults and the zeroing again (most of
  // the coordinator's page faults in cluster_bench were in gRPC's socket reads). So no mmap at
  // all and up to 1 GiB of free heap top kept: the resident size stays at its high-water mark.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  options.checkpoint_root = checkpoint_root;
  options.heartbeat_interval = absl::Milliseconds(heartbeat_interval_ms);
  options.heartbeat_timeout = absl::Milliseconds(heartbeat_timeout_ms);
  options.collective_timeout = absl::Milliseconds(collective_timeout_ms);
  options.default_worker_wait = absl::Milliseconds(worker_wait_ms);
  options.stuck_step.min = absl::Milliseconds(stuck_step_min_ms);
  options.stuck_step.factor = stuck_step_factor;
  GrpcWorkerClientFactory factory(*security);
  Coordinator coordinator(options, &factory);
  GrpcCoordinatorService service(&coordinator, Authenticator({}));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServer(&builder);
  int bound = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", port), MakeServerCredentials(*security), &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    std::fprintf(stderr,
                 "meshrt-coordinator: cannot listen on %s:%lld: the port is in use (by another "
                 "coordinator?) or the address is not this machine's\n",
                 host.c_str(),
                 static_cast<long long>(port));
    return 1;
  }
  std::string generated;
  absl::StatusOr<Authenticator::Options> auth =
      LoadCoordinatorCredentials(credentials, bound, &generated);
  if (!auth.ok()) {
    std::fprintf(stderr, "meshrt-coordinator: %s\n", std::string(auth.status().message()).c_str());
    server->Shutdown(std::chrono::system_clock::now());
    return 2;
  }
  // The HTTP side door (rpc/http_server.h): operators' tokens and --metrics_token_file's.
  HttpServer http;
  // Prometheus metrics (coordinator/coordinator_metrics.h and the process's).
  MetricsRegistry& metrics = coordinator.metrics().registry();
  AddProcessMetrics(&metrics);
  ServeMetrics(&http, &metrics);
  RegisterDashboard(&coordinator, &http);  // coordinator/dashboard.h: / and /api/*
  if (http_flags.port != 0) {
    std::vector<std::string> operator_tokens;
    for (const Credential& c : auth->operators) operator_tokens.push_back(c.token);
    absl::StatusOr<HttpServerOptions> http_options = StartFromFlags(
        &http, http_flags, host, std::move(operator_tokens), credentials.insecure);
    if (!http_options.ok()) {
      std::fprintf(stderr, "meshrt-coordinator: %s\n",
                   std::string(http_options.status().message()).c_str());
      server->Shutdown(std::chrono::system_clock::now());
      return 2;
    }
    LogInfo("meshrt-coordinator: metrics on ", HttpAddress(http_options->host, http.port()),
            "/metrics, the dashboard at ", HttpAddress(http_options->host, http.port()), "/ (",
            http_options->tokens.empty() ? "open to anyone who reaches it"
                                         : "the operator token required",
            ")");
  }
  const Authenticator authenticator(*auth);
  const std::string auth_description = authenticator.Describe();
  service.SetAuthenticator(authenticator);
  if (!generated.empty()) {
    LogInfo("meshrt-coordinator: generated credentials in ", generated, "/ (", kClientTokenFile,
            " for clients, ", kOperatorTokenFile, ", ", kClusterTokenFile,
            " for workers); the CLI and workers on this machine find them there");
  }
  if (credentials.insecure) {
    LogWarning("meshrt-coordinator: --insecure: ",
               credentials.any_token()
                   ? "roles without a token accept any caller"
                   : "no credentials: anyone who reaches the port can use every session, read "
                     "models and register workers");
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
  LogInfo("meshrt-coordinator: serving on ", host, ":", bound, " (", security->Describe(), "; ",
          auth_description, "; session lease ",
          options.session_lease == absl::ZeroDuration()
              ? std::string("off")
              : absl::FormatDuration(options.session_lease),
          ")");
  while (!g_stop.load()) absl::SleepFor(absl::Milliseconds(50));
  LogInfo("meshrt-coordinator: stopping");
  SetHealth({server.get(), health.get()}, "meshrt.v1.Coordinator", false);
  if (health != nullptr) health->Shutdown(std::chrono::system_clock::now());
  http.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace meshrt
