#include "coordinator/coordinator_server.h"

#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/dashboard.h"
#include "coordinator/grpc_coordinator_service.h"
#include "coordinator/grpc_worker_client.h"
#include "core/ir/limits.h"
#include "grpcpp/health_check_service_interface.h"
#include "monitoring/metrics.h"
#include "monitoring/metrics_http.h"
#include "monitoring/process_metrics.h"
#include "rpc/daemon_exit.h"
#include "runtime/checkpoint_store.h"
#include "util/logging.h"

namespace meshrt {
namespace {

constexpr char kHealthService[] = "meshrt.v1.Coordinator";

}  // namespace

// Everything a running coordinator owns, in construction order (destroyed in reverse: the servers
// before the service, the service before the logic it calls).
struct CoordinatorServer::Parts {
  CoordinatorServerOptions options;
  const std::atomic<bool>* stop = nullptr;
  Security security;
  std::unique_ptr<GrpcWorkerClientFactory> factory;
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<GrpcCoordinatorService> service;
  std::unique_ptr<grpc::Server> server;
  int bound_port = 0;
  std::string generated;  // where the credentials were generated, or ""
  Authenticator::Options auth;
  // The HTTP side door (rpc/http_server.h): operators' tokens and --metrics_token_file's.
  HttpServer http;
  std::unique_ptr<grpc::Server> health;
};

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

absl::Status CheckCoordinatorServerOptions(const CoordinatorServerOptions& options) {
  const CoordinatorOptions& c = options.coordinator;
  if (c.stuck_step.min < absl::ZeroDuration() || !(c.stuck_step.factor >= 1)) {
    return absl::InvalidArgumentError(
        "--stuck_step_min_ms must be >= 0 (0 = no watchdog) and --stuck_step_factor >= 1");
  }
  if (absl::Status s = CheckRequestLimits(c.limits); !s.ok()) return s;
  for (const auto& [value, flag] :
       {std::pair<int64_t, const char*>{c.kv_keys_per_processor, "max_kv_keys_per_processor"},
        {c.kv_bytes_per_processor, "max_kv_bytes_per_processor"},
        {c.kv.max_value_bytes, "max_kv_value_bytes"},
        {c.kv.max_keys, "max_kv_keys"},
        {c.kv.max_bytes, "max_kv_bytes"}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrFormat("--%s is %lld; it must be >= 1", flag,
                                                        static_cast<long long>(value)));
    }
  }
  return absl::OkStatus();
}

CoordinatorServer::CoordinatorServer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    CoordinatorServerOptions options, const std::atomic<bool>* stop) {
  if (absl::Status s = CheckCoordinatorServerOptions(options); !s.ok()) return UsageError(s);
  auto parts = std::make_unique<Parts>();
  parts->options = std::move(options);
  parts->stop = stop;
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer(std::move(parts)));
  for (absl::Status (CoordinatorServer::*step)() :
       {&CoordinatorServer::Prepare, &CoordinatorServer::Listen, &CoordinatorServer::Authenticate,
        &CoordinatorServer::StartHttp, &CoordinatorServer::Serve}) {
    if (absl::Status s = (server.get()->*step)(); !s.ok()) {
      server->shut_down_ = true;
      if (server->parts_->server != nullptr) {
        server->parts_->server->Shutdown(std::chrono::system_clock::now());
      }
      return s;
    }
  }
  return server;
}

// The TLS files, whether the address may be served this way, the checkpoint root; the logic and
// its gRPC adapter. Every error is a usage error.
absl::Status CoordinatorServer::Prepare() {
  Parts& p = *parts_;
  const CoordinatorServerOptions& o = p.options;
  absl::StatusOr<Security> security = LoadSecurity(o.security);
  if (!security.ok()) return UsageError(security.status());
  if (security->server_tls() && security->ca_pem.empty()) {
    return UsageError(absl::InvalidArgumentError(
        "--tls_cert needs --tls_ca too: the coordinator verifies the workers it calls with it"));
  }
  if (absl::Status s = ServeCheck("meshrt-coordinator", o.host, security->server_tls(),
                                  o.credentials.any_token(), o.credentials.insecure);
      !s.ok()) {
    return UsageError(s);
  }
  if (!o.coordinator.checkpoint_root.empty()) {
    // Refuse a root that does not exist now, rather than at the first save.
    absl::StatusOr<CheckpointRoot> root = CheckpointRoot::Open(o.coordinator.checkpoint_root);
    if (!root.ok()) return UsageError(root.status());
  }
  p.security = *std::move(security);
  p.factory = std::make_unique<GrpcWorkerClientFactory>(p.security);
  p.coordinator = std::make_unique<Coordinator>(o.coordinator, p.factory.get());
  p.service = std::make_unique<GrpcCoordinatorService>(p.coordinator.get(), Authenticator({}));
  return absl::OkStatus();
}

// The gRPC service, with the standard health service.
absl::Status CoordinatorServer::Listen() {
  Parts& p = *parts_;
  const CoordinatorServerOptions& o = p.options;
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
        "cannot listen on %s:%lld: the port is in use (by another coordinator?) or the address "
        "is not this machine's",
        o.host, static_cast<long long>(o.port)));
  }
  return absl::OkStatus();
}

// The credentials of the bound port: the token files', or generated ones (a usage error when
// they cannot be read or written).
absl::Status CoordinatorServer::Authenticate() {
  Parts& p = *parts_;
  absl::StatusOr<Authenticator::Options> auth =
      LoadCoordinatorCredentials(p.options.credentials, p.bound_port, &p.generated);
  if (!auth.ok()) return UsageError(auth.status());
  p.auth = *std::move(auth);
  return absl::OkStatus();
}

// Prometheus metrics (coordinator/coordinator_metrics.h and the process's) and the dashboard
// (coordinator/dashboard.h: / and /api/*), served when --metrics_port says so.
absl::Status CoordinatorServer::StartHttp() {
  Parts& p = *parts_;
  const CoordinatorServerOptions& o = p.options;
  MetricsRegistry& metrics = p.coordinator->metrics().registry();
  AddProcessMetrics(&metrics);
  ServeMetrics(&p.http, &metrics);
  RegisterDashboard(p.coordinator.get(), &p.http);
  if (o.http.port == 0) return absl::OkStatus();
  std::vector<std::string> operator_tokens;
  for (const Credential& c : p.auth.operators) operator_tokens.push_back(c.token);
  absl::StatusOr<HttpServerOptions> http_options = StartFromFlags(
      &p.http, o.http, o.host, std::move(operator_tokens), o.credentials.insecure);
  if (!http_options.ok()) return UsageError(http_options.status());
  LogInfo("meshrt-coordinator: metrics on ", HttpAddress(http_options->host, p.http.port()),
          "/metrics, the dashboard at ", HttpAddress(http_options->host, p.http.port()), "/ (",
          http_options->tokens.empty() ? "open to anyone who reaches it"
                                       : "the operator token required",
          ")");
  return absl::OkStatus();
}

// Calls are authenticated from here on; --health_port, SERVING, --port_file, the log line.
absl::Status CoordinatorServer::Serve() {
  Parts& p = *parts_;
  const CoordinatorServerOptions& o = p.options;
  const Authenticator authenticator(p.auth);
  const std::string auth_description = authenticator.Describe();
  p.service->SetAuthenticator(authenticator);
  if (!p.generated.empty()) {
    LogInfo("meshrt-coordinator: generated credentials in ", p.generated, "/ (", kClientTokenFile,
            " for clients, ", kOperatorTokenFile, ", ", kClusterTokenFile,
            " for workers); the CLI and workers on this machine find them there");
  }
  if (o.credentials.insecure) {
    LogWarning("meshrt-coordinator: --insecure: ",
               o.credentials.any_token()
                   ? "roles without a token accept any caller"
                   : "no credentials: anyone who reaches the port can use every session, read "
                     "models and register workers");
  }
  if (o.health_port > 0) {
    p.health = StartHealthServer(o.host, static_cast<int>(o.health_port));
    if (p.health == nullptr) {
      return absl::UnavailableError(absl::StrFormat("cannot listen on %s:%lld (--health_port)",
                                                    o.host, static_cast<long long>(o.health_port)));
    }
  }
  SetHealth({p.server.get(), p.health.get()}, kHealthService, true);
  if (!o.port_file.empty()) {
    std::string tmp = o.port_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d\n", p.bound_port);
      std::fclose(f);
      std::rename(tmp.c_str(), o.port_file.c_str());
    }
  }
  const absl::Duration lease = o.coordinator.session_lease;
  LogInfo("meshrt-coordinator: serving on ", o.host, ":", p.bound_port, " (",
          p.security.Describe(), "; ", auth_description, "; session lease ",
          lease == absl::ZeroDuration() ? std::string("off") : absl::FormatDuration(lease), ")");
  return absl::OkStatus();
}

int CoordinatorServer::port() const { return parts_->bound_port; }

Coordinator& CoordinatorServer::coordinator() { return *parts_->coordinator; }

bool CoordinatorServer::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (parts_->stop == nullptr || !parts_->stop->load()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

void CoordinatorServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  Parts& p = *parts_;
  LogInfo("meshrt-coordinator: stopping");
  SetHealth({p.server.get(), p.health.get()}, kHealthService, false);
  if (p.health != nullptr) p.health->Shutdown(std::chrono::system_clock::now());
  p.http.Stop();
  p.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace meshrt
