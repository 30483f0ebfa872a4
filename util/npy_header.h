// The header of a NumPy `.npy` file (format versions 1.0 and 2.0): the magic, the version, the
// header length and the header's dict literal, e.g.
//   \x93NUMPY \x01 \x00 <2-byte length> {'descr': '<i4', 'fortran_order': False, 'shape': (8,), }
// Shared by core's token-id reader (core/ops/ops_dataset.h: text_windows format "npy") and the CLI's
// .npy reader (client/npy.h), which adds the data and the dtypes it accepts.
//
// Only the header is parsed here: the caller decides which dtypes and shapes it takes. Errors are
// InvalidArgument and start with `source` (a path, or an op and a path). Thread-safe (pure).
#ifndef MESHRT_UTIL_NPY_HEADER_H_
#define MESHRT_UTIL_NPY_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {

struct NpyHeader {
  std::string descr;           // the dtype as NumPy spells it, e.g. "<i4", "<u2", "<f4"
  bool fortran_order = false;  // as stored; callers refuse True
  std::vector<int64_t> dims;   // sizes in order; empty for a scalar
  size_t data_offset = 0;      // bytes before the data (preamble + header)
};

// The most bytes of the preamble (magic, version, header length) a file can have: enough for
// NpyDataOffset.
inline constexpr size_t kNpyPreambleSize = 12;

// The data offset of the file starting with `prefix` (its first min(kNpyPreambleSize, file size)
// bytes): InvalidArgument when the magic or version is wrong or the preamble is cut short.
absl::StatusOr<size_t> NpyDataOffset(absl::string_view prefix, absl::string_view source);

// Parses the header at the start of `bytes`, which holds at least the whole header (anything
// after it, the data, is ignored). InvalidArgument: bad magic, unsupported version, a header
// longer than `bytes`, a malformed dict (naming the offset), a missing key.
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, absl::string_view source);

// "(8, 16)", "(8,)" or "()": sizes the way NumPy prints a shape.
std::string NpyShapeString(const std::vector<int64_t>& dims);

}  // namespace meshrt

#endif  // MESHRT_UTIL_NPY_HEADER_H_
