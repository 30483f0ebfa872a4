// Coordinator: the logic of the coordinator daemon, without gRPC.
//
//   - Worker registry: workers register (address, Gloo address, incarnation id) and heartbeat; a
//     worker silent for `heartbeat_timeout` is dropped, and so is one whose RPC fails as
//     unreachable. A re-registration from the same address with a new incarnation replaces the old
//     entry (the process restarted).
//   - Key-value store with blocking get: Gloo's rendezvous runs on it. Each session's keys live
//     under its kv_prefix, with a quota (CoordinatorOptions::kv_*_per_processor); keys outside
//     every live session's prefix are refused, and a session's keys are deleted when it is closed
//     or fails.
//   - Checkpoints: SaveCheckpoint / RestoreCheckpoint fan out to a session's workers; a checkpoint
//     saved on one mesh and layout restores on any other (runtime/checkpoint.h).
//   - Sessions: CreateSession validates the graph, the mesh and the layout, lowers the graph, picks
//     free workers (processor p -> the p-th free worker by id), and loads the program on every one
//     of them; RunStep checks the feeds, slices them per layout, fans out to the workers, and
//     assembles the fetched slices into whole tensors. Nothing is dispatched before the input has
//     been checked. A failing worker fails its session (and only it) with an error naming the
//     worker, its mesh coordinate, the step and what the worker reported; the other workers of the
//     session are released.
//   - Leases: a session belongs to its client's lease. The client renews it (KeepAlive; any call
//     on the session renews it too); a session whose client was silent longer than
//     `session_lease` expires: a step in flight is cancelled, the session is closed on its workers
//     (which are free at once), a WARNING names it, its owner and the silence, and every later call
//     on it is FailedPrecondition "session ... expired: its client was silent for ...". It stays
//     listed (state "expired") for `expired_session_retention`, then it is forgotten (NotFound).
//   - Stuck steps: workers send what their step threads are doing with every heartbeat
//     (WorkerActivity); a step that runs too long (CoordinatorOptions::stuck_step) fails its
//     session with an error naming the processor the others wait for, its worker, mesh
//     coordinate, instruction and op. ListWorkers shows each worker's latest activity.
//
// Thread-safe. Steps of one session run one at a time; different sessions run concurrently.
// Locks, in the order they may be taken (never the reverse):
//   1. Session::step_mu — one per session, held for its whole step, checkpoint save or restore
//      (worker calls included); no other session's call and no heartbeat ever waits for it.
//   2. mu_ — the worker registry and the session table (and the sessions' failed / lease fields):
//      bookkeeping only, never held across a worker call, a lowering, a load or a sleep.
//   Leaves, taken alone: a step's own call-tracking lock, profile_mu_, Session::explain_mu, the
//   KV store's and the metrics' locks. session_isolation_test.cc holds one session's step inside
//   its worker call and checks that other sessions' steps, CreateSession, ListWorkers, Heartbeat,
//   KeepAlive, Snapshot and CloseSession complete meanwhile.
#ifndef MESHRT_COORDINATOR_COORDINATOR_H_
#define MESHRT_COORDINATOR_COORDINATOR_H_

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/cluster_snapshot.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/memory_limit.h"
#include "coordinator/step_history.h"
#include "coordinator/stuck_step.h"
#include "coordinator/worker_client.h"
#include "core/ir/limits.h"
#include "core/planning/cost_model.h"
#include "core/planning/planner.h"
#include "core/reference/interpreter.h"
#include "proto/coordinator.pb.h"
#include "rpc/auth.h"
#include "runtime/kv_store.h"
#include "runtime/step_request.h"

namespace meshrt {

struct CoordinatorOptions {
  // How often workers are told to heartbeat.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A worker silent this long is dropped (and its session fails).
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // Timeout of every collective on the workers (Gloo).
  absl::Duration collective_timeout = absl::Seconds(30);
  // How long CreateSession waits for enough free workers when the request does not say.
  absl::Duration default_worker_wait = absl::Seconds(10);
  // Deadline of one step on the workers.
  absl::Duration step_timeout = absl::Minutes(10);
  // The stuck-step watchdog (coordinator/stuck_step.h): a step running longer than
  // max(min, factor × the session's median step time), as the workers' heartbeat activities
  // show, fails its session naming the processor the others wait for.
  StuckStepOptions stuck_step;
  // After a worker fails a step, how long the others may take to report before being cancelled.
  absl::Duration failure_grace = absl::Seconds(2);
  // ... and once a worker's own RPC failed in transport (it is gone: the cause is known), how
  // long the others may take: those talking to it fail at once, the rest only wait on peers.
  absl::Duration failure_grace_after_cause = absl::Milliseconds(200);
  // Deadline of one worker's part of a checkpoint save or restore.
  absl::Duration checkpoint_timeout = absl::Minutes(10);
  // --checkpoint_root: the directory (on the filesystem shared with every worker) that checkpoint
  // names are relative to and that checkpoints never leave. Empty: checkpoints are refused.
  std::string checkpoint_root;
  // Caps on one CreateSession request (core/ir/limits.h), checked before the graph is built.
  RequestLimits limits;
  // Caps of the whole KV store (runtime/kv_store.h). The coordinator always sets its
  // require_prefix: only keys under a live session's kv_prefix are accepted.
  KeyValueStoreOptions kv;
  // Each session's quota in the KV store, per processor of its mesh (Gloo's rendezvous stores a
  // few keys per processor and mesh-axis group, of ~170 bytes per member of the group).
  int64_t kv_keys_per_processor = 4096;
  int64_t kv_bytes_per_processor = 4 << 20;
  // --session_lease: a session whose client has renewed nothing for this long expires (its
  // workers are freed). Zero: sessions never expire (only CloseSession, a failed worker or a
  // coordinator restart end them).
  absl::Duration session_lease = absl::Seconds(10);
  // How long an expired session stays listed (state "expired") and answers calls with why it
  // expired, before it is forgotten.
  absl::Duration expired_session_retention = absl::Minutes(10);
  // --memory_limit: the most bytes one worker may hold at a step's peak
  // (coordinator/memory_limit.h, checked by CreateSession before any worker loads).
  // kMemoryLimitAuto: each worker's available memory as it reported it at registration (unknown:
  // not checked); kMemoryLimitNone: no check.
  int64_t memory_limit = kMemoryLimitAuto;
  // Re-lowerings CreateSession may spend looking for a layout that fits when it refuses one.
  int memory_suggestion_lowerings = 20;
  // --profile: the hardware profile (core/planning/cost_model.h; `meshrt calibrate --out` writes one) the
  // planner predicts step times with for CreateSession's auto_layout. Default: the built-in
  // figures with placeholder collective costs.
  HardwareProfile profile = [] {
    HardwareProfile p;
    p.source = "built-in (no --profile)";
    p.collectives = DefaultCollectiveLinks();
    return p;
  }();
  // The file `profile` came from (--profile), or "". CreateSession re-reads it for every
  // auto_layout session, so a `meshrt calibrate --out FILE` run later is used without a restart
  // (a file that no longer parses keeps the last good profile, with a warning).
  std::string profile_path;
  // How long a dropped worker stays in Snapshot() as "lost".
  absl::Duration lost_worker_retention = absl::Minutes(10);
};

class Coordinator {
 public:
  // `workers` is borrowed and must outlive the Coordinator. Starts the heartbeat reaper thread.
  Coordinator(CoordinatorOptions options, WorkerClientFactory* workers);
  ~Coordinator();  // stops the reaper; closes remaining sessions on their workers

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  // Drops the worker at once (it is shutting down) and fails its session with an error naming
  // the worker and `request.reason()`. NotFound when the id and incarnation name no live worker.
  absl::Status DeregisterWorker(const v1::DeregisterWorkerRequest& request);
  InMemoryKeyValueStore& kv() { return kv_; }
  // Its Prometheus metrics (coordinator/coordinator_metrics.h); `metrics().registry()` renders
  // them (the gauges of workers and sessions are read from this Coordinator at every render).
  CoordinatorMetrics& metrics() { return metrics_; }
  // The workers, the sessions and the waiting CreateSession calls. A client sees only its own
  // sessions: other sessions' ids are left out (a worker busy in one shows session "(another
  // client's)"). Operators see everything.
  v1::ListWorkersResponse ListWorkers(const Caller& caller = Caller::Trusted());

  // The dashboard's view (coordinator/cluster_snapshot.h, coordinator_snapshot.cc), for operators
  // only (every session, full ids): the workers — live ones and those dropped in the last
  // `lost_worker_retention` — the sessions, the waiting CreateSession calls and the recent errors.
  // Copies taken under the registry lock for microseconds; never waits for a step.
  ClusterSnapshot Snapshot();
  // One session in detail: its snapshot row and loss curve, and with `explain` its layout report
  // (the cost model's JSON is computed at the first such call and kept). NotFound for an unknown
  // session.
  absl::StatusOr<SessionDetail> DescribeSession(const std::string& id, bool explain);

  // Errors: ResourceExhausted / InvalidArgument for a request over CoordinatorOptions::limits
  // (naming the limit's flag), checked before the graph is built; InvalidArgument for a bad graph,
  // mesh or layout, or a mesh needing more workers than are registered (after waiting up to the
  // request's timeout); Unavailable when enough workers are registered but not enough are free;
  // the workers' errors while loading. ResourceExhausted (coordinator/memory_limit.h) when the
  // program's peak per worker exceeds the memory limit: the smallest of --memory_limit (or, with
  // auto, the available memory of each worker picked for the session) and the request's
  // memory_limit_bytes; then no worker is asked to load. Validation and lowering run without the
  // coordinator's lock, so heartbeats are answered meanwhile.
  // The session belongs to `caller` (its name): only it and operators may use it afterwards
  // (CheckSessionAccess). Session ids are random (128 bits), never reused.
  absl::StatusOr<v1::CreateSessionResponse> CreateSession(const v1::CreateSessionRequest& request,
                                                          const Caller& caller = Caller::Trusted());

  // OK when `caller` may use session `id`: it created it, or it is an operator. NotFound for an
  // unknown session, PermissionDenied for another client's. The gRPC adapter calls this before
  // RunStep, CloseSession and the checkpoint calls.
  absl::Status CheckSessionAccess(const std::string& id, const Caller& caller);

  // `fetches` empty = the graph's outputs. Errors: NotFound for an unknown session;
  // FailedPrecondition for a session that failed earlier (repeating why); InvalidArgument for bad
  // feeds or fetches (naming them); a worker's failure, naming the worker and the step.
  // The feeds are taken (moved in or copied): workers' slices are sent from them in place.
  // With `traces`, repetitions trace_first..trace_last (1-based, inclusive, at most num_steps;
  // 0: none; InvalidArgument before anything runs otherwise) are traced on every worker and their
  // timelines, completed by step_traces.h (names, mesh coordinates, waits), appended to *traces
  // after a successful step, ordered by step and processor.
  // `request` names the session, the fetches (request.fetches), num_steps and the trace range;
  // request.step and step_fetches are the coordinator's to set (ignored here).
  absl::StatusOr<TensorMap> RunStep(const StepRequest& request, TensorMap feeds,
                                    std::vector<v1::StepTrace>* traces = nullptr);
  // The same with the request's fields as arguments.
  absl::StatusOr<TensorMap> RunStep(const std::string& session, TensorMap feeds,
                                    const std::vector<std::string>& fetches,
                                    int64_t num_steps = 1, int64_t trace_first = 0,
                                    int64_t trace_last = 0,
                                    std::vector<v1::StepTrace>* traces = nullptr);

  // Closes the session on its workers and forgets it. NotFound for an unknown session. Closing an
  // expired session only forgets it (its workers were freed when it expired).
  absl::Status CloseSession(const std::string& session);

  // Renews the leases of `sessions` for `caller` (KeepAlive). Each session that is not renewed is
  // listed in the response with why: unknown, expired (repeating why), or another client's (an
  // operator may renew any). Failed sessions are renewed too (they stay until their client closes
  // them). The response carries the lease duration. Never fails as a whole.
  v1::KeepAliveResponse KeepAlive(const std::vector<std::string>& sessions,
                                  const Caller& caller = Caller::Trusted());

  // Keeps a client's own measurements of `session` (RecordMetricsRequest: the dev BLEU of a
  // decode it ran) for the dashboard's session page. NotFound for an unknown session;
  // InvalidArgument (nothing kept) for a bad name, step or value, too many names or points.
  absl::Status RecordMetrics(const std::string& session, const v1::RecordMetricsRequest& request);

  // Checkpoints (proto/checkpoint.proto, runtime/checkpoint_store.h). `name` is relative to
  // options.checkpoint_root ("ck", "runs/ck"), which must be on a filesystem shared by the
  // coordinator and every worker of the session at the same path (on Kubernetes a shared volume).
  // Both wait for a step in flight and run between steps. Errors of both: FailedPrecondition naming
  // --checkpoint_root when there is none; InvalidArgument for an empty or absolute name or one
  // with '..'; PermissionDenied when it leads out of the root through a symlink (each naming the
  // name and --checkpoint_root); NotFound / FailedPrecondition for the session.
  //
  // SaveCheckpoint creates the checkpoint's directory if needed, takes its LOCK (FailedPrecondition
  // while another save of it runs), creates a new version directory in it, has every worker write
  // the shards it owns there, writes the version's manifest (with the session's step count and a
  // checksum) and commits the version by replacing CURRENT atomically; then it removes the versions
  // older than the one it replaced. A save that fails (the workers' errors, naming each worker by
  // id, address and mesh coordinate; FailedPrecondition before the first step: variables have no
  // values yet) removes the new version's files and leaves the previous checkpoint committed and
  // restorable; so does a coordinator that dies half way (restore ignores versions CURRENT does not
  // name). A failed save changes no variable.
  // `keep` (>= 1) versions are left, the new one included.
  absl::StatusOr<v1::SaveCheckpointResponse> SaveCheckpoint(const std::string& session,
                                                            const std::string& name, int keep = 2);
  // RestoreCheckpoint follows CURRENT (or reads an old-format checkpoint whose manifest is directly
  // in the directory; when CURRENT's version is damaged — a manifest or shard fails its checksum,
  // a file is missing — the older complete versions the saves kept, newest first, with a
  // warning), reads the manifest — DataLoss naming the file when its checksum or contents
  // are wrong — and checks it against the session's program before dispatching anything
  // (InvalidArgument naming missing, extra and mismatched variables; the mesh and layout may
  // differ; NotFound when there is no such checkpoint or no save of it was committed). Then every
  // worker prepares its slices under the session's mesh and layout (reading and verifying the
  // shards overlapping them) and, only when all succeeded, installs them; the session's step count
  // becomes the saved one. A shard missing or corrupted fails the restore with NotFound / DataLoss
  // naming the file, the variable and every worker that needed it, and no variable of the session
  // changes. Only a worker lost between preparing and installing fails the session.
  // `partial` (RestoreCheckpointRequest.partial): the checkpoint may lack some of the session's
  // variables, which keep their values; the ones it holds are checked and installed as above (a
  // checkpoint variable the session lacks is still InvalidArgument naming it).
  absl::StatusOr<v1::RestoreCheckpointResponse> RestoreCheckpoint(const std::string& session,
                                                                  const std::string& name,
                                                                  bool partial = false);

 private:
  // The auto_layout / auto_mesh_processors fields of `request` are consistent with its mesh and
  // rules: InvalidArgument naming the conflict otherwise (also for an empty mesh without them).
  static absl::Status CheckAutoLayoutRequest(const v1::CreateSessionRequest& request);
  // The planner's choice for an auto_layout request (core/planning/planner.h) within the tightest memory
  // limit CreateSession will check. Errors are the planner's, prefixed "auto_layout: ".
  absl::StatusOr<Plan> PlanSession(const Graph& graph, const v1::CreateSessionRequest& request);
  // options_.profile, first re-read from options_.profile_path when there is one.
  HardwareProfile PlannerProfile();
  struct WorkerEntry;
  struct Session;

  void ReaperLoop();
  // The heartbeats a worker silent for `gap` missed: whole intervals in it, less the one it may
  // still be in.
  int64_t MissedIntervals(absl::Duration gap) const;
  // Sets the metrics' gauges from the registry and the sessions (coordinator_metrics.cc).
  void CollectMetrics();
  // SaveCheckpoint and RestoreCheckpoint, without counting them in metrics_.
  absl::StatusOr<v1::SaveCheckpointResponse> SaveCheckpointUncounted(const std::string& session,
                                                                     const std::string& name,
                                                                     int keep);
  absl::StatusOr<v1::RestoreCheckpointResponse> RestoreCheckpointUncounted(
      const std::string& session, const std::string& name, bool partial);
  // Expires the sessions whose lease ran out (collecting them into `expired` for ReleaseSession)
  // and forgets expired ones past expired_session_retention. Requires mu_.
  void ExpireLeasesLocked(absl::Time now, std::vector<std::shared_ptr<Session>>* expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops worker `id` (if present): fails its session with `why`. Requires mu_.
  void DropWorkerLocked(int id, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks a session failed and cancels its step in flight. Requires mu_.
  void FailSessionLocked(Session* session, const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the session's workers and tells the live ones to drop it (outside mu_).
  void ReleaseSession(const std::shared_ptr<Session>& session);
  std::string DescribeWorkersLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The dashboard's row of a session (coordinator_snapshot.cc). Requires mu_.
  SessionSnapshot SnapshotSessionLocked(const Session& session, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session's processors as the registry last heard from them (stuck_step.h).
  std::vector<ProcessorView> ProcessorViewsLocked(const Session& session) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The watchdog's check while a step of `session` runs (its step lock held): DeadlineExceeded
  // naming the processor the others wait for once the step in progress is stuck (JudgeStep); a
  // slow one (its laggards still computing) logs one WARNING per step and is OK.
  absl::Status CheckStuckStep(Session* session, StepProgress* progress, ComputeWatch* compute);
  // Heartbeats older than this make a worker "not responding".
  absl::Duration StaleHeartbeat() const;
  // Which of the `n` lowest ranks a waiting session still misses, and why.
  std::string DescribeMissingLocked(int n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The workers without a session, as a session takes them: ranked ones first, in rank order.
  std::vector<WorkerEntry*> FreeWorkersInRankOrderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session `id` (its lease renewed: a call on it is a sign of life); the caller takes its
  // step lock and then calls CheckUsable. NotFound.
  absl::StatusOr<std::shared_ptr<Session>> FindSession(const std::string& id);
  // FailedPrecondition for a session that failed or expired, saying why.
  absl::Status CheckUsable(Session* session);

  // CreateSession's steps (coordinator_session.cc), in order.
  struct SessionBuild;
  // InvalidArgument for an empty graph, conflicting layout fields, or a request over the caps
  // (options_.limits), before anything in proportion to the request is allocated.
  absl::Status CheckSessionRequest(const v1::CreateSessionRequest& request) const;
  // Fills `session` (its id and owner set, not yet listed): the graph with its training, the mesh
  // and rules (the planner's with auto_layout), the program, its memory report and explain text.
  // The graph's, planner's and lowering's errors. Takes no lock of the coordinator.
  absl::StatusOr<SessionBuild> BuildSession(const v1::CreateSessionRequest& request,
                                            std::shared_ptr<Session> session);
  // ResourceExhausted for a program over `limit` (whose limit: `whose`), with the layouts that fit
  // (coordinator/memory_limit.h).
  absl::Status RefuseMemory(const SessionBuild& build, int64_t limit,
                            const std::string& whose) const;
  // The flag's and the request's memory limits, before any worker is picked.
  absl::Status CheckMemoryLimits(const SessionBuild& build,
                                 const v1::CreateSessionRequest& request) const;
  // Waits up to `wait` for enough free workers and gives them to the session, which is then
  // listed; InvalidArgument (too few registered) or Unavailable (too few free) naming the workers
  // at the deadline; with --memory_limit=auto, refuses (no worker taken) a program over the
  // memory one of them has.
  absl::Status TakeWorkers(const SessionBuild& build, absl::Duration wait);
  // Registers the session's rendezvous prefix and quota; on failure the session is failed,
  // unlisted and released.
  absl::Status RegisterRendezvous(const std::shared_ptr<Session>& session);
  // Every worker loads its processor's program at once; on failure, the first worker to fail is
  // named first (the others after it), the session is failed, unlisted and released, and the first
  // worker is dropped when the transport failed (not when it reported the error itself).
  absl::Status LoadOnWorkers(const std::shared_ptr<Session>& session);
  v1::CreateSessionResponse SessionResponse(const SessionBuild& build,
                                            const v1::CreateSessionRequest& request) const;

  // RunStep's steps (coordinator_step.cc), in order; each runs under the session's step lock.
  struct StepCalls;
  struct StepFailure;
  // InvalidArgument naming a bad fetch, feed, num_steps or trace range, before anything runs.
  static absl::Status CheckStepRequest(const Session& session, const TensorMap& feeds,
                                       const StepRequest& request);
  // The whole tensors `fetches` name, uninitialised, for the workers' slices to fill.
  static absl::StatusOr<TensorMap> AllocateFetches(const Session& session,
                                                   const std::vector<std::string>& fetches);
  // Runs `request` on every worker of the session at once (processor p with feeds[p], its slices
  // into (*fetches)[p], its timelines into (*traces)[p] when traces is not null), waits for them
  // (WaitForWorkers), cancels the stragglers; returns each processor's status.
  std::vector<absl::Status> FanOut(Session* session, const StepRequest& request,
                                   const std::vector<FeedSlices>& feeds,
                                   std::vector<FetchTargets>* fetches,
                                   std::vector<std::vector<v1::StepTrace>>* traces,
                                   StepProgress* progress);
  // Until every call returned, or one failed and the others had their grace period, or the
  // watchdog found the step stuck (then the session fails).
  void WaitForWorkers(Session* session, StepProgress* progress, StepCalls* calls);
  // OK when the step succeeded; else fails the session with its errors ranked (causes first),
  // drops the workers found dead, releases the session and returns why it failed.
  absl::Status FailStep(const std::shared_ptr<Session>& session, int64_t step,
                        const std::vector<absl::Status>& results);
  // The step's errors, causes before effects (outside failure, dead workers, workers' own
  // errors, peers' Unavailable); Cancelled ones left out. Requires mu_.
  StepFailure RankFailuresLocked(const Session& session, const std::vector<absl::Status>& results)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Internal naming the worker that did not return one of its slices.
  static absl::Status CheckFetchesFilled(const Session& session,
                                         const std::vector<FetchTargets>& fetches);

  const CoordinatorOptions options_;
  std::string incarnation_;  // random per process; set once in the constructor
  WorkerClientFactory* const factory_;
  InMemoryKeyValueStore kv_;
  CoordinatorMetrics metrics_;

  absl::Mutex profile_mu_;
  HardwareProfile profile_ ABSL_GUARDED_BY(profile_mu_);  // the planner's (PlannerProfile)

  mutable absl::Mutex mu_;
  std::map<int, std::unique_ptr<WorkerEntry>> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  int next_worker_id_ ABSL_GUARDED_BY(mu_) = 0;
  // CreateSession calls waiting for workers, by a call number: the mesh they wait for.
  std::map<int, std::string> waiting_ ABSL_GUARDED_BY(mu_);
  int next_wait_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Workers dropped recently, newest first (DropWorkerLocked; Snapshot shows them as "lost"); a
  // new registration from the same address removes its entry.
  std::deque<WorkerSnapshot> lost_workers_ ABSL_GUARDED_BY(mu_);
  // Failed steps and loads, lost workers, expired sessions (the dashboard's "recent errors").
  ErrorLog errors_;
  std::thread reaper_;
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_COORDINATOR_H_
