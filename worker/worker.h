// Worker: the logic of a worker daemon, without gRPC. Holds the sessions the coordinator loaded
// onto this process — each a lowered program, this worker's mesh coordinate, a connected
// Communicator and the Executor — and runs their steps.
//
// Thread-safe: the coordinator may load, run and close different sessions concurrently. Steps of
// one session run one at a time (the coordinator never overlaps them; a second concurrent step is
// refused with FailedPrecondition rather than queued).
#ifndef MESHRT_WORKER_WORKER_H_
#define MESHRT_WORKER_WORKER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/ops/kernel_runner.h"
#include "core/reference/interpreter.h"
#include "proto/checkpoint.pb.h"
#include "proto/session.pb.h"
#include "runtime/communicator.h"
#include "runtime/step_request.h"
#include "util/file_access.h"
#include "worker/worker_metrics.h"

namespace meshrt {

// Makes the communicator of a session: joins every group in `groups` (sets of mesh axes) before
// returning, so collectives never wait for a connection. Implementations: Gloo (worker daemon),
// in-memory hubs (tests).
class CommunicatorFactory {
 public:
  virtual ~CommunicatorFactory() = default;
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Create(
      const v1::SessionSpec& spec, const Mesh& mesh, const std::vector<std::vector<int>>& groups) = 0;
};

// The groups of mesh axes `program`'s collectives use (sorted, size-1 groups dropped), plus the
// whole mesh (used for the barrier at session end).
std::vector<std::vector<int>> CollectiveGroups(const v1::Program& program);

// What the sessions of a Worker may touch on its host (util/file_access.h). Both policies are
// borrowed and must outlive the Worker. The defaults allow everything (in-process test workers);
// the worker daemon passes its flags' policies, which allow nothing when the flag is not given.
struct WorkerFileAccess {
  // Files the sessions' ops may read (text_windows): --data_dir.
  const FileAccessPolicy* data = &FileAccessPolicy::AllowAll();
  // Directories checkpoints are written to and read from: --checkpoint_root.
  const FileAccessPolicy* checkpoints = &FileAccessPolicy::AllowAll();
};

class Worker {
 public:
  // `kernels` and `communicators` are borrowed; must outlive the Worker.
  Worker(const KernelRunner* kernels, CommunicatorFactory* communicators,
         WorkerFileAccess files = WorkerFileAccess());
  ~Worker();

  // Keeps the program and connects the session's communicator. InvalidArgument for a malformed
  // spec (bad mesh, coordinate outside it); AlreadyExists if the session is loaded; errors of the
  // communicator (e.g. DeadlineExceeded when peers never join). Every error is marked as this
  // worker's own (rpc/error_origin.h): the coordinator must not take it for a lost worker.
  absl::Status LoadSession(const v1::SessionSpec& spec);

  // Runs `request.num_steps` steps (at least one) of `request.session` with this worker's feed
  // slices; returns the slices of `request.fetches` after the last. Each step runs only what
  // `request.step_fetches` and the variable updates need (Executor::Run). Variables keep their
  // slices between steps and calls. NotFound for an unknown session; the executor's errors
  // (naming the instruction, op and collective) prefixed with the step and marked as this
  // worker's own (rpc/error_origin.h). `feeds` is taken by value: the last step moves it into the
  // executor (pass an rvalue to avoid a copy). With `traces`, the repetitions
  // request.trace_first..trace_last record their timelines (runtime/step_trace.h), appended to
  // *traces in order, also those that ran before a failure.
  absl::StatusOr<TensorMap> RunStep(const StepRequest& request, TensorMap feeds,
                                    std::vector<v1::StepTrace>* traces = nullptr);

  // Checkpoints (runtime/checkpoint.h; the directory is on a filesystem shared with the
  // coordinator). The directory must resolve under `files.checkpoints` (PermissionDenied naming it
  // and --checkpoint_root otherwise). SaveCheckpoint writes the shards of the variable slices this
  // worker owns and returns their manifest entries: FailedPrecondition before the first step (no
  // values yet) or while a step runs; NotFound when the directory is not visible here.
  absl::StatusOr<std::vector<v1::CheckpointShard>> SaveCheckpoint(const std::string& session,
                                                                  const std::string& directory);
  // Restores in two phases so a session changes on every worker or on none: PREPARE reads and
  // verifies the shards overlapping this worker's slices (under the session's own mesh and layout)
  // and keeps the slices aside — NotFound / DataLoss naming the shard file and variable, and
  // nothing kept; COMMIT installs the prepared slices (FailedPrecondition when none are); ABORT
  // drops them.
  absl::Status RestoreCheckpoint(const v1::WorkerRestoreCheckpointRequest& request);

  // Frees the session at once: it is unknown to later calls (NotFound), and a step still running
  // on it stops with Aborted at its next instruction (an instruction in progress — a kernel, a
  // collective — is not interrupted; a collective whose peer has stopped fails fast) or before its
  // next repetition; its memory goes when that step returns. NotFound if
  // unknown.
  absl::Status CloseSession(const std::string& session);

  std::vector<std::string> Sessions() const;

  // What each loaded session's step thread is doing (runtime/step_activity.h), with the
  // instruction's names filled in from its program: for the heartbeats.
  std::vector<v1::WorkerActivity> Activities() const;

  // Fault injection for tests (the daemon's --debug_freeze_at_step): in every session loaded from
  // now on, step `step` blocks before instruction `instruction` (-1: its first) until the session
  // is closed, while heartbeats go on. `step` <= 0 turns it off.
  void SetDebugFreeze(int64_t step, int instruction);
  // Fault injection for tests (--debug_spin_at_step): in every session loaded from now on, step
  // `step` busy-loops on the CPU for `duration` before instruction `instruction` (-1: its first),
  // then goes on: a slow rank, not a stuck one. `step` <= 0 turns it off.
  void SetDebugSpin(int64_t step, int instruction, absl::Duration duration);
  // Whether the executors of sessions loaded from now on overlap collectives with compute
  // (ExecutorOptions::overlap_comm; the daemon's --overlap_comm): always, never, or as measured
  // on each session's first steps (ExecutorOptions::choose_overlap; logged once per fetch list).
  // kChoose by default.
  enum class Overlap { kOn, kOff, kChoose };
  void SetOverlapComm(Overlap overlap);
  // Counts the steps and collectives of sessions loaded from now on in `metrics` (borrowed; null =
  // none), and reports the loaded sessions and their buffer pools at every scrape of its registry
  // (a collector that reads this Worker: the registry must not be rendered after the Worker is
  // gone). Call once, before the first LoadSession.
  void SetMetrics(WorkerMetrics* metrics);

 private:
  struct SessionState;

  // LoadSession before its errors are marked.
  absl::Status Load(const v1::SessionSpec& spec);

  // The loaded session `session`, or NotFound.
  absl::StatusOr<std::shared_ptr<SessionState>> FindSession(const std::string& session) const;

  const KernelRunner* const kernels_;
  CommunicatorFactory* const communicators_;
  const WorkerFileAccess files_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<SessionState>> sessions_ ABSL_GUARDED_BY(mu_);
  int64_t freeze_step_ ABSL_GUARDED_BY(mu_) = 0;
  int freeze_instruction_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t spin_step_ ABSL_GUARDED_BY(mu_) = 0;
  int spin_instruction_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Duration spin_duration_ ABSL_GUARDED_BY(mu_);
  Overlap overlap_ ABSL_GUARDED_BY(mu_) = Overlap::kChoose;
  WorkerMetrics* metrics_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_WORKER_H_
