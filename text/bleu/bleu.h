// Corpus BLEU (Papineni et al., 2002) computed exactly as sacreBLEU 2.x computes it, so that a
// score printed by meshrt can be compared with published sacreBLEU scores. The defaults are
// sacreBLEU's: case-sensitive, the "13a" tokenizer (tokenizer_13a.h), n-grams of order 1 to 4
// clipped by their largest count in any one reference, the closest reference length (ties: the
// shorter) for the brevity penalty, and the "exp" smoothing of mteval-v13a.pl for orders without a
// match.
//
//   ASSIGN_OR_RETURN(BleuScore bleu, CorpusBleu(hypotheses, {reference_stream}));
//   std::cout << FormatBleu(bleu);  // BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ...)
//
// Text is UTF-8; ill-formed bytes count as ordinary characters. All functions are thread-safe.
#ifndef MESHRT_TEXT_BLEU_BLEU_H_
#define MESHRT_TEXT_BLEU_BLEU_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "text/bleu/tokenizer_13a.h"  // Tokenize13a, part of this library's interface

namespace meshrt {
namespace text {

// The n-gram orders BLEU counts: 1 to kBleuMaxOrder.
inline constexpr int kBleuMaxOrder = 4;

// How a segment is split into words after the optional lowercasing.
enum class BleuTokenizer {
  k13a,  // Tokenize13a (sacreBLEU's default)
  kNone  // whitespace only (sacreBLEU's "none")
};

// What a precision with no matching n-gram becomes (sacreBLEU's smooth_method).
enum class BleuSmoothing {
  kExp,    // 100 / (2^k * total) for the k-th such order (mteval-v13a.pl; sacreBLEU's default)
  kFloor,  // 100 * smooth_value / total
  kAddK,   // adds smooth_value to the matches and totals of every order above 1
  kNone    // 0, which makes the score 0
};

// sacreBLEU's BLEU() arguments that change the score. Defaults are sacreBLEU's defaults.
struct BleuOptions {
  // Lowercases hypotheses and references (Python's str.lower()) before tokenizing (sacreBLEU -lc).
  bool lowercase = false;
  // The tokenizer (sacreBLEU -tok).
  BleuTokenizer tokenize = BleuTokenizer::k13a;
  // The smoothing method (sacreBLEU -s).
  BleuSmoothing smooth_method = BleuSmoothing::kExp;
  // The value of kFloor (default 0.1) and kAddK (default 1); unused by kExp and kNone (sacreBLEU
  // -sv).
  std::optional<double> smooth_value;
  // Averages only the orders up to the highest one the hypotheses have n-grams of (sacreBLEU's
  // effective_order, which it turns on for sentence-level BLEU). Off for corpus BLEU.
  bool effective_order = false;
};

// BLEU's sufficient statistics, summed over segments; BLEU is a function of these alone.
struct BleuStats {
  int64_t counts[kBleuMaxOrder] =
      {};  // hypothesis n-grams found in a reference (clipped), by order
  int64_t totals[kBleuMaxOrder] = {};  // hypothesis n-grams, by order
  int64_t sys_len = 0;                 // hypothesis words
  int64_t ref_len = 0;                 // per segment, the reference length closest to sys_len
};

// A BLEU score and how it came about, as sacreBLEU's BLEUScore.
struct BleuScore {
  double score = 0;                       // 0..100
  double precisions[kBleuMaxOrder] = {};  // percent, after smoothing (all 0 when nothing matched)
  int64_t counts[kBleuMaxOrder] = {};     // as BleuStats (kAddK's additions are not included)
  int64_t totals[kBleuMaxOrder] = {};
  double bp = 0;     // brevity penalty, 0..1
  double ratio = 0;  // sys_len / ref_len (0 when ref_len is 0)
  int64_t sys_len = 0;
  int64_t ref_len = 0;
};

// The statistics of `hypotheses` against `references`: references[k] is the k-th reference stream
// and has one line per hypothesis. An empty line is a segment of no words (an empty reference
// still counts as a reference of length 0, as in sacreBLEU). InvalidArgument when there are no
// hypotheses, no reference streams, or a stream whose length differs (naming the stream, counted
// from 1, and both line counts); FailedPrecondition when options.lowercase meets non-ASCII text and
// the system has no "C.UTF-8" locale.
absl::StatusOr<BleuStats> CorpusBleuStats(const std::vector<std::string>& hypotheses,
                                          const std::vector<std::vector<std::string>>& references,
                                          const BleuOptions& options = BleuOptions());

// BLEU from its statistics (sacreBLEU's BLEU.compute_bleu). 0 when no n-gram matched.
BleuScore ComputeBleu(const BleuStats& stats, const BleuOptions& options = BleuOptions());

// Corpus BLEU with sacreBLEU's defaults, or with `options`. Errors as CorpusBleuStats.
absl::StatusOr<BleuScore> CorpusBleu(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::vector<std::string>>& references);
absl::StatusOr<BleuScore> CorpusBleu(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::vector<std::string>>& references,
                                     const BleuOptions& options);

// sacreBLEU's text form of a score (without a trailing newline):
//   BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
std::string FormatBleu(const BleuScore& score);

// sacreBLEU's signature for `options` with `num_refs` reference streams, without its version
// field: "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp".
std::string BleuSignature(const BleuOptions& options, int num_refs);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_BLEU_BLEU_H_
