// Entry point of the coordinator daemon, shared by `meshrt-coordinator` and `meshrt coordinator`.
#ifndef MESHRT_COORDINATOR_COORDINATOR_MAIN_H_
#define MESHRT_COORDINATOR_COORDINATOR_MAIN_H_

namespace meshrt {

// Parses flags (argv[0] is the program name; `--help` prints them), serves until SIGINT/SIGTERM.
// Returns the process exit code.
int CoordinatorMain(int argc, char** argv);

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_COORDINATOR_MAIN_H_
