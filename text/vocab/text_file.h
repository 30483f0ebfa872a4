// File helpers of text/vocab: a line reader with errors naming the file and line, and an output
// file that appears under its name only when complete. Not thread-safe (one user per object).
#ifndef MESHRT_TEXT_VOCAB_TEXT_FILE_H_
#define MESHRT_TEXT_VOCAB_TEXT_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

// Reads a file line by line: '\n' ends a line, a '\r' before it is dropped, and a last line
// without '\n' still counts ("a\nb\n" and "a\nb" are both two lines).
class LineReader {
 public:
  // The I/O error ("cannot open PATH: ...", NotFound when missing) on failure.
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  ~LineReader();

  // Sets *line to the next line and returns true; false at the end or on a read error (then
  // status() names the file and the line).
  bool Next(std::string* line);
  absl::Status status() const { return status_; }
  // Lines returned so far (the 1-based number of the last one).
  int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 private:
  LineReader(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  std::FILE* file_;  // owned
  int64_t line_number_ = 0;
  absl::Status status_;
};

// Whether `text` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
// when not, *bad_offset is the offset of the first bad byte.
bool IsValidUtf8(absl::string_view text, size_t* bad_offset);

// A file written under a temporary name beside `path` and renamed to `path` by Commit, so readers
// never see a partial file; destroyed uncommitted, it removes the temporary file.
class AtomicFile {
 public:
  // The I/O error naming `path` when the temporary file cannot be created.
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Create(const std::string& path);
  ~AtomicFile();

  // Errors are sticky and reported by Commit too.
  absl::Status Write(absl::string_view bytes);
  absl::Status Commit();

 private:
  AtomicFile(std::string path, std::string temp_path, std::FILE* file)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), file_(file) {}

  std::string path_;
  std::string temp_path_;
  std::FILE* file_;  // owned; null once closed
  bool committed_ = false;
  absl::Status status_;
};

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_TEXT_FILE_H_
