#include "bench/peer_cores.h"

#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace meshrt {
namespace bench {
namespace {

// Debian's torch uses the system BLAS through this alternative.
constexpr char kSystemBlas[] = "/usr/lib/x86_64-linux-gnu/libblas.so.3";

std::string FileIdentity(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  std::string resolved = real != nullptr ? real : path;
  free(real);
  struct stat st;
  if (stat(resolved.c_str(), &st) != 0) return resolved;
  return absl::StrCat(resolved, " ", st.st_size, " ", st.st_mtime);
}

// The cached measurements, when the file holds exactly `candidates`.
bool ReadCache(const std::string& path, const std::vector<std::string>& candidates,
               std::vector<kernels::CoreMeasurement>* cores) {
  if (!kernels::ReadMeasurements(path, cores)) return false;
  for (kernels::CoreMeasurement& c : *cores) {
    if (!c.corename.empty() && !c.correct) c.error = "wrong results when measured";
  }
  if (cores->size() != candidates.size()) return false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if ((*cores)[i].requested != candidates[i]) return false;
  }
  return true;
}

}  // namespace

kernels::CoreMeasurement ParsePeerProbe(const std::string& requested, const std::string& output) {
  kernels::CoreMeasurement m;
  m.requested = requested;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, "error=")) {
      m.error = absl::StrCat("the probe said: ", line.substr(6));
      return m;
    }
    if (!absl::StartsWith(line, "corename=")) continue;
    char name[64] = {0};
    int correct = 0;
    double error = 0, gflops = 0;
    const std::string text(line);
    if (std::sscanf(text.c_str(), "corename=%63s correct=%d error=%lf gflops=%lf", name, &correct,
                    &error, &gflops) != 4) {
      break;
    }
    m.corename = name;
    m.correct = correct != 0;
    m.gflops = gflops;
    if (!m.correct) m.error = absl::StrFormat("wrong results (relative error %.3g)", error);
    return m;
  }
  const std::string first = output.substr(0, output.find('\n'));
  m.error = output.empty() ? std::string("the probe printed nothing")
                           : absl::StrCat("no result line; the probe said: ", first);
  return m;
}

kernels::CoreMeasurement MeasurePeerCore(const std::string& python, const std::string& script,
                                         const std::string& core, int timeout_seconds) {
  const std::string cmd = absl::StrCat(
      "env -u OPENBLAS_NUM_THREADS -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=", core, " timeout -s KILL ",
      timeout_seconds, " ", python, " ", script, " 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    kernels::CoreMeasurement m;
    m.requested = core;
    m.error = absl::StrCat("cannot run ", cmd);
    return m;
  }
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  const int status = pclose(pipe);
  kernels::CoreMeasurement m = ParsePeerProbe(core, out);
  if (status != 0) {
    // A crash (an instruction the CPU lacks), the timeout's kill, or a failing interpreter.
    const std::string why = absl::StrCat("the probe exited with status ", status,
                                         WIFSIGNALED(status) || WEXITSTATUS(status) >= 128
                                             ? " (killed: crashed or timed out)"
                                             : "");
    m.error = m.error.empty() ? why : absl::StrCat(m.error, "; ", why);
  }
  return m;
}

PeerCores PeerCoresFor(const std::string& python, const std::string& script,
                       const std::vector<std::string>& candidates, const std::string& cache_dir) {
  PeerCores result;
  struct stat st;
  const bool usable = !cache_dir.empty() && lstat(cache_dir.c_str(), &st) == 0 &&
                      S_ISDIR(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 022) == 0;
  if (usable) {
    const std::string key = absl::StrCat(kernels::CpuModelName(), "|", FileIdentity(python), "|",
                                         FileIdentity(kSystemBlas), "|",
                                         absl::StrJoin(candidates, ","));
    result.cache_file =
        absl::StrFormat("%s/peer-cores-%016x.txt", cache_dir, std::hash<std::string>()(key));
    if (ReadCache(result.cache_file, candidates, &result.cores)) {
      result.from_cache = true;
      return result;
    }
    result.cores.clear();
  }
  for (const std::string& core : candidates) {
    result.cores.push_back(MeasurePeerCore(python, script, core));
  }
  if (!result.cache_file.empty() && !kernels::WriteMeasurements(result.cache_file, result.cores)) {
    result.cache_file.clear();
  }
  return result;
}

}  // namespace bench
}  // namespace meshrt
