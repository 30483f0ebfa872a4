// `meshrt sample` (client/cli_sample.h): the checkpoint's model from its variables' shapes, the
// decoding program (models/transformer.h BuildTransformerDecoder) run where the flags say
// (client/program_runner.h), the prompt and its continuation printed.
#include "client/cli_sample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/program_runner.h"
#include "core/ops/builder.h"
#include "runtime/checkpoint_tensors.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// A byte-level model (vocab 256) reads and writes text; any other vocabulary token ids.
constexpr int64_t kByteVocab = 256;

const Tensor* FindWeight(const TensorMap& weights, const std::string& name) {
  auto it = weights.find(name);
  return it == weights.end() ? nullptr : &it->second;
}

// The prompt as ids: its bytes for a byte model, else the ids it lists (separated by spaces or
// commas). UsageError for an empty prompt or an id outside [0, vocab).
absl::StatusOr<std::vector<int32_t>> PromptIds(const std::string& prompt, int64_t vocab) {
  std::vector<int32_t> ids;
  if (vocab == kByteVocab) {
    for (char c : prompt) ids.push_back(static_cast<unsigned char>(c));
  } else {
    for (absl::string_view piece :
         absl::StrSplit(prompt, absl::ByAnyChar(" ,"), absl::SkipEmpty())) {
      int32_t id = -1;
      if (!absl::SimpleAtoi(piece, &id) || id < 0 || id >= vocab) {
        return UsageError(absl::StrCat("--prompt: '", piece, "' is not a token id in [0, ", vocab,
                                       ") (a model of vocab ", vocab,
                                       " takes token ids separated by spaces)"));
      }
      ids.push_back(id);
    }
  }
  if (ids.empty()) {
    return UsageError(vocab == kByteVocab
                          ? "meshrt sample needs --prompt TEXT (at least one byte)"
                          : "meshrt sample needs --prompt IDS (token ids separated by spaces)");
  }
  return ids;
}

// `ids` as the user sees them: text for a byte model, else ids separated by spaces.
std::string Show(const std::vector<int32_t>& ids, int64_t vocab) {
  if (vocab != kByteVocab) return absl::StrJoin(ids, " ");
  std::string text;
  for (int32_t id : ids) text.push_back(static_cast<char>(id));
  return text;
}

}  // namespace

absl::StatusOr<models::TransformerOptions> TransformerOptionsFromWeights(const TensorMap& weights,
                                                                         const std::string& what) {
  auto need = [&](const std::string& name, int rank) -> absl::StatusOr<const Tensor*> {
    const Tensor* t = FindWeight(weights, name);
    if (t == nullptr || t->shape().rank() != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has no ", rank, "-D variable ", name,
                       ": it is not a transformer checkpoint (meshrt train --model transformer "
                       "--save CK saves one)"));
    }
    return t;
  };
  models::TransformerOptions o;
  ASSIGN_OR_RETURN(const Tensor* embedding, need("embedding", 2));
  o.vocab = embedding->shape().dim(0).size;
  o.d_model = embedding->shape().dim(1).size;
  ASSIGN_OR_RETURN(const Tensor* positions, need("positions", 2));
  o.length = positions->shape().dim(0).size;
  ASSIGN_OR_RETURN(const Tensor* q, need("layer_0/attention/q", 3));
  o.heads = q->shape().dim(1).size;
  o.d_kv = q->shape().dim(2).size;
  ASSIGN_OR_RETURN(const Tensor* w1, need("layer_0/ffn/w1", 2));
  o.d_ff = w1->shape().dim(1).size;
  o.layers = 0;
  while (FindWeight(weights, absl::StrCat("layer_", o.layers, "/ffn/w1")) != nullptr) ++o.layers;
  o.norm = FindWeight(weights, "final_ln/bias") != nullptr ? "layer" : "rms";
  return o;
}

namespace {

// `meshrt sample`'s flags.
struct SampleFlags {
  std::string prompt;
  int64_t tokens = 0;  // 0: up to the model's length
  int64_t top_k = 0;   // 0: every token
  int64_t seed = 1;
  int64_t samples = 1;
  double temperature = 0;  // 0: greedy
  ProgramTarget target;    // where it decodes; checkpoint_root: where CHECKPOINT is
};

constexpr char kSampleUsage[] =
    "meshrt sample CHECKPOINT --prompt TEXT [--tokens N] [--temperature T] [--top_k K] "
    "[--seed S] [--samples N] (--reference | --local N | --coordinator HOST:PORT) "
    "[--mesh MESH --layout RULES]";

constexpr char kSampleDescription[] =
    "Continues --prompt with a Transformer LM checkpoint (from `meshrt train --model "
    "transformer --save CK`; the checkpoint's variables give the model's sizes). Decoding is "
    "one program on the workers: a loop over the positions with a key/value cache per layer, "
    "greedy by default, or sampled at --temperature T from the --top_k K most likely tokens. "
    "The random draws are keyed on (--seed, position), so every mesh and layout gives the "
    "same text. A byte-level model (vocab 256) takes and prints text; another takes and "
    "prints token ids separated by spaces. The prompt and its continuation go to standard "
    "output; the speed to standard error.\n\n"
    "examples:\n"
    "  meshrt sample ck --prompt 'The ' --reference\n"
    "  meshrt sample ck --prompt 'The ' --temperature 0.8 --top_k 20 --seed 3 --local 4 "
    "--mesh rows:2,cols:2 --layout batch:rows,heads:cols,d_ff:cols,vocab:cols";

void AddSampleFlags(FlagSet& flags, SampleFlags* f) {
  flags.String("prompt", &f->prompt,
               "the text to continue (token ids separated by spaces for a vocab other than 256)");
  flags.Int("tokens", &f->tokens,
            "new tokens after the prompt (default: up to the model's length; prompt + tokens "
            "must fit in it)");
  flags.Double("temperature", &f->temperature, "0: greedy (the default); T > 0: sample at T");
  flags.Int("top_k", &f->top_k, "with --temperature: draw from the K most likely tokens (0: all)");
  flags.Int("seed", &f->seed, "the random draws' seed (default 1)");
  flags.Int("samples", &f->samples,
            "continuations decoded at once, printed one after another (default 1)");
  AddTargetFlags(flags, ProgramTargetFlagHelp("decode"), &f->target);
}

// The usage checks that need no checkpoint.
absl::Status CheckSampleFlags(const SampleFlags& f) {
  RETURN_IF_ERROR(CheckProgramTargetFlags(f.target, "sample"));
  if (!(f.temperature >= 0) || !std::isfinite(f.temperature)) {
    return UsageError(absl::StrCat("--temperature needs T >= 0 (0: greedy), not ", f.temperature));
  }
  if (f.samples < 1) return UsageError(absl::StrCat("--samples needs N >= 1, not ", f.samples));
  if (f.tokens < 0) return UsageError(absl::StrCat("--tokens needs N >= 1, not ", f.tokens));
  return absl::OkStatus();
}

// The usage checks of the prompt's length and --tokens against the checkpoint's model; sets
// f->tokens when it was 0 (the default).
absl::Status CheckSampleFitsModel(const models::TransformerOptions& model, int64_t prompt_length,
                                  SampleFlags* f) {
  const int64_t p = prompt_length;
  if (p >= model.length) {
    return UsageError(absl::StrCat("--prompt has ", p, " tokens; the model's length is ",
                                   model.length, ", so at most ", model.length - 1,
                                   " to leave room for a new one"));
  }
  if (f->tokens == 0) f->tokens = model.length - p;
  if (p + f->tokens > model.length) {
    return UsageError(absl::StrCat("--prompt (", p, " tokens) and --tokens ", f->tokens,
                                   " do not fit in the model's length ", model.length,
                                   ": ask at most --tokens ", model.length - p));
  }
  return absl::OkStatus();
}

// The decoding program of `model` for the flags, started where they say with the checkpoint's
// weights (`what` names it). Sets d->* to the program's tensors.
absl::StatusOr<std::unique_ptr<ProgramRunner>> StartDecoder(const SampleFlags& f,
                                                            const models::TransformerOptions& model,
                                                            int64_t prompt_length,
                                                            const TensorMap& checkpoint,
                                                            const std::string& what, CliIo io,
                                                            models::LmDecoderOutputs* d) {
  models::LmDecodeOptions decode;
  decode.max_new = f.tokens;
  decode.max_prompt = prompt_length;
  decode.temperature = static_cast<float>(f.temperature);
  decode.top_k = f.top_k;
  decode.seed = f.seed;
  GraphBuilder b;
  ASSIGN_OR_RETURN(*d, models::BuildTransformerDecoder(b, model, decode));
  ASSIGN_OR_RETURN(Graph graph, b.Build());
  std::vector<std::string> variables;
  for (const TensorRef& v : d->variables) variables.push_back(v.name);
  ASSIGN_OR_RETURN(TensorMap weights, ProgramWeights(graph, variables, checkpoint, what));
  return ProgramRunner::Start(f.target, std::move(graph), std::move(weights), "sample", io.err);
}

}  // namespace

absl::Status SampleCommand(const std::vector<std::string>& args, CliIo io) {
  SampleFlags f;
  FlagSet flags(kSampleUsage, kSampleDescription);
  AddSampleFlags(flags, &f);
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "sample"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (positional.size() != 1) {
    return UsageError("meshrt sample takes one CHECKPOINT (see meshrt sample --help)");
  }
  RETURN_IF_ERROR(CheckSampleFlags(f));
  // The mesh and layout first: the batch of rows decoded at once must divide by the mesh dim
  // `batch` is split over.
  ASSIGN_OR_RETURN(MeshAndRules layout, ParseMeshAndRules(f.target.mesh, f.target.layout));

  const std::string& root_dir = f.target.checkpoint_root;
  const std::string checkpoint =
      root_dir.empty() ? positional[0] : absl::StrCat(root_dir, "/", positional[0]);
  absl::StatusOr<CheckpointTensors> read = ReadCheckpointTensors(checkpoint);
  if (!read.ok()) return WithContext(read.status(), absl::StrCat("reading ", positional[0]));
  const std::string what = absl::StrCat("checkpoint ", positional[0]);
  ASSIGN_OR_RETURN(models::TransformerOptions model,
                   TransformerOptionsFromWeights(read->tensors, what));
  if (f.top_k < 0 || f.top_k > model.vocab) {
    return UsageError(absl::StrCat("--top_k needs 0 <= K <= ", model.vocab,
                                   " (the model's vocab; 0: all), not ", f.top_k));
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> ids, PromptIds(f.prompt, model.vocab));
  const int64_t p = static_cast<int64_t>(ids.size());
  RETURN_IF_ERROR(CheckSampleFitsModel(model, p, &f));
  const int axis = layout.rules.MeshAxisFor("batch");
  const int64_t split = axis >= 0 ? layout.mesh.size(axis) : 1;
  model.batch = (f.samples + split - 1) / split * split;  // extra rows are decoded, not printed
  models::LmDecoderOutputs d;
  ASSIGN_OR_RETURN(std::unique_ptr<ProgramRunner> runner,
                   StartDecoder(f, model, p, read->tensors, what, io, &d));

  std::vector<int32_t> rows(model.batch * model.length, 0);
  for (int64_t r = 0; r < model.batch; ++r) {
    std::copy(ids.begin(), ids.end(), rows.begin() + r * model.length);
  }
  TensorMap feeds = {{d.prompt.name, Tensor::Int(d.prompt.shape, rows)},
                     {d.prompt_length.name,
                      Tensor::Int(d.prompt_length.shape,
                                  std::vector<int32_t>(model.batch, static_cast<int32_t>(p)))}};
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(TensorMap got, runner->Run(feeds, {d.generated.name}));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const Tensor& generated = got.at(d.generated.name);  // [batch, length]
  for (int64_t r = 0; r < f.samples; ++r) {
    const int32_t* row = generated.i32() + r * model.length;
    if (f.samples > 1) io.out << "--- sample " << r + 1 << "\n";
    io.out << Show(std::vector<int32_t>(row, row + p + f.tokens), model.vocab) << "\n";
  }
  io.out.flush();
  io.err << absl::StrFormat(
      "sampled %d x %d tokens in %.2f s (%.1f tokens/s, %s; model length %d, vocab %d, "
      "%d layers)\n",
      f.samples, f.tokens, seconds, f.samples * f.tokens / std::max(seconds, 1e-9),
      f.temperature == 0 ? std::string("greedy")
                         : absl::StrFormat("temperature %g, top_k %d, seed %d", f.temperature,
                                           f.top_k, f.seed),
      model.length, model.vocab, model.layers);
  return absl::OkStatus();
}

}  // namespace meshrt
