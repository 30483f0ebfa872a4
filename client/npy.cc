#include "client/npy.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/file_bytes.h"
#include "util/npy_header.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlignment = 64;  // NumPy aligns the data to 64 bytes since 1.14

void AppendLittleEndian(uint32_t v, int width, std::string* out) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view source) {
  ASSIGN_OR_RETURN(const NpyHeader header, ParseNpyHeader(bytes, source));
  NpyArray array;
  array.dims = header.dims;
  const std::string& descr = header.descr;
  const bool fortran_order = header.fortran_order;
  if (descr == "<f4") {
    array.dtype = DType::kFloat32;
  } else if (descr == "<i4") {
    array.dtype = DType::kInt32;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unsupported dtype '", descr,
                     "'; meshrt reads float32 ('<f4') and int32 ('<i4'), e.g. "
                     "numpy.save(path, a.astype(numpy.float32))"));
  }
  if (fortran_order) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": fortran_order is True; meshrt reads C-order arrays only "
                     "(save numpy.ascontiguousarray(a) instead)"));
  }

  // Element count with an overflow guard: a hostile header must not wrap the size check.
  const int64_t max_elements = std::numeric_limits<int64_t>::max() / 4;
  int64_t elements = 1;
  for (int64_t d : array.dims) {
    if (d != 0 && elements > max_elements / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": shape ", NpyShapeString(array.dims), " is too large"));
    }
    elements *= d;
  }
  const absl::string_view data = bytes.substr(header.data_offset);
  const int64_t want = elements * 4;
  if (static_cast<int64_t>(data.size()) != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", static_cast<int64_t>(data.size()) < want ? "truncated" : "oversized",
        " .npy file: shape ", NpyShapeString(array.dims), " of ", DTypeName(array.dtype), " needs ",
        want, " data bytes, the file has ", data.size()));
  }
  array.data = std::string(data);
  return array;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileBytes(path));
  return ParseNpy(bytes, path);
}

absl::StatusOr<Tensor> NpyToTensor(const NpyArray& array, const Shape& expected,
                                   absl::string_view what) {
  if (array.dims != expected.Sizes()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected shape ", expected.ToString(),
                                                   ", got ", NpyShapeString(array.dims)));
  }
  Tensor t(array.dtype, expected);
  // ParseNpy guarantees 4 bytes per element; guard callers that build NpyArray by hand.
  if (static_cast<int64_t>(array.data.size()) != t.num_elements() * 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", array.data.size(), " data bytes for ", t.num_elements(), " elements"));
  }
  void* dst =
      array.dtype == DType::kFloat32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i32());
  if (!array.data.empty()) std::memcpy(dst, array.data.data(), array.data.size());
  return t;
}

std::string EncodeNpy(const Tensor& tensor) {
  const std::vector<int64_t> dims = tensor.shape().Sizes();
  std::string header =
      absl::StrCat("{'descr': '", tensor.dtype() == DType::kFloat32 ? "<f4" : "<i4",
                   "', 'fortran_order': False, 'shape': ", NpyShapeString(dims), ", }");
  // Version 1.0 stores the header length in 2 bytes; longer headers need 2.0 (4 bytes).
  int major = 1;
  size_t preamble = kMagicSize + 2 + 2;
  if (header.size() + 1 + preamble + kAlignment > 0xffff) {
    major = 2;
    preamble = kMagicSize + 2 + 4;
  }
  const size_t unpadded = preamble + header.size() + 1;  // +1 for the final '\n'
  header.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
  header.push_back('\n');

  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  AppendLittleEndian(static_cast<uint32_t>(header.size()), major == 1 ? 2 : 4, &out);
  out += header;
  const void* src = tensor.dtype() == DType::kFloat32 ? static_cast<const void*>(tensor.f32())
                                                      : static_cast<const void*>(tensor.i32());
  out.append(static_cast<const char*>(src), tensor.num_elements() * 4);
  return out;
}

absl::Status WriteNpy(const std::string& path, const Tensor& tensor) {
  return WriteFileBytes(path, EncodeNpy(tensor));
}

}  // namespace meshrt
