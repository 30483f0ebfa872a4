#include "client/npy.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/file_bytes.h"
#include "core/status_macros.h"

namespace meshrt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlignment = 64;  // NumPy aligns the data to 64 bytes since 1.14

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (8, 16), }
// This parser accepts exactly the literal forms NumPy writes (strings in either quote, True /
// False, tuples of non-negative integers with an optional trailing comma or Python 2 'L'), which
// is all a .npy header may contain.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, absl::string_view source) : text_(text), source_(source) {}

  absl::Status Parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* dims) {
    bool have_descr = false, have_order = false, have_shape = false;
    RETURN_IF_ERROR(Expect('{'));
    while (true) {
      SkipSpace();
      if (Peek() == '}') break;
      std::string key;
      RETURN_IF_ERROR(ParseString(&key));
      RETURN_IF_ERROR(Expect(':'));
      SkipSpace();
      if (key == "descr") {
        RETURN_IF_ERROR(ParseString(descr));
        have_descr = true;
      } else if (key == "fortran_order") {
        RETURN_IF_ERROR(ParseBool(fortran_order));
        have_order = true;
      } else if (key == "shape") {
        RETURN_IF_ERROR(ParseTuple(dims));
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
      } else if (Peek() != '}') {
        return Error("expected ',' or '}'");
      }
    }
    ++pos_;  // '}'
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after '}'");
    if (!have_descr || !have_order || !have_shape) {
      return Error("the header must have the keys 'descr', 'fortran_order' and 'shape'");
    }
    return absl::OkStatus();
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": malformed .npy header (", what, " at offset ", pos_,
                     "): ", absl::StripTrailingAsciiWhitespace(text_)));
  }
  absl::Status Expect(char c) {
    SkipSpace();
    if (Peek() != c) return Error(absl::StrCat("expected '", std::string(1, c), "'"));
    ++pos_;
    return absl::OkStatus();
  }
  absl::Status ParseString(std::string* out) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a string");
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return Error("unterminated string");
    *out = std::string(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return absl::OkStatus();
  }
  absl::Status ParseBool(bool* out) {
    for (absl::string_view word : {"True", "False"}) {
      if (text_.substr(pos_, word.size()) == word) {
        *out = word == "True";
        pos_ += word.size();
        return absl::OkStatus();
      }
    }
    return Error("expected True or False");
  }
  absl::Status ParseTuple(std::vector<int64_t>* dims) {
    RETURN_IF_ERROR(Expect('('));
    dims->clear();
    while (true) {
      SkipSpace();
      if (Peek() == ')') break;
      if (Peek() < '0' || Peek() > '9') return Error("expected a size");
      int64_t n = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        const int digit = Peek() - '0';
        if (n > (std::numeric_limits<int64_t>::max() - digit) / 10) return Error("size too large");
        n = n * 10 + digit;
        ++pos_;
      }
      if (Peek() == 'L') ++pos_;
      dims->push_back(n);
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
      } else if (Peek() != ')') {
        return Error("expected ',' or ')'");
      }
    }
    ++pos_;  // ')'
    return absl::OkStatus();
  }

  absl::string_view text_;
  absl::string_view source_;
  size_t pos_ = 0;
};

uint32_t ReadLittleEndian(absl::string_view bytes, size_t offset, int width) {
  uint32_t v = 0;
  for (int i = width - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
  }
  return v;
}

void AppendLittleEndian(uint32_t v, int width, std::string* out) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::string NpyShapeString(const std::vector<int64_t>& dims) {
  if (dims.size() == 1) return absl::StrCat("(", dims[0], ",)");
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view source) {
  if (bytes.size() < kMagicSize || bytes.substr(0, kMagicSize) != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a .npy file (it does not start with \\x93NUMPY)"));
  }
  if (bytes.size() < kMagicSize + 2) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": truncated .npy file (no version)"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2) || minor != 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": unsupported .npy format version ",
                                                   major, ".", minor,
                                                   " (meshrt reads 1.0 and 2.0)"));
  }
  const int length_width = major == 1 ? 2 : 4;
  const size_t header_start = kMagicSize + 2 + length_width;
  if (bytes.size() < header_start) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": truncated .npy file (no header length)"));
  }
  const size_t header_len = ReadLittleEndian(bytes, kMagicSize + 2, length_width);
  if (bytes.size() - header_start < header_len) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": truncated .npy file (header of ",
                                                   header_len, " bytes, file has ", bytes.size(),
                                                   " bytes)"));
  }
  const absl::string_view header = bytes.substr(header_start, header_len);

  std::string descr;
  bool fortran_order = false;
  NpyArray array;
  RETURN_IF_ERROR(HeaderParser(header, source).Parse(&descr, &fortran_order, &array.dims));
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
  const absl::string_view data = bytes.substr(header_start + header_len);
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
