// Reading and writing NumPy `.npy` files (format versions 1.0 and 2.0), the exchange format of the
// `meshrt` CLI's feeds and fetches. The header is parsed by util/npy_header.h.
//
// Supported: little-endian float32 (`<f4`) and int32 (`<i4`) arrays in C (row-major) order, of any
// rank including 0 (a scalar, shape `()`). Fortran-order arrays and every other dtype are refused
// with InvalidArgument rather than converted, so a feed is never silently reinterpreted.
//
// A .npy file has no dim names; they come from the graph: NpyToTensor pairs the file's sizes, in
// order, with the names of the placeholder's shape.
//
// Assumes a little-endian host (as the rest of meshrt does). All functions are thread-safe.
#ifndef MESHRT_CLIENT_NPY_H_
#define MESHRT_CLIENT_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"
#include "util/npy_header.h"  // NpyShapeString

namespace meshrt {

// The contents of a .npy file.
struct NpyArray {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;  // sizes in order; empty for a scalar
  std::string data;           // raw little-endian element bytes, C order; 4 bytes per element
};

// Parses the bytes of a .npy file. `source` (usually the path) names the file in errors, which
// are InvalidArgument: bad magic, unsupported version, malformed header, fortran_order True,
// a dtype other than '<f4'/'<i4' (naming it), a data section shorter or longer than the shape says.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view source);

// Reads and parses `path`. NotFound (naming the path) when it does not exist; errors of ParseNpy.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// Makes a Tensor of shape `expected` from `array`. The sizes of `array` must equal those of
// `expected` in order (a rank-0 `expected` accepts shape `()`); otherwise InvalidArgument
// "<what>: expected shape [batch:8, d_in:16], got (8, 15)". `what` names the value, e.g.
// "feed 'x' (x.npy)". The dtype is the file's; callers check it against what they need.
absl::StatusOr<Tensor> NpyToTensor(const NpyArray& array, const Shape& expected,
                                   absl::string_view what);

// The bytes of a .npy file holding `tensor` (dims in order, names dropped). Version 1.0 unless the
// header needs 2.0; the header is padded so the data starts at a multiple of 64 bytes, as NumPy
// does.
std::string EncodeNpy(const Tensor& tensor);

// Writes EncodeNpy(tensor) to `path` (replacing it). Errors name the path and the system error.
absl::Status WriteNpy(const std::string& path, const Tensor& tensor);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_NPY_H_
