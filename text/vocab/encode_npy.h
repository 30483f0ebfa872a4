// Lines of text to a matrix of token ids in a NumPy .npy file: what the translation model's data
// reader takes (core/ops/ops_dataset.h's text_windows, format "npy", and client/npy.h read it).
#ifndef MESHRT_TEXT_VOCAB_ENCODE_NPY_H_
#define MESHRT_TEXT_VOCAB_ENCODE_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "text/vocab/vocab.h"

namespace meshrt {
namespace text {

struct EncodeStats {
  int64_t lines = 0;      // rows written
  int64_t truncated = 0;  // lines whose ids (EOS included) were longer than `length`
  int64_t tokens = 0;     // ids written, EOS included, padding not
  // Per line, before truncation: ids + EOS (what `length` would need to keep the line whole).
  int64_t max_tokens = 0;
  double median_tokens = 0;  // the mean of the two middle values for an even count; 0 if no lines
};

// Encodes each line of the UTF-8 text file `text_path` (LineReader's lines: '\n' ends a line, a
// '\r' before it is dropped, an empty line is a row of just EOS) with `vocab` and writes the rows
// to `npy_path` as a C-order little-endian int32 array of shape [lines, length], in .npy format
// 1.0. A row is the line's ids followed by EOS (1) and padded with pad (0) to `length`; a longer
// line keeps its first length - 1 ids and EOS. The file appears complete or not at all (written
// beside npy_path and renamed). `stats` may be null.
// Errors: InvalidArgument for length < 1 or > 2^24, or for a line that is not UTF-8 (naming
// file:line); the I/O error naming the file.
absl::Status EncodeLinesToNpy(const Vocab& vocab, const std::string& text_path, int64_t length,
                              const std::string& npy_path, EncodeStats* stats);

// The .npy 1.0 header of a little-endian int32 array of shape `dims`: the magic, the version, the
// header length and the dict, padded with spaces and ending in '\n' so the data starts at a
// multiple of 64 bytes.
std::string NpyInt32Header(const std::vector<int64_t>& dims);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_ENCODE_NPY_H_
