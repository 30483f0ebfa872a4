// Parallel (English → other language) sentence pairs: reading them from a TSV file or two aligned
// files, cleaning and deduplicating them, splitting them into train/dev/test by a hash of the
// English side, and writing the split files. Pure functions except the Read*/Write* ones, which
// touch only the paths they are given. Thread-safe (no shared state).
#ifndef MESHRT_TEXT_CORPUS_PARALLEL_H_
#define MESHRT_TEXT_CORPUS_PARALLEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

// One translation: an English sentence and its rendering in the other language.
struct SentencePair {
  std::string en;
  std::string other;
};

inline bool operator==(const SentencePair& a, const SentencePair& b) {
  return a.en == b.en && a.other == b.other;
}

// OK when `lang` is a language code as Debian's DDTP spells them: [a-z]{2,3}, optionally
// followed by _[A-Z]{2} ("fr", "ast", "pt_BR", "zh_CN"), and not "en" (English is the source
// side; its files would collide). InvalidArgument naming --lang and the value otherwise. The code
// is also used in file names and in apt's configuration, so nothing else may pass.
absl::Status ValidateLangCode(absl::string_view lang);

struct CleanOptions {
  // Pairs with more words than this on either side are dropped; 0 keeps every length.
  int max_words = 60;
};

// What cleaning dropped, each pair counted once under the first reason that applies, in this
// order.
struct CleanStats {
  int64_t input = 0;
  int64_t invalid_utf8 = 0;  // either side is not well-formed UTF-8
  int64_t mojibake = 0;      // either side looks double-encoded (LooksDoubleEncoded)
  int64_t empty = 0;         // either side is empty after whitespace normalisation
  // The other side equals the English side, ignoring trailing punctuation and spaces (so
  // "router_static" and "router_static ;" count as untranslated).
  int64_t untranslated = 0;
  int64_t too_long = 0;   // more than max_words words on either side
  int64_t duplicate = 0;  // the same (English, other) pair seen before
  int64_t kept = 0;
};

// Normalises the whitespace of both sides (sentences.h), then drops the pairs CleanStats lists.
// Keeps the first occurrence of each pair, in input order. `stats` must not be null; its counts
// are added to.
std::vector<SentencePair> CleanPairs(std::vector<SentencePair> pairs, const CleanOptions& options,
                                     CleanStats* stats);

struct SplitOptions {
  int dev_percent = 2;   // in [0, 100]
  int test_percent = 2;  // in [0, 100], dev_percent + test_percent <= 100
};

// InvalidArgument naming --dev_percent/--test_percent when they are out of range.
absl::Status ValidateSplitOptions(const SplitOptions& options);

enum class Split { kTrain, kDev, kTest };
// "train", "dev" or "test": the file name stem of a split.
absl::string_view SplitName(Split split);

// The split of a pair with English side `en`: h = Fnv1a64(en) % 100 (util/hash.h); h <
// test_percent is test, h < test_percent + dev_percent dev, anything else train. Depends only on
// the English text, so a sentence that repeats (with the same or another translation) always
// lands in the same split, and the assignment is stable across runs, corpora and machines.
Split SplitOf(absl::string_view en, const SplitOptions& options);

struct SplitCorpus {
  std::vector<SentencePair> train, dev, test;  // each in input order
  std::vector<SentencePair>& of(Split split);
  const std::vector<SentencePair>& of(Split split) const;
};

SplitCorpus SplitPairs(std::vector<SentencePair> pairs, const SplitOptions& options);

// Reads EN<TAB>OTHER lines. A final newline ends the last line (it does not start an empty one);
// a trailing '\r' is removed; a UTF-8 byte order mark at the start is skipped. A blank line reads
// as an empty pair (CleanPairs drops it). Errors: the file's read error naming the path;
// InvalidArgument naming the path and line number for a line without a tab or with more than one.
absl::StatusOr<std::vector<SentencePair>> ReadTsv(const std::string& path);

// Reads two files aligned line by line (line i of `en_path` translates to line i of
// `other_path`); lines as in ReadTsv. Errors: a read error naming the path; InvalidArgument naming
// both files and their line counts when they differ.
absl::StatusOr<std::vector<SentencePair>> ReadAligned(const std::string& en_path,
                                                      const std::string& other_path);

// A file written by WriteSplits.
struct WrittenFile {
  std::string name;  // file name within the directory, e.g. "train.fr"
  int64_t lines = 0;
  int64_t bytes = 0;
  std::string sha256;
};

// Creates `dir` (and its parents) when missing and writes {train,dev,test}.{en,LANG} there, one
// sentence per line, line i of X.en aligned with line i of X.LANG, each replacing any older file
// of that name (written to a temporary name, then renamed). `lang` must be valid
// (ValidateLangCode). Returns the six files in the order train.en, train.LANG, dev.en, ...
// Errors: the I/O error naming the path.
absl::StatusOr<std::vector<WrittenFile>> WriteSplits(const std::string& dir, absl::string_view lang,
                                                     const SplitCorpus& corpus);

// Creates `dir` and its missing parents. Errors name the directory.
absl::Status MakeDirs(const std::string& dir);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_PARALLEL_H_
