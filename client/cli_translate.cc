// The translation experiment in the CLI (client/cli_translate.h): data for `meshrt train --model
// transformer_encdec`, the decoder, and `meshrt translate`.
#include "client/cli_translate.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli_train.h"
#include "client/npy.h"
#include "core/ops/builder.h"
#include "runtime/checkpoint_store.h"
#include "runtime/checkpoint_tensors.h"
#include "text/bleu/bleu.h"
#include "util/file.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// The lines of a UTF-8 text file (without their "\n" or "\r\n").
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ::access(path.c_str(), F_OK) != 0
               ? absl::NotFoundError(absl::StrCat("cannot read ", path, ": no such file"))
               : absl::PermissionDeniedError(absl::StrCat("cannot read ", path));
  }
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

// Writes `rows` (each at most `length` ids) as a 2-D int32 .npy [rows, length], 0-padded.
absl::Status WriteRows(const std::string& path, const std::vector<std::vector<int32_t>>& rows,
                       int64_t length) {
  std::vector<int32_t> flat(rows.size() * length, models::kPadId);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(rows[r].begin(), rows[r].end(), flat.begin() + r * length);
  }
  const Shape shape({{"rows", static_cast<int64_t>(rows.size())}, {"length", length}});
  return WriteNpy(path, Tensor::Int(shape, flat));
}

}  // namespace

absl::StatusOr<TranslationData> PrepareTranslationData(const std::string& dir,
                                                       const std::string& lang,
                                                       const std::string& split,
                                                       const text::Vocab& vocab, int64_t length,
                                                       int64_t seed) {
  const std::string en_path = absl::StrCat(dir, "/", split, ".en");
  const std::string xx_path = absl::StrCat(dir, "/", split, ".", lang);
  ASSIGN_OR_RETURN(std::vector<std::string> en, ReadLines(en_path));
  ASSIGN_OR_RETURN(std::vector<std::string> xx, ReadLines(xx_path));
  if (en.size() != xx.size() || en.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        en_path, " has ", en.size(), " lines and ", xx_path, " has ", xx.size(),
        en.empty() ? ": no sentence pairs" : ": the files must be aligned line by line"));
  }
  TranslationData data;
  data.pairs = static_cast<int64_t>(en.size());
  std::vector<size_t> order(en.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<int32_t>> inputs, targets;
  for (size_t i : order) {
    std::vector<int32_t> a = vocab.Encode(en[i]), b = vocab.Encode(xx[i]);
    if (static_cast<int64_t>(std::max(a.size(), b.size())) >= length) ++data.truncated;
    inputs.push_back(EncodeSource(vocab, en[i], length));
    targets.push_back(EncodeSource(vocab, xx[i], length));
  }
  const std::string out_dir = absl::StrCat(dir, "/.meshrt");
  RETURN_IF_ERROR(MakeDirs(out_dir));
  data.inputs = absl::StrCat(out_dir, "/", split, ".en.ids.npy");
  data.targets = absl::StrCat(out_dir, "/", split, ".", lang, ".ids.npy");
  RETURN_IF_ERROR(WriteRows(data.inputs, inputs, length));
  RETURN_IF_ERROR(WriteRows(data.targets, targets, length));
  return data;
}

absl::StatusOr<text::Vocab> PrepareEncDec(const TrainFlags& f, models::EncDecOptions* o,
                                          CliIo io) {
  if (f.vocab_text.empty()) {
    return UsageError(
        "--model transformer_encdec needs --vocab MODEL: a SentencePiece model file (trained "
        "on DIR/train.en and DIR/train.LANG and written there when it does not exist; or made "
        "with meshrt vocab train)");
  }
  if (f.data_format != "auto" || f.eval_fraction != 0 || f.eval_every != 0 || f.sample != 0) {
    return UsageError(
        "--data_format, --eval_fraction, --eval_every and --sample are for --model transformer; "
        "transformer_encdec evaluates with --eval_bleu_every and translates with meshrt "
        "translate");
  }
  if (f.vocab_size < 8) {
    return UsageError(absl::StrCat("--vocab_size needs N >= 8, not ", f.vocab_size));
  }
  if (f.eval_bleu_every < 0 || f.eval_bleu_lines < 1) {
    return UsageError("--eval_bleu_every needs N >= 0 and --eval_bleu_lines N >= 1");
  }
  if (!(f.dropout >= 0 && f.dropout < 1) || !(f.label_smoothing >= 0 && f.label_smoothing < 1)) {
    return UsageError("--dropout and --label_smoothing need 0 <= X < 1");
  }
  if (::access(f.vocab_text.c_str(), F_OK) != 0 && errno == ENOENT && f.data != "synthetic" &&
      f.data != TrainFlags().data) {
    // The experiment in one command: the vocabulary of the training split, made once.
    text::VocabTrainOptions train;
    train.inputs = {absl::StrCat(f.data, "/train.en"),
                    absl::StrCat(f.data, "/train.", f.target_lang)};
    train.size = f.vocab_size;
    text::VocabTrainStats stats;
    const absl::Time start = absl::Now();
    absl::Status trained = text::TrainVocab(train, f.vocab_text, &stats);
    if (!trained.ok()) {
      return WithContext(trained, absl::StrCat("--vocab ", f.vocab_text,
                                               " does not exist; training it"));
    }
    io.out << absl::StrFormat(
        "trained a vocabulary of %d pieces on %d sentences of %s and %s in %.1f s: %s\n",
        f.vocab_size, stats.used, train.inputs[0], train.inputs[1],
        absl::ToDoubleSeconds(absl::Now() - start), f.vocab_text);
  }
  ASSIGN_OR_RETURN(text::Vocab vocab, text::Vocab::Load(f.vocab_text));
  if (f.batch > 0) o->batch = f.batch;
  if (f.length > 0) o->length = f.length;
  if (f.d_model > 0) o->d_model = f.d_model;
  if (f.heads > 0) o->heads = f.heads;
  if (f.d_ff > 0) o->d_ff = f.d_ff;
  if (f.layers > 0) o->encoder_layers = o->decoder_layers = f.layers;
  o->vocab = vocab.size();
  o->seed = f.seed;
  o->dropout = static_cast<float>(f.dropout);
  o->label_smoothing = static_cast<float>(f.label_smoothing);
  if (f.data == TrainFlags().data || f.data == "synthetic") {
    if (f.data == "synthetic") return vocab;  // random ids: for benchmarks
    return UsageError(
        "--model transformer_encdec needs --data DIR: a directory of train.en and train.LANG "
        "(meshrt data translations --source ddtp --lang fr --out DIR)");
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<TranslationData> data =
      PrepareTranslationData(f.data, f.target_lang, "train", vocab, o->length, f.seed);
  if (!data.ok()) return WithContext(data.status(), "--data");
  o->inputs_path = data->inputs;
  o->targets_path = data->targets;
  io.out << absl::StrFormat(
      "encoded %d sentence pairs of %s/train.{en,%s} with %s (vocab %d) in %.1f s; %d pairs "
      "(%.1f%%) have a side longer than length %d and are cut\n",
      data->pairs, f.data, f.target_lang, f.vocab_text, vocab.size(),
      absl::ToDoubleSeconds(absl::Now() - start), data->truncated,
      100.0 * data->truncated / data->pairs, o->length);
  return vocab;
}

absl::Status CopyVocabInto(const std::string& dir, const std::string& vocab_path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(vocab_path));
  const std::string tmp = absl::StrCat(dir, "/vocab.model.tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) return absl::DataLossError(absl::StrCat("cannot write ", tmp));
  }
  if (::rename(tmp.c_str(), absl::StrCat(dir, "/vocab.model").c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", tmp));
  }
  return absl::OkStatus();
}

absl::StatusOr<DevBleu> LoadDevBleu(const TrainFlags& f, const text::Vocab& vocab,
                                    int64_t length) {
  const std::string en_path = absl::StrCat(f.data, "/dev.en");
  const std::string xx_path = absl::StrCat(f.data, "/dev.", f.target_lang);
  ASSIGN_OR_RETURN(std::vector<std::string> en, ReadLines(en_path));
  ASSIGN_OR_RETURN(std::vector<std::string> xx, ReadLines(xx_path));
  if (en.size() != xx.size() || en.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(en_path, " has ", en.size(), " lines and ",
                                                   xx_path, " has ", xx.size()));
  }
  DevBleu dev;
  for (size_t i = 0; i < en.size() && static_cast<int64_t>(i) < f.eval_bleu_lines; ++i) {
    dev.sources.push_back(EncodeSource(vocab, en[i], length));
    dev.references.push_back(xx[i]);
  }
  return dev;
}

absl::StatusOr<double> EvalBleu(const DevBleu& dev, const text::Vocab& vocab,
                                const models::EncDecOptions& model, const TensorMap& weights) {
  DecoderOptions d;
  d.model = model;
  d.model.inputs_path = d.model.targets_path = "";
  d.target.reference = true;
  std::ostringstream ignored;
  ASSIGN_OR_RETURN(std::unique_ptr<TranslationDecoder> decoder,
                   TranslationDecoder::Start(d, weights, ignored));
  ASSIGN_OR_RETURN(std::vector<Hypothesis> hyps, decoder->Decode(dev.sources));
  std::vector<std::string> text;
  for (const Hypothesis& h : hyps) text.push_back(vocab.Decode(h.ids));
  ASSIGN_OR_RETURN(text::BleuScore bleu, text::CorpusBleu(text, {dev.references}));
  return bleu.score;
}

constexpr char kTranslateUsage[] =
    "meshrt translate CHECKPOINT --input FILE [--output FILE] [--beam K] [--alpha A] "
    "[--max_length L] [--scores] (--reference | --local N | --coordinator HOST:PORT) "
    "[--mesh MESH --layout RULES]";

constexpr char kTranslateDescription[] =
    "Translates every line of --input with a transformer_encdec checkpoint (from `meshrt "
    "train --model transformer_encdec --save CK`): one line out per line in. The checkpoint "
    "knows its model (the sizes of its variables) and its vocabulary (CK/vocab.model, copied "
    "there by the training). Decoding is one program on the workers: the encoder once, then "
    "a loop over the output positions with a key/value cache, for --batch sentences per "
    "request; the same tokens on every mesh and layout. (From C++: client/translator.h.)\n\n"
    "examples:\n"
    "  meshrt translate ck --input data/test.en --output test.hyp.fr --local 4 "
    "--mesh rows:2,cols:2 --layout batch:rows,heads:cols,d_ff:cols,vocab:cols\n"
    "  meshrt bleu test.hyp.fr data/test.fr";

absl::Status TranslateCommand(const std::vector<std::string>& args, CliIo io) {
  std::string input, output, vocab_path;
  double alpha = 0.6;
  TranslatorOptions o;
  ProgramTarget& target = o.target;
  FlagSet flags(kTranslateUsage, kTranslateDescription);
  flags.String("input", &input, "the text to translate, one sentence per line (required)");
  flags.String("output", &output, "where the translations go (default: standard output)");
  flags.Int("beam", &o.beam, "beam size (1: greedy, the default)");
  flags.Double("alpha", &alpha, "beam search length penalty exponent (default 0.6)");
  flags.Int("max_length", &o.max_length,
            "output positions decoded, EOS included (default: the model's length)");
  flags.Bool("scores", &o.scores,
             "write SCORE<TAB>TEXT: greedy, the sum of the output tokens' log-probabilities "
             "(EOS included); beam search, that sum divided by the length penalty");
  flags.Int("batch", &o.batch, "sentences per decoding request (default 32)");
  flags.String("vocab", &vocab_path,
               "the SentencePiece model (default: CHECKPOINT/vocab.model, written by training)");
  AddTargetFlags(flags, ProgramTargetFlagHelp("decode"), &target);
  ASSIGN_OR_RETURN(std::vector<std::string> positional,
                   ParseCommandFlags(flags, args, "translate"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (positional.size() != 1) {
    return UsageError("meshrt translate takes one CHECKPOINT (see meshrt translate --help)");
  }
  if (input.empty()) return UsageError("meshrt translate needs --input FILE");
  RETURN_IF_ERROR(CheckProgramTargetFlags(target, "translate"));
  if (o.beam < 1) return UsageError(absl::StrCat("--beam needs K >= 1, not ", o.beam));
  if (!(alpha >= 0 && alpha <= 10)) {
    return UsageError(absl::StrCat("--alpha needs 0 <= A <= 10, not ", alpha));
  }
  o.alpha = static_cast<float>(alpha);
  if (o.batch < 1) return UsageError(absl::StrCat("--batch needs N >= 1, not ", o.batch));
  const std::string& root_dir = target.checkpoint_root;
  const std::string checkpoint =
      root_dir.empty() ? positional[0] : absl::StrCat(root_dir, "/", positional[0]);
  absl::StatusOr<CheckpointTensors> read = ReadCheckpointTensors(checkpoint);
  if (!read.ok()) return WithContext(read.status(), absl::StrCat("reading ", positional[0]));
  const std::string what = absl::StrCat("checkpoint ", positional[0]);
  ASSIGN_OR_RETURN(models::EncDecOptions model, EncDecOptionsFromWeights(read->tensors, what));
  // The options against the model, as usage errors: refused before anything starts.
  if (absl::Status fits = CheckTranslatorOptions(o, model); !fits.ok()) {
    return UsageError(absl::StrCat("--", fits.message()));
  }
  if (vocab_path.empty()) vocab_path = absl::StrCat(checkpoint, "/vocab.model");
  ASSIGN_OR_RETURN(text::Vocab vocab, text::Vocab::Load(vocab_path));
  ASSIGN_OR_RETURN(std::vector<std::string> lines, ReadLines(input));
  ASSIGN_OR_RETURN(std::unique_ptr<Translator> translator,
                   Translator::Create(read->tensors, std::move(vocab), o, io.err, what));
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(std::vector<Translation> translations, translator->Translate(lines));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::ofstream file;
  if (!output.empty()) {
    file.open(output, std::ios::binary | std::ios::trunc);
    if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write --output ", output));
  }
  std::ostream& out = output.empty() ? io.out : file;
  for (const Translation& t : translations) {
    if (o.scores) out << absl::StrFormat("%.4f\t", t.score);
    out << t.text << "\n";
  }
  out.flush();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", output.empty() ? "the output" : output));
  io.err << absl::StrFormat(
      "translated %d lines in %.1f s (%.1f sentences/s, %s)\n", translations.size(), seconds,
      translations.size() / std::max(seconds, 1e-9),
      o.beam > 1 ? absl::StrFormat("beam %d, alpha %g", o.beam, alpha) : std::string("greedy"));
  return absl::OkStatus();
}

}  // namespace meshrt
