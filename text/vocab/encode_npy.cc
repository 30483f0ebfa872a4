#include "text/vocab/encode_npy.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "text/vocab/text_file.h"
#include "util/median.h"
#include "util/npy_header.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

constexpr int64_t kMaxLength = int64_t{1} << 24;

void AppendInt32LittleEndian(int32_t value, std::string* out) {
  const auto u = static_cast<uint32_t>(value);
  const char bytes[4] = {static_cast<char>(u & 0xff), static_cast<char>((u >> 8) & 0xff),
                         static_cast<char>((u >> 16) & 0xff), static_cast<char>(u >> 24)};
  out->append(bytes, 4);
}

}  // namespace

std::string NpyInt32Header(const std::vector<int64_t>& dims) {
  std::string dict = absl::StrCat(
      "{'descr': '<i4', 'fortran_order': False, 'shape': ", NpyShapeString(dims), ", }");
  // Magic (6) + version (2) + header length (2) + dict + padding + '\n', a multiple of 64.
  constexpr size_t kPreamble = 10;
  const size_t unpadded = kPreamble + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  const size_t header_length = dict.size();
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header_length & 0xff));
  out.push_back(static_cast<char>(header_length >> 8));
  return out + dict;
}

absl::Status EncodeLinesToNpy(const Vocab& vocab, const std::string& text_path, int64_t length,
                              const std::string& npy_path, EncodeStats* stats) {
  if (length < 1 || length > kMaxLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--length ", length, ": a row needs room for EOS (length >= 1), and at most 2^24"));
  }
  // The header holds the row count, so count the lines first; the rows are then streamed.
  int64_t lines = 0;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader, LineReader::Open(text_path));
    std::string line;
    while (reader->Next(&line)) ++lines;
    RETURN_IF_ERROR(reader->status());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader, LineReader::Open(text_path));
  ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> out, AtomicFile::Create(npy_path));
  RETURN_IF_ERROR(out->Write(NpyInt32Header({lines, length})));

  EncodeStats s;
  std::vector<double> per_line;
  per_line.reserve(static_cast<size_t>(lines));
  std::string line, row;
  while (reader->Next(&line)) {
    size_t bad = 0;
    if (!IsValidUtf8(line, &bad)) {
      return absl::InvalidArgumentError(absl::StrCat(text_path, ":", reader->line_number(),
                                                     " is not valid UTF-8 (byte ", bad + 1,
                                                     " of the line)"));
    }
    std::vector<int32_t> ids = vocab.Encode(line);
    const int64_t needed = static_cast<int64_t>(ids.size()) + 1;
    per_line.push_back(static_cast<double>(needed));
    s.max_tokens = std::max(s.max_tokens, needed);
    if (needed > length) {
      ++s.truncated;
      ids.resize(static_cast<size_t>(length - 1));
    }
    ids.push_back(kEosId);
    s.tokens += static_cast<int64_t>(ids.size());
    ids.resize(static_cast<size_t>(length), kPadId);
    row.clear();
    for (const int32_t id : ids) AppendInt32LittleEndian(id, &row);
    RETURN_IF_ERROR(out->Write(row));
    ++s.lines;
  }
  RETURN_IF_ERROR(reader->status());
  if (s.lines != lines) {
    return absl::AbortedError(absl::StrCat(text_path, " changed while it was encoded (", lines,
                                           " lines, then ", s.lines, ")"));
  }
  RETURN_IF_ERROR(out->Commit());
  if (!per_line.empty()) s.median_tokens = Median(std::move(per_line));
  if (stats != nullptr) *stats = s;
  return absl::OkStatus();
}

}  // namespace text
}  // namespace meshrt
