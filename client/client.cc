#include "client/client.h"

#include <algorithm>
#include <set>
#include <system_error>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"
#include "util/logging.h"

namespace meshrt {

struct Client::Impl {
  ClientOptions options;
  Security security;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  std::unique_ptr<StepMethod> run_step;  // RunStep on raw frames (rpc/step_stream.h)

  absl::Status Annotate(const absl::Status& s) const {
    if (s.ok()) return s;
    if (s.code() == absl::StatusCode::kUnauthenticated) {
      return absl::Status(s.code(), absl::StrCat("coordinator ", options.address,
                                                 " refused this client: ", s.message()));
    }
    if (s.code() != absl::StatusCode::kUnavailable) return s;
    // No TLS hint here: Connect already proved this channel's security works, so an Unavailable
    // now is a failure (a worker died, a link was cut), not a TLS mismatch.
    return absl::Status(s.code(), absl::StrCat("coordinator ", options.address, ": ", s.message()));
  }

  // A context for one call: deadline and bearer token.
  void Prepare(grpc::ClientContext* ctx, absl::Duration timeout) const {
    SetTimeout(ctx, timeout);
    AttachToken(ctx, security);
  }

  // Leases (client.h): the open sessions' ids, renewed by `renewer` every quarter of the lease.
  void StartLease(const std::string& id, absl::Duration lease);
  void EndLease(const std::string& id);
  void RenewLoop();
  void StopRenewing();

  absl::Mutex lease_mu;
  std::set<std::string> leased ABSL_GUARDED_BY(lease_mu);
  absl::Duration lease ABSL_GUARDED_BY(lease_mu) = absl::ZeroDuration();
  bool stopping ABSL_GUARDED_BY(lease_mu) = false;
  grpc::ClientContext* renewing ABSL_GUARDED_BY(lease_mu) = nullptr;  // the KeepAlive in flight
  std::thread renewer;  // started with the first leased session
};

void Client::Impl::StartLease(const std::string& id, absl::Duration session_lease) {
  if (session_lease <= absl::ZeroDuration()) return;  // the coordinator never expires sessions
  absl::MutexLock lock(&lease_mu);
  lease = session_lease;
  leased.insert(id);
  if (!renewer.joinable()) renewer = std::thread([this] { RenewLoop(); });
}

void Client::Impl::EndLease(const std::string& id) {
  absl::MutexLock lock(&lease_mu);
  leased.erase(id);
}

void Client::Impl::RenewLoop() {
  bool failing = false;  // the last renewal failed (logged once per run of failures)
  while (true) {
    v1::KeepAliveRequest request;
    grpc::ClientContext ctx;
    {
      absl::MutexLock lock(&lease_mu);
      // A quarter of the lease: three renewals may fail (a slow network, a busy coordinator)
      // before the session is at risk.
      const absl::Duration interval = std::max(lease / 4, absl::Milliseconds(100));
      if (lease_mu.AwaitWithTimeout(absl::Condition(&stopping), interval)) return;
      if (leased.empty()) continue;
      for (const std::string& id : leased) request.add_sessions(id);
      // Short, so that one renewal stuck on the network does not delay the next.
      Prepare(&ctx, std::min(std::max(interval, absl::Milliseconds(200)), absl::Seconds(5)));
      renewing = &ctx;
    }
    v1::KeepAliveResponse response;
    // No lock here: StopRenewing cancels this call through `renewing`.
    const absl::Status s = Annotate(FromGrpcStatus(stub->KeepAlive(&ctx, request, &response)));
    absl::MutexLock lock(&lease_mu);
    renewing = nullptr;
    if (!s.ok()) {
      if (!failing && !stopping) {
        LogWarning("renewing the lease of ", request.sessions_size(), " session(s) failed (",
                   s.message(), "); retrying every ", absl::FormatDuration(lease / 4),
                   "; a session expires after ", absl::FormatDuration(lease), " without renewal");
      }
      failing = true;
      continue;
    }
    if (failing) LogInfo("renewing session leases works again");
    failing = false;
    if (response.lease_ms() > 0) lease = absl::Milliseconds(response.lease_ms());
    for (const v1::LostSession& lost : response.lost()) {
      if (leased.erase(lost.session()) > 0) {
        LogWarning("session ", lost.session(), " is no longer renewed: ", lost.reason());
      }
    }
  }
}

void Client::Impl::StopRenewing() {
  {
    absl::MutexLock lock(&lease_mu);
    stopping = true;
    if (renewing != nullptr) renewing->TryCancel();
  }
  if (renewer.joinable()) renewer.join();
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { impl_->StopRenewing(); }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("no coordinator address given (HOST:PORT)");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  SecurityOptions security_options = options.security;
  if (security_options.auth_token_file.empty()) {
    const std::string dir = DefaultCredentialsDir();
    std::optional<std::string> found;
    if (options.prefer_operator_token) {
      found = FindGeneratedToken(dir, options.address, kOperatorTokenFile);
    }
    if (!found.has_value()) found = FindGeneratedToken(dir, options.address, kClientTokenFile);
    if (found.has_value()) security_options.auth_token_file = *found;
  }
  absl::StatusOr<Security> security = LoadSecurity(security_options);
  if (!security.ok()) return security.status();
  impl->security = *std::move(security);
  auto channel = MakeChannel(options.address, impl->security);
  impl->stub = v1::Coordinator::NewStub(channel);
  impl->run_step = std::make_unique<StepMethod>(kCoordinatorRunStep, channel);
  const bool connected = channel->WaitForConnected(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options.connect_timeout)));
  // One call: it proves the coordinator accepts this client (token), and when the connection
  // failed it carries gRPC's reason (e.g. a TLS handshake error).
  grpc::ClientContext ctx;
  impl->Prepare(&ctx, connected ? options.connect_timeout : absl::Seconds(1));
  v1::ListWorkersResponse response;
  absl::Status s =
      FromGrpcStatus(impl->stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &response));
  if (!connected || s.code() == absl::StatusCode::kUnavailable ||
      s.code() == absl::StatusCode::kDeadlineExceeded) {
    const std::string hint = SecurityHint(s, impl->security);
    if (!hint.empty()) {
      return absl::UnavailableError(absl::StrCat("cannot connect to the coordinator at ",
                                                 options.address, ": ", s.message(), "; ", hint));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot reach the coordinator at ", options.address, " within ",
                     absl::FormatDuration(options.connect_timeout), "; is it running?",
                     s.ok() ? "" : absl::StrCat(" (", s.message(), ")")));
  }
  if (!s.ok()) return impl->Annotate(s);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<v1::ListWorkersResponse> Client::ListWorkers() {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, impl_->options.connect_timeout);
  v1::ListWorkersResponse response;
  absl::Status s = impl_->Annotate(
      FromGrpcStatus(impl_->stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &response)));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<std::unique_ptr<Session>> Client::CreateSession(const v1::Graph& graph,
                                                               const Mesh& mesh,
                                                               const LayoutRules& rules,
                                                               absl::Duration wait_for_workers,
                                                               const v1::TrainingSpec* training) {
  v1::CreateSessionRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_mesh() = mesh.ToProto();
  *request.mutable_rules() = rules.ToProto();
  request.set_timeout_ms(absl::ToInt64Milliseconds(wait_for_workers));
  if (training != nullptr) *request.mutable_training() = *training;
  return CreateSession(request);
}

absl::StatusOr<std::unique_ptr<Session>> Client::CreateSession(
    const v1::CreateSessionRequest& request) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, impl_->options.rpc_timeout + absl::Milliseconds(request.timeout_ms()));
  v1::CreateSessionResponse response;
  absl::Status s =
      impl_->Annotate(FromGrpcStatus(impl_->stub->CreateSession(&ctx, request, &response)));
  if (!s.ok()) return s;
  impl_->StartLease(response.session(), absl::Milliseconds(response.lease_ms()));
  auto session =
      std::unique_ptr<Session>(new Session(this, response.session(), response.explain()));
  session->plan_ = response.plan();
  for (const v1::WorkerInfo& w : response.workers()) session->worker_addresses_.push_back(w.address());
  return session;
}

Session::Session(Client* client, std::string id, std::string explain)
    : client_(client), id_(std::move(id)), explain_(std::move(explain)) {}

Session::~Session() {
  if (!closed_) {
    absl::Status s = Close();
    if (!s.ok()) LogWarning("closing session ", id_, ": ", s.message());
  }
}

absl::StatusOr<TensorMap> Session::Run(const TensorMap& feeds,
                                       const std::vector<std::string>& fetches) {
  return RunSteps(1, feeds, fetches);
}

absl::StatusOr<TensorMap> Session::RunSteps(int64_t num_steps, const TensorMap& feeds,
                                            const std::vector<std::string>& fetches) {
  return RunSteps(num_steps, feeds, fetches, nullptr);
}

absl::StatusOr<TensorMap> Session::RunSteps(int64_t num_steps, const TensorMap& feeds,
                                            const std::vector<std::string>& fetches,
                                            StepTraceRequest* trace) {
  Client::Impl& impl = *client_->impl_;
  grpc::ClientContext ctx;
  impl.Prepare(&ctx, impl.options.rpc_timeout * std::max<int64_t>(num_steps, 1));
  // Send the call's metadata with the header message: one write less per step.
  ctx.set_initial_metadata_corked(true);
  auto stream = impl.run_step->Open(&ctx);
  v1::RunStepRequest header;
  header.set_session(id_);
  header.set_num_steps(num_steps);
  for (const std::string& f : fetches) header.add_fetches(f);
  if (trace != nullptr) {
    header.set_trace_first(trace->first);
    header.set_trace_last(trace->last);
  }
  TensorAssembler fetched;
  std::vector<v1::StepTrace> traces;
  absl::Status status = CallStep(stream.get(), header, BorrowedSources(feeds), &fetched,
                                 trace != nullptr ? &traces : nullptr);
  if (!status.ok()) return impl.Annotate(status);
  absl::StatusOr<TensorMap> out = fetched.Finish();
  if (out.ok() && trace != nullptr) {
    for (v1::StepTrace& t : traces) trace->traces.push_back(std::move(t));
  }
  return out;
}

absl::Status Session::SaveCheckpoint(const std::string& name, int keep) {
  Client::Impl& impl = *client_->impl_;
  grpc::ClientContext ctx;
  impl.Prepare(&ctx, impl.options.rpc_timeout);
  v1::SaveCheckpointRequest request;
  request.set_session(id_);
  request.set_directory(name);
  request.set_keep(keep);
  v1::SaveCheckpointResponse response;
  return impl.Annotate(FromGrpcStatus(impl.stub->SaveCheckpoint(&ctx, request, &response)));
}

absl::StatusOr<int64_t> Session::RestoreCheckpoint(const std::string& name, bool partial) {
  Client::Impl& impl = *client_->impl_;
  grpc::ClientContext ctx;
  impl.Prepare(&ctx, impl.options.rpc_timeout);
  v1::RestoreCheckpointRequest request;
  request.set_session(id_);
  request.set_directory(name);
  request.set_partial(partial);
  v1::RestoreCheckpointResponse response;
  absl::Status s =
      impl.Annotate(FromGrpcStatus(impl.stub->RestoreCheckpoint(&ctx, request, &response)));
  if (!s.ok()) return s;
  return response.step();
}

absl::Status Session::RecordMetrics(int64_t step,
                                    const std::vector<std::pair<std::string, double>>& values) {
  Client::Impl& impl = *client_->impl_;
  grpc::ClientContext ctx;
  impl.Prepare(&ctx, impl.options.rpc_timeout);
  v1::RecordMetricsRequest request;
  request.set_session(id_);
  for (const auto& [name, value] : values) {
    v1::MetricPoint* p = request.add_points();
    p->set_name(name);
    p->set_step(step);
    p->set_value(value);
  }
  v1::RecordMetricsResponse response;
  return impl.Annotate(FromGrpcStatus(impl.stub->RecordMetrics(&ctx, request, &response)));
}

absl::Status Session::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  return client_->CloseSession(id_);
}

absl::Status Client::CloseSession(const std::string& id) {
  Client::Impl& impl = *impl_;
  impl.EndLease(id);
  grpc::ClientContext ctx;
  impl.Prepare(&ctx, absl::Seconds(30));
  v1::CloseSessionRequest request;
  request.set_session(id);
  v1::CloseSessionResponse response;
  return impl.Annotate(FromGrpcStatus(impl.stub->CloseSession(&ctx, request, &response)));
}

}  // namespace meshrt
