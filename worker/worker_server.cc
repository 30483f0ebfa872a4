#include "worker/worker_server.h"

#include <unistd.h>

#include <chrono>
#include <functional>
#include <random>
#include <utility>

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
#include "rpc/daemon_exit.h"
#include "util/file.h"
#include "util/file_access.h"
#include "util/logging.h"
#include "worker/coordinator_client.h"
#include "worker/gloo_communicator.h"
#include "worker/grpc_worker_service.h"
#include "worker/worker_agent.h"
#include "worker/worker_metrics.h"

namespace meshrt {
namespace {

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

std::string NewIncarnation() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x-%d", rd(), rd(), getpid());
}

// /proc/meminfo's MemAvailable, or 0 when it cannot be read.
int64_t ReadMemAvailable() {
  absl::StatusOr<std::string> text = ReadFile("/proc/meminfo");
  return text.ok() ? MemAvailableBytes(*text) : 0;
}

constexpr char kHealthService[] = "meshrt.v1.Worker";

}  // namespace

// Everything a running worker owns, in construction order (destroyed in reverse: the agent first,
// the coordinator client last).
struct WorkerServer::Parts {
  WorkerServerOptions options;
  const std::atomic<bool>* stop = nullptr;
  Security security;
  std::string secret;  // what the coordinator presents to this worker
  std::string first_token;  // the cluster token at start
  std::optional<FileAccessPolicy> data_policy;
  std::optional<FileAccessPolicy> checkpoint_policy;
  std::unique_ptr<GrpcCoordinatorClient> client;
  std::unique_ptr<GlooCommunicatorFactory> communicators;
  // Prometheus metrics (worker/worker_metrics.h), counted only when served (--metrics_port).
  MetricsRegistry metrics_registry;
  std::unique_ptr<WorkerMetrics> worker_metrics;
  std::unique_ptr<Worker> worker;
  std::unique_ptr<GrpcWorkerService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::Server> health;
  // The HTTP side door (rpc/http_server.h): --metrics_token_file's tokens and the cluster token.
  HttpServer http;
  int bound_port = 0;
  std::string address;
  std::unique_ptr<WorkerAgent> agent;

  // The cluster token: the flag's file, else one a coordinator on this machine generated. That
  // one may appear after this worker starts (any start order works): looked up again before
  // every registration attempt.
  absl::StatusOr<std::string> ClusterToken() const {
    if (!options.cluster_token_file.empty()) {
      return ReadOwnToken(options.cluster_token_file, "cluster_token_file");
    }
    std::optional<std::string> found =
        FindGeneratedToken(options.credentials_dir, options.coordinator, kClusterTokenFile);
    if (!found.has_value()) return std::string();
    return ReadOwnToken(*found, "credentials_dir");
  }
};

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

absl::Status CheckWorkerServerOptions(const WorkerServerOptions& options) {
  if (options.coordinator.empty()) {
    return absl::InvalidArgumentError("--coordinator HOST:PORT is required (see --help)");
  }
  if (!(options.debug_spin_seconds >= 0 && options.debug_spin_seconds <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--debug_spin_seconds must be between 0 and 3600, not %g",
                        options.debug_spin_seconds));
  }
  return absl::OkStatus();
}

WorkerServer::WorkerServer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

WorkerServer::~WorkerServer() {
  if (!shut_down_) Shutdown(absl::Seconds(2));
  if (stopper_.joinable()) stopper_.join();
}

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(
    WorkerServerOptions options, const std::atomic<bool>* stop) {
  if (absl::Status s = CheckWorkerServerOptions(options); !s.ok()) return UsageError(s);
  auto parts = std::make_unique<Parts>();
  parts->options = std::move(options);
  parts->stop = stop;
  std::unique_ptr<WorkerServer> server(new WorkerServer(std::move(parts)));
  for (absl::Status (WorkerServer::*step)() : {&WorkerServer::Prepare, &WorkerServer::MakeWorker,
                                               &WorkerServer::Listen, &WorkerServer::StartMetrics,
                                               &WorkerServer::Register}) {
    if (absl::Status s = (server.get()->*step)(); !s.ok()) {
      server->shut_down_ = true;  // nothing to drain: stop what runs, at once
      if (server->parts_->server != nullptr) {
        server->parts_->server->Shutdown(std::chrono::system_clock::now());
      }
      return s;
    }
  }
  return server;
}

// The defaults that depend on other options, the credentials and the file policies. Every error is
// a usage error but the secret's.
absl::Status WorkerServer::Prepare() {
  Parts& p = *parts_;
  WorkerServerOptions& o = p.options;
  if (o.advertise_address.empty()) {
    o.advertise_address =
        IsLoopbackHost(o.host) || o.host == "0.0.0.0" || o.host == "::" || o.host == "[::]"
            ? "127.0.0.1"
            : o.host;
  }
  if (o.gloo_address.empty()) o.gloo_address = o.advertise_address;
  if (o.credentials_dir.empty()) o.credentials_dir = DefaultCredentialsDir();
  absl::StatusOr<Security> security = LoadSecurity(o.security);
  if (!security.ok()) return UsageError(security.status());
  if (security->server_tls() && security->ca_pem.empty()) {
    return UsageError(absl::InvalidArgumentError(
        "--tls_cert needs --tls_ca too: the worker verifies the coordinator with it"));
  }
  if (absl::Status s = ServeCheck("meshrt-worker", o.host, security->server_tls(),
                                  !o.cluster_token_file.empty(), o.insecure);
      !s.ok()) {
    return UsageError(s);
  }
  if (o.insecure) LogWarning("meshrt-worker: --insecure: listening on ", o.host, " in the open");
  absl::StatusOr<std::string> first_token = p.ClusterToken();
  if (!first_token.ok()) return UsageError(first_token.status());
  p.first_token = *first_token;
  security->token = *first_token;
  p.security = *std::move(security);
  absl::StatusOr<std::string> secret = RandomToken();
  if (!secret.ok()) return secret.status();
  p.secret = *secret;
  absl::StatusOr<FileAccessPolicy> data_policy = FileAccessPolicy::Under(o.data_dirs, "--data_dir");
  if (!data_policy.ok()) return UsageError(data_policy.status());
  p.data_policy = *std::move(data_policy);
  absl::StatusOr<FileAccessPolicy> checkpoint_policy = FileAccessPolicy::Under(
      o.checkpoint_root.empty() ? std::vector<std::string>()
                                : std::vector<std::string>{o.checkpoint_root},
      "--checkpoint_root");
  if (!checkpoint_policy.ok()) return UsageError(checkpoint_policy.status());
  p.checkpoint_policy = *std::move(checkpoint_policy);
  return absl::OkStatus();
}

// The worker's logic over Gloo and the coordinator's KV store, and its gRPC service.
absl::Status WorkerServer::MakeWorker() {
  Parts& p = *parts_;
  const WorkerServerOptions& o = p.options;
  LogInfo("meshrt-worker: ", kernels::GetBlas().corename(), " OpenBLAS kernel (",
          kernels::GetBlas().reason(), ")");
  p.client = std::make_unique<GrpcCoordinatorClient>(o.coordinator, p.security);
  p.communicators = std::make_unique<GlooCommunicatorFactory>(p.client.get(), o.gloo_address);
  WorkerFileAccess files;
  files.data = &*p.data_policy;
  files.checkpoints = &*p.checkpoint_policy;
  AddProcessMetrics(&p.metrics_registry);
  p.worker_metrics = std::make_unique<WorkerMetrics>(&p.metrics_registry);
  p.worker = std::make_unique<Worker>(&CpuKernels(), p.communicators.get(), files);
  if (o.http.port != 0) p.worker->SetMetrics(p.worker_metrics.get());
  p.worker->SetOverlapComm(o.overlap);
  if (o.overlap == Worker::Overlap::kOff) {
    LogInfo("meshrt-worker: --overlap_comm=false: every collective blocks the step thread");
  }
  if (o.debug_freeze_at_step > 0) {
    LogWarning("meshrt-worker: --debug_freeze_at_step=", o.debug_freeze_at_step, ": step ",
               o.debug_freeze_at_step, " of every session will freeze (a test fault)");
    p.worker->SetDebugFreeze(o.debug_freeze_at_step,
                             static_cast<int>(o.debug_freeze_at_instruction));
  }
  if (o.debug_spin_at_step > 0) {
    LogWarning("meshrt-worker: --debug_spin_at_step=", o.debug_spin_at_step, ": step ",
               o.debug_spin_at_step, " of every session will compute (a busy loop) for ",
               o.debug_spin_seconds, " s more (a test fault)");
    p.worker->SetDebugSpin(o.debug_spin_at_step, static_cast<int>(o.debug_spin_at_instruction),
                           absl::Seconds(o.debug_spin_seconds));
  }
  p.service = std::make_unique<GrpcWorkerService>(p.worker.get(), p.secret);
  return absl::OkStatus();
}

// The gRPC service (with the standard health service) and --health_port's plaintext one.
absl::Status WorkerServer::Listen() {
  Parts& p = *parts_;
  const WorkerServerOptions& o = p.options;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServer(&builder);
  builder.AddListeningPort(absl::StrCat(o.host, ":", o.port), MakeServerCredentials(p.security),
                           &p.bound_port);
  builder.RegisterService(p.service.get());
  p.server = builder.BuildAndStart();
  if (p.server == nullptr || p.bound_port == 0) {
    p.server.reset();
    return absl::UnavailableError(absl::StrFormat(
        "cannot listen on %s:%lld: the port is in use or the address is not this machine's",
        o.host, static_cast<long long>(o.port)));
  }
  if (o.health_port > 0) {
    p.health = StartHealthServer(o.host, static_cast<int>(o.health_port));
    if (p.health == nullptr) {
      return absl::UnavailableError(absl::StrFormat("cannot listen on port %lld (--health_port)",
                                                    static_cast<long long>(o.health_port)));
    }
  }
  return absl::OkStatus();
}

absl::Status WorkerServer::StartMetrics() {
  Parts& p = *parts_;
  ServeMetrics(&p.http, &p.metrics_registry);
  if (p.options.http.port == 0) return absl::OkStatus();
  absl::StatusOr<HttpServerOptions> http_options =
      StartFromFlags(&p.http, p.options.http, p.options.host, {p.first_token}, p.options.insecure);
  if (!http_options.ok()) return UsageError(http_options.status());
  LogInfo("meshrt-worker: metrics on ", HttpAddress(http_options->host, p.http.port()),
          "/metrics (", http_options->tokens.empty() ? "open to anyone who reaches it"
                                                     : "token required",
          ")");
  return absl::OkStatus();
}

// Registers through a WorkerAgent, which then heartbeats; the worker is ready (Kubernetes'
// readiness probe) once registered, not before and not while draining.
absl::Status WorkerServer::Register() {
  Parts& p = *parts_;
  const WorkerServerOptions& o = p.options;
  SetHealth({p.server.get(), p.health.get()}, kHealthService, false);
  p.address = absl::StrCat(o.advertise_address, ":", p.bound_port);
  WorkerAgentOptions agent_options;
  agent_options.coordinator = o.coordinator;
  agent_options.register_timeout = o.register_timeout;
  agent_options.drain_timeout = o.drain_timeout;
  v1::RegisterWorkerRequest& reg = agent_options.registration;
  reg.set_address(p.address);
  reg.set_gloo_address(o.gloo_address);
  reg.set_incarnation(NewIncarnation());
  reg.set_secret(p.secret);
  reg.set_available_memory_bytes(ReadMemAvailable());
  if (o.rank.has_value()) reg.set_rank(*o.rank);
  WorkerAgentHooks hooks;
  hooks.cluster_token = [parts = &p] { return parts->ClusterToken(); };
  hooks.set_ready = [parts = &p](bool ready) {
    SetHealth({parts->server.get(), parts->health.get()}, kHealthService, ready);
  };
  hooks.drain_calls = [parts = &p](absl::Duration timeout) {
    return parts->service->Drain(timeout);
  };
  hooks.interrupt = p.stop;
  p.agent = std::make_unique<WorkerAgent>(std::move(agent_options), p.client.get(),
                                          p.worker.get(), std::move(hooks));
  if (absl::Status registered = p.agent->Start(); !registered.ok()) {
    return absl::Status(registered.code(),
                        absl::StrCat("cannot register with coordinator ", o.coordinator, ": ",
                                     registered.message()));
  }
  LogInfo("meshrt-worker: serving at ", p.address, " as worker ", p.agent->worker_id(),
          o.rank.has_value() ? absl::StrCat(" (rank ", *o.rank, ")") : "", " of coordinator ",
          o.coordinator, "; ", p.security.Describe(), "; data dirs: ",
          o.data_dirs.empty() ? "none (--data_dir)" : absl::StrJoin(p.data_policy->roots(), ", "),
          "; checkpoint root: ",
          o.checkpoint_root.empty() ? "none (--checkpoint_root)" : p.checkpoint_policy->roots()[0]);
  return absl::OkStatus();
}

const std::string& WorkerServer::address() const { return parts_->address; }
int WorkerServer::port() const { return parts_->bound_port; }
int WorkerServer::worker_id() const { return parts_->agent->worker_id(); }

bool WorkerServer::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (parts_->stop == nullptr || !parts_->stop->load()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

bool WorkerServer::Shutdown(absl::Duration timeout) {
  shut_down_ = true;
  Parts& p = *parts_;
  p.agent->Drain();
  // A step stuck in a collective would hold the server's Shutdown until the collective's timeout:
  // the caller may give up waiting (and exit, which closes this worker's Gloo connections, so its
  // peers fail fast instead).
  auto done = std::make_shared<absl::Notification>();
  stopper_ = std::thread([parts = &p, done] {
    if (parts->health != nullptr) parts->health->Shutdown(std::chrono::system_clock::now());
    parts->http.Stop();
    parts->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    done->Notify();
  });
  return done->WaitForNotificationWithTimeout(timeout);
}

}  // namespace meshrt
