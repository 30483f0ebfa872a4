#include "worker/worker.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ir/slicing.h"
#include "rpc/error_origin.h"
#include "rpc/wire_buffers.h"
#include "runtime/checkpoint.h"
#include "runtime/executor.h"
#include "runtime/step_activity.h"
#include "runtime/step_trace.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

struct Worker::SessionState {
  v1::SessionSpec spec;
  Mesh mesh;  // the program's
  // What the step thread does (the executor reports into it); aborted by CloseSession. Declared
  // before the executor, which borrows it.
  StepActivity activity;
  // The timeline of a traced repetition (RunStep's trace_first..trace_last); used under step_mu.
  StepTraceRecorder trace;
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<Executor> executor;
  absl::Mutex step_mu;  // held while a step, a save or a restore runs
  // Set by CloseSession: a step still running stops before its next repetition.
  std::atomic<bool> closed{false};
  // Slices of a prepared restore, installed by its COMMIT. Guarded by step_mu.
  std::optional<std::map<std::string, Tensor>> restore;
  bool restore_partial = false;  // it holds only some variables (the others keep their values)
  WorkerMetrics* metrics = nullptr;  // the Worker's when it was loaded; borrowed
};

std::vector<std::vector<int>> CollectiveGroups(const v1::Program& program) {
  std::set<std::vector<int>> groups;
  std::vector<int> all;
  for (int a = 0; a < program.mesh().dims_size(); ++a) {
    if (program.mesh().dims(a).size() > 1) all.push_back(a);
  }
  if (!all.empty()) groups.insert(all);
  for (const v1::Instruction& inst : program.instructions()) {
    if (!inst.has_collective()) continue;
    std::vector<int> axes;
    for (int a : inst.collective().mesh_axes()) {
      if (a >= 0 && a < program.mesh().dims_size() && program.mesh().dims(a).size() > 1) {
        axes.push_back(a);
      }
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    if (!axes.empty()) groups.insert(axes);
  }
  return std::vector<std::vector<int>>(groups.begin(), groups.end());
}

Worker::Worker(const KernelRunner* kernels, CommunicatorFactory* communicators,
               WorkerFileAccess files)
    : kernels_(kernels), communicators_(communicators), files_(files) {}

namespace {

// The checkpoint directory the coordinator sent, resolved under this worker's checkpoint root.
absl::StatusOr<std::string> CheckpointDirectory(const FileAccessPolicy& checkpoints,
                                                const std::string& directory) {
  absl::StatusOr<std::string> resolved = checkpoints.Resolve(directory, "checkpoint directory");
  if (resolved.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat(
        resolved.status().message(), " on this worker (it must be on a filesystem shared by the "
        "coordinator and every worker, at the same path)"));
  }
  return resolved;
}

}  // namespace

Worker::~Worker() = default;

absl::Status Worker::LoadSession(const v1::SessionSpec& spec) {
  return MarkWorkerReported(Load(spec));
}

absl::Status Worker::Load(const v1::SessionSpec& spec) {
  if (spec.session().empty()) return absl::InvalidArgumentError("session spec without a session id");
  ScopedLogContext log_session(spec.session());
  {
    absl::MutexLock lock(&mu_);
    if (sessions_.count(spec.session())) {
      return absl::AlreadyExistsError(absl::StrCat("session ", spec.session(), " is already loaded"));
    }
  }
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::FromProto(spec.program().mesh()));
  std::vector<int64_t> coord(spec.coordinate().begin(), spec.coordinate().end());
  if (static_cast<int>(coord.size()) != mesh.ndims()) {
    return absl::InvalidArgumentError(absl::StrCat("session ", spec.session(), ": coordinate (",
                                                   absl::StrJoin(coord, ","), ") does not fit mesh ",
                                                   mesh.ToString()));
  }
  for (int a = 0; a < mesh.ndims(); ++a) {
    if (coord[a] < 0 || coord[a] >= mesh.size(a)) {
      return absl::InvalidArgumentError(absl::StrCat("session ", spec.session(), ": coordinate (",
                                                     absl::StrJoin(coord, ","), ") is outside mesh ",
                                                     mesh.ToString()));
    }
  }
  auto state = std::make_shared<SessionState>();
  state->spec = spec;
  state->mesh = mesh;
  absl::StatusOr<std::unique_ptr<Communicator>> communicator =
      communicators_->Create(spec, mesh, CollectiveGroups(spec.program()));
  if (!communicator.ok()) {
    LogError("worker: loading session ", spec.session(), " at mesh coordinate (",
             absl::StrJoin(coord, ","), ") failed: ", communicator.status().message());
    return communicator.status();
  }
  state->communicator = *std::move(communicator);
  KernelContext context;
  context.files = files_.data;
  ExecutorOptions executor_options;
  {
    absl::MutexLock lock(&mu_);
    executor_options.overlap_comm = overlap_ != Overlap::kOff;
    executor_options.choose_overlap = overlap_ == Overlap::kChoose;
    executor_options.fixed_program = true;  // state->spec's, kept unchanged until the session ends
    state->metrics = metrics_;
  }
  if (state->metrics != nullptr) {
    state->communicator = std::make_unique<MeteredCommunicator>(std::move(state->communicator),
                                                                state->metrics);
  }
  state->executor = std::make_unique<Executor>(state->spec.program(), coord, kernels_,
                                               state->communicator.get(), context,
                                               executor_options);
  state->executor->set_activity(&state->activity);
  absl::MutexLock lock(&mu_);
  if (freeze_step_ > 0) state->activity.FreezeAt(freeze_step_, freeze_instruction_);
  if (spin_step_ > 0) state->activity.SpinAt(spin_step_, spin_instruction_, spin_duration_);
  sessions_[spec.session()] = std::move(state);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Worker::SessionState>> Worker::FindSession(
    const std::string& session) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("session ", session, " is not loaded on this worker"));
  }
  return it->second;
}

absl::StatusOr<TensorMap> Worker::RunStep(const StepRequest& request, TensorMap feeds,
                                          std::vector<v1::StepTrace>* traces) {
  const std::string& session = request.session;
  const int64_t step = request.step;
  const int64_t num_steps = request.num_steps;
  const std::vector<std::string>& fetches = request.fetches;
  const std::vector<std::string>& step_fetches = request.step_fetches;
  const int64_t trace_first = request.trace_first;
  const int64_t trace_last = request.trace_last;
  ScopedLogContext log_step(session, step);
  ASSIGN_OR_RETURN(std::shared_ptr<SessionState> state, FindSession(session));
  if (!state->step_mu.TryLock()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", session, ": step ", step, " arrived while another step runs"));
  }
  absl::Status status;
  int64_t done = 0;  // repetitions completed
  const int64_t repetitions = std::max<int64_t>(num_steps, 1);
  while (done < repetitions) {
    if (state->closed.load()) {
      // The coordinator closed the session under the step (its client's lease ran out, or an
      // operator closed it): stop now rather than run the remaining repetitions for nobody. Peers
      // still inside a repetition fail fast once this worker's communicator goes with the state.
      status =
          absl::AbortedError(absl::StrCat("session ", session, " was closed while this step ran"));
      break;
    }
    state->activity.BeginStep(step + done);
    const absl::Time started = absl::Now();
    const bool traced = traces != nullptr && done + 1 >= trace_first && done + 1 <= trace_last;
    if (traced) {
      state->trace.Begin(step + done);
      state->executor->set_trace(&state->trace);
    }
    const std::vector<std::string>& run_fetches = step_fetches.empty() ? fetches : step_fetches;
    // The last repetition needs the feeds no more: moved in, not copied.
    status = done + 1 == repetitions ? state->executor->Run(std::move(feeds), run_fetches)
                                     : state->executor->Run(feeds, run_fetches);
    if (state->metrics != nullptr) {
      state->metrics->StepDone(status.ok(), absl::Now() - started, state->activity.Read().step_cpu);
    }
    state->activity.EndStep();
    for (const std::string& decision : state->executor->TakeOverlapDecisions()) {
      LogInfo("meshrt-worker: session ", session, ": overlap of collectives with compute ",
              decision);
    }
    if (traced) {
      state->executor->set_trace(nullptr);
      traces->push_back(state->trace.Finish());
    }
    if (!status.ok()) break;
    ++done;
  }
  if (!status.ok() && num_steps > 1) {
    status = absl::Status(status.code(), absl::StrCat("(repetition ", done + 1, " of ", num_steps,
                                                      ") ", status.message()));
  }
  TensorMap out;
  if (status.ok()) {
    // Moved out of the executor where it can be, else copied into recycled wire storage
    // (rpc/wire_buffers.h) rather than fresh memory: the gRPC adapter sends and then recycles it.
    absl::StatusOr<TensorMap> taken = state->executor->TakeOutputSlices(fetches, NewTensorForWire);
    if (taken.ok()) {
      out = *std::move(taken);
    } else {
      status = taken.status();
    }
  }
  state->step_mu.Unlock();
  if (!status.ok()) {
    // Marked as this worker's own error (rpc/error_origin.h): the coordinator tells it from a
    // transport failure by the mark; "step N:" is for the reader.
    status = MarkWorkerReported(
        absl::Status(status.code(), absl::StrCat("step ", step, ": ", status.message())));
    if (state->closed.load() || state->activity.aborted()) {
      // Whether it stopped here or in a collective whose peer had stopped first: say so once.
      LogWarning("worker: session ", session, " was closed while step ", step,
                 " ran; it stopped after ", done, " of ", repetitions, " repetitions: ",
                 status.message());
    } else {
      LogError("worker: session ", session, " failed: ", status.message());
    }
    return status;
  }
  return out;
}

absl::StatusOr<std::vector<v1::CheckpointShard>> Worker::SaveCheckpoint(
    const std::string& session, const std::string& directory) {
  ASSIGN_OR_RETURN(std::shared_ptr<SessionState> state, FindSession(session));
  ASSIGN_OR_RETURN(const std::string resolved,
                   CheckpointDirectory(*files_.checkpoints, directory));
  if (!state->step_mu.TryLock()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", session, ": a checkpoint save arrived while a step runs"));
  }
  absl::StatusOr<std::vector<v1::CheckpointShard>> shards =
      SaveShards(state->spec.program(), state->executor->coordinate(),
                 state->executor->variables(), resolved);
  state->step_mu.Unlock();
  return shards;
}

absl::Status Worker::RestoreCheckpoint(const v1::WorkerRestoreCheckpointRequest& request) {
  ASSIGN_OR_RETURN(std::shared_ptr<SessionState> state, FindSession(request.session()));
  if (!state->step_mu.TryLock()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", request.session(), ": a checkpoint restore arrived while a step runs"));
  }
  absl::Status status;
  switch (request.phase()) {
    case v1::WorkerRestoreCheckpointRequest::PREPARE: {
      state->restore.reset();
      absl::StatusOr<std::string> resolved =
          CheckpointDirectory(*files_.checkpoints, request.directory());
      if (!resolved.ok()) {
        status = resolved.status();
        break;
      }
      // A partial restore loads (and later installs) only the variables the checkpoint holds.
      absl::StatusOr<std::map<std::string, Tensor>> slices =
          LoadSlices(request.manifest(), *resolved,
                     request.partial()
                         ? ProgramWithSavedVariables(state->spec.program(), request.manifest())
                         : state->spec.program(),
                     state->executor->coordinate());
      if (slices.ok()) {
        state->restore = *std::move(slices);
        state->restore_partial = request.partial();
      } else {
        status = slices.status();
      }
      break;
    }
    case v1::WorkerRestoreCheckpointRequest::COMMIT:
      if (!state->restore.has_value()) {
        status = absl::FailedPreconditionError(
            absl::StrCat("session ", request.session(), ": no prepared checkpoint restore to commit"));
        break;
      }
      // LoadSlices made every slice in the shape the executor expects, so no SetVariable fails
      // half way; check anyway before changing anything.
      for (const v1::ProgramVariable& v : state->spec.program().variables()) {
        if (!state->restore_partial && !state->restore->count(v.name())) {
          status = absl::InternalError(absl::StrCat("prepared restore lacks '", v.name(), "'"));
        }
      }
      if (!status.ok()) break;
      for (auto& [name, slice] : *state->restore) {
        status.Update(state->executor->SetVariable(name, std::move(slice)));
      }
      state->restore.reset();
      break;
    case v1::WorkerRestoreCheckpointRequest::ABORT:
      state->restore.reset();
      break;
    default:
      status = absl::InvalidArgumentError("checkpoint restore without a phase");
  }
  state->step_mu.Unlock();
  return status;
}

absl::Status Worker::CloseSession(const std::string& session) {
  std::shared_ptr<SessionState> state;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session);
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("session ", session, " is not loaded on this worker"));
    }
    state = std::move(it->second);
    sessions_.erase(it);
  }
  state->closed.store(true);
  state->activity.Abort();  // a step still running stops at its next instruction
  return absl::OkStatus();  // `state` dies here, or when a running step lets go of it
}

std::vector<v1::WorkerActivity> Worker::Activities() const {
  std::vector<std::shared_ptr<SessionState>> states;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) states.push_back(s);
  }
  std::vector<v1::WorkerActivity> out;
  for (const std::shared_ptr<SessionState>& state : states) {
    const StepActivity::Snapshot s = state->activity.Read();
    v1::WorkerActivity a;
    a.set_session(state->spec.session());
    a.set_step(s.step);
    a.set_running(s.running);
    a.set_instruction(s.instruction);
    a.set_ordinal(s.ordinal);
    a.set_instruction_ms(absl::ToInt64Milliseconds(s.in_instruction));
    a.set_step_ms(absl::ToInt64Milliseconds(s.in_step));
    for (int64_t c : state->spec.coordinate()) a.add_coordinate(c);
    const v1::Program& program = state->spec.program();
    if (s.instruction >= 0 && s.instruction < program.instructions_size()) {
      const v1::Instruction& instr = program.instructions(s.instruction);
      a.set_op(instr.source_op());
      a.set_kind(DescribeInstructionKind(instr, state->mesh));
      if (instr.has_collective()) {
        a.set_collective(v1::Collective::Kind_Name(instr.collective().kind()));
        for (int axis : instr.collective().mesh_axes()) {
          if (axis >= 0 && axis < state->mesh.ndims()) {
            a.add_mesh_dims(state->mesh.dims()[axis].name);
          }
        }
      }
    }
    if (s.step_cpu.has_value()) a.set_step_cpu_ms(absl::ToInt64Milliseconds(*s.step_cpu));
    if (s.frozen) a.set_note("frozen on purpose by --debug_freeze_at_step (a test fault)");
    if (s.spinning) {
      a.set_note("computing on purpose (a busy loop) by --debug_spin_at_step (a test fault)");
    }
    out.push_back(std::move(a));
  }
  return out;
}

void Worker::SetDebugFreeze(int64_t step, int instruction) {
  absl::MutexLock lock(&mu_);
  freeze_step_ = step;
  freeze_instruction_ = instruction;
}

void Worker::SetDebugSpin(int64_t step, int instruction, absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  spin_step_ = step;
  spin_instruction_ = instruction;
  spin_duration_ = duration;
}

void Worker::SetMetrics(WorkerMetrics* metrics) {
  {
    absl::MutexLock lock(&mu_);
    metrics_ = metrics;
  }
  if (metrics == nullptr) return;
  metrics->registry()->AddCollector([this, metrics] {
    std::vector<std::shared_ptr<SessionState>> states;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, s] : sessions_) states.push_back(s);
    }
    int64_t pooled = 0;
    for (const auto& s : states) pooled += s->executor->pooled_bytes();
    metrics->sessions->Set(static_cast<double>(states.size()));
    metrics->buffer_pool_bytes->Set(static_cast<double>(pooled));
  });
}

void Worker::SetOverlapComm(Overlap overlap) {
  absl::MutexLock lock(&mu_);
  overlap_ = overlap;
}

std::vector<std::string> Worker::Sessions() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, s] : sessions_) ids.push_back(id);
  return ids;
}

}  // namespace meshrt
