#include "runtime/step_trace.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace meshrt {

int64_t StepTraceRecorder::MonotonicMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const std::string& StepTraceRecorder::ClockId() {
  static const std::string* id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    if (in && std::getline(in, line) && !line.empty()) {
      return new std::string(absl::StrCat("boot:", absl::StripAsciiWhitespace(line)));
    }
    return new std::string(absl::StrCat("pid:", ::getpid()));
  }();
  return *id;
}

void StepTraceRecorder::Begin(int64_t step) {
  step_ = step;
  origin_us_ = MonotonicMicros();
  absl::MutexLock lock(&mu_);
  events_.clear();
}

int64_t StepTraceRecorder::Now() const { return MonotonicMicros() - origin_us_; }

void StepTraceRecorder::Add(v1::TraceEvent event) {
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

void StepTraceRecorder::AddSpan(v1::TraceEvent::Kind kind, v1::TraceEvent::Thread thread,
                                int instruction, int64_t start_us, int64_t bytes, int fused) {
  v1::TraceEvent e;
  e.set_kind(kind);
  e.set_thread(thread);
  e.set_instruction(instruction);
  e.set_start_us(start_us);
  e.set_dur_us(std::max<int64_t>(0, Now() - start_us));
  if (bytes > 0) e.set_bytes(bytes);
  if (fused > 0) e.set_fused(fused);
  Add(std::move(e));
}

v1::StepTrace StepTraceRecorder::Finish() {
  v1::StepTrace trace;
  trace.set_step(step_);
  trace.set_start_us(origin_us_);
  trace.set_dur_us(Now());
  trace.set_clock(ClockId());
  std::vector<v1::TraceEvent> events;
  {
    absl::MutexLock lock(&mu_);
    events.swap(events_);
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const v1::TraceEvent& a, const v1::TraceEvent& b) {
                     if (a.start_us() != b.start_us()) return a.start_us() < b.start_us();
                     return a.thread() < b.thread();
                   });
  for (v1::TraceEvent& e : events) *trace.add_events() = std::move(e);
  return trace;
}

}  // namespace meshrt
