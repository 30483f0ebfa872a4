// The worker daemon: flags -> options -> gRPC server, then a WorkerAgent (worker_agent.h) for
// registration, heartbeats and the drain on SIGTERM.
#include "worker/worker_main.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "kernels/blas.h"
#include "kernels/cpu_kernels.h"
#include "monitoring/metrics.h"
#include "monitoring/metrics_http.h"
#include "monitoring/process_metrics.h"
#include "rpc/auth.h"
#include "rpc/grpc_util.h"
#include "rpc/http_server.h"
#include "util/file.h"
#include "util/file_access.h"
#include "util/flags.h"
#include "util/logging.h"
#include "worker/coordinator_client.h"
#include "worker/gloo_communicator.h"
#include "worker/grpc_worker_service.h"
#include "worker/worker.h"
#include "worker/worker_agent.h"

namespace meshrt {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

// Sessions' communicators over Gloo, rendezvousing through the coordinator's key-value store.
class GlooCommunicatorFactory : public CommunicatorFactory {
 public:
  GlooCommunicatorFactory(KeyValueStore* store, std::string hostname)
      : store_(store), hostname_(std::move(hostname)) {}

  absl::StatusOr<std::unique_ptr<Communicator>> Create(
      const v1::SessionSpec& spec, const Mesh& mesh,
      const std::vector<std::vector<int>>& groups) override {
    GlooCommunicator::Options options;
    options.mesh = mesh;
    options.coordinate.assign(spec.coordinate().begin(), spec.coordinate().end());
    options.hostname = hostname_;
    options.prefix = spec.kv_prefix();
    options.timeout = spec.collective_timeout_ms() > 0
                          ? absl::Milliseconds(spec.collective_timeout_ms())
                          : absl::Seconds(30);
    options.store = store_;
    auto comm = GlooCommunicator::Create(options);
    if (!comm.ok()) return comm.status();
    absl::Status s = (*comm)->Connect(groups);
    if (!s.ok()) return s;
    return std::unique_ptr<Communicator>(std::move(*comm));
  }

 private:
  KeyValueStore* store_;
  std::string hostname_;
};

// --rank: an integer, or a name ending in "-N" (a StatefulSet pod name: its ordinal N).
absl::StatusOr<std::optional<int>> ParseRank(const std::string& text) {
  if (text.empty()) return std::optional<int>();
  const size_t dash = text.rfind('-');
  const std::string digits = dash == std::string::npos ? text : text.substr(dash + 1);
  int rank = -1;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(digits, &rank) || rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank=", text, ": expected a rank N >= 0 or a pod name ending in -N (its ordinal)"));
  }
  return std::optional<int>(rank);
}

std::string NewIncarnation() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x-%d", rd(), rd(), getpid());
}

// /proc/meminfo's MemAvailable, or 0 when it cannot be read.
int64_t ReadMemAvailable() {
  absl::StatusOr<std::string> text = ReadFile("/proc/meminfo");
  return text.ok() ? MemAvailableBytes(*text) : 0;
}

}  // namespace

absl::StatusOr<Worker::Overlap> ParseOverlap(const std::string& text) {
  if (text == "auto") return Worker::Overlap::kChoose;
  if (text == "true" || text == "on" || text == "1") return Worker::Overlap::kOn;
  if (text == "false" || text == "off" || text == "0") return Worker::Overlap::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("--overlap_comm=", text, ": expected auto, true or false"));
}

int64_t MemAvailableBytes(const std::string& meminfo) {
  static constexpr char kKey[] = "MemAvailable:";
  size_t at = meminfo.find(kKey);
  if (at == std::string::npos || (at > 0 && meminfo[at - 1] != '\n')) return 0;
  at += sizeof(kKey) - 1;
  const size_t end = meminfo.find('\n', at);
  std::string value(
      absl::StripAsciiWhitespace(meminfo.substr(at, end == std::string::npos ? end : end - at)));
  int64_t scale = 1;
  if (absl::EndsWith(value, "kB")) {
    scale = 1024;
    value = std::string(absl::StripAsciiWhitespace(value.substr(0, value.size() - 2)));
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 0 || n > INT64_MAX / scale) return 0;
  return n * scale;
}

int WorkerMain(int argc, char** argv) {
  std::string coordinator;
  std::string host = "127.0.0.1";
  std::string advertise;
  std::string cluster_token_file;
  std::string credentials_dir;
  bool insecure = false;
  std::string gloo_address;
  int64_t port = 0;
  int64_t register_timeout_s = 120;
  int64_t drain_timeout_s = 20;
  int64_t health_port = 0;
  HttpFlags http_flags;
  std::string rank_text;
  std::vector<std::string> data_dirs;
  std::string checkpoint_root;
  std::string log_format = "text";
  int64_t debug_freeze_at_step = 0;
  int64_t debug_freeze_at_instruction = -1;
  int64_t debug_spin_at_step = 0;
  int64_t debug_spin_at_instruction = -1;
  double debug_spin_seconds = 4;
  std::string overlap_comm = "auto";
  SecurityOptions security_options;
  FlagSet flags("meshrt-worker --coordinator HOST:PORT [flags]",
                "Runs a meshrt worker: registers with the coordinator, loads the SPMD programs of "
                "the sessions it is given, runs their steps with OpenBLAS kernels and Gloo "
                "collectives.\nExample: meshrt-worker --coordinator 127.0.0.1:7070");
  flags.String("coordinator", &coordinator, "coordinator address HOST:PORT (required)");
  flags.Int("port", &port, "port of this worker's gRPC service; 0 picks a free one");
  flags.String("host", &host,
               "address this worker's gRPC service listens on; anything but loopback needs TLS or "
               "--cluster_token_file, or --insecure (0.0.0.0 = every interface)");
  flags.String("advertise_address", &advertise,
               "host name or IP the coordinator and peers use to reach this worker (default: "
               "--host, or 127.0.0.1 when --host is loopback or a wildcard)");
  flags.String("gloo_address", &gloo_address,
               "host name or IP Gloo binds and advertises (default: --advertise_address)");
  flags.Int("register_timeout_s", &register_timeout_s,
            "give up if the coordinator cannot be reached for this long (retrying with backoff)");
  flags.String("rank", &rank_text,
               "stable rank of this worker: N, or a StatefulSet pod name NAME-N (rank N); "
               "sessions take free workers in rank order (default: empty, no rank)");
  flags.Int("drain_timeout_s", &drain_timeout_s,
            "on SIGTERM, how long the step in flight may take to finish before it is aborted; "
            "the worker then deregisters and exits");
  flags.Int("health_port", &health_port,
            "also serve the standard gRPC health service, alone and in plaintext, on this port "
            "(for Kubernetes' gRPC probes, which cannot speak TLS); 0 = off");
  flags.Repeated("data_dir", &data_dirs,
                 "a directory whose files the graphs' ops may read (text_windows); repeatable. "
                 "Paths are resolved (symlinks, '..') and must stay inside one; none given = "
                 "graphs read no file");
  flags.String("checkpoint_root", &checkpoint_root,
               "checkpoints are written to and read from directories under this one only "
               "(the coordinator's --checkpoint_root, on the shared filesystem at the same "
               "path); empty = this worker takes no part in checkpoints");
  flags.Int("debug_freeze_at_step", &debug_freeze_at_step,
            "FOR TESTS ONLY (fault injection): in every session, step N blocks before "
            "--debug_freeze_at_instruction until the session is closed, while heartbeats go on "
            "(a stuck rank); 0 = off");
  flags.Int("debug_freeze_at_instruction", &debug_freeze_at_instruction,
            "FOR TESTS ONLY: the program instruction --debug_freeze_at_step blocks before "
            "(-1 = the step's first)");
  flags.Int("debug_spin_at_step", &debug_spin_at_step,
            "FOR TESTS ONLY (fault injection): in every session, step N busy-loops its step thread "
            "(burning CPU) for --debug_spin_seconds before --debug_spin_at_instruction, then goes "
            "on (a slow rank, not a stuck one); 0 = off");
  flags.Int("debug_spin_at_instruction", &debug_spin_at_instruction,
            "FOR TESTS ONLY: the program instruction --debug_spin_at_step spins before (-1 = the "
            "step's first)");
  flags.Double("debug_spin_seconds", &debug_spin_seconds,
               "FOR TESTS ONLY: how long --debug_spin_at_step spins");
  flags.String("overlap_comm", &overlap_comm,
               "auto, true or false: run each session's collectives on a communication thread, "
               "overlapping the compute that does not read their results (true), or on the step "
               "thread (false: every collective blocks it), or measure both on each session's "
               "first 8 steps and keep the faster, logging the figures (auto: overlap pays only "
               "where a core is free for the communication thread). Results are the same bits");
  AddSecurityFlags(&flags, &security_options, /*server=*/true);
  flags.String("cluster_token_file", &cluster_token_file,
               "file with the cluster token this worker presents to the coordinator (the "
               "coordinator's --cluster_token_file); default: for a coordinator on this machine's "
               "loopback, the one it generated in --credentials_dir");
  flags.String("credentials_dir", &credentials_dir,
               "where a coordinator on this machine keeps generated tokens (default: "
               "$MESHRT_HOME, else ~/.meshrt)");
  flags.Bool("insecure", &insecure,
             "allow listening beyond loopback without TLS or --cluster_token_file (the worker "
             "still accepts calls only from its coordinator, but the secret that proves it "
             "travels in plaintext)");
  AddHttpFlags(&flags, &http_flags, "Prometheus metrics at /metrics");
  AddLogFormatFlag(&flags, &log_format);
  auto positional = flags.Parse(argc, argv);
  if (!positional.ok()) {
    std::fprintf(stderr, "meshrt-worker: %s\n", std::string(positional.status().message()).c_str());
    return 2;
  }
  if (flags.help()) {
    std::cout << flags.Help();
    return 0;
  }
  if (std::optional<int> done = HandleVersionAndLogFormat(flags, "meshrt-worker", log_format)) {
    return *done;
  }
  if (coordinator.empty()) {
    std::fprintf(stderr, "meshrt-worker: --coordinator HOST:PORT is required (see --help)\n");
    return 2;
  }
  if (!(debug_spin_seconds >= 0 && debug_spin_seconds <= 3600)) {
    std::fprintf(stderr, "meshrt-worker: --debug_spin_seconds must be between 0 and 3600, not %g\n",
                 debug_spin_seconds);
    return 2;
  }
  if (advertise.empty()) {
    advertise = IsLoopbackHost(host) || host == "0.0.0.0" || host == "::" || host == "[::]"
                    ? "127.0.0.1"
                    : host;
  }
  if (gloo_address.empty()) gloo_address = advertise;
  if (credentials_dir.empty()) credentials_dir = DefaultCredentialsDir();
  absl::StatusOr<std::optional<int>> rank = ParseRank(rank_text);
  if (!rank.ok()) {
    std::fprintf(stderr, "meshrt-worker: %s\n", std::string(rank.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<Worker::Overlap> overlap = ParseOverlap(overlap_comm);
  if (!overlap.ok()) {
    std::fprintf(stderr, "meshrt-worker: %s\n", std::string(overlap.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<Security> security = LoadSecurity(security_options);
  if (!security.ok()) {
    std::fprintf(stderr, "meshrt-worker: %s\n", std::string(security.status().message()).c_str());
    return 2;
  }
  if (security->server_tls() && security->ca_pem.empty()) {
    std::fprintf(stderr,
                 "meshrt-worker: --tls_cert needs --tls_ca too: the worker verifies the "
                 "coordinator with it\n");
    return 2;
  }

  if (absl::Status s = ServeCheck("meshrt-worker", host, security->server_tls(),
                                  !cluster_token_file.empty(), insecure);
      !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (insecure) LogWarning("meshrt-worker: --insecure: listening on ", host, " in the open");
  // The cluster token: the flag's file, else one a coordinator on this machine generated. That
  // one may appear after this worker starts (any start order works): looked up again before
  // every registration attempt.
  auto cluster_token = [&]() -> absl::StatusOr<std::string> {
    if (!cluster_token_file.empty()) return ReadOwnToken(cluster_token_file, "cluster_token_file");
    std::optional<std::string> found =
        FindGeneratedToken(credentials_dir, coordinator, kClusterTokenFile);
    if (!found.has_value()) return std::string();
    return ReadOwnToken(*found, "credentials_dir");
  };
  absl::StatusOr<std::string> first_token = cluster_token();
  if (!first_token.ok()) {
    std::fprintf(stderr, "meshrt-worker: %s\n", std::string(first_token.status().message()).c_str());
    return 2;
  }
  security->token = *first_token;
  absl::StatusOr<std::string> secret = RandomToken();
  if (!secret.ok()) {
    std::fprintf(stderr, "meshrt-worker: %s\n", std::string(secret.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<FileAccessPolicy> data_policy = FileAccessPolicy::Under(data_dirs, "--data_dir");
  absl::StatusOr<FileAccessPolicy> checkpoint_policy = FileAccessPolicy::Under(
      checkpoint_root.empty() ? std::vector<std::string>() : std::vector<std::string>{checkpoint_root},
      "--checkpoint_root");
  for (const absl::StatusOr<FileAccessPolicy>* p : {&data_policy, &checkpoint_policy}) {
    if (!p->ok()) {
      std::fprintf(stderr, "meshrt-worker: %s\n", std::string(p->status().message()).c_str());
      return 2;
    }
  }

  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  SetDaemonLogName("worker");
  // Every step receives its feeds and sends its fetches in fresh buffers (the step's RPC messages,
  // the assembled feed tensors); by default glibc returns big freed blocks to the kernel and the
  // next step pays the page faults again. Blocks above 32 MiB (glibc's largest mmap threshold) are
  // each their own mmap, unmapped on free, whatever the threshold says: so no mmap at all (every
  // block from the heap, reused step after step), and freed memory stays mapped up to 1 GiB of
  // free heap top. Cost: the worker's resident size stays at its high-water mark (what its largest
  // step needed) instead of shrinking between steps. The executor's own buffers are recycled by
  // its BufferPool either way. cluster_bench, 4 workers on a loaded 2-core machine, with the same
  // setting in every process (GLIBC_TUNABLES=glibc.malloc.mmap_max=0): feed/fetch of a split
  // 16-64 MiB tensor 10-25% faster than with the 32 MiB threshold alone (noisy: load 8-13).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  LogInfo("meshrt-worker: ", kernels::GetBlas().corename(), " OpenBLAS kernel (",
          kernels::GetBlas().reason(), ")");

  GrpcCoordinatorClient client(coordinator, *security);
  GlooCommunicatorFactory communicators(&client, gloo_address);
  WorkerFileAccess files;
  files.data = &*data_policy;
  files.checkpoints = &*checkpoint_policy;
  // Prometheus metrics (worker/worker_metrics.h), counted only when served (--metrics_port).
  MetricsRegistry metrics_registry;
  AddProcessMetrics(&metrics_registry);
  WorkerMetrics worker_metrics(&metrics_registry);
  Worker worker(&CpuKernels(), &communicators, files);
  if (http_flags.port != 0) worker.SetMetrics(&worker_metrics);
  worker.SetOverlapComm(*overlap);
  if (*overlap == Worker::Overlap::kOff) {
    LogInfo("meshrt-worker: --overlap_comm=false: every collective blocks the step thread");
  }
  if (debug_freeze_at_step > 0) {
    LogWarning("meshrt-worker: --debug_freeze_at_step=", debug_freeze_at_step, ": step ",
               debug_freeze_at_step, " of every session will freeze (a test fault)");
    worker.SetDebugFreeze(debug_freeze_at_step, static_cast<int>(debug_freeze_at_instruction));
  }
  if (debug_spin_at_step > 0) {
    LogWarning("meshrt-worker: --debug_spin_at_step=", debug_spin_at_step, ": step ",
               debug_spin_at_step, " of every session will compute (a busy loop) for ",
               debug_spin_seconds, " s more (a test fault)");
    worker.SetDebugSpin(debug_spin_at_step, static_cast<int>(debug_spin_at_instruction),
                        absl::Seconds(debug_spin_seconds));
  }
  GrpcWorkerService service(&worker, *secret);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServer(&builder);
  int bound_port = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", port), MakeServerCredentials(*security),
                           &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::fprintf(stderr,
                 "meshrt-worker: cannot listen on %s:%lld: the port is in use or the address is "
                 "not this machine's\n",
                 host.c_str(), static_cast<long long>(port));
    return 1;
  }
  std::unique_ptr<grpc::Server> health;
  if (health_port > 0) {
    health = StartHealthServer(host, static_cast<int>(health_port));
    if (health == nullptr) {
      std::fprintf(stderr, "meshrt-worker: cannot listen on port %lld (--health_port)\n",
                   static_cast<long long>(health_port));
      server->Shutdown();
      return 1;
    }
  }
  // The HTTP side door (rpc/http_server.h): --metrics_token_file's tokens and the cluster token.
  HttpServer http;
  ServeMetrics(&http, &metrics_registry);
  if (http_flags.port != 0) {
    absl::StatusOr<HttpServerOptions> http_options =
        StartFromFlags(&http, http_flags, host, {*first_token}, insecure);
    if (!http_options.ok()) {
      std::fprintf(stderr, "meshrt-worker: %s\n",
                   std::string(http_options.status().message()).c_str());
      server->Shutdown();
      return 2;
    }
    LogInfo("meshrt-worker: metrics on ", HttpAddress(http_options->host, http.port()),
            "/metrics (", http_options->tokens.empty() ? "open to anyone who reaches it"
                                                       : "token required",
            ")");
  }
  // Ready (Kubernetes' readiness probe) once registered, not before and not while draining.
  SetHealth({server.get(), health.get()}, "meshrt.v1.Worker", false);
  const std::string address = absl::StrCat(advertise, ":", bound_port);

  WorkerAgentOptions agent_options;
  agent_options.coordinator = coordinator;
  agent_options.register_timeout = absl::Seconds(register_timeout_s);
  agent_options.drain_timeout = absl::Seconds(drain_timeout_s);
  v1::RegisterWorkerRequest& reg = agent_options.registration;
  reg.set_address(address);
  reg.set_gloo_address(gloo_address);
  reg.set_incarnation(NewIncarnation());
  reg.set_secret(*secret);
  reg.set_available_memory_bytes(ReadMemAvailable());
  if (rank->has_value()) reg.set_rank(**rank);
  WorkerAgentHooks hooks;
  hooks.cluster_token = cluster_token;
  hooks.set_ready = [&](bool ready) {
    SetHealth({server.get(), health.get()}, "meshrt.v1.Worker", ready);
  };
  hooks.drain_calls = [&](absl::Duration timeout) { return service.Drain(timeout); };
  hooks.interrupt = &g_stop;
  WorkerAgent agent(std::move(agent_options), &client, &worker, std::move(hooks));
  if (absl::Status registered = agent.Start(); !registered.ok()) {
    std::fprintf(stderr, "meshrt-worker: cannot register with coordinator %s: %s\n",
                 coordinator.c_str(), std::string(registered.message()).c_str());
    server->Shutdown();
    return 1;
  }
  LogInfo("meshrt-worker: serving at ", address, " as worker ", agent.worker_id(),
          rank->has_value() ? absl::StrCat(" (rank ", **rank, ")") : "", " of coordinator ",
          coordinator, "; ", security->Describe(), "; data dirs: ",
          data_dirs.empty() ? "none (--data_dir)" : absl::StrJoin(data_policy->roots(), ", "),
          "; checkpoint root: ",
          checkpoint_root.empty() ? "none (--checkpoint_root)" : checkpoint_policy->roots()[0]);
  while (!g_stop.load()) absl::SleepFor(absl::Milliseconds(20));
  agent.Drain();
  // A step stuck in a collective would hold Shutdown until the collective's timeout; exiting
  // closes this worker's Gloo connections, so its peers fail fast instead.
  absl::Notification shut_down;
  std::thread stopper([&] {
    if (health != nullptr) health->Shutdown(std::chrono::system_clock::now());
    http.Stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    shut_down.Notify();
  });
  if (!shut_down.WaitForNotificationWithTimeout(absl::Seconds(4))) {
    std::fflush(nullptr);
    _exit(0);
  }
  stopper.join();
  return 0;
}

}  // namespace meshrt
