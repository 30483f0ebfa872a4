// How a daemon's start-up failure becomes its exit code (no gRPC): 2 for a usage error — a flag's
// value or a file it names (the command line must change) — and 1 for any other failure to start
// (the port is in use, the coordinator never answered). The server classes (worker_server.h,
// coordinator_server.h) mark their usage errors with UsageError(); the mains print the message and
// exit with DaemonExitCode().
#ifndef MESHRT_RPC_DAEMON_EXIT_H_
#define MESHRT_RPC_DAEMON_EXIT_H_

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace meshrt {

inline constexpr char kUsageErrorPayload[] = "meshrt.usage_error";

// `status` (not OK), marked as a usage error; its code and message are unchanged.
inline absl::Status UsageError(absl::Status status) {
  status.SetPayload(kUsageErrorPayload, absl::Cord("1"));
  return status;
}

inline bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsageErrorPayload).has_value();
}

// 0 for OK, 2 for a usage error, 1 otherwise.
inline int DaemonExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  return IsUsageError(status) ? 2 : 1;
}

}  // namespace meshrt

#endif  // MESHRT_RPC_DAEMON_EXIT_H_
