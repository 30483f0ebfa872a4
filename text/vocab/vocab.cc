#include "text/vocab/vocab.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "text/vocab/sentencepiece_library.h"
#include "text/vocab/text_file.h"
#include "util/file.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace text {
namespace {

absl::Status CheckOptions(const VocabTrainOptions& o) {
  if (o.inputs.empty()) return absl::InvalidArgumentError("no input file (--input)");
  if (o.size < 4 || o.size > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--size ", o.size, ": a vocabulary needs at least 4 pieces (pad, EOS, UNK and one more)",
        o.size < 4 ? "" : " and at most 2^30"));
  }
  if (o.model_type != "unigram" && o.model_type != "bpe") {
    return absl::InvalidArgumentError(
        absl::StrCat("--model_type '", o.model_type, "': expected unigram or bpe"));
  }
  // SentencePiece's own range.
  if (!(o.character_coverage >= 0.98 && o.character_coverage <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--character_coverage ", o.character_coverage, ": must be in [0.98, 1]"));
  }
  if (o.max_sentences < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_sentences ", o.max_sentences, ": must be >= 0 (0: all)"));
  }
  if (o.threads < 1 || o.threads > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads ", o.threads, ": must be in [1, 128]"));
  }
  return absl::OkStatus();
}

// The non-empty lines of the input files in order, each checked to be UTF-8; with a selection,
// only the chosen ones.
class FileSentences : public SentenceSource {
 public:
  // Reads every line when `total` is 0; otherwise chooses `wanted` of the `total` sentences
  // uniformly (selection sampling, Knuth's Algorithm S, with `seed`), keeping their order.
  FileSentences(const std::vector<std::string>& paths, int64_t total, int64_t wanted, uint64_t seed)
      : paths_(paths), total_(total), wanted_(wanted), random_(seed) {}

  bool Next(absl::string_view* line) override {
    while (ReadSentence()) {
      if (total_ > 0) {
        const uint64_t remaining = static_cast<uint64_t>(total_ - seen_);
        const bool take = random_() % remaining < static_cast<uint64_t>(wanted_ - used_);
        ++seen_;
        if (!take) continue;
      }
      ++used_;
      *line = line_;
      return true;
    }
    return false;
  }
  absl::Status status() const override { return status_; }

  int64_t read() const { return read_; }
  int64_t used() const { return used_; }

 private:
  // The next non-empty line of any file into line_.
  bool ReadSentence() {
    while (status_.ok()) {
      if (reader_ == nullptr) {
        if (next_file_ == paths_.size()) return false;
        absl::StatusOr<std::unique_ptr<LineReader>> opened = LineReader::Open(paths_[next_file_++]);
        if (!opened.ok()) {
          status_ = opened.status();
          return false;
        }
        reader_ = *std::move(opened);
      }
      if (!reader_->Next(&line_)) {
        status_ = reader_->status();
        reader_.reset();
        continue;
      }
      if (line_.empty()) continue;
      size_t bad = 0;
      if (!IsValidUtf8(line_, &bad)) {
        status_ = absl::InvalidArgumentError(
            absl::StrCat(reader_->path(), ":", reader_->line_number(), " is not valid UTF-8 (byte ",
                         bad + 1, " of the line)"));
        return false;
      }
      ++read_;
      return true;
    }
    return false;
  }

  const std::vector<std::string>& paths_;
  const int64_t total_;
  const int64_t wanted_;
  std::mt19937_64 random_;  // specified by the standard: the same choice everywhere
  size_t next_file_ = 0;
  std::unique_ptr<LineReader> reader_;
  std::string line_;
  int64_t read_ = 0;
  int64_t seen_ = 0;
  int64_t used_ = 0;
  absl::Status status_;
};

std::string IdName(int32_t id) { return id < 0 ? "none" : absl::StrCat(id); }

}  // namespace

absl::Status TrainVocab(const VocabTrainOptions& options, const std::string& out_model_path,
                        VocabTrainStats* stats) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (out_model_path.empty()) return absl::InvalidArgumentError("no output model path (--out)");

  // Count the sentences first when only some are wanted (and so check every input before the
  // training starts either way: a missing file fails here, not after a long first one).
  int64_t total = 0;
  {
    FileSentences all(options.inputs, 0, 0, 0);
    absl::string_view line;
    if (options.max_sentences > 0) {
      while (all.Next(&line)) {
      }
      RETURN_IF_ERROR(all.status());
      total = all.read();
    } else {
      for (const std::string& path : options.inputs) {
        ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader, LineReader::Open(path));
      }
    }
  }
  const bool sample = options.max_sentences > 0 && options.max_sentences < total;
  FileSentences sentences(options.inputs, sample ? total : 0, options.max_sentences,
                          static_cast<uint64_t>(options.seed));

  const std::vector<std::pair<std::string, std::string>> flags = {
      {"model_type", options.model_type},
      {"vocab_size", absl::StrCat(options.size)},
      {"character_coverage", absl::StrCat(options.character_coverage)},
      {"num_threads", absl::StrCat(options.threads)},
      {"pad_id", absl::StrCat(kPadId)},
      {"eos_id", absl::StrCat(kEosId)},
      {"unk_id", absl::StrCat(kUnkId)},
      {"bos_id", "-1"},
      // Warnings (such as skipped long lines) and errors only.
      {"minloglevel", "1"},
  };
  absl::StatusOr<std::string> model = TrainSentencePiece(flags, sentences);
  if (stats != nullptr) {
    stats->sentences = sample ? total : sentences.read();
    stats->used = sentences.used();
  }
  const std::string inputs = absl::StrJoin(options.inputs, ", ");
  if (sentences.status().ok() && sentences.used() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("the input (", inputs, ") holds no text"));
  }
  if (!model.ok()) {
    if (!sentences.status().ok()) return model.status();
    return absl::Status(
        model.status().code(),
        absl::StrCat("training a vocabulary of --size ", options.size, " on ", sentences.used(),
                     " sentences of ", inputs, ": ", model.status().message()));
  }
  return WriteFileAtomically(out_model_path, *model);
}

absl::StatusOr<Vocab> Vocab::Load(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  return FromBytes(bytes, path);
}

absl::StatusOr<Vocab> Vocab::FromBytes(absl::string_view bytes, absl::string_view source) {
  absl::StatusOr<std::unique_ptr<SentencePieceModel>> model = SentencePieceModel::FromBytes(bytes);
  if (!model.ok()) {
    if (model.status().code() != absl::StatusCode::kInvalidArgument) return model.status();
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not a SentencePiece model (", model.status().message(), ")"));
  }
  const SentencePieceModel& m = **model;
  const int32_t pad = m.special_id('p'), eos = m.special_id('e');
  if (pad != kPadId || eos != kEosId) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, " has pad id ", IdName(pad), ", EOS id ", IdName(eos), ", UNK id ",
        IdName(m.special_id('u')), " and BOS id ", IdName(m.special_id('b')),
        "; meshrt's models need pad 0 and EOS 1 (train it with `meshrt vocab train`, or with "
        "spm_train --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1)"));
  }
  return Vocab(*std::move(model));
}

Vocab::Vocab(std::unique_ptr<SentencePieceModel> model) : model_(std::move(model)) {}
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

std::vector<int32_t> Vocab::Encode(absl::string_view text) const {
  absl::StatusOr<std::vector<int32_t>> ids = model_->Encode(text);
  // A loaded model encodes any bytes; a failure here is SentencePiece breaking its contract.
  MESHRT_CHECK(ids.ok(), ids.status().ToString());
  return *std::move(ids);
}

std::string Vocab::Decode(const std::vector<int32_t>& ids) const {
  const int32_t size = model_->piece_size();
  std::vector<int32_t> kept;
  kept.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id == kEosId) break;
    if (id == kPadId) continue;
    // SentencePiece does not check the range (it would read past its piece table).
    kept.push_back(id >= 0 && id < size ? id : unk_id());
  }
  absl::StatusOr<std::string> text = model_->Decode(kept);
  MESHRT_CHECK(text.ok(), text.status().ToString());
  return *std::move(text);
}

int64_t Vocab::size() const { return model_->piece_size(); }
int32_t Vocab::unk_id() const { return model_->special_id('u'); }
int32_t Vocab::bos_id() const { return model_->special_id('b'); }

std::string Vocab::Piece(int32_t id) const {
  if (id < 0 || id >= model_->piece_size()) return "";
  return std::string(model_->Piece(id));
}

float Vocab::Score(int32_t id) const {
  if (id < 0 || id >= model_->piece_size()) return 0;
  return model_->Score(id);
}

int32_t Vocab::PieceToId(absl::string_view piece) const { return model_->PieceToId(piece); }

}  // namespace text
}  // namespace meshrt
