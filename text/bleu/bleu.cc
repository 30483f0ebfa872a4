#include "text/bleu/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "text/bleu/python_text.h"

namespace meshrt {
namespace text {
namespace {

// sacreBLEU's my_log(0): the log of a zero precision, so that the score underflows to 0.
constexpr double kLogOfZero = -9999999999.0;

// One segment after sacreBLEU's _preprocess_segment: lowercased (optionally), right-stripped,
// tokenized, its words joined by single spaces so that every n-gram is a substring of `text`.
struct Segment {
  std::string text;
  std::vector<absl::string_view> words;  // views into `text`
};

// Fills `segment` (which must not move afterwards: `words` points into it). Sets `*lowercase_ok`
// to false when lowercasing lacked the Unicode tables.
void Preprocess(absl::string_view line, const BleuOptions& options, Segment* segment,
                bool* lowercase_ok) {
  std::string lowered;
  if (options.lowercase) {
    bool full = true;
    lowered = LowercasePython(line, &full);
    if (!full) *lowercase_ok = false;
    line = lowered;
  }
  line = StripTrailingPythonWhitespace(line);
  const std::string tokenized =
      options.tokenize == BleuTokenizer::k13a ? Tokenize13a(line) : std::string(line);
  // sacreBLEU splits the tokenized line with str.split(); joining those words with one space makes
  // equal word sequences equal strings.
  segment->text = absl::StrJoin(SplitPythonWhitespace(tokenized), " ");
  segment->words.clear();
  if (!segment->text.empty()) segment->words = absl::StrSplit(segment->text, ' ');
}

// The n-gram of `words` starting at word i with n words, as a view into their text.
absl::string_view NGram(const std::vector<absl::string_view>& words, size_t i, int n) {
  const char* begin = words[i].data();
  const char* end = words[i + n - 1].data() + words[i + n - 1].size();
  return absl::string_view(begin, static_cast<size_t>(end - begin));
}

using NGramCounts = absl::flat_hash_map<absl::string_view, int64_t>;

// Adds every n-gram of order 1..kBleuMaxOrder of `words` to `counts`. N-grams of different
// orders never collide: words hold no spaces, so an n-gram's text has n - 1 of them.
void CountNGrams(const std::vector<absl::string_view>& words, NGramCounts* counts) {
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    for (size_t i = 0; i + n <= words.size(); ++i) ++(*counts)[NGram(words, i, n)];
  }
}

// sacreBLEU's _get_closest_ref_len: the reference length nearest `hyp_len`, the shorter on a tie.
int64_t ClosestRefLen(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t closest_diff = -1, closest_len = -1;
  for (int64_t ref_len : ref_lens) {
    const int64_t diff = std::llabs(hyp_len - ref_len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = ref_len;
    } else if (diff == closest_diff && ref_len < closest_len) {
      closest_len = ref_len;
    }
  }
  return closest_len;
}

// Adds one segment's statistics to `stats` (sacreBLEU's _compute_segment_statistics).
void AddSegment(const Segment& hyp, const std::vector<Segment>& refs, BleuStats* stats) {
  // Each reference n-gram's largest count in any one reference.
  NGramCounts ref_max;
  std::vector<int64_t> ref_lens;
  ref_lens.reserve(refs.size());
  NGramCounts one_ref;
  for (const Segment& ref : refs) {
    ref_lens.push_back(static_cast<int64_t>(ref.words.size()));
    one_ref.clear();
    CountNGrams(ref.words, &one_ref);
    for (const auto& [ngram, count] : one_ref) {
      int64_t& best = ref_max[ngram];
      best = std::max(best, count);
    }
  }
  const int64_t hyp_len = static_cast<int64_t>(hyp.words.size());
  stats->sys_len += hyp_len;
  stats->ref_len += ClosestRefLen(hyp_len, ref_lens);
  NGramCounts hyp_counts;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    hyp_counts.clear();
    for (size_t i = 0; i + n <= hyp.words.size(); ++i) ++hyp_counts[NGram(hyp.words, i, n)];
    for (const auto& [ngram, count] : hyp_counts) {
      stats->totals[n - 1] += count;
      const auto it = ref_max.find(ngram);
      if (it != ref_max.end()) stats->counts[n - 1] += std::min(count, it->second);
    }
  }
}

double DefaultSmoothValue(BleuSmoothing method) {
  switch (method) {
    case BleuSmoothing::kFloor:
      return 0.1;
    case BleuSmoothing::kAddK:
      return 1.0;
    case BleuSmoothing::kExp:
    case BleuSmoothing::kNone:
      break;
  }
  return 0.0;
}

std::string FormatDouble(const char* format, double value) {
  // snprintf rounds the exact binary value half-to-even, as Python's format() does.
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

}  // namespace

absl::StatusOr<BleuStats> CorpusBleuStats(const std::vector<std::string>& hypotheses,
                                          const std::vector<std::vector<std::string>>& references,
                                          const BleuOptions& options) {
  if (hypotheses.empty()) {
    return absl::InvalidArgumentError("BLEU needs at least one hypothesis line; there are none");
  }
  if (references.empty()) {
    return absl::InvalidArgumentError("BLEU needs at least one reference stream; there are none");
  }
  for (size_t k = 0; k < references.size(); ++k) {
    if (references[k].size() != hypotheses.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reference stream ", k + 1, " has ", references[k].size(), " lines but there are ",
          hypotheses.size(), " hypothesis lines; every stream needs one line per hypothesis"));
    }
  }
  BleuStats stats;
  bool lowercase_ok = true;
  Segment hyp;
  std::vector<Segment> refs(references.size());
  for (size_t line = 0; line < hypotheses.size(); ++line) {
    Preprocess(hypotheses[line], options, &hyp, &lowercase_ok);
    for (size_t k = 0; k < references.size(); ++k) {
      Preprocess(references[k][line], options, &refs[k], &lowercase_ok);
    }
    AddSegment(hyp, refs, &stats);
  }
  if (!lowercase_ok) {
    return absl::FailedPreconditionError(
        "lowercasing non-ASCII text needs the system's C.UTF-8 locale, which is missing "
        "(install it, or compute BLEU without lowercasing)");
  }
  return stats;
}

BleuScore ComputeBleu(const BleuStats& stats, const BleuOptions& options) {
  BleuScore out;
  std::copy(std::begin(stats.counts), std::end(stats.counts), out.counts);
  std::copy(std::begin(stats.totals), std::end(stats.totals), out.totals);
  out.sys_len = stats.sys_len;
  out.ref_len = stats.ref_len;
  out.ratio = stats.ref_len != 0
                  ? static_cast<double>(stats.sys_len) / static_cast<double>(stats.ref_len)
                  : 0.0;
  out.bp = 1.0;
  if (stats.sys_len < stats.ref_len) {
    out.bp = stats.sys_len > 0 ? std::exp(1.0 - static_cast<double>(stats.ref_len) /
                                                    static_cast<double>(stats.sys_len))
                               : 0.0;
  }
  // No match of any order: 0, whatever the smoothing (sacreBLEU #141).
  if (std::all_of(std::begin(stats.counts), std::end(stats.counts),
                  [](int64_t c) { return c == 0; })) {
    return out;
  }
  const double smooth_value = options.smooth_value.has_value()
                                  ? *options.smooth_value
                                  : DefaultSmoothValue(options.smooth_method);
  double smooth_mteval = 1.0;
  int eff_order = kBleuMaxOrder;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    double correct = static_cast<double>(stats.counts[n - 1]);
    double total = static_cast<double>(stats.totals[n - 1]);
    if (options.smooth_method == BleuSmoothing::kAddK && n > 1) {
      correct += smooth_value;
      total += smooth_value;
    }
    // No n-grams of this order (every segment is shorter than n): this and the higher orders keep
    // precision 0, so the score is 0 unless effective_order leaves them out.
    if (total == 0) break;
    if (options.effective_order) eff_order = n;
    if (correct == 0) {
      if (options.smooth_method == BleuSmoothing::kExp) {
        smooth_mteval *= 2;
        out.precisions[n - 1] = 100.0 / (smooth_mteval * total);
      } else if (options.smooth_method == BleuSmoothing::kFloor) {
        out.precisions[n - 1] = 100.0 * smooth_value / total;
      }
    } else {
      out.precisions[n - 1] = 100.0 * correct / total;
    }
  }
  // Summed in order from 0, as Python's sum() does, so the last bits agree with sacreBLEU.
  double log_sum = 0;
  for (int n = 0; n < eff_order; ++n) {
    log_sum += out.precisions[n] == 0.0 ? kLogOfZero : std::log(out.precisions[n]);
  }
  out.score = out.bp * std::exp(log_sum / eff_order);
  return out;
}

absl::StatusOr<BleuScore> CorpusBleu(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::vector<std::string>>& references) {
  return CorpusBleu(hypotheses, references, BleuOptions());
}

absl::StatusOr<BleuScore> CorpusBleu(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::vector<std::string>>& references,
                                     const BleuOptions& options) {
  absl::StatusOr<BleuStats> stats = CorpusBleuStats(hypotheses, references, options);
  if (!stats.ok()) return stats.status();
  return ComputeBleu(*stats, options);
}

std::string FormatBleu(const BleuScore& score) {
  std::vector<std::string> precisions;
  for (double p : score.precisions) precisions.push_back(FormatDouble("%.1f", p));
  return absl::StrCat("BLEU = ", FormatDouble("%.2f", score.score), " ",
                      absl::StrJoin(precisions, "/"), " (BP = ", FormatDouble("%.3f", score.bp),
                      " ratio = ", FormatDouble("%.3f", score.ratio), " hyp_len = ", score.sys_len,
                      " ref_len = ", score.ref_len, ")");
}

std::string BleuSignature(const BleuOptions& options, int num_refs) {
  std::string smooth;
  switch (options.smooth_method) {
    case BleuSmoothing::kExp:
      smooth = "exp";
      break;
    case BleuSmoothing::kNone:
      smooth = "none";
      break;
    case BleuSmoothing::kFloor:
    case BleuSmoothing::kAddK: {
      const double value = options.smooth_value.has_value()
                               ? *options.smooth_value
                               : DefaultSmoothValue(options.smooth_method);
      smooth = absl::StrCat(options.smooth_method == BleuSmoothing::kFloor ? "floor" : "add-k", "[",
                            FormatDouble("%.2f", value), "]");
      break;
    }
  }
  return absl::StrCat("nrefs:", num_refs, "|case:", options.lowercase ? "lc" : "mixed",
                      "|eff:", options.effective_order ? "yes" : "no",
                      "|tok:", options.tokenize == BleuTokenizer::k13a ? "13a" : "none",
                      "|smooth:", smooth);
}

}  // namespace text
}  // namespace meshrt
