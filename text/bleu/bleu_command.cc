#include "text/bleu/bleu_command.h"

#include <cmath>
#include <cstdio>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "text/bleu/bleu.h"
#include "text/bleu/python_text.h"
#include "util/file.h"
#include "util/flags.h"

namespace meshrt {
namespace text {
namespace {

constexpr char kUsage[] =
    "meshrt bleu HYP REF [REF...] [--lowercase] [--tokenize 13a|none] "
    "[--smooth_method exp|floor|add-k|none] [--smooth_value V]";

constexpr char kDescription[] =
    "Corpus BLEU of the hypothesis file HYP (one segment per line, UTF-8, detokenized) against\n"
    "one or more reference files with the same number of lines, computed as sacreBLEU 2.x does\n"
    "by default: case-sensitive, its 13a tokenizer (mteval-v13a), 1- to 4-grams clipped by their\n"
    "largest count in one reference, the closest reference length for the brevity penalty,\n"
    "\"exp\" smoothing. Scores compare with published sacreBLEU scores of the same signature.\n\n"
    "Prints three lines: `BLEU = SCORE` (two decimals), sacreBLEU's detailed line (n-gram\n"
    "precisions, brevity penalty, length ratio, lengths) and the sacreBLEU signature.\n\n"
    "example (sacreBLEU's README example: three segments, two reference files):\n"
    "  meshrt bleu hyp.en ref1.en ref2.en\n"
    "  BLEU = 48.53\n"
    "  BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n"
    "  signature: nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp";

// The lines of `path` as sacreBLEU's command line reads them: split at '\n' only, a final '\n'
// ending the last line rather than starting an empty one, trailing whitespace (so "\r") removed.
// NotFound (or another I/O error) naming the path; InvalidArgument naming the path and line for
// text that is not UTF-8.
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  std::vector<std::string> lines;
  if (bytes->empty()) return lines;
  std::vector<absl::string_view> raw = absl::StrSplit(*bytes, '\n');
  if (raw.back().empty()) raw.pop_back();
  lines.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const size_t bad = FindInvalidUtf8(raw[i]);
    if (bad != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": line ", i + 1,
                                                     " is not valid UTF-8 (byte ", bad + 1,
                                                     " of the line); convert the file to UTF-8"));
    }
    lines.emplace_back(StripTrailingPythonWhitespace(raw[i]));
  }
  return lines;
}

absl::Status ParseOptions(const std::string& tokenize, const std::string& smooth_method,
                          const std::string& smooth_value, BleuOptions* options) {
  if (tokenize == "13a") {
    options->tokenize = BleuTokenizer::k13a;
  } else if (tokenize == "none") {
    options->tokenize = BleuTokenizer::kNone;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenize: unknown tokenizer '", tokenize, "'; use 13a or none"));
  }
  if (smooth_method == "exp") {
    options->smooth_method = BleuSmoothing::kExp;
  } else if (smooth_method == "floor") {
    options->smooth_method = BleuSmoothing::kFloor;
  } else if (smooth_method == "add-k") {
    options->smooth_method = BleuSmoothing::kAddK;
  } else if (smooth_method == "none") {
    options->smooth_method = BleuSmoothing::kNone;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--smooth_method: unknown method '", smooth_method, "'; use exp, floor, add-k or none"));
  }
  if (!smooth_value.empty()) {
    if (options->smooth_method != BleuSmoothing::kFloor &&
        options->smooth_method != BleuSmoothing::kAddK) {
      return absl::InvalidArgumentError(
          "--smooth_value applies to --smooth_method floor or add-k only");
    }
    double value = 0;
    if (!absl::SimpleAtod(smooth_value, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--smooth_value: '", smooth_value, "' is not a number"));
    }
    options->smooth_value = value;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BleuCommand(const std::vector<std::string>& args, std::ostream& out) {
  FlagSet flags(kUsage, kDescription);
  bool lowercase = false;
  std::string tokenize = "13a";
  std::string smooth_method = "exp";
  std::string smooth_value;
  flags.Bool("lowercase", &lowercase,
             "case-insensitive BLEU: lowercase both sides (sacreBLEU -lc)");
  flags.String("tokenize", &tokenize,
               "13a (mteval-v13a, sacreBLEU's default) or none (split at whitespace only)");
  flags.String("smooth_method", &smooth_method,
               "what a precision without matches becomes: exp (mteval-v13a), floor, add-k, none");
  flags.String("smooth_value", &smooth_value,
               "the value of floor (default 0.1) or add-k (default 1)");
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(args);
  if (!positional.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("meshrt bleu: ", positional.status().message(), " (see meshrt bleu --help)"));
  }
  if (flags.help()) {
    out << flags.Help();
    return absl::OkStatus();
  }
  if (positional->size() < 2) {
    return absl::InvalidArgumentError(
        "meshrt bleu needs a hypothesis file and at least one reference file: " +
        std::string(kUsage));
  }
  BleuOptions options;
  options.lowercase = lowercase;
  if (absl::Status s = ParseOptions(tokenize, smooth_method, smooth_value, &options); !s.ok()) {
    return s;
  }

  const std::string& hyp_path = (*positional)[0];
  absl::StatusOr<std::vector<std::string>> hypotheses = ReadLines(hyp_path);
  if (!hypotheses.ok()) return hypotheses.status();
  if (hypotheses->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(hyp_path, " has no lines to score"));
  }
  std::vector<std::vector<std::string>> references;
  for (size_t k = 1; k < positional->size(); ++k) {
    const std::string& ref_path = (*positional)[k];
    absl::StatusOr<std::vector<std::string>> lines = ReadLines(ref_path);
    if (!lines.ok()) return lines.status();
    if (lines->size() != hypotheses->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the hypothesis file ", hyp_path, " has ", hypotheses->size(),
                       " lines but the reference file ", ref_path, " has ", lines->size(),
                       "; they need one line per segment"));
    }
    references.push_back(*std::move(lines));
  }

  absl::StatusOr<BleuScore> score = CorpusBleu(*hypotheses, references, options);
  if (!score.ok()) return score.status();
  char headline[64];
  std::snprintf(headline, sizeof(headline), "BLEU = %.2f", score->score);
  out << headline << "\n"
      << FormatBleu(*score) << "\n"
      << "signature: " << BleuSignature(options, static_cast<int>(references.size())) << "\n";
  return absl::OkStatus();
}

}  // namespace text
}  // namespace meshrt
