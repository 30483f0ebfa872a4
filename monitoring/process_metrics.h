// The standard process metrics every Prometheus client exports, for a meshrt daemon, read from
// Linux's /proc at scrape time (a collector; nothing is sampled in between):
//
//   process_resident_memory_bytes  gauge    resident set size (/proc/self/statm, pages × page size)
//   process_virtual_memory_bytes   gauge    virtual memory size (/proc/self/statm)
//   process_start_time_seconds     gauge    start of the process, Unix time (/proc/self/stat's
//                                           start tick + /proc/stat's btime; when unreadable, the
//                                           time AddProcessMetrics ran)
//   process_cpu_seconds_total      counter  user + system CPU time of all threads (getrusage)
//   process_open_fds               gauge    open file descriptors (/proc/self/fd)
//   meshrt_build_info{version}     gauge    1, labelled with util/version.h's version
//
// A value that cannot be read keeps its last one. Thread-safety: as MetricsRegistry.
#ifndef MESHRT_MONITORING_PROCESS_METRICS_H_
#define MESHRT_MONITORING_PROCESS_METRICS_H_

#include "monitoring/metrics.h"

namespace meshrt {

// Registers the families above in `registry` (borrowed) and their collector.
void AddProcessMetrics(MetricsRegistry* registry);

}  // namespace meshrt

#endif  // MESHRT_MONITORING_PROCESS_METRICS_H_
