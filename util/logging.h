// Minimal logging and invariant checks (the installed Abseil has no absl/log).
//
// MESHRT_CHECK is for broken internal invariants only; bad user or remote input returns a Status.
// LogInfo/LogWarning/LogError write one line to stderr. Thread-safe.
//
// A line is, in the text format (the default),
//   I 2026-12-03T07:40:12.345Z session=s-1f2e step=12 coordinator: ...
// — level (I, W, E), the UTC time with milliseconds, then the session and step this thread works
// on (ScopedLogContext; omitted when none), then the message. With SetLogFormat(kJson) (the
// daemons' --log_format json) every line is one JSON object for log collectors:
//   {"time":"2026-12-03T07:40:12.345Z","level":"info","program":"meshrt-coordinator",
//    "session":"s-1f2e","step":12,"message":"coordinator: ..."}
// ("session" and "step" only when set; strings JSON-escaped, invalid UTF-8 replaced by U+FFFD).
#ifndef MESHRT_UTIL_LOGGING_H_
#define MESHRT_UTIL_LOGGING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace meshrt {

[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const std::string& msg);
void LogLine(const char* level, const std::string& msg);

enum class LogFormat { kText, kJson };
// Process-wide; call once at start-up, before other threads log.
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
// "text" or "json"; else InvalidArgument naming --log_format and the value.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);
// The "program" field of JSON lines (default "meshrt"). Call at start-up, as SetLogFormat.
void SetLogProgram(absl::string_view program);
// The --log_format flag's help text, shared by every binary that has it.
inline constexpr char kLogFormatHelp[] =
    "log line format: text (level, UTC time, session=, step=, message) or json (one object per "
    "line: time, level, program, session, step, message; for log collectors)";

// While it lives, the lines this thread logs name `session` (and `step`, when >= 0). Nests: the
// destructor restores the context it replaced. Not movable; one thread only.
class ScopedLogContext {
 public:
  explicit ScopedLogContext(absl::string_view session, int64_t step = -1);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  std::string previous_session_;
  int64_t previous_step_;
};

// One log line as LogLine writes it (without the newline), for `level` "I", "W", "E" or "F" and
// the given context; exposed for tests.
std::string FormatLogLine(LogFormat format, absl::string_view level, absl::Time time,
                          absl::string_view program, absl::string_view session, int64_t step,
                          absl::string_view message);
// `text` as a JSON string literal, quotes included.
std::string JsonQuoted(absl::string_view text);

template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine("I", absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine("W", absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine("E", absl::StrCat(args...));
}

// The file stderr (and so this log) goes to, when it is a regular file (a daemon started with
// `2>FILE`, or by LocalCluster); "" for a terminal, pipe, socket or /dev/null.
std::string StderrLogPath();

// `text`, or its first `max_bytes` bytes and "...": for messages quoting input that may be long.
inline std::string Abbreviated(absl::string_view text, size_t max_bytes) {
  return text.size() <= max_bytes ? std::string(text)
                                  : absl::StrCat(text.substr(0, max_bytes), "...");
}

}  // namespace meshrt

#define MESHRT_CHECK(cond, ...)                                                   \
  do {                                                                            \
    if (!(cond)) {                                                                \
      ::meshrt::CheckFailed(__FILE__, __LINE__, #cond, ::absl::StrCat(__VA_ARGS__)); \
    }                                                                             \
  } while (0)

#endif  // MESHRT_UTIL_LOGGING_H_
