// Reading and writing NumPy `.npz` files: a ZIP archive holding one `.npy` file (client/npy.h)
// per array, the member `<key>.npy` holding the array `key` (what numpy.savez writes and
// numpy.load reads). Keys may contain '/' ("layer_0/w"): numpy keeps them as member names.
//
// Writing: members are stored (not compressed), each with its CRC-32, a fixed timestamp (1980-01-01,
// so the same arrays give the same bytes), and ZIP64 records where a size or offset passes 4 GiB
// or there are more than 65535 members.
// Reading: stored and deflated members (numpy.savez_compressed), ZIP64 or not; every member's
// CRC-32 is verified. Errors name the file and the member:
//   - InvalidArgument: not a ZIP archive, a bad header signature, encryption, a compression method
//     other than stored/deflate, a member name not ending in ".npy", a duplicate key, a split
//     archive, and the member's .npy errors (ParseNpy: dtypes other than '<f4'/'<i4', ...);
//   - DataLoss: the archive is truncated (a record or member runs past the end), a CRC-32 does not
//     match, a deflate stream is corrupted or inflates to another size than recorded.
//
// All functions are thread-safe.
#ifndef MESHRT_CLIENT_NPZ_H_
#define MESHRT_CLIENT_NPZ_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/file_bytes.h"
#include "client/npy.h"
#include "core/ir/tensor.h"

namespace meshrt {

struct NpzWriteOptions {
  // Writes ZIP64 records (extra fields and the ZIP64 end of central directory) even when no size,
  // offset or count needs them. For tests of the ZIP64 path without 4 GiB files.
  bool force_zip64 = false;
};

// The bytes of a .npz file holding `arrays` (key -> array; the member for key k is "k.npy", in key
// order). InvalidArgument for an empty key or one too long for a ZIP member name (65531 bytes).
absl::StatusOr<std::string> EncodeNpz(const std::map<std::string, Tensor>& arrays,
                                      const NpzWriteOptions& options = {});

// Writes EncodeNpz(arrays) to `path` (replacing it). Errors as EncodeNpz, or name the path and
// the system error.
absl::Status WriteNpz(const std::string& path, const std::map<std::string, Tensor>& arrays,
                      const NpzWriteOptions& options = {});

// Parses the bytes of a .npz file into its arrays by key. `source` (usually the path) names the
// file in errors (see the top of this file).
absl::StatusOr<std::map<std::string, NpyArray>> ParseNpz(absl::string_view bytes,
                                                         absl::string_view source);

// Reads and parses `path`. NotFound (naming the path) when it does not exist; errors of ParseNpz.
absl::StatusOr<std::map<std::string, NpyArray>> ReadNpz(const std::string& path);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_NPZ_H_
