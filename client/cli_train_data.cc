#include "client/cli_train_data.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli_commands.h"
#include "core/ops/builder.h"
#include "kernels/cpu_kernels.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

bool IsTokenFormat(const std::string& format) { return format == "npy" || format == "uint16"; }

// The prompt as ids: its bytes for a byte model, else the ids it lists.
absl::StatusOr<std::vector<int32_t>> PromptIds(const models::TransformerOptions& model,
                                               const std::string& prompt) {
  std::vector<int32_t> ids;
  if (!IsTokenFormat(model.data_format)) {
    for (char c : prompt.empty() ? std::string("\n") : prompt) {
      ids.push_back(static_cast<unsigned char>(c));
    }
    return ids;
  }
  for (absl::string_view piece : absl::StrSplit(prompt, absl::ByAnyChar(" ,"), absl::SkipEmpty())) {
    int32_t id = -1;
    if (!absl::SimpleAtoi(piece, &id) || id < 0 || id >= model.vocab) {
      return UsageError(absl::StrCat("--prompt: '", piece, "' is not a token id in [0, vocab ",
                                     model.vocab, ") (token data: ids separated by spaces)"));
    }
    ids.push_back(id);
  }
  if (ids.empty()) ids.push_back(0);
  return ids;
}

}  // namespace

std::string ResolveDataFormat(const std::string& format, const std::string& data) {
  if (format != "auto") return format;
  const std::string lower = absl::AsciiStrToLower(data);
  if (absl::EndsWith(lower, ".npy")) return "npy";
  if (absl::EndsWith(lower, ".bin")) return "uint16";
  return "bytes";
}

absl::Status ApplyTrainData(const TrainData& d, models::TransformerOptions* o) {
  const bool synthetic = d.data == "synthetic";
  o->data_path = synthetic ? "" : d.data;
  const std::string format =
      synthetic && d.format == "auto" ? "bytes" : ResolveDataFormat(d.format, d.data);
  if (format != "bytes" && !IsTokenFormat(format)) {
    return UsageError(
        absl::StrCat("--data_format '", d.format, "' is not auto, bytes, npy or uint16"));
  }
  if (d.vocab < 0) return UsageError(absl::StrCat("--vocab needs N >= 1, not ", d.vocab));
  if (synthetic && IsTokenFormat(format)) {
    return UsageError(
        absl::StrCat("--data_format ", format, " needs a data file, not --data synthetic"));
  }
  if (IsTokenFormat(format) && d.vocab == 0) {
    return UsageError(absl::StrCat(
        "--data_format ", format, " (", d.data,
        ") needs --vocab N: the token ids are in [0, N), e.g. 50257 for GPT-2's tokenizer"));
  }
  if (!(d.eval_fraction >= 0 && d.eval_fraction < 1)) {
    return UsageError(absl::StrCat("--eval_fraction needs 0 <= F < 1, not ", d.eval_fraction));
  }
  if (synthetic && d.eval_fraction > 0) {
    return UsageError("--eval_fraction holds out part of a data file: not with --data synthetic");
  }
  o->data_format = format;
  if (d.vocab > 0) o->vocab = d.vocab;
  o->eval_fraction = static_cast<float>(d.eval_fraction);
  return absl::OkStatus();
}

absl::StatusOr<std::string> GreedySample(const models::TransformerOptions& model,
                                         TensorMap variables, const std::string& prompt,
                                         int64_t count) {
  ASSIGN_OR_RETURN(std::vector<int32_t> ids, PromptIds(model, prompt));
  GraphBuilder b;
  ASSIGN_OR_RETURN(models::SamplerOutputs s, models::BuildTransformerSampler(b, model));
  ASSIGN_OR_RETURN(Graph graph, b.Build());
  std::vector<int32_t> out;
  for (int64_t i = 0; i < count; ++i) {
    // The last `length` ids are the window; the next id is predicted at its last position.
    const size_t begin =
        ids.size() > static_cast<size_t>(model.length) ? ids.size() - model.length : 0;
    std::vector<int32_t> window(model.length, 0);
    std::copy(ids.begin() + begin, ids.end(), window.begin());
    TensorMap feeds;
    feeds[s.prompt.name] = Tensor::Int(s.prompt.shape, window);
    feeds[s.position.name] =
        Tensor::Int(s.position.shape, {static_cast<int32_t>(ids.size() - begin) - 1});
    ASSIGN_OR_RETURN(TensorMap got,
                     InterpretStep(graph, feeds, {s.next_token.name}, &variables, CpuKernels()));
    const int32_t next = got.at(s.next_token.name).i32()[0];
    ids.push_back(next);
    out.push_back(next);
  }
  if (IsTokenFormat(model.data_format)) return absl::StrJoin(out, " ");
  std::string text;
  for (int32_t id : out) text.push_back(static_cast<char>(id));
  return text;
}

}  // namespace meshrt
