// Who reported an error, carried in the error itself rather than in its text: an absl::Status
// payload under kErrorOriginTypeUrl. A worker marks the errors it reports itself (its step failed
// there); an error without the mark came from the transport or from this process. ToGrpcStatus /
// FromGrpcStatus (rpc/grpc_util.h) carry the payload across gRPC, so the coordinator tells a
// worker's own Unavailable (a peer's collective failed) from a worker that is gone by the mark,
// never by parsing the message. No gRPC inside. Thread-safe (pure functions).
#ifndef MESHRT_RPC_ERROR_ORIGIN_H_
#define MESHRT_RPC_ERROR_ORIGIN_H_

#include "absl/status/status.h"

namespace meshrt {

// The payload's type URL; its value names the origin ("worker").
inline constexpr char kErrorOriginTypeUrl[] = "type.meshrt.dev/ErrorOrigin";

// `status` marked as reported by a worker itself. An OK status stays OK (it carries no payload).
absl::Status MarkWorkerReported(absl::Status status);

// Whether `status` carries MarkWorkerReported's mark.
bool IsWorkerReported(const absl::Status& status);

}  // namespace meshrt

#endif  // MESHRT_RPC_ERROR_ORIGIN_H_
