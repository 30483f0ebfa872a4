#include "core/logging.h"

#include <sys/stat.h>
#include <unistd.h>

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

std::string StderrLogPath() {
  struct stat st;
  if (fstat(2, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  char path[4096];
  const ssize_t n = readlink("/proc/self/fd/2", path, sizeof(path) - 1);
  if (n <= 0 || path[0] != '/') return "";
  return std::string(path, n);
}

}  // namespace meshrt
