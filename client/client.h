// The C++ client API: connect to a coordinator, create a session for a graph on a mesh with layout
// rules, run steps (feeds in, fetches out), close it.
//
//   ASSIGN_OR_RETURN(auto client, Client::Connect({.address = "localhost:7070"}));
//   ASSIGN_OR_RETURN(auto session, client->CreateSession(graph_proto, mesh, rules));
//   ASSIGN_OR_RETURN(TensorMap out, session->Run({{"x", x}}, {"y"}));
//
// Errors come back as absl::Status with the coordinator's message (which names the tensor, dim,
// op, worker or step). Client and Session are thread-compatible; a Session must not outlive its
// Client.
//
// Leases: a session lives as long as its client renews its lease (the coordinator's
// --session_lease, 10 s by default, sent with CreateSession). A Client renews the leases of all its
// open sessions from one background thread, every quarter of the lease, also while a long step
// (RunSteps) is in flight; the thread starts with the first session and stops in ~Client. A client
// process that dies, stops or loses its network for longer than the lease loses its sessions:
// their workers are freed for others, and a later call on such a session fails with
// FailedPrecondition "session ... expired: its client was silent for ... (> --session_lease ...)".
// Failed renewals are logged once per run of failures and retried.
#ifndef MESHRT_CLIENT_CLIENT_H_
#define MESHRT_CLIENT_CLIENT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/ir/mesh.h"
#include "core/reference/interpreter.h"
#include "proto/coordinator.pb.h"
#include "proto/graph.pb.h"
#include "rpc/grpc_util.h"

namespace meshrt {

struct ClientOptions {
  std::string address;                        // coordinator host:port
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration rpc_timeout = absl::Minutes(10);  // per CreateSession / step
  // TLS and the bearer token (rpc/grpc_util.h): tls_ca_file turns TLS on; tls_cert_file and
  // tls_key_file are the client certificate for coordinators that require one; auth_token_file
  // holds the token a coordinator may require. tls_require_client_cert is ignored. Default:
  // plaintext; with no auth_token_file and a coordinator on this machine's loopback, the client
  // token that coordinator generated (rpc/auth.h; $MESHRT_HOME or ~/.meshrt, <port>/client.token).
  SecurityOptions security;
  // Without auth_token_file, look for the generated operator token before the client token (for
  // commands that show or manage every session, like `meshrt status`).
  bool prefer_operator_token = false;
};

class Client;

// Which repetitions of a request to trace, and their timelines (Session::RunSteps).
struct StepTraceRequest {
  int64_t first = 0;
  int64_t last = 0;
  std::vector<v1::StepTrace> traces;  // appended by RunSteps
};

class Session {
 public:
  ~Session();  // closes the session (errors are logged)
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }
  // The coordinator's layout report for this session (core/planning/explain.h).
  const std::string& explain() const { return explain_; }
  // The planner's report when the session was created with auto_layout (core/planning/planner.h
  // ExplainPlan), else "".
  const std::string& plan() const { return plan_; }
  // The gRPC address (host:port) of the worker serving each processor, in processor order.
  const std::vector<std::string>& worker_addresses() const { return worker_addresses_; }

  // Runs one step. `fetches` empty = the graph's outputs. Feeds are whole (logical) tensors; the
  // coordinator slices them per layout. Returns whole tensors by name.
  absl::StatusOr<TensorMap> Run(const TensorMap& feeds, const std::vector<std::string>& fetches);
  // Runs `num_steps` steps on the workers in one request (same feeds each time; a training loop
  // whose data the workers read themselves) and returns the last step's fetches. The lease is
  // renewed meanwhile, so a long request keeps its session.
  absl::StatusOr<TensorMap> RunSteps(int64_t num_steps, const TensorMap& feeds,
                                     const std::vector<std::string>& fetches);
  // The same, tracing repetitions trace->first..trace->last of the request (1-based, inclusive;
  // InvalidArgument from the coordinator unless 1 <= first <= last <= num_steps): every
  // processor's timeline of each (runtime/step_trace.h, completed by coordinator/step_traces.h,
  // ordered by step and processor; StepTrace.step is the session's step number) is appended to
  // trace->traces when the request succeeds. `trace` is borrowed; null: no trace.
  absl::StatusOr<TensorMap> RunSteps(int64_t num_steps, const TensorMap& feeds,
                                     const std::vector<std::string>& fetches,
                                     StepTraceRequest* trace);
  // Checkpoints of the session's variables (proto/checkpoint.proto). `name` is relative to the
  // coordinator's --checkpoint_root ("ck", "runs/ck") and sent as given: the coordinator refuses
  // an absolute name, '..' or a symlink out of its root (InvalidArgument / PermissionDenied), and
  // every checkpoint when it has no --checkpoint_root (FailedPrecondition naming the flag).
  // SaveCheckpoint writes a new version of the checkpoint (shards, then the manifest with the
  // session's step count) and commits it atomically; a failed save leaves the previous one
  // restorable. It fails before the first step (variables have no values yet). RestoreCheckpoint
  // loads the committed version of a checkpoint saved by a session with the same variables
  // (names, shapes, dtypes) on any mesh and layout, and returns the restored step count; a
  // missing or corrupted shard or manifest fails it (NotFound / DataLoss naming the file) and
  // changes nothing.
  // `keep` (>= 1): how many versions of the checkpoint the save leaves, the new one included (the
  // older ones are what a restore falls back to when the newest is damaged).
  absl::Status SaveCheckpoint(const std::string& name, int keep = 2);
  // `partial` (RestoreCheckpointRequest.partial): the checkpoint may hold only some of the
  // session's variables (imported weights); the others keep their values, or their initializers
  // before the first step. A saved variable the session lacks or that differs is InvalidArgument.
  absl::StatusOr<int64_t> RestoreCheckpoint(const std::string& name, bool partial = false);
  // Records measurements the client made of this session at training step `step` — a dev BLEU
  // computed from fetched weights, a held-out loss — drawn beside the loss on the dashboard's
  // session page. Names are 1-64 characters of [A-Za-z0-9_.:/-], at most 16 per session; values
  // finite (InvalidArgument otherwise, nothing recorded).
  absl::Status RecordMetrics(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // Closes the session on the coordinator and stops renewing its lease. Closing an expired
  // session is OK.
  absl::Status Close();

 private:
  friend class Client;
  Session(Client* client, std::string id, std::string explain);

  Client* client_;  // not owned
  std::string id_;
  std::string explain_;
  std::string plan_;
  std::vector<std::string> worker_addresses_;
  bool closed_ = false;
};

class Client {
 public:
  // Connects and checks the coordinator answers within `connect_timeout` and accepts this client
  // (one ListWorkers call). Errors: InvalidArgument for unreadable TLS or token files;
  // Unavailable naming the address, gRPC's reason and the likely security cause (wrong CA, no
  // client certificate, TLS on one side only); Unauthenticated when the token is missing or
  // wrong.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  // Stops the lease thread (cancelling a renewal in flight; it does not wait for its deadline).
  // Does not close open sessions: Session's destructor does, and it must run first.
  ~Client();

  // Validates, lays out, lowers and dispatches on the coordinator, waiting up to
  // `wait_for_workers` for enough workers to register. The session's lease is renewed from then
  // on (see "Leases" above). With `training` (borrowed for the call), the coordinator first adds
  // the gradients and updates it asks for (proto/session.proto TrainingSpec).
  static constexpr absl::Duration kWorkerWait = absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<Session>> CreateSession(
      const v1::Graph& graph, const Mesh& mesh, const LayoutRules& rules,
      absl::Duration wait_for_workers = kWorkerWait, const v1::TrainingSpec* training = nullptr);
  // The same for a whole request, e.g. with auto_layout (and auto_mesh_processors): the
  // coordinator's planner chooses the rules (and the mesh); Session::plan() says what and why.
  // The request's timeout_ms is the wait for workers (0: the coordinator's default).
  absl::StatusOr<std::unique_ptr<Session>> CreateSession(const v1::CreateSessionRequest& request);
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers();
  // Closes session `id` (this client's own, or any with an operator token): NotFound for an
  // unknown id, PermissionDenied for another client's. This client stops renewing its lease.
  absl::Status CloseSession(const std::string& id);

 private:
  friend class Session;
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CLIENT_H_
