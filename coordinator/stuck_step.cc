#include "coordinator/stuck_step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace meshrt {

void StepDurations::Add(absl::Duration d) {
  recent_.push_back(d);
  if (static_cast<int>(recent_.size()) > kKeep) recent_.pop_front();
}

absl::Duration StepDurations::Median() const {
  if (recent_.empty()) return absl::ZeroDuration();
  std::vector<absl::Duration> sorted(recent_.begin(), recent_.end());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2];
}

absl::Duration StuckStepLimit(const StuckStepOptions& options, const StepDurations& durations) {
  return std::max(options.min, durations.Median() * options.factor);
}

std::string ShortDuration(absl::Duration d) {
  if (d < absl::Milliseconds(10)) {
    return absl::StrFormat("%.2f ms", absl::ToDoubleMilliseconds(d));
  }
  if (d < absl::Seconds(1)) return absl::StrCat(absl::ToInt64Milliseconds(d), " ms");
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

std::string DescribeStuckStepLimit(const StuckStepOptions& options,
                                   const StepDurations& durations) {
  return absl::StrCat(
      ShortDuration(StuckStepLimit(options, durations)),
      " (the larger of --stuck_step_min_ms=", absl::ToInt64Milliseconds(options.min),
      " and --stuck_step_factor=", options.factor,
      durations.size() == 0
          ? " times the median step time, of which there is none yet)"
          : absl::StrCat(" times the median of the last ", durations.size(), " step times, ",
                         ShortDuration(durations.Median()), ")"));
}

namespace {

// The step a processor is on: the one it runs, or the one after its last.
int64_t StepOn(const ProcessorView& p, int64_t if_unknown) {
  if (!p.activity.has_value()) return if_unknown;
  return p.activity->running() ? p.activity->step() : p.activity->step() + 1;
}

}  // namespace

StepProgress::StepProgress(int64_t first_step, int64_t last_step, absl::Time start)
    : first_step_(first_step), last_step_(last_step), step_(first_step), since_(start) {}

void StepProgress::Update(const std::vector<ProcessorView>& processors, absl::Time now,
                          StepDurations* durations) {
  int64_t lowest = last_step_ + 1;
  for (const ProcessorView& p : processors) {
    reported_ = reported_ || p.activity.has_value();
    lowest = std::min(lowest, StepOn(p, first_step_));
  }
  // Reports older than the request say steps before it; the request ends after its last.
  lowest = std::min(std::max(lowest, first_step_), last_step_ + 1);
  if (lowest <= step_) return;
  durations->Add((now - since_) / (lowest - step_));
  step_ = lowest;
  since_ = now;
}

bool StepProgress::FirstSlowWarning() {
  if (warned_step_ == step_) return false;
  warned_step_ = step_;
  return true;
}

void StepProgress::Finish(absl::Time now, StepDurations* durations) {
  if (step_ <= last_step_) durations->Add((now - since_) / (last_step_ + 1 - step_));
  step_ = last_step_ + 1;
  since_ = now;
}

namespace {

// Position in the step sequence every processor runs: (step, ordinal); lower is further behind.
std::pair<int64_t, int64_t> Position(const ProcessorView& p) {
  if (!p.activity.has_value()) return {std::numeric_limits<int64_t>::min(), 0};
  if (!p.activity->running()) return {p.activity->step() + 1, 0};
  return {p.activity->step(), p.activity->ordinal()};
}

std::string Who(const ProcessorView& p) {
  return absl::StrCat("processor ", p.processor, " (worker ", p.worker_id, ", ", p.address,
                      ", mesh coordinate (", absl::StrJoin(p.coordinate, ","), "))");
}

// "98%", "0%".
std::string CpuPercent(double share) {
  return absl::StrCat(static_cast<int64_t>(std::lround(std::max(0.0, share) * 100)), "%");
}

bool InCollective(const ProcessorView& p) {
  return p.activity.has_value() && p.activity->running() && !p.activity->collective().empty();
}

// Where the processor is: "in instruction 4 (source_op 'h', local op 'einsum') of step 7 for
// 10.1 s". Times count on from its report by the report's age.
std::string Where(const ProcessorView& p) {
  if (!p.registered) return "gone (its worker was dropped)";
  if (!p.activity.has_value()) return "without any activity reported for this session";
  const v1::WorkerActivity& a = *p.activity;
  if (!a.running()) {
    return absl::StrCat("idle after step ", a.step(), " for ",
                        ShortDuration(absl::Milliseconds(a.step_ms()) + p.heartbeat_age));
  }
  const absl::Duration in_instruction = absl::Milliseconds(a.instruction_ms()) + p.heartbeat_age;
  std::string where =
      a.instruction() < 0
          ? absl::StrCat("at the start of step ", a.step(), " (no instruction entered yet) for ",
                         ShortDuration(in_instruction))
          : absl::StrCat("in instruction ", a.instruction(), " (source_op '", a.op(), "', ",
                         a.kind(), ") of step ", a.step(), " for ", ShortDuration(in_instruction));
  if (!a.note().empty()) absl::StrAppend(&where, " [", a.note(), "]");
  if (p.cpu_share.has_value()) {
    absl::StrAppend(&where, ", its step thread using ", CpuPercent(*p.cpu_share), " of a core");
  }
  if (p.computed_ago.has_value() && !p.computing) {
    absl::StrAppend(&where, " (last seen computing ", ShortDuration(*p.computed_ago), " ago)");
  }
  return where;
}

}  // namespace

StuckDiagnosis DiagnoseStuckStep(int64_t step, absl::Duration elapsed,
                                 const std::string& limit_text,
                                 const std::vector<ProcessorView>& processors,
                                 absl::Duration stale_heartbeat) {
  StuckDiagnosis d;
  std::vector<std::string> causes;
  for (const ProcessorView& p : processors) {
    if (p.registered && p.heartbeat_age <= stale_heartbeat) continue;
    d.behind.push_back(p.processor);
    causes.push_back(p.registered
                         ? absl::StrCat(Who(p), " is not responding (no heartbeat for ",
                                        ShortDuration(p.heartbeat_age),
                                        "; the process may be stopped or hung, or its network "
                                        "failed); it was last ",
                                        Where(p))
                         : absl::StrCat(Who(p), " is ", Where(p)));
  }
  bool everyone = false;
  if (d.behind.empty() && !processors.empty()) {
    std::pair<int64_t, int64_t> lowest = Position(processors[0]);
    for (const ProcessorView& p : processors) lowest = std::min(lowest, Position(p));
    for (const ProcessorView& p : processors) {
      if (Position(p) == lowest) d.behind.push_back(p.processor);
    }
    everyone = d.behind.size() == processors.size() && processors.size() > 1;
    for (const ProcessorView& p : processors) {
      if (Position(p) != lowest) continue;
      if (everyone) {
        causes.push_back(absl::StrCat(Who(p), " ", Where(p)));
      } else {
        causes.push_back(absl::StrCat(Who(p), " has not arrived: it is ", Where(p)));
      }
    }
  }
  std::string message = absl::StrCat("step ", step, " has run for ", ShortDuration(elapsed),
                                     ", over the stuck-step limit of ", limit_text, ": ");
  if (everyone) {
    const bool collective = InCollective(processors[0]);
    absl::StrAppend(&message, "every processor is at the same place, ",
                    collective ? "in a collective that does not complete although all have "
                                 "arrived (a network problem between them?): "
                               : "none waiting for another (a slow or stuck kernel?): ",
                    absl::StrJoin(causes, "; "));
    d.message = std::move(message);
    return d;
  }
  absl::StrAppend(&message, absl::StrJoin(causes, "; "));
  // Where the others are (most often: waiting for the ones above in a collective).
  std::vector<std::string> others;
  constexpr int kMaxOthers = 6;
  int more = 0;
  for (const ProcessorView& p : processors) {
    if (std::find(d.behind.begin(), d.behind.end(), p.processor) != d.behind.end()) continue;
    if (static_cast<int>(others.size()) == kMaxOthers) {
      ++more;
      continue;
    }
    others.push_back(absl::StrCat(Who(p), InCollective(p) ? " waits " : " is ", Where(p)));
  }
  if (!others.empty()) {
    absl::StrAppend(&message, ". Meanwhile ", absl::StrJoin(others, "; "),
                    more > 0 ? absl::StrCat("; and ", more, " more") : "");
  }
  d.message = std::move(message);
  return d;
}

ComputeWatch::ComputeWatch(const StuckStepOptions& options)
    : computing_share_(options.computing_share),
      window_ms_(std::max<int64_t>(1, absl::ToInt64Milliseconds(options.cpu_window))) {}

void ComputeWatch::Update(std::vector<ProcessorView>* processors, absl::Time now,
                          absl::Duration stale_heartbeat) {
  // Enough reports for a window at any heartbeat rate the coordinator allows, and a bound.
  constexpr size_t kMaxReports = 1024;
  for (ProcessorView& p : *processors) {
    if (p.processor < 0) continue;
    if (static_cast<size_t>(p.processor) >= histories_.size()) histories_.resize(p.processor + 1);
    History& h = histories_[p.processor];
    const bool fresh = p.registered && p.heartbeat_age <= stale_heartbeat;
    if (!p.activity.has_value() || !p.activity->running() || p.activity->step() != h.step) {
      h = History();  // idle, or another step: start afresh
      if (p.activity.has_value() && p.activity->running()) h.step = p.activity->step();
    }
    if (fresh && p.activity.has_value() && p.activity->running() && p.activity->has_step_cpu_ms()) {
      const Report r{p.activity->step_ms(), p.activity->step_cpu_ms()};
      if (!h.reports.empty() && r.step_ms < h.reports.back().step_ms) {
        h.reports.clear();  // the worker's clock went back within a step: trust only what follows
        h.share.reset();
      }
      if (h.reports.empty() || r.step_ms > h.reports.back().step_ms) {
        h.reports.push_back(r);
        // Keep the newest report at least a window older than this one, and all newer ones.
        while (h.reports.size() > kMaxReports ||
               (h.reports.size() >= 2 && r.step_ms - h.reports[1].step_ms >= window_ms_)) {
          h.reports.pop_front();
        }
        const Report& base = h.reports.front();
        if (r.step_ms - base.step_ms >= window_ms_) {
          h.share = static_cast<double>(r.cpu_ms - base.cpu_ms) /
                    static_cast<double>(r.step_ms - base.step_ms);
          if (*h.share >= computing_share_) h.last_computing = now - p.heartbeat_age;
        }
      }
    }
    p.cpu_share = fresh ? h.share : std::nullopt;
    p.computing = p.cpu_share.has_value() && *p.cpu_share >= computing_share_;
    p.computed_ago.reset();
    if (h.last_computing.has_value()) {
      p.computed_ago = std::max(absl::ZeroDuration(), now - *h.last_computing);
    }
  }
}

StepVerdict JudgeStep(int64_t step, absl::Duration elapsed, absl::Duration limit,
                      const std::string& limit_text, const std::vector<ProcessorView>& processors,
                      absl::Duration stale_heartbeat) {
  StepVerdict v;
  if (elapsed <= limit) return v;
  StuckDiagnosis d = DiagnoseStuckStep(step, elapsed, limit_text, processors, stale_heartbeat);
  v.behind = d.behind;
  // Q(p): since p was last seen computing in this step (stuck_step.h).
  bool computing = !d.behind.empty();
  std::vector<std::string> who;
  for (int n : d.behind) {
    const ProcessorView* p = nullptr;
    for (const ProcessorView& q : processors) {
      if (q.processor == n) p = &q;
    }
    const bool responding = p != nullptr && p->registered && p->heartbeat_age <= stale_heartbeat;
    const absl::Duration quiet =
        responding && p->computed_ago.has_value() ? std::min(elapsed, *p->computed_ago) : elapsed;
    if (quiet > limit) {
      computing = false;
      break;
    }
    who.push_back(absl::StrCat(Who(*p), " ", Where(*p)));
  }
  if (!computing) {
    v.kind = StepVerdict::Kind::kStuck;
    v.message = std::move(d.message);
    return v;
  }
  v.kind = StepVerdict::Kind::kSlow;
  v.message =
      absl::StrCat("step ", step, " has run for ", ShortDuration(elapsed),
                   ", over the stuck-step limit of ", limit_text, ", but ",
                   who.size() == 1                   ? "the processor the others wait for"
                   : who.size() == processors.size() ? "every processor"
                                                     : "every processor the others wait for",
                   " is still computing: ", absl::StrJoin(who, "; "),
                   ": slow, not stuck (it fails once one of them has not computed for ",
                   ShortDuration(limit), ")");
  return v;
}

std::string DescribeLostWorker(const absl::Status& status,
                               std::optional<absl::Duration> heartbeat_age,
                               absl::Duration stale_heartbeat) {
  const std::string text = absl::AsciiStrToLower(status.message());
  if (heartbeat_age.has_value() && *heartbeat_age > stale_heartbeat) {
    return absl::StrCat(
        "is not responding (no heartbeat for ", ShortDuration(*heartbeat_age),
        "; the process may be stopped or hung, or its network failed): ", status.message());
  }
  if (absl::StrContains(text, "keepalive")) {  // the connection is up, nobody answers on it
    return absl::StrCat(
        "is not responding (it answers no keepalive pings; the process may be stopped or hung, or "
        "its network failed): ",
        status.message());
  }
  for (const char* gone : {"connection refused", "failed to connect", "connection reset",
                           "socket closed", "end of tcp stream", "broken pipe"}) {
    if (absl::StrContains(text, gone)) {
      return absl::StrCat("is unreachable: its process is gone (", gone, "): ", status.message());
    }
  }
  return absl::StrCat("is unreachable (it died or its network failed): ", status.message());
}

}  // namespace meshrt
