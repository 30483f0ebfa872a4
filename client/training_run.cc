#include "client/training_run.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/lowering/lowering.h"
#include "core/ops/layout_names.h"
#include "core/planning/explain.h"
#include "core/train/training_spec.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// The first line of a message, at most `max` bytes: what a progress line shows.
std::string Headline(absl::string_view message, size_t max = 240) {
  return Abbreviated(message.substr(0, message.find('\n')), max);
}

// `rules` (read by dim name) bound to `mesh`, or the error.
absl::StatusOr<LayoutRules> RulesOn(const LayoutRules& rules, const Mesh& mesh) {
  return LayoutRules::FromProto(rules.ToProto(), mesh);
}

// Bytes each worker sends per step under `mesh` and `rules`: the planner's stand-in for a
// predicted step time until there is a time model.
absl::StatusOr<int64_t> SentBytesPerStep(const Graph& graph, const Mesh& mesh,
                                         const LayoutRules& rules) {
  ASSIGN_OR_RETURN(const v1::Program program, Lower(graph, mesh, rules));
  return meshrt::SentBytesPerStep(program);  // without resolves that run only on a fetch
}

}  // namespace

bool IsRecoverable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:  // the graph, the layout, a name: the same again
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kResourceExhausted:  // a full disk, a quota: not a lost worker
    case absl::StatusCode::kDataLoss:           // no intact checkpoint to go back to
    case absl::StatusCode::kOk:
      return false;
    case absl::StatusCode::kFailedPrecondition:
      // A session the coordinator failed (a worker lost) or expired; not a setting that is off
      // (no --checkpoint_root) or another save holding the checkpoint.
      return absl::StrContains(s.message(), " has failed") ||
             absl::StrContains(s.message(), "expired");
    default:
      return true;
  }
}

absl::StatusOr<Mesh> ChooseSmallerMesh(const Graph& graph, const Mesh& requested,
                                       const LayoutRules& rules, int free) {
  struct Candidate {
    Mesh mesh;
    int64_t sent_bytes;
  };
  std::vector<Candidate> candidates;
  const std::vector<Dim>& dims = requested.dims();
  std::vector<Dim> sizes = dims;
  std::function<void(size_t, int64_t)> each = [&](size_t axis, int64_t processors) {
    if (axis == dims.size()) {
      absl::StatusOr<Mesh> mesh = Mesh::Make(sizes);
      if (!mesh.ok()) return;
      absl::StatusOr<LayoutRules> bound = RulesOn(rules, *mesh);
      if (!bound.ok()) return;
      // Lower validates every tensor's layout first: an invalid mesh is an error here.
      absl::StatusOr<int64_t> bytes = SentBytesPerStep(graph, *mesh, *bound);
      if (bytes.ok()) candidates.push_back({*std::move(mesh), *bytes});
      return;
    }
    for (int64_t size = 1; size <= dims[axis].size && processors * size <= free; ++size) {
      sizes[axis].size = size;
      each(axis + 1, processors * size);
    }
  };
  if (free >= 1) each(0, 1);
  if (candidates.empty()) {
    return absl::NotFoundError(absl::StrCat("no mesh with the dims of ", requested.ToString(),
                                            " fits ", free, " free worker(s) under the layout"));
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    const int pa = a.mesh.num_processors(), pb = b.mesh.num_processors();
    if (pa != pb) return pa > pb;
    if (a.sent_bytes != b.sent_bytes) return a.sent_bytes < b.sent_bytes;
    return a.mesh.ToString() < b.mesh.ToString();
  });
  return candidates.front().mesh;
}

TrainingRun::TrainingRun(TrainingRunOptions options, Graph graph)
    : options_(std::move(options)), graph_(std::move(graph)), mesh_(options_.mesh) {}

TrainingRun::~TrainingRun() {
  absl::Status s = Close();
  if (!s.ok()) LogWarning("training run: closing its session: ", s.message());
}

void TrainingRun::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    LogInfo("training run: ", line);
  }
}

absl::StatusOr<std::unique_ptr<TrainingRun>> TrainingRun::Start(TrainingRunOptions options) {
  if (options.save_every < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("save_every is ", options.save_every, ": give N >= 1 steps, or 0 for none"));
  }
  if (options.keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep is ", options.keep, ": a checkpoint keeps at least 1 version"));
  }
  if (options.checkpoint.empty() && (options.save_every > 0 || options.resume)) {
    return absl::InvalidArgumentError(
        "save_every and resume need a checkpoint name (--checkpoint_dir NAME)");
  }
  ASSIGN_OR_RETURN(Graph graph, Graph::Build(options.graph));
  if (!options.training.loss().empty()) {
    // The graph the coordinator will run, for the checks here and the recovery's mesh choice.
    ASSIGN_OR_RETURN(TrainedGraph trained, AddTraining(graph, options.training));
    graph = std::move(trained.graph);
  }
  RETURN_IF_ERROR(CheckRulesNameGraphDims(graph, options.rules));
  RETURN_IF_ERROR(ValidateLayouts(graph, options.mesh, options.rules));
  std::unique_ptr<TrainingRun> run(new TrainingRun(std::move(options), std::move(graph)));
  RETURN_IF_ERROR(run->Connect());
  const TrainingRunOptions& o = run->options_;
  if (o.resume) {
    RETURN_IF_ERROR(run->Open(o.mesh, /*restore=*/true, o.initial_checkpoint));
    if (!run->resumed_) {
      run->Log(absl::StrCat("no checkpoint '", o.checkpoint, "' yet: starting ",
                            o.initial_checkpoint.empty()
                                ? std::string("at step 0")
                                : absl::StrCat("from '", o.initial_checkpoint, "'")));
    }
  } else {
    RETURN_IF_ERROR(run->Open(o.mesh, /*restore=*/false));
    if (!o.initial_checkpoint.empty()) {
      ASSIGN_OR_RETURN(run->step_, run->session_->RestoreCheckpoint(
                                       o.initial_checkpoint, o.initial_checkpoint_partial));
    }
  }
  return run;
}

absl::Status TrainingRun::Connect() {
  client_.reset();
  ASSIGN_OR_RETURN(client_, Client::Connect(options_.client));
  return absl::OkStatus();
}

absl::Status TrainingRun::Open(const Mesh& mesh, bool restore, const std::string& fallback) {
  ASSIGN_OR_RETURN(const LayoutRules rules, RulesOn(options_.rules, mesh));
  ASSIGN_OR_RETURN(session_, client_->CreateSession(
                                 options_.graph, mesh, rules, Client::kWorkerWait,
                                 options_.training.loss().empty() ? nullptr : &options_.training));
  mesh_ = mesh;
  step_ = 0;
  if (!restore) return absl::OkStatus();
  absl::StatusOr<int64_t> restored =
      options_.checkpoint.empty() ? absl::NotFoundError("no checkpoint name")
                                  : session_->RestoreCheckpoint(options_.checkpoint);
  if (restored.status().code() == absl::StatusCode::kNotFound && saved_step_ < 0) {
    // Nothing saved yet: the run's starting point again.
    if (!fallback.empty()) {
      ASSIGN_OR_RETURN(step_, session_->RestoreCheckpoint(
                                  fallback, options_.initial_checkpoint_partial));
      return absl::OkStatus();
    }
    return absl::OkStatus();  // step 0, as a new session's variables are
  }
  if (!restored.ok()) return restored.status();
  step_ = *restored;
  saved_step_ = step_;
  resumed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> TrainingRun::Steps(int64_t n, const std::vector<std::string>& fetches) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("Steps(", n, "): need n >= 1"));
  while (true) {
    int64_t count = n;
    if (options_.save_every > 0) {
      count = std::min(count, options_.save_every - step_ % options_.save_every);
    }
    // The traced steps of this request, as its repetitions step_ + 1 .. step_ + count.
    StepTraceRequest trace;
    const int64_t lo = std::max(trace_first_, step_ + 1);
    const int64_t hi = std::min(trace_last_, step_ + count);
    const bool traced = trace_first_ > 0 && lo <= hi;
    if (traced) {
      trace.first = lo - step_;
      trace.last = hi - step_;
    }
    absl::StatusOr<TensorMap> out =
        session_ != nullptr ? session_->RunSteps(count, {}, fetches, traced ? &trace : nullptr)
                            : absl::UnavailableError("no session (closed)");
    if (out.ok() && traced && !trace.traces.empty()) {
      // The coordinator numbers its session's steps; renumbered as this run counts them.
      int64_t first_session_step = trace.traces.front().step();
      for (const v1::StepTrace& t : trace.traces) {
        first_session_step = std::min(first_session_step, t.step());
      }
      for (v1::StepTrace& t : trace.traces) {
        t.set_step(lo + (t.step() - first_session_step));
        traces_.push_back(std::move(t));
      }
    }
    if (out.ok()) {
      step_ += count;
      if (options_.save_every > 0 && step_ % options_.save_every == 0) {
        absl::Status saved = SaveNow();
        if (!saved.ok()) {
          RETURN_IF_ERROR(Recover(saved));
          continue;
        }
        MaybeGrowBack();
      }
      return out;
    }
    RETURN_IF_ERROR(Recover(out.status()));
  }
}

absl::Status TrainingRun::Save() {
  while (true) {
    absl::Status saved = SaveNow();
    if (saved.ok()) return saved;
    RETURN_IF_ERROR(Recover(saved));
    if (saved_step_ == step_) return absl::OkStatus();  // the restored checkpoint is this step's
  }
}

absl::Status TrainingRun::SaveNow() {
  if (options_.checkpoint.empty()) {
    return absl::FailedPreconditionError("this training run has no checkpoint name");
  }
  if (session_ == nullptr) return absl::UnavailableError("no session (closed)");
  if (saved_step_ == step_) return absl::OkStatus();
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(session_->SaveCheckpoint(options_.checkpoint, options_.keep));
  saved_step_ = step_;
  Log(absl::StrFormat("saved checkpoint '%s' at step %d in %.2f s", options_.checkpoint, step_,
                      absl::ToDoubleSeconds(absl::Now() - start)));
  return absl::OkStatus();
}

absl::Status TrainingRun::Close() {
  if (session_ == nullptr) return absl::OkStatus();
  std::unique_ptr<Session> session = std::move(session_);
  return session->Close();
}

absl::StatusOr<int> TrainingRun::FreeWorkers() {
  ASSIGN_OR_RETURN(const v1::ListWorkersResponse workers, client_->ListWorkers());
  int free = 0;
  for (const v1::WorkerInfo& w : workers.workers()) {
    if (w.session().empty()) ++free;
  }
  return free;
}

void TrainingRun::MaybeGrowBack() {
  const int want = options_.mesh.num_processors();
  if (mesh_.num_processors() >= want) return;
  absl::StatusOr<int> free = FreeWorkers();
  // The workers of this session become free when it closes.
  if (!free.ok() || *free + mesh_.num_processors() < want) return;
  const Mesh smaller = mesh_;
  const absl::Time start = absl::Now();
  (void)Close();
  const int64_t at = step_;
  absl::Status s = Open(options_.mesh, /*restore=*/true);
  if (s.ok()) {
    Log(absl::StrFormat("grew back to mesh %s from %s at step %d (%.2f s)",
                        options_.mesh.ToString(), smaller.ToString(), at,
                        absl::ToDoubleSeconds(absl::Now() - start)));
    return;
  }
  // Someone else took the workers meanwhile: back on a mesh that fits.
  Log(absl::StrCat("could not grow back to mesh ", options_.mesh.ToString(), ": ",
                   Headline(s.message())));
  s = Recover(s);
  if (!s.ok()) LogError("training run: ", s.message());
}

absl::Status TrainingRun::Recover(const absl::Status& cause) {
  if (!options_.recover || !IsRecoverable(cause)) return cause;
  if (static_cast<int>(recoveries_.size()) >= options_.max_recoveries) {
    return absl::Status(cause.code(),
                        absl::StrCat("giving up after ", recoveries_.size(),
                                     " recoveries (max_recoveries); the last failure: ",
                                     cause.message()));
  }
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.recovery_timeout;
  const int64_t failed_at = step_;
  Log(absl::StrCat("step ", failed_at + 1, " failed on mesh ", mesh_.ToString(), ": ",
                   Headline(cause.message(), 600),
                   options_.checkpoint.empty() || saved_step_ < 0
                       ? "; starting again from where the run began"
                       : absl::StrCat("; recovering from the checkpoint of step ", saved_step_)));
  if (!options_.log) LogError("training run: step ", failed_at + 1, " failed: ", cause.message());
  if (session_ != nullptr) {
    std::unique_ptr<Session> old = std::move(session_);
    (void)old->Close();  // best effort: the coordinator may be gone
  }
  const int want = options_.mesh.num_processors();
  absl::Status last = cause;
  const absl::Time replace_until = start + options_.replace_wait;
  while (absl::Now() < deadline) {
    // One ListWorkers a round: it also tells whether the coordinator is still there.
    absl::StatusOr<int> free =
        client_ != nullptr ? FreeWorkers() : absl::UnavailableError("not connected");
    if (!free.ok()) {
      last = free.status();
      absl::Status c = Connect();  // the coordinator restarted, or the channel broke
      if (!c.ok()) {
        last = c;
        absl::SleepFor(absl::Milliseconds(500));
      }
      continue;
    }
    Mesh mesh = options_.mesh;
    if (*free < want) {
      if (absl::Now() < replace_until) {  // a replacement may yet register
        absl::SleepFor(absl::Milliseconds(200));
        continue;
      }
      absl::StatusOr<Mesh> smaller = ChooseSmallerMesh(graph_, options_.mesh, options_.rules, *free);
      if (!smaller.ok()) {
        last = smaller.status();
        absl::SleepFor(absl::Milliseconds(500));
        continue;
      }
      mesh = *std::move(smaller);
    }
    absl::Status opened = Open(mesh, /*restore=*/true, options_.initial_checkpoint);
    if (!opened.ok()) {
      last = opened;
      session_.reset();
      if (!IsRecoverable(opened)) break;
      absl::SleepFor(absl::Milliseconds(200));
      continue;
    }
    Recovery r;
    r.cause = std::string(cause.message());
    r.failed_at = failed_at;
    r.resumed_at = step_;
    r.mesh = mesh_.ToString();
    r.took = absl::Now() - start;
    recoveries_.push_back(r);
    Log(absl::StrFormat(
        "recovered in %.1f s: continuing on mesh %s (%d of %d workers) from step %d, redoing %d "
        "step(s)",
        absl::ToDoubleSeconds(r.took), r.mesh, mesh_.num_processors(), want, step_,
        std::max<int64_t>(0, failed_at - step_)));
    return absl::OkStatus();
  }
  return absl::Status(cause.code(),
                      absl::StrCat(cause.message(), "; recovery failed after ",
                                   absl::FormatDuration(absl::Now() - start), ": ",
                                   Headline(last.message())));
}

}  // namespace meshrt
