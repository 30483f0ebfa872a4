// sacreBLEU's default "13a" tokenizer: the tokenization of mteval-v13a.pl, which WMT's official
// BLEU scores use. Thread-safe (no state).
#ifndef MESHRT_TEXT_BLEU_TOKENIZER_13A_H_
#define MESHRT_TEXT_BLEU_TOKENIZER_13A_H_

#include <string>

#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

// Tokenizes one segment (UTF-8) as sacreBLEU's Tokenizer13a does, in this order:
//   1. removes "<skipped>" and "-\n", turns the remaining "\n" into spaces;
//   2. if the line has an '&', unescapes &quot; &amp; &lt; &gt; (one after the other, so "&amp;lt;"
//      becomes "<");
//   3. surrounds with spaces every ASCII symbol in {|}~ [\]^_` space!"#$%& ()*+ :;<=>?@ /;
//   4. splits '.' and ',' from what precedes them unless that is a digit, then from what follows
//      them unless that is a digit ("1,000.50" stays one token, "end." becomes "end .");
//   5. splits '-' from a digit before it;
//   6. joins the words (runs of Python whitespace) with single spaces.
// Apostrophes, non-ASCII punctuation and '-' after a letter are not split ("wasn't" stays whole).
std::string Tokenize13a(absl::string_view line);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_BLEU_TOKENIZER_13A_H_
