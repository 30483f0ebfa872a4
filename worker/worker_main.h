// Entry point of the worker daemon, shared by `meshrt-worker` and `meshrt worker`.
#ifndef MESHRT_WORKER_WORKER_MAIN_H_
#define MESHRT_WORKER_WORKER_MAIN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/worker.h"

namespace meshrt {

// The MemAvailable line of /proc/meminfo-format text ("MemAvailable:  123456 kB"), in bytes; 0
// when absent or malformed (unknown: the coordinator then does not check the memory limit).
int64_t MemAvailableBytes(const std::string& meminfo);

// --overlap_comm's value: auto (kChoose), true / on / 1 (kOn), false / off / 0 (kOff);
// InvalidArgument naming the flag otherwise.
absl::StatusOr<Worker::Overlap> ParseOverlap(const std::string& text);

// Parses flags (argv[0] is the program name; `--help` prints them), registers with the
// coordinator, serves until SIGINT/SIGTERM. Returns the process exit code.
int WorkerMain(int argc, char** argv);

}  // namespace meshrt

#endif  // MESHRT_WORKER_WORKER_MAIN_H_
