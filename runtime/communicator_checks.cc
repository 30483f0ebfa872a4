#include "runtime/communicator_checks.h"

#include "absl/strings/str_cat.h"
#include "runtime/communicator.h"

namespace meshrt {

std::string CollectiveContext(const Mesh& mesh, absl::string_view kind,
                              const std::vector<int>& sorted_axes,
                              const std::vector<int64_t>& coordinate) {
  return absl::StrCat(kind, " over mesh axes ", MeshAxesString(mesh, sorted_axes),
                      " at processor ", CoordinateString(coordinate));
}

absl::Status CheckBuffer(absl::string_view context, int64_t size, const void* buffer) {
  if (size >= 0 && (size == 0 || buffer != nullptr)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(context, ": invalid buffer (size ", size, ")"));
}

absl::Status CheckInput(absl::string_view context, int64_t size, const void* in) {
  if (size <= 0 || in != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(context, ": input buffer is null"));
}

absl::Status InvalidReduceOp(absl::string_view context, v1::ReduceOp op) {
  return absl::InvalidArgumentError(
      absl::StrCat(context, ": invalid reduce op ", static_cast<int>(op)));
}

absl::Status CheckReduceOp(absl::string_view context, v1::ReduceOp op) {
  if (op == v1::REDUCE_SUM || op == v1::REDUCE_MAX || op == v1::REDUCE_MIN ||
      op == v1::REDUCE_PROD) {
    return absl::OkStatus();
  }
  return InvalidReduceOp(context, op);
}

absl::Status CheckRoot(absl::string_view context, int root_rank, int g) {
  if (root_rank >= 0 && root_rank < g) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(context, ": root rank ", root_rank, " is not in a group of ", g));
}

}  // namespace meshrt
