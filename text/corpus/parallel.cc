#include "text/corpus/parallel.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "text/corpus/sentences.h"
#include "text/corpus/sha256.h"
#include "util/file.h"
#include "util/hash.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsUpperAscii(char c) { return c >= 'A' && c <= 'Z'; }

// The lines of `text` (see ReadTsv for what a line is).
std::vector<absl::string_view> Lines(absl::string_view text) {
  if (absl::StartsWith(text, "\xEF\xBB\xBF")) text.remove_prefix(3);
  std::vector<absl::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    pos = end + 1;
  }
  return lines;
}

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  const std::string message = absl::StrCat(what, " ", path, ": ", strerror(errno));
  switch (errno) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

// `s` without trailing spaces (ASCII, no-break, narrow no-break) and . , ; : ! ?
absl::string_view WithoutTrailingPunctuation(absl::string_view s) {
  while (!s.empty()) {
    if (absl::EndsWith(s, "\xC2\xA0")) {
      s.remove_suffix(2);
    } else if (absl::EndsWith(s, "\xE2\x80\xAF")) {
      s.remove_suffix(3);
    } else if (absl::string_view(" .,;:!?").find(s.back()) != absl::string_view::npos) {
      s.remove_suffix(1);
    } else {
      break;
    }
  }
  return s;
}

}  // namespace

absl::Status ValidateLangCode(absl::string_view lang) {
  size_t i = 0;
  while (i < lang.size() && IsLower(lang[i])) ++i;
  bool ok = i >= 2 && i <= 3;
  if (ok && i < lang.size()) {
    ok = lang.size() == i + 3 && lang[i] == '_' && IsUpperAscii(lang[i + 1]) &&
         IsUpperAscii(lang[i + 2]);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lang '", lang,
        "' is not a language code: expected 2 or 3 lowercase letters, optionally followed by _ and "
        "2 uppercase letters (fr, de, ast, pt_BR, zh_CN)"));
  }
  if (lang == "en") {
    return absl::InvalidArgumentError(
        "--lang en: English is the source side of every pair; give the other language");
  }
  return absl::OkStatus();
}

std::vector<SentencePair> CleanPairs(std::vector<SentencePair> pairs, const CleanOptions& options,
                                     CleanStats* stats) {
  std::vector<SentencePair> kept;
  absl::flat_hash_set<std::string> seen;
  for (SentencePair& p : pairs) {
    ++stats->input;
    if (!IsValidUtf8(p.en) || !IsValidUtf8(p.other)) {
      ++stats->invalid_utf8;
      continue;
    }
    if (LooksDoubleEncoded(p.en) || LooksDoubleEncoded(p.other)) {
      ++stats->mojibake;
      continue;
    }
    p.en = NormalizeWhitespace(p.en);
    p.other = NormalizeWhitespace(p.other);
    if (p.en.empty() || p.other.empty()) {
      ++stats->empty;
      continue;
    }
    if (WithoutTrailingPunctuation(p.en) == WithoutTrailingPunctuation(p.other)) {
      ++stats->untranslated;
      continue;
    }
    if (options.max_words > 0 &&
        (CountWords(p.en) > options.max_words || CountWords(p.other) > options.max_words)) {
      ++stats->too_long;
      continue;
    }
    // Normalised text has no tab, so the key is unambiguous.
    if (!seen.insert(absl::StrCat(p.en, "\t", p.other)).second) {
      ++stats->duplicate;
      continue;
    }
    ++stats->kept;
    kept.push_back(std::move(p));
  }
  return kept;
}

absl::Status ValidateSplitOptions(const SplitOptions& options) {
  if (options.dev_percent < 0 || options.dev_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dev_percent ", options.dev_percent, " is not in [0, 100]"));
  }
  if (options.test_percent < 0 || options.test_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("--test_percent ", options.test_percent, " is not in [0, 100]"));
  }
  if (options.dev_percent + options.test_percent > 100) {
    return absl::InvalidArgumentError(absl::StrCat("--dev_percent ", options.dev_percent,
                                                   " + --test_percent ", options.test_percent,
                                                   " is more than 100"));
  }
  return absl::OkStatus();
}

absl::string_view SplitName(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kDev:
      return "dev";
    case Split::kTest:
      return "test";
  }
  return "train";
}

Split SplitOf(absl::string_view en, const SplitOptions& options) {
  const uint64_t h = Fnv1a64(en) % 100;
  if (h < static_cast<uint64_t>(options.test_percent)) return Split::kTest;
  if (h < static_cast<uint64_t>(options.test_percent + options.dev_percent)) return Split::kDev;
  return Split::kTrain;
}

std::vector<SentencePair>& SplitCorpus::of(Split split) {
  switch (split) {
    case Split::kDev:
      return dev;
    case Split::kTest:
      return test;
    case Split::kTrain:
      break;
  }
  return train;
}

const std::vector<SentencePair>& SplitCorpus::of(Split split) const {
  return const_cast<SplitCorpus*>(this)->of(split);
}

SplitCorpus SplitPairs(std::vector<SentencePair> pairs, const SplitOptions& options) {
  SplitCorpus corpus;
  for (SentencePair& p : pairs) corpus.of(SplitOf(p.en, options)).push_back(std::move(p));
  return corpus;
}

absl::StatusOr<std::vector<SentencePair>> ReadTsv(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  std::vector<SentencePair> pairs;
  int line_number = 0;
  for (absl::string_view line : Lines(text)) {
    ++line_number;
    if (line.empty()) {
      pairs.emplace_back();
      continue;
    }
    const size_t tab = line.find('\t');
    if (tab == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " line ", line_number, " has no tab: expected ENGLISH<TAB>TRANSLATION"));
    }
    if (line.find('\t', tab + 1) != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", line_number,
                       " has more than one tab: expected ENGLISH<TAB>TRANSLATION (two columns)"));
    }
    pairs.push_back({std::string(line.substr(0, tab)), std::string(line.substr(tab + 1))});
  }
  return pairs;
}

absl::StatusOr<std::vector<SentencePair>> ReadAligned(const std::string& en_path,
                                                      const std::string& other_path) {
  ASSIGN_OR_RETURN(const std::string en_text, ReadFile(en_path));
  ASSIGN_OR_RETURN(const std::string other_text, ReadFile(other_path));
  const std::vector<absl::string_view> en = Lines(en_text);
  const std::vector<absl::string_view> other = Lines(other_text);
  if (en.size() != other.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        en_path, " has ", en.size(), " lines but ", other_path, " has ", other.size(),
        ": aligned inputs must have one line per sentence, line i of one translating line i of "
        "the other"));
  }
  std::vector<SentencePair> pairs;
  pairs.reserve(en.size());
  for (size_t i = 0; i < en.size(); ++i) {
    pairs.push_back({std::string(en[i]), std::string(other[i])});
  }
  return pairs;
}

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("MakeDirs: empty directory name");
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create directory", prefix);
    }
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return ErrnoError("cannot create directory", dir);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WrittenFile>> WriteSplits(const std::string& dir, absl::string_view lang,
                                                     const SplitCorpus& corpus) {
  RETURN_IF_ERROR(MakeDirs(dir));
  std::vector<WrittenFile> files;
  for (Split split : {Split::kTrain, Split::kDev, Split::kTest}) {
    const std::vector<SentencePair>& pairs = corpus.of(split);
    for (bool english : {true, false}) {
      std::string contents;
      for (const SentencePair& p : pairs)
        absl::StrAppend(&contents, english ? p.en : p.other, "\n");
      WrittenFile file;
      file.name = absl::StrCat(SplitName(split), ".", english ? "en" : lang);
      file.lines = static_cast<int64_t>(pairs.size());
      file.bytes = static_cast<int64_t>(contents.size());
      file.sha256 = Sha256Hex(contents);
      RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/", file.name), contents));
      files.push_back(std::move(file));
    }
  }
  return files;
}

}  // namespace text
}  // namespace meshrt
