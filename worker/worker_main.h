// Entry point of the worker daemon, shared by `meshrt-worker` and `meshrt worker`: flags ->
// WorkerServerOptions -> WorkerServer (worker_server.h).
#ifndef MESHRT_WORKER_WORKER_MAIN_H_
#define MESHRT_WORKER_WORKER_MAIN_H_

#include "worker/worker_server.h"  // ParseOverlap, MemAvailableBytes (tested with the main)

namespace meshrt {

// Parses flags (argv[0] is the program name; `--help` prints them), registers with the
// coordinator, serves until SIGINT/SIGTERM. Returns the process exit code: 0, 2 for a usage error,
// 1 when the worker could not listen or register.
int WorkerMain(int argc, char** argv);

}  // namespace meshrt

#endif  // MESHRT_WORKER_WORKER_MAIN_H_
