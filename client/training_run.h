// TrainingRun: a training session that survives failures. It checkpoints every `save_every` steps
// and, when a step, a save or the coordinator fails (a worker killed, a link cut, a rank stuck, the
// coordinator restarted), restores the last checkpoint on a new session and continues:
//   - on the requested mesh when enough workers are free within `replace_wait` (a replacement
//     registered, or the coordinator came back);
//   - else on the best smaller mesh the free workers allow (ChooseSmallerMesh), keeping the graph
//     and so the global batch: the loss curve continues as if nothing happened;
//   - and back on the requested mesh at the next checkpoint once enough workers are free again.
// A training graph's state is all in its variables (weights, optimizer slots, the step and data
// counters: models/train.h), so a restored step s+1 computes what the uninterrupted step s+1 did.
//
//   TrainingRunOptions o;  o.client = ...; o.graph = tg.graph.proto(); o.mesh = ...;
//   o.rules = ...; o.checkpoint = "runs/lm"; o.save_every = 50; o.resume = true;
//   ASSIGN_OR_RETURN(auto run, TrainingRun::Start(o));
//   while (run->step() < 1000) ASSIGN_OR_RETURN(TensorMap out, run->Steps(10, {"loss"}));
//   RETURN_IF_ERROR(run->Save());
//
// Thread-compatible (one thread drives it); `log` is called on that thread.
#ifndef MESHRT_CLIENT_TRAINING_RUN_H_
#define MESHRT_CLIENT_TRAINING_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "proto/graph.pb.h"

namespace meshrt {

struct TrainingRunOptions {
  ClientOptions client;
  // A training graph: each run of it is one step. With `training` (a spec naming a loss): the
  // model's graph before training, which the coordinator trains as the spec says (CreateSession's
  // TrainingSpec, core/train/training_spec.h: the graph models/train.h builds, op for op).
  v1::Graph graph;
  v1::TrainingSpec training;
  Mesh mesh;         // the requested mesh
  LayoutRules rules;  // its layout rules (they must be valid on `mesh`)
  // Checkpoint name under the coordinator's --checkpoint_root. Empty: no checkpoints, and a
  // failure is recovered by starting again from step 0.
  std::string checkpoint;
  int64_t save_every = 0;  // steps between checkpoints; 0: only when Save() is called
  int keep = 2;            // checkpoint versions kept (the newest, and older ones to fall back to)
  bool resume = false;     // start from the checkpoint when one exists (else from step 0)
  // Start restores this checkpoint (e.g. a finished run's) when `resume` found none; its step
  // count carries on. Empty: none.
  std::string initial_checkpoint;
  // `initial_checkpoint` may hold only some of the graph's variables (imported weights, e.g.
  // `meshrt train --init W.npz`): a partial restore, the others start from their initializers.
  bool initial_checkpoint_partial = false;
  bool recover = true;     // false: the first failure is returned
  // How long a recovery waits for enough free workers for the requested mesh before it continues
  // on a smaller one.
  absl::Duration replace_wait = absl::Seconds(10);
  // How long a recovery tries in all (reconnecting to the coordinator, creating the session)
  // before it gives up with the failure.
  absl::Duration recovery_timeout = absl::Minutes(2);
  int max_recoveries = 20;
  // One line per event: a checkpoint, a failure, a recovery (what failed, the mesh it continues
  // on, the steps redone). Null: nothing is reported.
  std::function<void(const std::string&)> log;
};

// One recovery, as TrainingRun::recoveries() lists it.
struct Recovery {
  std::string cause;       // the failure's message
  int64_t failed_at = 0;   // the step count when it failed
  int64_t resumed_at = 0;  // the checkpoint's step it continued from
  std::string mesh;        // the mesh it continued on
  absl::Duration took;     // failure -> the new session restored
};

class TrainingRun {
 public:
  // Connects, creates the session on the requested mesh and, with `resume`, restores the
  // checkpoint if it exists. Errors: bad options (InvalidArgument naming the option), Connect's
  // and CreateSession's (not retried: a run that cannot start says why at once).
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Start(TrainingRunOptions options);
  ~TrainingRun();  // closes the session (errors are logged)

  // Steps done: the restored checkpoint's, plus those run since. A recovery moves it back to the
  // checkpoint it restored.
  int64_t step() const { return step_; }
  const Mesh& mesh() const { return mesh_; }  // the mesh the session runs on now
  bool resumed() const { return resumed_; }   // Start restored a checkpoint
  const std::vector<Recovery>& recoveries() const { return recoveries_; }

  // Runs up to `n` steps (fewer when a checkpoint is due sooner: a save happens between requests)
  // and returns the last step's `fetches`; saves when step() reaches a multiple of save_every.
  // On a failure that a new session can get past (not a bad graph or a refused credential), it
  // recovers and runs again from the restored step: check step() after each call. Errors: the
  // failure when recover is off, or when a recovery failed (with the original cause).
  absl::StatusOr<TensorMap> Steps(int64_t n, const std::vector<std::string>& fetches);
  // Step timelines (runtime/step_trace.h): from now on, Steps traces the training steps
  // first..last (inclusive, numbered as step() counts them: the step after step() == k is k + 1)
  // on every processor; traces() holds them, StepTrace.step set to that number, in the order they
  // ran (a step redone after a recovery appears again, later). first = last = 0: off.
  void TraceSteps(int64_t first, int64_t last) {
    trace_first_ = first;
    trace_last_ = last;
  }
  const std::vector<v1::StepTrace>& traces() const { return traces_; }
  // Saves a checkpoint of step() now (recovering like Steps when the save fails).
  absl::Status Save();
  // Closes the session.
  absl::Status Close();
  // The session it runs on now (null after Close); a recovery replaces it.
  Session* session() { return session_.get(); }

 private:
  TrainingRun(TrainingRunOptions options, Graph graph);
  absl::Status Connect();
  // A new session on `mesh`; `restore`: the checkpoint when there is one (else `fallback`, if
  // given — the initial checkpoint, restored partially when initial_checkpoint_partial — else
  // step 0).
  absl::Status Open(const Mesh& mesh, bool restore, const std::string& fallback = "");
  absl::Status SaveNow();
  // After `cause`: a new session restored from the checkpoint, or the error to return.
  absl::Status Recover(const absl::Status& cause);
  // At a checkpoint on a smaller mesh: back to the requested one when enough workers are free.
  void MaybeGrowBack();
  absl::StatusOr<int> FreeWorkers();
  void Log(const std::string& line) const;

  TrainingRunOptions options_;
  Graph graph_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Session> session_;
  Mesh mesh_;
  int64_t step_ = 0;
  int64_t saved_step_ = -1;  // the step of the newest checkpoint this run saved or restored
  bool resumed_ = false;
  std::vector<Recovery> recoveries_;
  int64_t trace_first_ = 0, trace_last_ = 0;
  std::vector<v1::StepTrace> traces_;
};

// The failures a new session may get past (a worker or the coordinator lost, a timeout, a session
// the coordinator no longer knows), as opposed to errors of the request itself.
bool IsRecoverable(const absl::Status& s);

// The mesh to continue on with `free` workers: the requested mesh's dims (same names and order)
// with sizes no larger than requested and at most `free` processors in all, on which `rules`
// (read by dim name) are valid for every tensor of `graph`; the most processors first, then the
// fewest bytes sent per worker per step (core/planning/explain.h), then the mesh string. NotFound when no
// mesh fits (naming the requested mesh and `free`).
absl::StatusOr<Mesh> ChooseSmallerMesh(const Graph& graph, const Mesh& requested,
                                       const LayoutRules& rules, int free);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_TRAINING_RUN_H_
