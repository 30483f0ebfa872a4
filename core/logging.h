// Minimal logging and invariant checks (the installed Abseil has no absl/log).
//
// MESHRT_CHECK is for broken internal invariants only; bad user or remote input returns a Status.
// LogInfo/LogWarning/LogError write one line to stderr, prefixed with the program name. Thread-safe.
#ifndef MESHRT_CORE_LOGGING_H_
#define MESHRT_CORE_LOGGING_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace meshrt {

[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const std::string& msg);
void LogLine(const char* level, const std::string& msg);

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

#endif  // MESHRT_CORE_LOGGING_H_
