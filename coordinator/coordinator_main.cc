// The coordinator daemon: flags -> CoordinatorServerOptions -> CoordinatorServer::Start
// (coordinator_server.h), which serves until SIGINT/SIGTERM.
#include "coordinator/coordinator_main.h"

#include <malloc.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/coordinator_server.h"
#include "coordinator/memory_limit.h"
#include "core/ir/limits.h"
#include "core/planning/cost_model.h"
#include "rpc/daemon_exit.h"
#include "rpc/grpc_util.h"
#include "util/flags.h"

namespace meshrt {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// The flags' values as given: the options that need no conversion are bound in place, the rest
// are converted by OptionsFromFlags.
struct CoordinatorFlags {
  CoordinatorServerOptions server;
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 5000;
  int64_t collective_timeout_ms = 30000;
  int64_t worker_wait_ms = 10000;
  int64_t stuck_step_min_ms = 10000;
  double stuck_step_factor = 5;
  std::string log_format = "text";
  std::string session_lease = "10s";
  std::string memory_limit = "auto";
  std::string profile_path;
};

// Where it serves, its timeouts, leases, watchdog and checkpoint root.
void AddServingFlags(FlagSet* flags, CoordinatorFlags* f) {
  flags->Int("port", &f->server.port, "gRPC port to listen on; 0 picks a free one");
  flags->String("host", &f->server.host,
               "address to listen on; anything but loopback needs TLS or the token flags, or "
               "--insecure (0.0.0.0 = every interface)");
  flags->Int("heartbeat_interval_ms", &f->heartbeat_interval_ms, "how often workers heartbeat");
  flags->Int("heartbeat_timeout_ms", &f->heartbeat_timeout_ms,
            "a worker silent this long is dropped and its session fails");
  flags->Int("collective_timeout_ms", &f->collective_timeout_ms,
            "timeout of every collective (Gloo operation) on the workers");
  flags->Int("worker_wait_ms", &f->worker_wait_ms,
            "how long a new session waits for enough free workers");
  flags->String("session_lease", &f->session_lease,
               "a session whose client renewed nothing for this long (the client was killed, or "
               "lost its network) expires: its step in flight is cancelled, its workers are freed, "
               "and it is listed as expired for 10 minutes; clients renew every quarter of it. A "
               "duration with a unit (10s, 2500ms, 1m), at least 1s; 0 = sessions never expire");
  flags->String("memory_limit", &f->memory_limit,
               "the most bytes one worker may hold at a step's peak (the program's memory model: "
               "variables, feeds, live activations, for a step fetching the graph's outputs); a "
               "session over it is refused before any worker loads, naming the tensors that "
               "dominate and a layout that fits. A byte count (8G, 512M, 1048576), auto = each "
               "worker's available memory as it reported it at registration, or none");
  flags->String("profile", &f->profile_path,
               "hardware profile file (`meshrt calibrate --out FILE` writes one) the planner uses "
               "for sessions created with auto_layout (`--layout auto`); default: built-in "
               "figures with placeholder collective costs");
  flags->Int("stuck_step_min_ms", &f->stuck_step_min_ms,
            "a step that runs longer than this and than --stuck_step_factor times the session's "
            "median step time is stuck: its session fails naming the rank the others wait for "
            "(from the workers' heartbeats), unless that rank is still computing (its step "
            "thread used >= 25% of a core over the last second): then it is only slow, logged "
            "once as a WARNING, and fails once the rank has not computed for this long; "
            "0 = never");
  flags->Double("stuck_step_factor", &f->stuck_step_factor,
               "see --stuck_step_min_ms: how many times its session's median step time a step "
               "may take");
  flags->String("port_file", &f->server.port_file,
               "write the bound port to this file once serving (for --port 0)");
  flags->Int("health_port", &f->server.health_port,
            "also serve the standard gRPC health service, alone and in plaintext, on this port "
            "(for Kubernetes' gRPC probes, which cannot speak TLS); 0 = off");
  flags->String("checkpoint_root", &f->server.coordinator.checkpoint_root,
               "clients name checkpoints relative to this directory (on a filesystem shared with "
               "every worker, which needs the same --checkpoint_root), and no checkpoint is "
               "written or read outside it; empty = checkpoints are refused");
}

// The caps on one request and on the KV store.
void AddLimitFlags(FlagSet* flags, CoordinatorFlags* f) {
  flags->Int(kMaxGraphBytesFlag, &f->server.coordinator.limits.max_graph_bytes,
            "largest CreateSession request (serialised graph, mesh and layout rules), in bytes");
  flags->Int(kMaxOpsFlag, &f->server.coordinator.limits.max_ops, "most ops in one graph, counting every while_loop body");
  flags->Int(kMaxInputsPerOpFlag, &f->server.coordinator.limits.max_inputs_per_op, "most inputs of one op");
  flags->Int(kMaxNameLengthFlag, &f->server.coordinator.limits.max_name_length,
            "longest op, tensor, dim, attr or mesh dim name, in bytes");
  flags->Int(kMaxDimsPerShapeFlag, &f->server.coordinator.limits.max_dims_per_shape, "most dims of one tensor shape");
  flags->Int(kMaxMeshDimsFlag, &f->server.coordinator.limits.max_mesh_dims, "most dims of a session's mesh");
  flags->Int(kMaxMeshProcessorsFlag, &f->server.coordinator.limits.max_mesh_processors,
            "most processors (= workers) of a session's mesh");
  flags->Int(kMaxElementsPerTensorFlag, &f->server.coordinator.limits.max_elements_per_tensor,
            "most elements of one (whole, unsliced) tensor of a graph");
  flags->Int(kMaxWhileLoopDepthFlag, &f->server.coordinator.limits.max_while_loop_depth,
            "deepest nesting of while_loop bodies");
  flags->Int(kMaxAttrListLengthFlag, &f->server.coordinator.limits.max_attr_list_length,
            "most values of one list attr of an op");
  flags->Int("max_kv_keys_per_processor", &f->server.coordinator.kv_keys_per_processor,
            "KV store quota of a session: keys per processor of its mesh");
  flags->Int("max_kv_bytes_per_processor", &f->server.coordinator.kv_bytes_per_processor,
            "KV store quota of a session: bytes per processor of its mesh");
  flags->Int("max_kv_value_bytes", &f->server.coordinator.kv.max_value_bytes, "largest value in the KV store");
  flags->Int("max_kv_keys", &f->server.coordinator.kv.max_keys,
            "most keys in the KV store, all sessions together");
  flags->Int("max_kv_bytes", &f->server.coordinator.kv.max_bytes,
            "most bytes in the KV store, all sessions together (keys, values and 64 bytes of "
            "overhead per key)");
}

// Every flag, in --help's order.
void AddCoordinatorFlags(FlagSet* flags, CoordinatorFlags* f) {
  AddServingFlags(flags, f);
  AddLimitFlags(flags, f);
  AddSecurityFlags(flags, &f->server.security, /*server=*/true);
  flags->String("auth_token_file", &f->server.credentials.auth_token_file,
               "file of client tokens, one per line: \"NAME TOKEN\" (NAME owns the sessions the "
               "token creates) or \"TOKEN\"; default: none given = generate all three tokens in "
               "--credentials_dir/<port>/");
  flags->String("operator_token_file", &f->server.credentials.operator_token_file,
               "file with the operator token: may list and close every session");
  flags->String("cluster_token_file", &f->server.credentials.cluster_token_file,
               "file with the cluster token the workers present (worker registration, heartbeats, "
               "the KV store); the same file on every worker");
  flags->String("credentials_dir", &f->server.credentials.credentials_dir,
               "where generated tokens are written (<dir>/<port>/client.token, operator.token, "
               "cluster.token; mode 0600) and found by the CLI and workers on this machine "
               "(default: $MESHRT_HOME, else ~/.meshrt)");
  flags->Bool("insecure", &f->server.credentials.insecure,
             "allow listening beyond loopback without TLS or tokens, and accept any caller for "
             "every role that has no token: anyone who reaches the port can read sessions and "
             "models and register workers");
  AddHttpFlags(flags, &f->server.http,
               "Prometheus metrics at /metrics and the dashboard at / (open "
               "http://HOST:PORT/?token=OPERATOR_TOKEN)");
  AddLogFormatFlag(flags, &f->log_format);
}

// The options `f` says; InvalidArgument naming the flag (--session_lease, --memory_limit,
// --profile, then CheckCoordinatorServerOptions), a usage error either way.
absl::StatusOr<CoordinatorServerOptions> OptionsFromFlags(const CoordinatorFlags& f) {
  CoordinatorServerOptions o = f.server;
  CoordinatorOptions& c = o.coordinator;
  absl::StatusOr<absl::Duration> lease = ParseSessionLease(f.session_lease);
  if (!lease.ok()) return lease.status();
  c.session_lease = *lease;
  absl::StatusOr<int64_t> limit = ParseMemoryLimitFlag(f.memory_limit);
  if (!limit.ok()) return limit.status();
  c.memory_limit = *limit;
  if (!f.profile_path.empty()) {
    absl::StatusOr<HardwareProfile> profile = LoadHardwareProfile(f.profile_path);
    if (!profile.ok()) {
      return absl::Status(profile.status().code(),
                          absl::StrCat("--profile: ", profile.status().message()));
    }
    c.profile = *std::move(profile);
    c.profile_path = f.profile_path;
  }
  c.heartbeat_interval = absl::Milliseconds(f.heartbeat_interval_ms);
  c.heartbeat_timeout = absl::Milliseconds(f.heartbeat_timeout_ms);
  c.collective_timeout = absl::Milliseconds(f.collective_timeout_ms);
  c.default_worker_wait = absl::Milliseconds(f.worker_wait_ms);
  c.stuck_step.min = absl::Milliseconds(f.stuck_step_min_ms);
  c.stuck_step.factor = f.stuck_step_factor;
  if (absl::Status s = CheckCoordinatorServerOptions(o); !s.ok()) return s;
  return o;
}

// Prints why the coordinator could not start, as "meshrt-coordinator: ..." (ServeCheck's
// messages name the daemon already), and returns the exit code (rpc/daemon_exit.h).
int StartFailed(const absl::Status& status) {
  const std::string message(status.message());
  if (absl::StartsWith(message, "meshrt-coordinator: ")) {
    std::fprintf(stderr, "%s\n", message.c_str());
  } else {
    std::fprintf(stderr, "meshrt-coordinator: %s\n", message.c_str());
  }
  return DaemonExitCode(status);
}

}  // namespace

int CoordinatorMain(int argc, char** argv) {
  CoordinatorFlags f;
  FlagSet flags("meshrt-coordinator [flags]",
                "Runs the meshrt coordinator: workers register with it; clients create sessions "
                "(graph + mesh + layout rules) and run steps through it.\n"
                "Example: meshrt-coordinator --port 7070");
  AddCoordinatorFlags(&flags, &f);
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
  if (std::optional<int> done =
          HandleVersionAndLogFormat(flags, "meshrt-coordinator", f.log_format)) {
    return *done;
  }
  absl::StatusOr<CoordinatorServerOptions> options = OptionsFromFlags(f);
  if (!options.ok()) return StartFailed(UsageError(options.status()));
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
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(*std::move(options), &g_stop);
  if (!server.ok()) return StartFailed(server.status());
  (*server)->Wait();
  (*server)->Shutdown();
  return 0;
}

}  // namespace meshrt
