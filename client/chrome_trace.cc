#include "client/chrome_trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/logging.h"

namespace meshrt {
namespace {

// A JSON string literal (util/logging.h; invalid UTF-8 becomes U+FFFD, so the file stays JSON).
std::string Quote(absl::string_view s) { return JsonQuoted(s); }

// "rank 1 (rows=0,cols=1) worker 5", from the mesh text "rows:2,cols:2".
std::string RankName(const v1::StepTrace& t) {
  std::vector<std::string> dims;
  for (absl::string_view d : absl::StrSplit(t.mesh(), ',', absl::SkipEmpty())) {
    dims.push_back(std::string(d.substr(0, d.find(':'))));
  }
  std::vector<std::string> coord;
  for (int a = 0; a < t.coordinate_size(); ++a) {
    coord.push_back(a < static_cast<int>(dims.size()) ? absl::StrCat(dims[a], "=", t.coordinate(a))
                                                      : absl::StrCat(t.coordinate(a)));
  }
  return absl::StrCat("rank ", t.processor(), " (", absl::StrJoin(coord, ","), ") worker ",
                      t.worker_id());
}

// "ALLREDUCE" from "collective ALLREDUCE over [rows]".
std::string CollectiveKind(const std::string& what) {
  std::vector<std::string> words = absl::StrSplit(what, ' ');
  return words.size() >= 2 && words[0] == "collective" ? words[1] : "collective";
}

class EventList {
 public:
  void Add(const std::string& name, const std::string& cat, int pid, int tid, int64_t ts,
           int64_t dur, const std::vector<std::string>& args) {
    events_.push_back(absl::StrCat("{\"name\":", Quote(name), ",\"cat\":", Quote(cat),
                                   ",\"ph\":\"X\",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":", ts,
                                   ",\"dur\":", dur, ",\"args\":{", absl::StrJoin(args, ","),
                                   "}}"));
  }
  void Meta(const std::string& name, int pid, int tid, const std::string& arg) {
    events_.push_back(absl::StrCat("{\"name\":", Quote(name), ",\"ph\":\"M\",\"pid\":", pid,
                                   ",\"tid\":", tid, ",\"args\":{", arg, "}}"));
  }
  const std::vector<std::string>& events() const { return events_; }

 private:
  std::vector<std::string> events_;
};

std::string Arg(const std::string& key, const std::string& value) {
  return absl::StrCat(Quote(key), ":", Quote(value));
}
std::string Arg(const std::string& key, int64_t value) {
  return absl::StrCat(Quote(key), ":", value);
}

}  // namespace

absl::StatusOr<std::pair<int64_t, int64_t>> ParseTraceSteps(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  int64_t a = 0, b = 0;
  const bool parsed = (parts.size() == 1 && absl::SimpleAtoi(parts[0], &a) && (b = a, true)) ||
                      (parts.size() == 2 && absl::SimpleAtoi(parts[0], &a) &&
                       absl::SimpleAtoi(parts[1], &b));
  if (!parsed || a < 1 || b < a) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--trace_steps '", text, "': expected A:B with 1 <= A <= B (steps A to B inclusive) or N"));
  }
  return std::make_pair(a, b);
}

std::string ChromeTraceJson(const std::vector<v1::StepTrace>& input) {
  // One trace per (step, rank), the last given winning (a step redone after a recovery).
  std::map<std::pair<int64_t, int>, const v1::StepTrace*> by_step;
  for (const v1::StepTrace& t : input) by_step[{t.step(), t.processor()}] = &t;
  std::vector<const v1::StepTrace*> traces;
  for (const auto& [key, t] : by_step) traces.push_back(t);

  // Placement on one timeline.
  const std::string reference = traces.empty() ? "" : traces.front()->clock();
  bool shared = true;
  int64_t origin = INT64_MAX;
  std::map<int64_t, int64_t> reference_start;  // step -> its first reference-clock rank's start
  for (const v1::StepTrace* t : traces) {
    if (t->clock() != reference || reference.empty()) {
      shared = false;
      continue;
    }
    origin = std::min(origin, t->start_us());
    reference_start.emplace(t->step(), t->start_us());  // traces are ordered by step, rank
  }
  if (origin == INT64_MAX) origin = 0;
  auto step_ts = [&](const v1::StepTrace& t) -> int64_t {
    if (!reference.empty() && t.clock() == reference) return t.start_us() - origin;
    auto r = reference_start.find(t.step());
    return r != reference_start.end() ? r->second - origin : 0;
  };

  EventList list;
  std::map<int, const v1::StepTrace*> ranks;
  for (const v1::StepTrace* t : traces) ranks.emplace(t->processor(), t);
  for (const auto& [rank, t] : ranks) {
    const int pid = rank + 1;
    list.Meta("process_name", pid, 0, Arg("name", RankName(*t)));
    list.Meta("process_sort_index", pid, 0, Arg("sort_index", rank));
    list.Meta("thread_name", pid, 1, Arg("name", "step thread"));
    list.Meta("thread_name", pid, 2, Arg("name", "comm thread"));
  }
  for (const v1::StepTrace* t : traces) {
    const int pid = t->processor() + 1;
    const int64_t base = step_ts(*t);
    list.Add(absl::StrCat("step ", t->step()), "step", pid, 1, base, t->dur_us(),
             {Arg("step", t->step()), Arg("rank", t->processor()), Arg("worker", t->worker_id()),
              Arg("clock", t->clock())});
    for (const v1::TraceEvent& e : t->events()) {
      const int tid = e.thread() == v1::TraceEvent::COMM ? 2 : 1;
      const int64_t ts = base + e.start_us();
      std::vector<std::string> args = {Arg("what", e.what()), Arg("instruction", e.instruction())};
      switch (e.kind()) {
        case v1::TraceEvent::OP:
          if (e.skipped()) args.push_back(Arg("skipped", "true"));
          list.Add(e.name().empty() ? e.what() : e.name(), "op", pid, tid, ts, e.dur_us(), args);
          break;
        case v1::TraceEvent::WAIT:
          list.Add(absl::StrCat("wait for ", e.name().empty() ? "a collective" : e.name()), "wait",
                   pid, tid, ts, e.dur_us(), args);
          break;
        case v1::TraceEvent::COLLECTIVE: {
          const bool known = e.wait_us() >= 0;
          const int64_t wait = known ? std::min(e.wait_us(), e.dur_us()) : 0;
          args.push_back(Arg("op", e.name()));
          args.push_back(Arg("bytes", e.bytes()));
          args.push_back(Arg("fused", std::max(e.fused(), 1)));
          if (known) {
            args.push_back(Arg("wait_us", wait));
            args.push_back(Arg("transfer_us", e.dur_us() - wait));
          } else {
            args.push_back(Arg("wait_us", "unknown (ranks on different clocks)"));
          }
          list.Add(absl::StrCat(CollectiveKind(e.what()), " ", e.name()), "collective", pid, tid,
                   ts, e.dur_us(), args);
          if (known && wait > 0) {
            list.Add("waiting for peers", "collective.wait", pid, tid, ts, wait,
                     {Arg("op", e.name()), Arg("wait_us", wait)});
          }
          if (known && e.dur_us() - wait > 0) {
            list.Add("transfer", "collective.transfer", pid, tid, ts + wait, e.dur_us() - wait,
                     {Arg("op", e.name()), Arg("bytes", e.bytes()),
                      Arg("transfer_us", e.dur_us() - wait)});
          }
          break;
        }
        default:
          break;
      }
    }
  }
  std::string out = "{\"traceEvents\":[\n";
  absl::StrAppend(&out, absl::StrJoin(list.events(), ",\n"));
  absl::StrAppend(&out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{",
                  Arg("producer", "meshrt step timelines"), ",",
                  Arg("clocks", shared ? "one monotonic clock: ranks on a common timeline"
                                       : "several hosts' clocks: each rank's step N starts where "
                                         "the first rank's did (not synchronised)"),
                  "}}\n");
  return out;
}

absl::Status WriteChromeTrace(const std::string& path, const std::vector<v1::StepTrace>& traces) {
  std::ofstream out(path, std::ios::trunc);
  if (out) out << ChromeTraceJson(traces);
  if (out) out.close();
  if (!out) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write the trace file ", path));
  }
  return absl::OkStatus();
}

absl::Status CheckTraceFileWritable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return absl::PermissionDeniedError(
        absl::StrCat("--trace ", path, ": cannot write it: ", std::strerror(err)));
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace meshrt
