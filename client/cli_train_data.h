// Internal to the `meshrt` CLI: what `meshrt train` reads for the Transformer — the data flags
// (--data, --data_format, --vocab, --eval_fraction) made into TransformerOptions, and the greedy
// sample printed at the end (text for bytes, token ids for another vocabulary).
#ifndef MESHRT_CLIENT_CLI_TRAIN_DATA_H_
#define MESHRT_CLIENT_CLI_TRAIN_DATA_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/reference/interpreter.h"
#include "models/transformer.h"

namespace meshrt {

// The Transformer's data, as the flags give it.
struct TrainData {
  std::string data;          // --data: a file, or "synthetic"
  std::string format;        // --data_format: auto | bytes | npy | uint16
  int64_t vocab = 0;         // --vocab: 0 = 256 (bytes, synthetic); required for npy and uint16
  double eval_fraction = 0;  // --eval_fraction: in [0, 1); > 0 needs a data file
};

// "auto" resolved by the file name: *.npy -> npy, *.bin -> uint16 (nanoGPT's train.bin), anything
// else (and "synthetic") -> bytes. Other values are returned as they are.
std::string ResolveDataFormat(const std::string& format, const std::string& data);

// Sets o->data_path, data_format, vocab and eval_fraction from `d`. UsageError naming the flag:
// an unknown --data_format, npy/uint16 without --vocab (token ids are checked against it on the
// workers; the client need not hold the file, so it is not scanned), --vocab < 0, --eval_fraction
// outside [0, 1), or npy/uint16 or --eval_fraction with synthetic data.
absl::Status ApplyTrainData(const TrainData& d, models::TransformerOptions* o);

// A greedy sample of `count` tokens after `prompt` with the trained `variables`, run in process
// with the sampler graph (models/transformer.h). A byte model's prompt and sample are text; with
// data_format npy/uint16 the prompt is token ids separated by spaces or commas ("" = token 0) and
// the sample is printed as ids separated by spaces. UsageError for a prompt id outside [0, vocab).
absl::StatusOr<std::string> GreedySample(const models::TransformerOptions& model,
                                         TensorMap variables, const std::string& prompt,
                                         int64_t count);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CLI_TRAIN_DATA_H_
