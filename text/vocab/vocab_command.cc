#include "text/vocab/vocab_command.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "text/vocab/encode_npy.h"
#include "text/vocab/vocab.h"
#include "util/flags.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

constexpr char kSubcommands[] = "train, inspect, encode";

constexpr char kUsage[] =
    "usage: meshrt vocab SUBCOMMAND [ARGS] [FLAGS]      meshrt vocab SUBCOMMAND --help for its "
    "flags\n\n"
    "The translation experiment's subword vocabulary: one SentencePiece model shared by both "
    "languages, with ids pad 0, EOS 1, UNK 2 and no BOS.\n\n"
    "subcommands:\n"
    "  train    train a vocabulary on text files: meshrt vocab train --input FILE [FILE...] "
    "--size N --out MODEL\n"
    "  inspect  its size, special ids and first pieces, and how it encodes a text: meshrt vocab "
    "inspect MODEL [--encode TEXT] [--pieces N]\n"
    "  encode   lines of text to a [lines, length] int32 .npy of ids: meshrt vocab encode MODEL "
    "--input TEXT_FILE --length L --out FILE.npy\n";

// Parses `args` with `flags`; errors name the subcommand.
absl::StatusOr<std::vector<std::string>> Parse(FlagSet& flags, const std::vector<std::string>& args,
                                               absl::string_view subcommand) {
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(args);
  if (!positional.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("meshrt vocab ", subcommand, ": ", positional.status().message()));
  }
  return positional;
}

std::string IdText(int32_t id) { return id < 0 ? "none" : absl::StrCat(id); }

std::string SpecialIds(const Vocab& vocab) {
  return absl::StrCat("pad ", vocab.pad_id(), ", EOS ", vocab.eos_id(), ", UNK ",
                      IdText(vocab.unk_id()), ", BOS ", IdText(vocab.bos_id()));
}

absl::Status Train(const std::vector<std::string>& args, std::ostream& out) {
  VocabTrainOptions options;
  std::string out_path;
  int64_t threads = options.threads;
  FlagSet flags(
      "meshrt vocab train --input FILE [FILE...] --size N --out MODEL [flags]",
      "Trains one SentencePiece vocabulary on the lines of the input files (UTF-8, one sentence "
      "a line; give --input several times or list more files after it) and writes the model "
      "file MODEL (no .vocab file: `meshrt vocab inspect --pieces N` lists pieces). Ids: pad 0, "
      "EOS 1, UNK 2, no BOS. The same inputs and flags give a byte-identical model.\n\n"
      "example:\n  meshrt vocab train --input corpus/train.en corpus/train.fr --size 8000 "
      "--out vocab.model");
  flags.Repeated("input", &options.inputs, "a text file to train on (repeatable)");
  flags.Int("size", &options.size, "pieces in the vocabulary, the 3 special ones included");
  flags.String("out", &out_path, "the model file to write (required)");
  flags.String("model_type", &options.model_type, "unigram or bpe");
  flags.Int("max_sentences", &options.max_sentences,
            "train on this many sentences chosen at random (by --seed) from the inputs; 0: all");
  flags.Int("seed", &options.seed, "seeds the choice of --max_sentences");
  flags.Double("character_coverage", &options.character_coverage,
               "the fraction of characters with their own piece, in [0.98, 1]; rarer ones are UNK");
  flags.Int("threads", &threads,
            "training threads (faster; a unigram model differs with the count, so keep it fixed)");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, Parse(flags, args, "train"));
  if (flags.help()) {
    out << flags.Help();
    return absl::OkStatus();
  }
  options.inputs.insert(options.inputs.end(), positional.begin(), positional.end());
  if (out_path.empty()) {
    return absl::InvalidArgumentError("meshrt vocab train needs --out MODEL");
  }
  if (threads < 1 || threads > 128) {
    return absl::InvalidArgumentError(absl::StrCat("--threads ", threads, ": must be in [1, 128]"));
  }
  options.threads = static_cast<int>(threads);

  const absl::Time start = absl::Now();
  VocabTrainStats stats;
  RETURN_IF_ERROR(TrainVocab(options, out_path, &stats));
  const absl::Duration took = absl::Now() - start;
  ASSIGN_OR_RETURN(const Vocab vocab, Vocab::Load(out_path));
  out << "model: " << out_path << "\n"
      << "vocab size: " << vocab.size() << " (" << options.model_type << ")\n"
      << "special ids: " << SpecialIds(vocab) << "\n"
      << "sentences: " << stats.used;
  if (stats.used < stats.sentences) {
    out << " of " << stats.sentences << " (--max_sentences, --seed " << options.seed << ")";
  }
  out << " from " << options.inputs.size() << (options.inputs.size() == 1 ? " file" : " files")
      << "\n"
      << absl::StrFormat("time: %.2f s\n", absl::ToDoubleSeconds(took));
  return absl::OkStatus();
}

absl::Status Inspect(const std::vector<std::string>& args, std::ostream& out) {
  std::string text;
  int64_t pieces = 10;
  FlagSet flags("meshrt vocab inspect MODEL [--encode TEXT] [--pieces N]",
                "Prints a vocabulary's size, special ids and first pieces (id, piece, score), "
                "and with --encode how it encodes TEXT: the ids (a row adds EOS 1), the pieces, "
                "and the text decoded back.\n\n"
                "example:\n  meshrt vocab inspect vocab.model --encode 'Le garçon a 3 ans.'");
  flags.String("encode", &text, "a text to encode (non-empty)");
  flags.Int("pieces", &pieces, "how many of the first pieces to list");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, Parse(flags, args, "inspect"));
  if (flags.help()) {
    out << flags.Help();
    return absl::OkStatus();
  }
  if (positional.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("meshrt vocab inspect takes one MODEL, got ",
                                                   positional.size(), " arguments"));
  }
  if (pieces < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--pieces ", pieces, ": must be >= 0"));
  }
  ASSIGN_OR_RETURN(const Vocab vocab, Vocab::Load(positional[0]));
  out << "model: " << positional[0] << "\n"
      << "vocab size: " << vocab.size() << "\n"
      << "special ids: " << SpecialIds(vocab) << "\n";
  const int64_t shown = std::min(pieces, vocab.size());
  if (shown > 0) {
    out << "first " << shown << " pieces (id, piece, score):\n";
    for (int32_t id = 0; id < shown; ++id) {
      out << absl::StrFormat("  %6d  %s  %g\n", id, vocab.Piece(id), vocab.Score(id));
    }
  }
  if (!text.empty()) {
    const std::vector<int32_t> ids = vocab.Encode(text);
    std::vector<std::string> piece_list;
    for (const int32_t id : ids) piece_list.push_back(vocab.Piece(id));
    const std::string decoded = vocab.Decode(ids);
    out << "text: " << text << "\n"
        << "ids (" << ids.size() << "): " << absl::StrJoin(ids, " ") << "\n"
        << "pieces: " << absl::StrJoin(piece_list, " ") << "\n"
        << "decoded: " << decoded << "\n"
        << "round trip: "
        << (decoded == text ? "exact"
                            : "differs (SentencePiece normalises text: NFKC, whitespace; "
                              "characters it lacks decode as \" \xE2\x81\x87 \")")
        << "\n";
  }
  return absl::OkStatus();
}

absl::Status Encode(const std::vector<std::string>& args, std::ostream& out) {
  std::string input, out_path;
  int64_t length = 0;
  FlagSet flags("meshrt vocab encode MODEL --input TEXT_FILE --length L --out FILE.npy",
                "Encodes each line of TEXT_FILE into a row of L int32 ids: the line's ids, EOS "
                "(1), then pad (0); a longer line keeps its first L - 1 ids and EOS. Writes the "
                "rows as a [lines, L] .npy file and prints how many lines were truncated and "
                "how many ids lines need.\n\n"
                "example:\n  meshrt vocab encode vocab.model --input corpus/train.fr --length 64 "
                "--out train_fr.npy");
  flags.String("input", &input, "the text file, one sentence a line (required)");
  flags.Int("length", &length, "ids per row, EOS included (required)");
  flags.String("out", &out_path, "the .npy file to write (required)");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, Parse(flags, args, "encode"));
  if (flags.help()) {
    out << flags.Help();
    return absl::OkStatus();
  }
  if (positional.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("meshrt vocab encode takes one MODEL, got ", positional.size(), " arguments"));
  }
  if (input.empty() || out_path.empty() || length == 0) {
    return absl::InvalidArgumentError(
        "meshrt vocab encode needs --input TEXT_FILE, --length L and --out FILE.npy");
  }
  ASSIGN_OR_RETURN(const Vocab vocab, Vocab::Load(positional[0]));
  EncodeStats stats;
  RETURN_IF_ERROR(EncodeLinesToNpy(vocab, input, length, out_path, &stats));
  const double cells = static_cast<double>(stats.lines) * static_cast<double>(length);
  out << "wrote " << out_path << ": int32 (" << stats.lines << ", " << length << ")\n"
      << "lines: " << stats.lines << "\n"
      << absl::StrFormat("truncated: %d (%.1f%%)\n", stats.truncated,
                         stats.lines > 0 ? 100.0 * stats.truncated / stats.lines : 0.0)
      << absl::StrFormat("tokens: %d (%.1f%% of the ids; the rest is padding)\n", stats.tokens,
                         cells > 0 ? 100.0 * stats.tokens / cells : 0.0)
      << absl::StrFormat("tokens per line, EOS included: max %d, median %g\n", stats.max_tokens,
                         stats.median_tokens);
  return absl::OkStatus();
}

}  // namespace

absl::Status VocabCommand(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meshrt vocab needs a subcommand: ", kSubcommands, " (see meshrt vocab --help)"));
  }
  const std::string& sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "--help" || sub == "-h" || sub == "help") {
    out << kUsage;
    return absl::OkStatus();
  }
  if (sub == "train") return Train(rest, out);
  if (sub == "inspect") return Inspect(rest, out);
  if (sub == "encode") return Encode(rest, out);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown vocab subcommand '", sub, "'; the subcommands are ", kSubcommands));
}

}  // namespace text
}  // namespace meshrt
