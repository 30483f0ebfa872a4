#include "rpc/error_origin.h"

#include "absl/strings/cord.h"

namespace meshrt {
namespace {

constexpr char kWorkerOrigin[] = "worker";

}  // namespace

absl::Status MarkWorkerReported(absl::Status status) {
  if (!status.ok()) status.SetPayload(kErrorOriginTypeUrl, absl::Cord(kWorkerOrigin));
  return status;
}

bool IsWorkerReported(const absl::Status& status) {
  const absl::optional<absl::Cord> origin = status.GetPayload(kErrorOriginTypeUrl);
  return origin.has_value() && *origin == kWorkerOrigin;
}

}  // namespace meshrt
