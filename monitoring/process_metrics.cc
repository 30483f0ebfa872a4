#include "monitoring/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "util/version.h"

namespace meshrt {
namespace {

// Resident and virtual bytes from /proc/self/statm (its first two fields are pages).
bool ReadStatm(double* resident, double* virtual_bytes) {
  std::ifstream f("/proc/self/statm");
  long long size = 0, rss = 0;
  if (!(f >> size >> rss)) return false;
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  *resident = static_cast<double>(rss) * page;
  *virtual_bytes = static_cast<double>(size) * page;
  return true;
}

// The process's start as Unix seconds: field 22 of /proc/self/stat (clock ticks after boot) plus
// the boot time (/proc/stat's btime).
bool ReadStartTime(double* seconds) {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
  // After ")", fields start at field 3 (state); starttime is field 22.
  constexpr size_t kStartTime = 22 - 3;
  unsigned long long ticks = 0;
  if (fields.size() <= kStartTime || !absl::SimpleAtoi(fields[kStartTime], &ticks)) return false;
  std::ifstream boot("/proc/stat");
  std::string key;
  unsigned long long btime = 0;
  while (boot >> key) {
    if (key == "btime") {
      if (!(boot >> btime)) return false;
      const long hz = sysconf(_SC_CLK_TCK);
      if (hz <= 0) return false;
      *seconds = static_cast<double>(btime) + static_cast<double>(ticks) / hz;
      return true;
    }
    std::getline(boot, key);  // the rest of that line
  }
  return false;
}

bool CountOpenFds(double* count) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  *count = n - 1;  // the descriptor opendir itself holds
  return true;
}

}  // namespace

void AddProcessMetrics(MetricsRegistry* registry) {
  Gauge* resident =
      registry->AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.")
          ->WithLabels({});
  Gauge* virtual_bytes =
      registry->AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.")
          ->WithLabels({});
  Gauge* start = registry
                     ->AddGauge("process_start_time_seconds",
                                "Start time of the process since the Unix epoch in seconds.")
                     ->WithLabels({});
  Counter* cpu = registry
                     ->AddCounter("process_cpu_seconds_total",
                                  "Total user and system CPU time spent in seconds.")
                     ->WithLabels({});
  Gauge* fds =
      registry->AddGauge("process_open_fds", "Number of open file descriptors.")->WithLabels({});
  registry
      ->AddGauge("meshrt_build_info", "1, labelled with the meshrt version of this binary.",
                 {"version"})
      ->WithLabels({kMeshrtVersion})
      ->Set(1);
  double started = 0;
  if (!ReadStartTime(&started)) started = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  start->Set(started);
  registry->AddCollector([resident, virtual_bytes, cpu, fds] {
    double rss = 0, vsize = 0, open = 0;
    if (ReadStatm(&rss, &vsize)) {
      resident->Set(rss);
      virtual_bytes->Set(vsize);
    }
    rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) == 0) {
      cpu->IncrementTo(static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6);
    }
    if (CountOpenFds(&open)) fds->Set(open);
  });
}

}  // namespace meshrt
