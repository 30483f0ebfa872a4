// Sentence pairs from the Debian Description Translation Project (DDTP): the archive's
// `Translation-en` and `Translation-LANG` files (dists/SUITE/COMPONENT/i18n/), which hold each
// package description in English and as translated, keyed by the MD5 of the English text.
// Pure functions on the files' text (the download is ddtp_fetch.h); thread-safe.
//
// How a description becomes pairs (counted in DdtpStats at each step):
//  1. The English and LANG stanzas are joined on Description-md5 (the first stanza of each md5
//     in each file; packages sharing a description share its md5).
//  2. The short descriptions (the Description-xx line) form one pair (DdtpOptions).
//  3. The long descriptions are split into paragraphs at " ." lines. Only when both sides have
//     the same number are paragraphs paired, in order.
//  4. Each paragraph is a sequence of blocks: prose, and bullet-list items (lines starting with
//     a mark and a space after the indentation: "* ", "- ", "+ ", or the "• ", "– ", "— ", "− "
//     translators write instead; with their more-indented continuation lines). Only when both
//     sides have the same sequence of blocks is the paragraph paired, prose with prose and item
//     with item (an item is one pair, however many sentences it holds). Otherwise the whole
//     paragraph is skipped: a list on one side only is usually a list run into the prose, so even
//     the prose would not match.
//  5. A prose block pair is split into sentences (sentences.h); only when both sides have the
//     same number do the sentences pair, in order. Otherwise the block is skipped.
// All text is whitespace-normalised. Pairs come out in the order of the English file.
#ifndef MESHRT_TEXT_CORPUS_DDTP_H_
#define MESHRT_TEXT_CORPUS_DDTP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "text/corpus/parallel.h"

namespace meshrt {
namespace text {

// One stanza of a Translation-xx file.
struct DdtpDescription {
  std::string package;
  std::string md5;         // Description-md5: names the English description this translates
  std::string short_text;  // the text of the Description-xx line
  // The continuation lines, '\n'-separated, each without its first space (so a paragraph break
  // is a line ".", and bullet items keep their extra indentation).
  std::string long_text;
};

struct TranslationFile {
  std::vector<DdtpDescription> descriptions;  // in file order
  int64_t stanzas = 0;
  // Stanzas without a Description-md5 or a Description-LANG field (skipped).
  int64_t malformed = 0;
};

// Parses a Translation-`lang` file. Errors: InvalidArgument naming `what` and the line for text
// that is not deb822 (deb822.h).
absl::StatusOr<TranslationFile> ParseTranslationFile(absl::string_view text, absl::string_view lang,
                                                     absl::string_view what);

// A block of a paragraph (see 4. above); `text` is whitespace-normalised, without the bullet.
struct DescriptionBlock {
  enum class Kind { kProse, kItem };
  Kind kind = Kind::kProse;
  std::string text;
};
using Paragraph = std::vector<DescriptionBlock>;

// The paragraphs of a long description (DdtpDescription::long_text). Paragraphs without any
// text (two breaks in a row) are left out.
std::vector<Paragraph> SplitParagraphs(absl::string_view long_text);

// Counts of every step above. Descriptions are counted by distinct md5.
struct DdtpStats {
  int64_t en_stanzas = 0;
  int64_t lang_stanzas = 0;
  int64_t malformed_stanzas = 0;  // in either file
  int64_t en_descriptions = 0;    // distinct md5 in the English file
  int64_t lang_descriptions = 0;  // distinct md5 in the LANG file
  int64_t joined = 0;             // md5 in both
  int64_t lang_only = 0;          // translations of English texts the English file no longer has
  int64_t short_pairs = 0;        // 0 without DdtpOptions::short_descriptions
  int64_t paragraph_count_mismatch = 0;  // joined descriptions whose long texts were skipped
  int64_t paragraphs_paired = 0;
  int64_t paragraph_structure_mismatch = 0;  // paragraphs skipped: their blocks differ
  int64_t items_paired = 0;
  int64_t items_skipped = 0;            // English items in those skipped paragraphs
  int64_t prose_blocks_paired = 0;      // prose block pairs whose sentence counts agree
  int64_t sentence_count_mismatch = 0;  // prose block pairs skipped: sentence counts differ
  int64_t sentence_pairs = 0;           // pairs from prose blocks
  int64_t pairs = 0;                    // short + item + sentence pairs
};

struct DdtpOptions {
  // Step 2: pair the short descriptions (noun phrases such as "tool to frobnicate widgets":
  // about a quarter of the pairs, and shorter than the sentences of the long descriptions).
  bool short_descriptions = true;
};

// The pairs of one joined description (steps 2-5); appends to `out` and adds to `stats`.
void PairDescription(const DdtpDescription& en, const DdtpDescription& other,
                     const DdtpOptions& options, std::vector<SentencePair>* out, DdtpStats* stats);

// All pairs of a Translation-en and a Translation-`lang` file's text (steps 1-5). `stats` must
// not be null; its counts are added to. Errors: those of ParseTranslationFile, naming `en_what`
// or `lang_what`.
absl::StatusOr<std::vector<SentencePair>> DdtpPairs(absl::string_view en_text,
                                                    absl::string_view lang_text,
                                                    absl::string_view lang,
                                                    absl::string_view en_what,
                                                    absl::string_view lang_what,
                                                    const DdtpOptions& options, DdtpStats* stats);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_DDTP_H_
