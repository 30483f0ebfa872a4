#include "core/logging.h"

#include <cstdio>
#include <cstdlib>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace meshrt {

void CheckFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "F %s:%d check failed: %s %s\n", file, line, cond, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

void LogLine(const char* level, const std::string& msg) {
  std::string line = absl::StrCat(
      level, " ", absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()), " ", msg,
      "\n");
  std::fputs(line.c_str(), stderr);
}

}  // namespace meshrt
