// `meshrt data translations`: reads pairs from the chosen source (DDTP, TSV, aligned files),
// cleans and splits them (parallel.h) and writes the splits with a SOURCES record.
#include "text/corpus/corpus_command.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "text/corpus/ddtp.h"
#include "text/corpus/ddtp_fetch.h"
#include "text/corpus/parallel.h"
#include "text/corpus/sentences.h"
#include "text/corpus/sha256.h"
#include "util/file.h"
#include "util/flags.h"
#include "util/median.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

constexpr char kDataUsage[] =
    "usage: meshrt data SUBCOMMAND [flags]\n\n"
    "Builds datasets reproducibly. Subcommands:\n"
    "  translations   an English→LANG parallel corpus split into train/dev/test "
    "(meshrt data translations --help)\n";

struct TranslationsFlags {
  std::string source = "ddtp";
  std::string lang;
  std::string out;
  std::vector<std::string> inputs;
  int64_t dev_percent = 2;
  int64_t test_percent = 2;
  int64_t max_words = 60;
  std::string cache;
  bool update = true;
  bool short_descriptions = true;
};

// The command line as typed, for SOURCES (arguments with spaces or quotes single-quoted).
std::string CommandLine(const std::vector<std::string>& args) {
  std::string line = "meshrt data translations";
  for (const std::string& a : args) {
    const bool plain = !a.empty() && a.find_first_of(" \t'\"\\$`") == std::string::npos;
    absl::StrAppend(&line, " ",
                    plain ? a : absl::StrCat("'", absl::StrReplaceAll(a, {{"'", "'\\''"}}), "'"));
  }
  return line;
}

// Appends "  path: bytes N, sha256 HEX" for an input file.
absl::Status DescribeInput(const std::string& path, std::string* sources) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  absl::StrAppend(sources, "input: ", path, "\n  bytes ", bytes.size(), ", sha256 ",
                  Sha256Hex(bytes), "\n");
  return absl::OkStatus();
}

std::string DescribeDdtpFile(const DdtpFile& f) {
  std::string match = "not listed in the Release file";
  if (!f.release_sha256.empty()) {
    match = f.release_sha256 == f.text_sha256
                ? "equals the Release file's SHA256"
                : absl::StrCat("DIFFERS from the Release file's SHA256 ", f.release_sha256);
  }
  return absl::StrCat("file: ", f.uri, "\n  cached as ", f.path, ": bytes ", f.compressed_bytes,
                      ", sha256 ", f.compressed_sha256, "\n  decompressed: bytes ", f.text.size(),
                      ", sha256 ", f.text_sha256, " (", match, ")\n");
}

std::string DescribeDdtpStats(const DdtpStats& s, absl::string_view lang) {
  return absl::StrCat(
      "ddtp stanzas: en ", s.en_stanzas, ", ", lang, " ", s.lang_stanzas, ", malformed ",
      s.malformed_stanzas, "\n", "ddtp descriptions (distinct Description-md5): en ",
      s.en_descriptions, ", ", lang, " ", s.lang_descriptions, ", joined ", s.joined, ", ", lang,
      " only (English text no longer in the archive) ", s.lang_only, "\n",
      "ddtp pairing: short descriptions ", s.short_pairs,
      "; long descriptions skipped because their paragraph counts differ ",
      s.paragraph_count_mismatch, "; paragraphs paired ", s.paragraphs_paired,
      ", skipped because their blocks (prose, list items) differ ", s.paragraph_structure_mismatch,
      "; list items paired ", s.items_paired, ", skipped with their paragraphs ", s.items_skipped,
      "; prose blocks paired ", s.prose_blocks_paired, ", skipped (sentence counts differ) ",
      s.sentence_count_mismatch, "; sentence pairs ", s.sentence_pairs, "; all pairs ", s.pairs,
      "\n");
}

absl::Status ReadDdtp(const TranslationsFlags& flags, std::vector<SentencePair>* pairs,
                      std::string* sources, std::ostream& out) {
  if (!flags.inputs.empty()) {
    return absl::InvalidArgumentError("--source ddtp fetches its files: do not give --input");
  }
  DdtpFetchOptions options;
  options.lang = flags.lang;
  options.cache_dir = flags.cache.empty() ? absl::StrCat(flags.out, "/.ddtp") : flags.cache;
  options.update = flags.update;
  out << (flags.update ? "fetching" : "reading") << " DDTP Translation-en and Translation-"
      << flags.lang << " (" << options.codename << "/" << options.component << ", cache "
      << options.cache_dir << ")" << std::endl;
  ASSIGN_OR_RETURN(const DdtpFetchResult fetched, FetchDdtp(options));
  for (const std::string& m : fetched.apt_messages) {
    out << "  apt: " << m << "\n";
    absl::StrAppend(sources, "apt said: ", m, "\n");
  }
  absl::StrAppend(sources,
                  "source: ddtp (Debian Description Translation Project: translated "
                  "package descriptions), ",
                  options.codename, "/", options.component, ", fetched with apt-get",
                  flags.update ? " update" : " (cache reused: --noupdate)", "\n");
  absl::StrAppend(
      sources, "archive: ",
      fetched.release_summary.empty() ? "(no Release file found)" : fetched.release_summary, "\n");
  if (!fetched.release_path.empty()) {
    absl::StrAppend(sources, "release file: ", fetched.release_path, ", sha256 ",
                    fetched.release_sha256, "\n");
  }
  absl::StrAppend(sources, DescribeDdtpFile(fetched.en), DescribeDdtpFile(fetched.lang));
  DdtpOptions ddtp_options;
  ddtp_options.short_descriptions = flags.short_descriptions;
  absl::StrAppend(sources, "short descriptions: ",
                  flags.short_descriptions ? "paired" : "left out (--noshort_descriptions)", "\n");
  DdtpStats stats;
  ASSIGN_OR_RETURN(*pairs, DdtpPairs(fetched.en.text, fetched.lang.text, flags.lang,
                                     fetched.en.path, fetched.lang.path, ddtp_options, &stats));
  absl::StrAppend(sources, DescribeDdtpStats(stats, flags.lang),
                  "order: the English file's (each description where it first appears)\n");
  return absl::OkStatus();
}

absl::Status ReadInputs(const TranslationsFlags& flags, std::vector<SentencePair>* pairs,
                        std::string* sources) {
  if (flags.source == "tsv") {
    if (flags.inputs.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--source tsv takes one --input FILE.tsv (ENGLISH<TAB>", flags.lang,
                       " lines), got ", flags.inputs.size()));
    }
    ASSIGN_OR_RETURN(*pairs, ReadTsv(flags.inputs[0]));
    absl::StrAppend(sources, "source: tsv (English<TAB>", flags.lang, " per line)\n");
  } else {
    if (flags.inputs.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--source aligned takes two --input files, English first, then ", flags.lang,
                       " (aligned line by line), got ", flags.inputs.size()));
    }
    ASSIGN_OR_RETURN(*pairs, ReadAligned(flags.inputs[0], flags.inputs[1]));
    absl::StrAppend(sources, "source: aligned (English file, then ", flags.lang, " file)\n");
  }
  for (const std::string& path : flags.inputs) RETURN_IF_ERROR(DescribeInput(path, sources));
  absl::StrAppend(sources, "order: the input's\n");
  return absl::OkStatus();
}

double MedianWords(const SplitCorpus& corpus, bool english) {
  std::vector<double> words;
  for (Split split : {Split::kTrain, Split::kDev, Split::kTest}) {
    for (const SentencePair& p : corpus.of(split)) {
      words.push_back(CountWords(english ? p.en : p.other));
    }
  }
  return words.empty() ? 0 : Median(std::move(words));
}

constexpr char kTranslationsUsage[] =
    "meshrt data translations --lang LANG --out DIR [--source ddtp|tsv|aligned] "
    "[--input FILE]... [flags]";

constexpr char kTranslationsDescription[] =
    "Builds an English→LANG parallel corpus: DIR/{train,dev,test}.{en,LANG}, aligned line by "
    "line (UTF-8, one sentence per line), and DIR/SOURCES, which records the inputs with their "
    "SHA-256 checksums, the date, and every count of what was paired, dropped and kept.\n"
    "Sources:\n"
    "  ddtp     Debian's translated package descriptions (Translation-en and Translation-LANG of "
    "bookworm main), fetched with apt-get into --cache without changing the system's apt "
    "state; joined on Description-md5, paired by paragraph and sentence where both sides "
    "agree (text/corpus/README.md)\n"
    "  tsv      --input FILE.tsv, ENGLISH<TAB>LANG per line\n"
    "  aligned  --input EN.txt --input LANG.txt, line i of one translating line i of the other\n"
    "Pairs are whitespace-normalised; invalid UTF-8, empty, untranslated (LANG side equal to "
    "the English), too long and duplicate pairs are dropped and counted. The split is by a "
    "hash of the English side (FNV-1a 64 mod 100: below --test_percent test, below "
    "--test_percent + --dev_percent dev, else train), so no English sentence is in two splits "
    "and reruns give the same split.\n\n"
    "examples:\n"
    "  meshrt data translations --source ddtp --lang fr --out data/en-fr\n"
    "  meshrt data translations --source tsv --input pairs.tsv --lang de --out data/en-de";

void AddTranslationsFlags(FlagSet& flags, TranslationsFlags* f) {
  flags.String("source", &f->source, "where the pairs come from: ddtp, tsv or aligned");
  flags.String("lang", &f->lang,
               "the target language code (required): fr, de, es, pt_BR, ... (DDTP's spelling)");
  flags.String("out", &f->out, "the output directory (required; created when missing)");
  flags.Repeated("input", &f->inputs,
                 "input file(s): one for tsv, two (English, LANG) for aligned");
  flags.Int("dev_percent", &f->dev_percent, "percent of English sentences in dev");
  flags.Int("test_percent", &f->test_percent, "percent of English sentences in test");
  flags.Int("max_words", &f->max_words,
            "drop pairs with more words than this on either side (0: no limit)");
  flags.String("cache", &f->cache, "ddtp: where the fetched files are kept (default: OUT/.ddtp)");
  flags.Bool("update", &f->update,
             "ddtp: run apt-get update; --noupdate reuses the files in --cache (no network)");
  flags.Bool("short_descriptions", &f->short_descriptions,
             "ddtp: pair the one-line short descriptions too (noun phrases, about a quarter of the "
             "pairs); --noshort_descriptions keeps the long descriptions' sentences only");
}

// The flags' checks (InvalidArgument naming the flag) and the split they ask for.
absl::StatusOr<SplitOptions> CheckTranslationsFlags(const TranslationsFlags& f) {
  if (f.lang.empty()) return absl::InvalidArgumentError("--lang is required (e.g. --lang fr)");
  RETURN_IF_ERROR(ValidateLangCode(f.lang));
  if (f.out.empty()) return absl::InvalidArgumentError("--out DIR is required");
  if (f.source != "ddtp" && f.source != "tsv" && f.source != "aligned") {
    return absl::InvalidArgumentError(
        absl::StrCat("--source '", f.source, "' is not one of ddtp, tsv, aligned"));
  }
  for (const auto& [name, percent] : {std::pair<const char*, int64_t>{"dev", f.dev_percent},
                                      std::pair<const char*, int64_t>{"test", f.test_percent}}) {
    if (percent < 0 || percent > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, "_percent ", percent, " is not in [0, 100]"));
    }
  }
  SplitOptions split_options;
  split_options.dev_percent = static_cast<int>(f.dev_percent);
  split_options.test_percent = static_cast<int>(f.test_percent);
  RETURN_IF_ERROR(ValidateSplitOptions(split_options));
  if (f.max_words < 0 || f.max_words > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_words ", f.max_words, " is not in [0, 1000000]"));
  }
  return split_options;
}

// Appends to SOURCES what the cleaning dropped and how the split was made.
void DescribeCleaning(const TranslationsFlags& f, const CleanStats& clean,
                      const SplitOptions& split_options, std::string* sources) {
  absl::StrAppend(sources, "cleaning: input pairs ", clean.input, "; dropped: invalid UTF-8 ",
                  clean.invalid_utf8, ", double-encoded UTF-8 ", clean.mojibake, ", empty ",
                  clean.empty, ", untranslated (", f.lang, " equal to English) ",
                  clean.untranslated, ", more than ", f.max_words, " words ", clean.too_long,
                  ", duplicate pairs ", clean.duplicate, "; kept ", clean.kept, "\n",
                  "split: FNV-1a 64 of the English side mod 100: below ",
                  split_options.test_percent, " test, below ",
                  split_options.test_percent + split_options.dev_percent, " dev, else train\n");
}

// Writes the splits and SOURCES (with `sources` so far, then the counts, files and medians) and
// prints the summary.
absl::Status WriteCorpus(const TranslationsFlags& f, const SplitCorpus& corpus,
                         const CleanStats& clean, absl::Time start, std::string sources,
                         std::ostream& out) {
  ASSIGN_OR_RETURN(const std::vector<WrittenFile> files, WriteSplits(f.out, f.lang, corpus));
  std::string summary;
  int64_t distinct_total = 0;
  for (Split split : {Split::kTrain, Split::kDev, Split::kTest}) {
    absl::flat_hash_set<absl::string_view> english;
    for (const SentencePair& p : corpus.of(split)) english.insert(p.en);
    distinct_total += static_cast<int64_t>(english.size());
    const std::string counts =
        absl::StrCat(corpus.of(split).size(), " pairs (", english.size(), " distinct English)");
    absl::StrAppend(&sources, SplitName(split), ": ", counts, "\n");
    absl::StrAppend(&summary, "  ", SplitName(split), ": ", counts, "\n");
  }
  for (const WrittenFile& file : files) {
    absl::StrAppend(&sources, "output: ", file.name, ": lines ", file.lines, ", bytes ", file.bytes,
                    ", sha256 ", file.sha256, "\n");
  }
  const double median_en = MedianWords(corpus, true);
  const double median_other = MedianWords(corpus, false);
  absl::StrAppend(&sources, "median words per sentence: en ", median_en, ", ", f.lang, " ",
                  median_other, "\n");
  RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(f.out, "/SOURCES"), sources));
  out << "wrote " << f.out << "/{train,dev,test}.{en," << f.lang << "} and SOURCES in "
      << absl::StrFormat("%.1f", absl::ToDoubleSeconds(absl::Now() - start)) << " s\n"
      << summary << "  " << clean.kept << " pairs, " << distinct_total
      << " distinct English; median words en " << median_en << ", " << f.lang << " " << median_other
      << "\n  dropped: invalid UTF-8 " << clean.invalid_utf8 << ", double-encoded "
      << clean.mojibake << ", empty " << clean.empty << ", untranslated " << clean.untranslated
      << ", longer than " << f.max_words << " words " << clean.too_long << ", duplicates "
      << clean.duplicate << " (details in SOURCES)\n";
  return absl::OkStatus();
}

absl::Status TranslationsCommand(const std::vector<std::string>& args, std::ostream& out) {
  TranslationsFlags f;
  FlagSet flags(kTranslationsUsage, kTranslationsDescription);
  AddTranslationsFlags(flags, &f);
  ASSIGN_OR_RETURN(const std::vector<std::string> positional, flags.Parse(args));
  if (flags.help()) {
    out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", positional[0], "' (see --help)"));
  }
  ASSIGN_OR_RETURN(const SplitOptions split_options, CheckTranslationsFlags(f));

  const absl::Time start = absl::Now();
  std::string sources = absl::StrCat(
      "# How the files in this directory were made (text/corpus/README.md).\n",
      "command: ", CommandLine(args), "\n",
      "date: ", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", start, absl::UTCTimeZone()), "\n");
  std::vector<SentencePair> pairs;
  if (f.source == "ddtp") {
    RETURN_IF_ERROR(ReadDdtp(f, &pairs, &sources, out));
  } else {
    RETURN_IF_ERROR(ReadInputs(f, &pairs, &sources));
  }

  CleanOptions clean_options;
  clean_options.max_words = static_cast<int>(f.max_words);
  CleanStats clean;
  SplitCorpus corpus =
      SplitPairs(CleanPairs(std::move(pairs), clean_options, &clean), split_options);
  DescribeCleaning(f, clean, split_options, &sources);
  return WriteCorpus(f, corpus, clean, start, std::move(sources), out);
}

}  // namespace

absl::Status DataCommand(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) {
    out << kDataUsage;
    return absl::InvalidArgumentError("meshrt data needs a subcommand: translations");
  }
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    out << kDataUsage;
    return absl::OkStatus();
  }
  if (sub == "translations") {
    return TranslationsCommand(std::vector<std::string>(args.begin() + 1, args.end()), out);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown subcommand 'data ", sub, "'; the subcommands are: translations"));
}

}  // namespace text
}  // namespace meshrt
