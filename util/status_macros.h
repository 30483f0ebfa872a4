// Status helpers. The installed Abseil (20220623) lacks RETURN_IF_ERROR / ASSIGN_OR_RETURN; these
// use the same names and meaning so they can be swapped for Abseil's own later.
#ifndef MESHRT_UTIL_STATUS_MACROS_H_
#define MESHRT_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MESHRT_STATUS_CONCAT_INNER_(a, b) a##b
#define MESHRT_STATUS_CONCAT_(a, b) MESHRT_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    const ::absl::Status _meshrt_status = (expr);    \
    if (!_meshrt_status.ok()) return _meshrt_status; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F());` assigns the value of an absl::StatusOr or returns its status.
#define ASSIGN_OR_RETURN(lhs, expr)                                                       \
  MESHRT_ASSIGN_OR_RETURN_IMPL_(MESHRT_STATUS_CONCAT_(_meshrt_statusor_, __LINE__), lhs, \
                                expr)

#define MESHRT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return statusor.status();            \
  lhs = std::move(statusor).value()

#endif  // MESHRT_UTIL_STATUS_MACROS_H_
