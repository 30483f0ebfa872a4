// Text helpers for building sentence pairs: whitespace normalisation, word counts, UTF-8 checks
// and a rule-based sentence splitter. Pure functions, thread-safe.
//
// The splitter is deliberately simple (no model, no language-specific tables beyond a short
// abbreviation list) and is used only where both sides of a translation are split and paired
// when, and only when, they give the same number of sentences: a wrong split on one side then
// costs a skipped paragraph rather than a misaligned pair.
#ifndef MESHRT_TEXT_CORPUS_SENTENCES_H_
#define MESHRT_TEXT_CORPUS_SENTENCES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

// `text` with every run of ASCII whitespace (space, tab, CR, LF, VT, FF) replaced by one space
// and none at either end. Other characters (such as the no-break spaces of French typography)
// are kept as they are.
std::string NormalizeWhitespace(absl::string_view text);

// The number of words: maximal runs of non-ASCII-whitespace bytes. (For scripts written without
// spaces, such as Chinese or Japanese, a whole clause counts as one word.)
int CountWords(absl::string_view text);

// Whether `bytes` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool IsValidUtf8(absl::string_view bytes);

// Whether `text` (valid UTF-8) looks like UTF-8 that was decoded as Latin-1 or Windows-1252 and
// encoded again ("fonctionnalitÃ©s", "â€™"): it holds 'Ã' or 'Â' followed by a character in
// U+0080-U+00BF, or "â€". Ordinary text in any language has neither.
bool LooksDoubleEncoded(absl::string_view text);

// Splits whitespace-normalised `text` into sentences, each trimmed, in order; empty text gives
// no sentences. A sentence ends
//  - at '.', '!', '?' or '…' (and any closing quotes or brackets right after it) followed by a
//    space and then a capital letter (Latin, Greek or Cyrillic), optionally after an opening
//    quote or bracket ("«", "\"", "(", "¿", ...), unless the word ending in '.' is a single letter
//    (an initial, as in "Donald E. Knuth") or one of a few abbreviations ("e.g.", "i.e.", "cf.",
//    "vs.", "Dr.", "z.B.", "p.ex.", ...);
//  - at the CJK full stop, exclamation and question marks (。！？) whatever follows.
// So "e.g. the list" and "version 2.0 is" are not split, "A.D. The" is.
std::vector<std::string> SplitSentences(absl::string_view text);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_SENTENCES_H_
