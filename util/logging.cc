#include "util/logging.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace meshrt {
namespace {

std::atomic<LogFormat> g_format{LogFormat::kText};

std::string& Program() {
  static std::string* program = new std::string("meshrt");
  return *program;
}

thread_local std::string t_session;
thread_local int64_t t_step = -1;

const char* JsonLevel(absl::string_view level) {
  if (level == "W") return "warning";
  if (level == "E") return "error";
  if (level == "F") return "fatal";
  return "info";
}

// Length of the valid UTF-8 sequence at text[i], or 0 when the bytes there are not one.
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const unsigned char c = text[i];
  size_t n;
  uint32_t min;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  uint32_t code = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const unsigned char d = text[i + k];
    if ((d & 0xc0) != 0x80) return 0;
    code = (code << 6) | (d & 0x3f);
  }
  if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return n;
}

}  // namespace

void CheckFailed(const char* file, int line, const char* cond, const std::string& msg) {
  const std::string text = FormatLogLine(g_format.load(), "F", absl::Now(), Program(), t_session,
                                        t_step, absl::StrCat(file, ":", line, " check failed: ",
                                                             cond, " ", msg));
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  std::abort();
}

void SetLogFormat(LogFormat format) { g_format.store(format); }
LogFormat GetLogFormat() { return g_format.load(); }

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log_format '", name, "' is not text or json"));
}

void SetLogProgram(absl::string_view program) { Program() = std::string(program); }

ScopedLogContext::ScopedLogContext(absl::string_view session, int64_t step)
    : previous_session_(std::move(t_session)), previous_step_(t_step) {
  t_session = std::string(session);
  t_step = step;
}

ScopedLogContext::~ScopedLogContext() {
  t_session = std::move(previous_session_);
  t_step = previous_step_;
}

std::string JsonQuoted(absl::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = text[i];
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(text.data() + i, n);
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
    i += n;
  }
  out += '"';
  return out;
}

std::string FormatLogLine(LogFormat format, absl::string_view level, absl::Time time,
                          absl::string_view program, absl::string_view session, int64_t step,
                          absl::string_view message) {
  const std::string when = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  if (format == LogFormat::kJson) {
    std::string line = absl::StrCat("{\"time\":\"", when, "\",\"level\":\"", JsonLevel(level),
                                    "\",\"program\":", JsonQuoted(program));
    if (!session.empty()) absl::StrAppend(&line, ",\"session\":", JsonQuoted(session));
    if (step >= 0) absl::StrAppend(&line, ",\"step\":", step);
    absl::StrAppend(&line, ",\"message\":", JsonQuoted(message), "}");
    return line;
  }
  std::string line = absl::StrCat(level, " ", when);
  if (!session.empty()) absl::StrAppend(&line, " session=", session);
  if (step >= 0) absl::StrAppend(&line, " step=", step);
  absl::StrAppend(&line, " ", message);
  return line;
}

void LogLine(const char* level, const std::string& msg) {
  std::string line =
      FormatLogLine(g_format.load(), level, absl::Now(), Program(), t_session, t_step, msg);
  line += '\n';
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
