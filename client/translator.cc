// Translating with a transformer_encdec checkpoint (client/translator.h).
#include "client/translator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ops/builder.h"
#include "runtime/checkpoint_tensors.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

const TensorMap::mapped_type* FindWeight(const TensorMap& weights, const std::string& name) {
  auto it = weights.find(name);
  return it == weights.end() ? nullptr : &it->second;
}

}  // namespace

std::vector<int32_t> EncodeSource(const text::Vocab& vocab, const std::string& line,
                                  int64_t length) {
  std::vector<int32_t> ids = vocab.Encode(line);
  if (static_cast<int64_t>(ids.size()) > length - 1) ids.resize(length - 1);
  ids.push_back(models::kEosId);
  return ids;
}

absl::StatusOr<models::EncDecOptions> EncDecOptionsFromWeights(const TensorMap& weights,
                                                               const std::string& what) {
  auto need = [&](const std::string& name, int rank) -> absl::StatusOr<const Tensor*> {
    const Tensor* t = FindWeight(weights, name);
    if (t == nullptr || t->shape().rank() != rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has no ", rank, "-D variable ", name,
          ": it is not a transformer_encdec checkpoint (meshrt train --model transformer_encdec "
          "saves one)"));
    }
    return t;
  };
  models::EncDecOptions o;
  ASSIGN_OR_RETURN(const Tensor* embedding, need("shared/embedding", 2));
  o.vocab = embedding->shape().dim(0).size;
  o.d_model = embedding->shape().dim(1).size;
  ASSIGN_OR_RETURN(const Tensor* positions, need("encoder/positions", 2));
  o.length = positions->shape().dim(0).size;
  ASSIGN_OR_RETURN(const Tensor* q, need("encoder/layer_0/attention/q", 3));
  o.heads = q->shape().dim(1).size;
  o.d_kv = q->shape().dim(2).size;
  ASSIGN_OR_RETURN(const Tensor* w1, need("encoder/layer_0/ffn/w1", 2));
  o.d_ff = w1->shape().dim(1).size;
  o.encoder_layers = o.decoder_layers = 0;
  while (FindWeight(weights, absl::StrCat("encoder/layer_", o.encoder_layers, "/ffn/w1"))) {
    ++o.encoder_layers;
  }
  while (FindWeight(weights, absl::StrCat("decoder/layer_", o.decoder_layers, "/ffn/w1"))) {
    ++o.decoder_layers;
  }
  if (o.decoder_layers == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has no decoder layers"));
  }
  o.norm = FindWeight(weights, "encoder/final_ln/bias") ? "layer" : "rms";
  return o;
}

absl::StatusOr<std::unique_ptr<TranslationDecoder>> TranslationDecoder::Start(
    const DecoderOptions& options, const TensorMap& weights, std::ostream& log) {
  GraphBuilder b;
  models::DecodeOptions decode;
  decode.max_length = options.max_length;
  decode.scores = options.scores;
  decode.beam = options.beam;
  decode.alpha = options.alpha;
  ASSIGN_OR_RETURN(models::DecoderOutputs d, models::BuildEncDecDecoder(b, options.model, decode));
  ASSIGN_OR_RETURN(Graph graph, b.Build());
  // Only the model's weights: a checkpoint also holds optimizer slots and counters.
  std::vector<std::string> variables;
  for (const TensorRef& v : d.variables) variables.push_back(v.name);
  ASSIGN_OR_RETURN(TensorMap model_weights,
                   ProgramWeights(graph, variables, weights, "the checkpoint"));
  std::unique_ptr<TranslationDecoder> decoder(new TranslationDecoder());
  decoder->options_ = options;
  ASSIGN_OR_RETURN(
      decoder->runner_,
      ProgramRunner::Start(options.target, std::move(graph), std::move(model_weights), "translate", log));
  decoder->decoded_ = d.decoded.name;
  decoder->scores_ = d.scores.name;
  return decoder;
}

absl::StatusOr<std::vector<Hypothesis>> TranslationDecoder::Decode(
    const std::vector<std::vector<int32_t>>& sources) {
  const int64_t batch = options_.model.batch, length = options_.model.length;
  std::vector<Hypothesis> out;
  for (size_t first = 0; first < sources.size(); first += batch) {
    std::vector<int32_t> ids(batch * length, models::kPadId);
    for (int64_t r = 0; r < batch; ++r) {
      if (first + r >= sources.size()) {
        ids[r * length] = models::kEosId;  // padding rows: empty sentences
        continue;
      }
      const std::vector<int32_t>& s = sources[first + r];
      std::copy(s.begin(), s.begin() + std::min<int64_t>(s.size(), length), ids.begin() + r * length);
    }
    std::vector<std::string> fetches = {decoded_};
    if (!scores_.empty()) fetches.push_back(scores_);
    ASSIGN_OR_RETURN(
        TensorMap got,
        runner_->Run({{"inputs", Tensor::Int(Shape({{"batch", batch}, {"length", length}}), ids)}},
                     fetches));
    const Tensor& decoded = got.at(decoded_);
    const bool beam = options_.beam > 1;
    for (int64_t r = 0; r < batch && first + r < sources.size(); ++r) {
      Hypothesis h;
      for (int64_t t = 0; t < length; ++t) {
        // Greedy: int32 [length, batch]. Beam search: float32 [batch, length + 1] whose ids are
        // exact (integers below 2^24) and whose last column is the score.
        const int32_t id = beam ? static_cast<int32_t>(decoded.f32()[r * (length + 1) + t])
                                : decoded.i32()[t * batch + r];
        if (id == models::kEosId || id == models::kPadId) break;
        h.ids.push_back(id);
      }
      if (beam) {
        h.score = decoded.f32()[r * (length + 1) + length];
      } else if (!scores_.empty()) {
        h.score = got.at(scores_).f32()[r];
      }
      out.push_back(std::move(h));
    }
  }
  return out;
}

absl::Status CheckTranslatorOptions(const TranslatorOptions& options,
                                    const models::EncDecOptions& model) {
  if (options.batch < 1 || options.beam < 1 || !(options.alpha >= 0 && options.alpha <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a translator needs batch >= 1, beam >= 1 and 0 <= alpha <= 10, not batch ",
                     options.batch, ", beam ", options.beam, ", alpha ", options.alpha));
  }
  if (options.max_length < 0 || options.max_length > model.length) {
    return absl::InvalidArgumentError(absl::StrCat("max_length needs 1 <= L <= ", model.length,
                                                   " (the model's length), not ",
                                                   options.max_length));
  }
  if (2 * options.beam > model.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("beam ", options.beam,
                                                   " needs 2 x beam <= the vocabulary (",
                                                   model.vocab, " pieces)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Translator>> Translator::Open(const std::string& checkpoint,
                                                             const TranslatorOptions& options,
                                                             std::ostream& log,
                                                             const std::string& vocab) {
  absl::StatusOr<CheckpointTensors> read = ReadCheckpointTensors(checkpoint);
  if (!read.ok()) {
    return absl::Status(read.status().code(),
                        absl::StrCat("reading ", checkpoint, ": ", read.status().message()));
  }
  const std::string vocab_path = vocab.empty() ? absl::StrCat(checkpoint, "/vocab.model") : vocab;
  ASSIGN_OR_RETURN(text::Vocab loaded, text::Vocab::Load(vocab_path));
  return Create(read->tensors, std::move(loaded), options, log,
                absl::StrCat("checkpoint ", checkpoint));
}

absl::StatusOr<std::unique_ptr<Translator>> Translator::Create(const TensorMap& weights,
                                                               text::Vocab vocab,
                                                               const TranslatorOptions& options,
                                                               std::ostream& log,
                                                               const std::string& what) {
  ASSIGN_OR_RETURN(models::EncDecOptions model, EncDecOptionsFromWeights(weights, what));
  RETURN_IF_ERROR(CheckTranslatorOptions(options, model));
  if (vocab.size() != model.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the vocabulary has ", vocab.size(),
                                                   " pieces; the model of ", what, " ",
                                                   model.vocab));
  }
  model.batch = options.batch;
  DecoderOptions d;
  d.model = model;
  d.max_length = options.max_length;
  d.beam = options.beam;
  d.alpha = options.alpha;
  d.scores = options.scores;
  d.target = options.target;
  std::unique_ptr<Translator> translator(new Translator(std::move(vocab), model));
  ASSIGN_OR_RETURN(translator->decoder_, TranslationDecoder::Start(d, weights, log));
  return translator;
}

absl::StatusOr<std::vector<Translation>> Translator::Translate(
    const std::vector<std::string>& lines) {
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(lines.size());
  for (const std::string& line : lines) sources.push_back(EncodeSource(vocab_, line, model_.length));
  ASSIGN_OR_RETURN(std::vector<Hypothesis> hyps, decoder_->Decode(sources));
  std::vector<Translation> out;
  out.reserve(hyps.size());
  for (Hypothesis& h : hyps) {
    Translation t;
    t.text = vocab_.Decode(h.ids);
    t.ids = std::move(h.ids);
    t.score = h.score;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace meshrt
