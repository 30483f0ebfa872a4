// Internal to the `meshrt` CLI: `meshrt train` and what `meshrt demo` shares with it.
#ifndef MESHRT_CLIENT_CLI_TRAIN_H_
#define MESHRT_CLIENT_CLI_TRAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/cli_commands.h"
#include "client/program_runner.h"
#include "util/flags.h"

namespace meshrt {

// The options of `meshrt train` (and `meshrt demo`), as its flags (AddTrainFlags) set them.
struct TrainFlags {
  std::string model = "transformer";  // transformer | transformer_encdec | mlp
  // Where it trains (--reference, --local N or --coordinator with its security flags), on which
  // --mesh and --layout, its daemons' --log_dir and, with --local or --reference, the
  // --checkpoint_root --save, --restore and --checkpoint_dir are relative to.
  ProgramTarget target;
  int64_t steps = 200;
  int64_t seed = 1;
  std::string loss_csv;
  int64_t log_every = 1;
  std::string optimizer = "adam";
  double lr = 0;  // 0: the optimizer's default
  std::string schedule = "constant";
  int64_t warmup = 0;
  double clip = 0;  // 0: off
  int64_t microbatches = 1;
  std::string data = "/usr/share/games/fortunes/cookie";
  std::string data_format = "auto";  // client/cli_train_data.h
  int64_t vocab = 0;                 // 0: 256 (bytes); required for npy and uint16
  // --vocab as typed: a size for the LM (parsed into `vocab` by TrainCommand), the SentencePiece
  // model file for transformer_encdec.
  std::string vocab_text;
  // transformer_encdec (client/cli_translate.h): --data is a `meshrt data translations` directory
  // holding train.en / train.LANG (and dev.* for --eval_bleu_every).
  std::string target_lang = "fr";
  int64_t vocab_size = 8000;  // pieces of the vocabulary trained when --vocab MODEL is missing
  double dropout = 0.1;
  double label_smoothing = 0.1;
  int64_t eval_bleu_every = 0;  // dev BLEU at the first step, every N steps and the last; 0: off
  int64_t eval_bleu_lines = 200;
  double eval_fraction = 0;          // held out at the end of the data file; 0: no eval
  int64_t eval_every = 0;            // eval_loss at the first step, every N and the last
  int64_t batch = 0, length = 0, d_model = 0, heads = 0, d_ff = 0, layers = 0;
  int64_t sample = 0;
  std::string prompt;
  std::string save;             // checkpoint names (proto/checkpoint.proto)
  std::string restore;
  // Long runs (client/training_run.h): periodic checkpoints, resume, automatic recovery.
  std::string checkpoint_dir;  // a name, like --save's
  int64_t save_every = 0;
  int64_t keep = 2;
  bool resume = false;
  std::string recover;  // "auto" or "off"; "" = auto with a checkpoint_dir, else off
  int64_t replace_wait = 10;  // seconds
  int64_t max_seconds = 0;
  std::string export_graph;
  std::string init;  // a .npz file: initial values of the variables it names
  std::string trace;        // --trace FILE: step timelines (client/chrome_trace.h); "" = off
  std::string trace_steps;  // --trace_steps A:B; "" = the run's 2nd and 3rd steps
};

void AddTrainFlags(FlagSet& flags, TrainFlags* f);
// Trains as `f` says, writing progress to io.out: checks the flags and builds the model, layout
// and checkpoint places (every refusal before a daemon starts), starts the trainer, runs the
// steps, reports and saves. Usage errors are UsageError.
// `final_loss` (may be null) receives the mean of the losses logged over the last 50 steps.
absl::Status RunTraining(const TrainFlags& f, CliIo io, float* final_loss = nullptr);
absl::Status TrainCommand(const std::vector<std::string>& args, CliIo io);

// --init: the arrays of .npz file `npz_path` as tensors of `graph`'s variables (`variables`, by
// name): each key must be one of them (else InvalidArgument naming the key and the variables),
// with the variable's sizes (else InvalidArgument naming the key, the expected and the file's
// shapes) and dtype. Errors of ReadNpz, prefixed by --init.
absl::StatusOr<TensorMap> InitialWeights(const std::string& npz_path, const Graph& graph,
                                         const std::vector<std::string>& variables);
// WriteInitialCheckpoint (initial weights as a checkpoint to restore): client/program_runner.h.

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CLI_TRAIN_H_
