#include "util/npy_header.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

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

}  // namespace

std::string NpyShapeString(const std::vector<int64_t>& dims) {
  if (dims.size() == 1) return absl::StrCat("(", dims[0], ",)");
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

absl::StatusOr<size_t> NpyDataOffset(absl::string_view bytes, absl::string_view source) {
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
  return header_start + ReadLittleEndian(bytes, kMagicSize + 2, length_width);
}

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, absl::string_view source) {
  ASSIGN_OR_RETURN(const size_t data_offset, NpyDataOffset(bytes, source));
  const size_t header_start = bytes[6] == 1 ? kMagicSize + 4 : kMagicSize + 6;
  if (bytes.size() < data_offset) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": truncated .npy file (header of ",
                                                   data_offset - header_start,
                                                   " bytes, file has ", bytes.size(), " bytes)"));
  }
  NpyHeader header;
  header.data_offset = data_offset;
  RETURN_IF_ERROR(HeaderParser(bytes.substr(header_start, data_offset - header_start), source)
                      .Parse(&header.descr, &header.fortran_order, &header.dims));
  return header;
}

}  // namespace meshrt
