// `meshrt train`: trains a model of //models (the MLP regression or the Transformer LM) on a mesh
// — in process on one processor (--reference), on an embedded local cluster (--local N) or on a
// running coordinator — with a progress bar, a loss CSV and a greedy sample at the end.
// `meshrt demo` runs it with the paper's 2x2 layout.
#include "client/cli_train.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/chrome_trace.h"
#include "client/cli_train_data.h"
#include "client/cli_translate.h"
#include "client/client.h"
#include "client/graph_io.h"
#include "client/local_cluster.h"
#include "client/training_run.h"
#include "core/lowering/lowering.h"
#include "core/ops/layout_names.h"
#include "core/reference/interpreter.h"
#include "core/train/optimizers.h"
#include "kernels/cpu_kernels.h"
#include "models/train.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_store.h"
#include "runtime/checkpoint_tensors.h"
#include "util/file_access.h"
#include "util/file.h"
#include "util/flags.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// Where training runs, step by step: in process or through a client session.
class Trainer {
 public:
  virtual ~Trainer() = default;
  // Steps done (a restored checkpoint's included). A recovery may move it back.
  virtual int64_t step() const = 0;
  // Runs up to `n` steps; returns the last one's `fetches`.
  virtual absl::StatusOr<TensorMap> Steps(int64_t n, const std::vector<std::string>& fetches) = 0;
  // Checkpoints (proto/checkpoint.proto): every variable, optimizer slot and counter.
  virtual absl::Status Save(const std::string& name, int keep) = 0;
  // Continues from checkpoint `name`; returns the number of steps it had run.
  virtual absl::StatusOr<int64_t> Restore(const std::string& name) = 0;
};

// The single-process reference: the interpreter with the CPU kernels. Its checkpoints are those
// of a one-processor mesh, so they restore onto any mesh and any mesh's restore here. With a
// `checkpoint` name it saves every `save_every` steps, like a TrainingRun.
class InProcessTrainer : public Trainer {
 public:
  // Checkpoint names are relative to `checkpoint_root`.
  InProcessTrainer(const Graph& graph, std::string checkpoint_root, std::string checkpoint,
                   int64_t save_every, int keep)
      : graph_(graph),
        checkpoint_root_(std::move(checkpoint_root)),
        checkpoint_(std::move(checkpoint)),
        save_every_(save_every),
        keep_(keep) {}
  int64_t step() const override { return step_; }
  absl::StatusOr<TensorMap> Steps(int64_t n, const std::vector<std::string>& fetches) override {
    TensorMap out;
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(out, InterpretStep(graph_, {}, fetches, &variables_, CpuKernels()));
      ++step_;
      if (save_every_ > 0 && step_ % save_every_ == 0) {
        RETURN_IF_ERROR(Save(checkpoint_, keep_));
        LogInfo("train: saved checkpoint '", checkpoint_, "' at step ", step_);
        if (i + 1 < n) break;  // a checkpoint ends a request, as on a cluster
      }
    }
    return out;
  }
  // The same versions and commit as a cluster's save (runtime/checkpoint_store.h).
  absl::Status Save(const std::string& name, int keep) override {
    ASSIGN_OR_RETURN(const v1::Program program, OneProcessorProgram());
    ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(checkpoint_root_));
    ASSIGN_OR_RETURN(const std::string dir, root.Resolve(name, /*create=*/true));
    return SaveOneProcessorCheckpoint(dir, program, variables_, step_, keep);
  }
  absl::StatusOr<int64_t> Restore(const std::string& name) override {
    ASSIGN_OR_RETURN(const v1::Program program, OneProcessorProgram());
    ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(checkpoint_root_));
    ASSIGN_OR_RETURN(const std::string dir, root.Resolve(name, /*create=*/false));
    ASSIGN_OR_RETURN(const CommittedCheckpoint committed, ReadCommittedCheckpoint(dir));
    RETURN_IF_ERROR(CheckManifestForProgram(committed.manifest, program));
    ASSIGN_OR_RETURN(variables_, LoadSlices(committed.manifest, committed.directory, program, {0}));
    step_ = committed.manifest.step();
    return step_;
  }
  // Starts from `weights` (some variables, whole); the others start from their initializers at
  // the first step, as after a partial restore on a cluster.
  void Import(TensorMap weights) {
    variables_ = std::move(weights);
    step_ = 0;
  }

 private:
  absl::StatusOr<v1::Program> OneProcessorProgram() const {
    ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse("x:1"));
    ASSIGN_OR_RETURN(LayoutRules rules, LayoutRules::Parse("", mesh));
    return Lower(graph_, mesh, rules);
  }

  const Graph& graph_;
  const std::string checkpoint_root_;
  const std::string checkpoint_;
  const int64_t save_every_;
  const int keep_;
  TensorMap variables_;
  int64_t step_ = 0;
};

// A TrainingRun on a coordinator: periodic checkpoints and recovery (client/training_run.h).
class RunTrainer : public Trainer {
 public:
  explicit RunTrainer(std::unique_ptr<TrainingRun> run) : run_(std::move(run)) {}
  int64_t step() const override { return run_->step(); }
  absl::StatusOr<TensorMap> Steps(int64_t n, const std::vector<std::string>& fetches) override {
    return run_->Steps(n, fetches);
  }
  absl::Status Save(const std::string& name, int keep) override {
    if (run_->session() == nullptr) return absl::FailedPreconditionError("the run is closed");
    return run_->session()->SaveCheckpoint(name, keep);
  }
  absl::StatusOr<int64_t> Restore(const std::string& name) override {
    return absl::UnimplementedError("a TrainingRun restores at its start");
  }
  TrainingRun& run() { return *run_; }

 private:
  std::unique_ptr<TrainingRun> run_;
};

// Keeps the rows of loss CSV `path` up to step `last` (a resumed run appends after them).
absl::Status TruncateLossCsv(const std::string& path, int64_t last) {
  std::ifstream in(path);
  if (!in) return absl::OkStatus();  // none yet
  std::vector<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    int64_t step = 0;
    if (kept.empty() || (absl::SimpleAtoi(line.substr(0, line.find(',')), &step) && step <= last)) {
      kept.push_back(line);
    }
  }
  in.close();
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& l : kept) out << l << "\n";
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write --loss_csv ", path));
  return absl::OkStatus();
}

std::string Duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

// Where --save and --restore live when this process starts the run (--reference, --local).
struct CheckpointPlace {
  std::string root;  // the checkpoint root
  std::string save, restore, checkpoint_dir;  // names under it
};

// --checkpoint_root, with the names as given; else an absolute name's parent directory, with its
// base name (a command like `--save /tmp/ck` keeps working); else the current directory.
absl::StatusOr<CheckpointPlace> PlaceCheckpoints(const TrainFlags& f) {
  CheckpointPlace place{f.target.checkpoint_root, f.save, f.restore, f.checkpoint_dir};
  if (!f.target.checkpoint_root.empty()) return place;
  bool relative = false;
  for (std::string* name : {&place.save, &place.restore, &place.checkpoint_dir}) {
    if (name->empty()) continue;
    if ((*name)[0] != '/') {
      relative = true;
      continue;
    }
    const std::string normal = LexicallyNormal(*name);
    const size_t slash = normal.rfind('/');
    const std::string parent = slash == 0 ? "/" : normal.substr(0, slash);
    if (normal == "/") return UsageError("--save / --restore / --checkpoint_dir cannot be '/'");
    if (!place.root.empty() && place.root != parent) {
      return UsageError(absl::StrCat(
          "--save, --restore and --checkpoint_dir are absolute paths in different directories (",
          place.root,
          ", ", parent, "): pass --checkpoint_root DIR and names relative to it"));
    }
    place.root = parent;
    *name = normal.substr(slash + 1);
  }
  if (!place.root.empty() && relative) {
    return UsageError(
        "of --save, --restore and --checkpoint_dir, one is an absolute path and another "
        "relative: pass "
        "--checkpoint_root DIR and names relative to it");
  }
  if (place.root.empty()) {
    ASSIGN_OR_RETURN(place.root, CurrentDirectory());
  }
  return place;
}

// `meshrt train`'s help texts of the "where to run" flags; --checkpoint_root is where --save and
// --restore are with --local and --reference.
TargetFlagHelp TrainTargetFlagHelp() {
  TargetFlagHelp help;
  help.mesh =
      "mesh shape, e.g. rows:2,cols:2 (default: x:N with --local N, x:1 with "
      "--coordinator, one processor with --reference)";
  help.layout =
      "layout rules, e.g. batch:rows (data parallel), heads:cols,d_ff:cols,vocab:cols "
      "(model parallel), or both; auto: the planner chooses them (and with --mesh "
      "auto:N the mesh) for the least predicted step time";
  help.local = "start a local cluster with N worker processes, train, stop it";
  help.coordinator = "train on the coordinator at HOST:PORT";
  help.reference = "train in this process on one processor (the single-process reference)";
  help.checkpoint_root =
      "with --local or --reference: the directory --save and --restore names are "
      "relative to (default: the current directory, or an absolute name's parent)";
  help.log_dir = "with --local: the daemons' logs (default: a temp dir)";
  return help;
}

// The model, its size and its optimizer.
void AddTrainModelFlags(FlagSet& flags, TrainFlags* f) {
  flags.String("model", &f->model,
               "transformer (byte-level LM on a text file), transformer_encdec (translation: "
               "--data DIR from `meshrt data translations`, --vocab MODEL) or mlp (regression on "
               "synthetic data)");
  flags.Int("steps", &f->steps,
            "the step the run ends at: the total, counted from the start of training, also "
            "with --restore and --resume (a checkpoint at step 100 with --steps 120 trains 20 "
            "more; default 200)");
  flags.Int("seed", &f->seed, "seed of the initial weights (and synthetic data)");
  flags.Int("log_every", &f->log_every,
            "steps the workers run per request; the loss is reported every N steps (default 1)");
  flags.String("optimizer", &f->optimizer, "sgd, momentum, adam, adamw or adafactor");
  flags.Double("lr", &f->lr,
               "base learning rate (0: for adam/adamw/adafactor 0.01 for the transformer and "
               "0.001 for the mlp; 0.1 for sgd/momentum)");
  flags.String("schedule", &f->schedule, "constant, linear_warmup or rsqrt_decay");
  flags.Int("warmup", &f->warmup, "warm-up steps of the schedule");
  flags.Double("clip", &f->clip, "clip gradients to this global norm (0: off)");
  flags.Int("microbatches", &f->microbatches, "accumulate N steps' gradients per update");
  flags.Int("batch", &f->batch, "batch size (0: the model's default)");
  flags.Int("length", &f->length, "transformer: sequence length (0: default)");
  flags.Int("d_model", &f->d_model, "model width (0: default)");
  flags.Int("heads", &f->heads, "transformer: attention heads (0: default)");
  flags.Int("d_ff", &f->d_ff, "feed-forward width (0: default)");
  flags.Int("layers", &f->layers, "transformer: layers (0: default)");
}

// What the model reads, and how it is evaluated.
void AddTrainDataFlags(FlagSet& flags, TrainFlags* f) {
  flags.String("data", &f->data,
               "transformer: the file to train on — a text file (default "
               "/usr/share/games/fortunes/cookie, from Debian's fortunes package) or token ids "
               "(--data_format); 'synthetic' for random ids");
  flags.String("data_format", &f->data_format,
               "transformer: auto (the default: *.npy is npy, *.bin uint16, else bytes), bytes "
               "(every byte a token), npy (a 1-D int32 or uint16 .npy of token ids) or uint16 "
               "(raw little-endian uint16 ids, nanoGPT's train.bin)");
  flags.String("vocab", &f->vocab_text,
               "transformer: vocabulary size; token ids must be in [0, N) (required for npy and "
               "uint16: the file is not scanned; default 256 for bytes). transformer_encdec: the "
               "SentencePiece model file (`meshrt vocab train`), required; when it does not "
               "exist yet, a vocabulary of --vocab_size pieces is trained on DIR/train.en and "
               "DIR/train.LANG and written there");
  flags.Int("vocab_size", &f->vocab_size,
            "transformer_encdec: pieces of the vocabulary trained when --vocab MODEL does not "
            "exist (shared by both languages; pad 0, EOS 1, UNK 2)");
  flags.String("target_lang", &f->target_lang,
               "transformer_encdec: the language translated into; --data DIR holds "
               "train.en and train.LANG");
  flags.Double("dropout", &f->dropout, "transformer_encdec: dropout rate");
  flags.Double("label_smoothing", &f->label_smoothing,
               "transformer_encdec: label smoothing");
  flags.Int("eval_bleu_every", &f->eval_bleu_every,
            "transformer_encdec: greedy-decode the first --eval_bleu_lines lines of DIR/dev.en "
            "in this process and log their BLEU against DIR/dev.LANG at the first step, every N "
            "steps and the last (0: off); --loss_csv gains a bleu column");
  flags.Int("eval_bleu_lines", &f->eval_bleu_lines,
            "transformer_encdec: dev lines decoded for --eval_bleu_every");
  flags.Double("eval_fraction", &f->eval_fraction,
               "transformer: hold out the last F of the data file's tokens (0 <= F < 1; 0: no "
               "eval): training reads the rest, and the eval loss is measured on the held-out "
               "part");
  flags.Int("eval_every", &f->eval_every,
            "with --eval_fraction: log the eval loss (one fixed held-out batch, with the weights "
            "the step starts from) at the first step, every N steps and at the last (0: first "
            "and last only); --loss_csv gains an eval_loss column, empty where not evaluated");
}

// Checkpoints: saved, restored, resumed, recovered from; --init's starting values.
void AddTrainCheckpointFlags(FlagSet& flags, TrainFlags* f) {
  flags.String("save", &f->save,
               "save a checkpoint (every variable and optimizer slot) named NAME at the end, "
               "relative to the checkpoint root (--checkpoint_root; with --coordinator, that "
               "coordinator's); an absolute path without --checkpoint_root saves under its "
               "parent directory (--local and --reference only)");
  flags.String("restore", &f->restore,
               "start from checkpoint NAME (saved on any mesh or layout; named as --save) and "
               "train from its step up to --steps (the total)");
  flags.String("checkpoint_dir", &f->checkpoint_dir,
               "long runs: the checkpoint NAME (named as --save) written every --save_every "
               "steps, at the end and on SIGTERM; with --resume the run continues from it, and "
               "failures are recovered from it (--recover)");
  flags.Int("save_every", &f->save_every,
            "with --checkpoint_dir: checkpoint every N steps (0: only at the end and on SIGTERM)");
  flags.Int("keep", &f->keep,
            "with --checkpoint_dir: checkpoint versions kept (default 2; a restore falls back "
            "to an older one when the newest is damaged)");
  flags.Bool("resume", &f->resume,
             "continue from the newest valid version of --checkpoint_dir (start at step 0 when "
             "there is none); --steps is then the total, so a restarted job ends where the "
             "first would have");
  flags.String("recover", &f->recover,
               "auto (the default with --checkpoint_dir) or off: on a lost worker, a stuck rank "
               "or a coordinator restart, restore the last checkpoint on a new session — on a "
               "replacement worker if one registers within --replace_wait, else on a smaller "
               "mesh, growing back at a later checkpoint — and continue");
  flags.Int("replace_wait", &f->replace_wait,
            "seconds a recovery waits for a replacement worker before it continues on a "
            "smaller mesh (default 10)");
  flags.String("init", &f->init,
               "initial values from a NumPy .npz file (e.g. from `meshrt export`): each array "
               "sets the variable of the model with its name (same sizes), the others start from "
               "their initializers; with --local or --reference (written as a checkpoint under "
               "the checkpoint root's imports/ and restored partially). Not with --restore; with "
               "--resume, an existing --checkpoint_dir wins");
}

// What the run writes besides checkpoints: the loss curve, a sample, the graph, the timelines.
void AddTrainOutputFlags(FlagSet& flags, TrainFlags* f) {
  flags.String("loss_csv", &f->loss_csv,
               "write the loss curve here: step,loss,learning_rate,"
               "tokens_per_s,elapsed_s");
  flags.Int("sample", &f->sample,
            "transformer: print a greedy sample of N tokens at the end (text for bytes, token "
            "ids for npy/uint16 data)");
  flags.String("prompt", &f->prompt,
               "transformer: the sample's prompt (for npy/uint16 data: token ids separated by "
               "spaces or commas)");
  flags.Int("max_seconds", &f->max_seconds, "stop early after this many seconds (0: no limit)");
  flags.String("export_graph", &f->export_graph,
               "also write the training graph (model, gradients, optimizer) to this .pbtxt or .pb "
               "file, e.g. for `meshrt explain`");
  flags.String("trace", &f->trace,
               "FILE: write the timelines of the --trace_steps steps on every worker (each op "
               "and collective with its bytes, time waiting for peers apart from transfer, a "
               "'step N' span per step; one track per rank) as Chrome trace-event JSON, for "
               "https://ui.perfetto.dev or chrome://tracing; --local and --coordinator only "
               "(default: empty, off)");
  flags.String("trace_steps", &f->trace_steps,
               "A:B: with --trace, the steps to trace, A to B inclusive, numbered as the "
               "progress bar counts them (a restored run continues its checkpoint's count); "
               "B at most --steps (default: the second and third steps this run makes, or as "
               "many of them as it makes)");
}

}  // namespace

void AddTrainFlags(FlagSet& flags, TrainFlags* f) {
  AddTrainModelFlags(flags, f);
  AddTargetFlags(flags, TrainTargetFlagHelp(), &f->target);
  AddTrainDataFlags(flags, f);
  AddTrainCheckpointFlags(flags, f);
  AddTrainOutputFlags(flags, f);
}

namespace {

// --prompt, else "The " for a byte model (an empty prompt starts where the fortune file's
// separators start, and samples lines of '%'); token-id models start from token 0.
std::string SamplePrompt(const TrainFlags& f, const models::TransformerOptions& model) {
  if (!f.prompt.empty()) return f.prompt;
  return model.data_format == "bytes" ? "The " : "";
}

// Prints --sample N tokens greedily sampled with `variables` after the prompt.
absl::Status PrintSample(const TrainFlags& f, const models::TransformerOptions& model,
                         const TensorMap& variables, CliIo io) {
  const std::string prompt = SamplePrompt(f, model);
  ASSIGN_OR_RETURN(std::string text, GreedySample(model, variables, prompt, f.sample));
  if (model.data_format == "bytes") {
    io.out << "greedy sample (prompt \"" << prompt << "\"):\n" << prompt << text << "\n";
  } else {
    io.out << "greedy sample of token ids (prompt \"" << (prompt.empty() ? "0" : prompt)
           << "\"):\n"
           << text << "\n";
  }
  return absl::OkStatus();
}

// --steps 0 --restore CK --sample N: the checkpoint's weights read here (checksums verified),
// checked against the model the flags describe, and sampled from; nothing is trained or saved.
absl::Status SampleFromCheckpoint(const TrainFlags& f, const models::TransformerOptions& model,
                                  const models::TrainGraph& tg, const CheckpointPlace& place,
                                  CliIo io) {
  ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(place.root));
  absl::StatusOr<std::string> dir = root.Resolve(place.restore, /*create=*/false);
  if (!dir.ok()) return WithContext(dir.status(), absl::StrCat("--restore ", f.restore));
  absl::StatusOr<CheckpointTensors> read = ReadCheckpointTensors(*dir);
  if (!read.ok()) return WithContext(read.status(), absl::StrCat("reading ", f.restore));
  CheckpointTensors& saved = *read;
  TensorMap weights;
  for (const std::string& name : tg.trainable) {
    auto it = saved.tensors.find(name);
    if (it == saved.tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", f.restore, " has no variable ", name,
          ": it was saved by another model (pass the --model and size flags it was trained with)"));
    }
    const TensorType& type = tg.graph.type(name);
    if (it->second.shape() != type.shape || it->second.dtype() != type.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", f.restore, " holds ", name, " as ", DTypeName(it->second.dtype()), " ",
          it->second.shape().ToString(), "; this model's is ", DTypeName(type.dtype), " ",
          type.shape.ToString(), " (pass the size flags the checkpoint was trained with)"));
    }
    weights[name] = std::move(it->second);
  }
  io.out << "sampling from checkpoint " << f.restore << " (after step " << saved.step
         << "; not trained further)\n";
  return PrintSample(f, model, weights, io);
}

// The usage checks of `meshrt train` that need no model: UsageError naming the flag. Sets
// `trace_steps` from --trace_steps (absolute; {0, 0}: the default).
absl::Status CheckTrainFlags(const TrainFlags& f, std::pair<int64_t, int64_t>* trace_steps) {
  RETURN_IF_ERROR(CheckTargetFlags(f.target, TrainTargetFlagHelp(), "train"));
  if (f.steps == 0 && (f.restore.empty() || f.sample < 1 || f.model != "transformer")) {
    return UsageError(
        "--steps 0 samples from a checkpoint without training it: it needs --restore CK and "
        "--sample N (transformer)");
  }
  if (f.steps == 0 && !f.target.coordinator.empty()) {
    return UsageError(
        "--steps 0 reads the checkpoint on this machine: use --reference (or --local N) with "
        "--checkpoint_root DIR, the coordinator's root as mounted here");
  }
  if (f.steps < 0) return UsageError("--steps needs N >= 1 (or 0 with --restore and --sample)");
  if (!f.trace_steps.empty() && f.trace.empty()) {
    return UsageError("--trace_steps needs --trace FILE (where the timelines go)");
  }
  if (!f.trace.empty()) {
    if (f.target.reference) {
      return UsageError("--trace records the workers' timelines: use --local N or --coordinator, "
                        "not --reference");
    }
    if (!f.trace_steps.empty()) {
      absl::StatusOr<std::pair<int64_t, int64_t>> range = ParseTraceSteps(f.trace_steps);
      if (!range.ok()) return UsageError(std::string(range.status().message()));
      *trace_steps = *range;
      // A run that starts from step 0 makes steps 1..--steps; one that restores is checked
      // once its checkpoint's step is known, still before any step.
      if (f.restore.empty() && !f.resume && trace_steps->second > f.steps) {
        return UsageError(absl::StrCat("--trace_steps ", f.trace_steps, ": step ",
                                       trace_steps->second, " is beyond --steps ", f.steps));
      }
    }
    absl::Status writable = CheckTraceFileWritable(f.trace);
    if (!writable.ok()) return UsageError(std::string(writable.message()));
  }
  if (f.steps == 0 && !f.trace.empty()) {
    return UsageError("--steps 0 runs no step: there is nothing to --trace");
  }
  if (f.log_every < 1) return UsageError("--log_every needs N >= 1");
  if (f.model != "transformer" && f.model != "mlp" && f.model != kEncDec) {
    return UsageError(absl::StrCat("--model '", f.model,
                                   "' is not transformer, transformer_encdec or mlp"));
  }
  if (f.checkpoint_dir.empty() && (f.save_every != 0 || f.resume)) {
    return UsageError("--save_every and --resume need --checkpoint_dir NAME");
  }
  if (f.save_every < 0) return UsageError("--save_every needs N >= 0");
  if (!f.init.empty() && !f.restore.empty()) {
    return UsageError(
        "--init and --restore both set the starting values: pass one (--restore continues a "
        "checkpoint, --init imports .npz arrays into a fresh run)");
  }
  if (!f.init.empty() && !f.target.coordinator.empty()) {
    return UsageError(
        "--init is for --local and --reference (it writes a checkpoint under the checkpoint "
        "root); with --coordinator, restore the weights in a session (Python: "
        "Session.load_npz)");
  }
  if (f.keep < 1 || f.keep > 1000) return UsageError("--keep needs 1 <= K <= 1000");
  if (f.replace_wait < 0) return UsageError("--replace_wait needs N >= 0 seconds");
  if (!f.recover.empty() && f.recover != "auto" && f.recover != "off") {
    return UsageError(absl::StrCat("--recover '", f.recover, "' is not auto or off"));
  }
  return absl::OkStatus();
}

// The optimizer, schedule, clipping and microbatches the flags ask for (defaults by model).
TrainOptions TrainOptionsFromFlags(const TrainFlags& f) {
  TrainOptions train;
  train.optimizer = f.optimizer;
  const bool adaptive = IsAdaptiveOptimizer(f.optimizer);
  // Defaults measured on the default models (`meshrt train --reference --steps 100`): the MLP's
  // regression under Adam at 0.01 jumps from loss 0.71 to 91.45 at step 2 (0.25 at step 100); at
  // 0.001 it ends at 0.09 (0.0003: 0.17, slower).
  train.learning_rate.base = !adaptive ? 0.1f : f.model == "mlp" ? 0.001f : 0.01f;
  if (f.lr != 0) train.learning_rate.base = static_cast<float>(f.lr);
  train.learning_rate.kind = f.schedule;
  train.learning_rate.warmup_steps = f.warmup;
  train.clip_global_norm = static_cast<float>(f.clip);
  train.microbatches = static_cast<int>(f.microbatches);

  return train;
}

// The model the flags describe, its training graph, and what it reads.
struct TrainModel {
  models::TransformerOptions tmodel;
  models::MlpOptions mmodel;
  models::EncDecOptions emodel;
  std::optional<text::Vocab> vocab;  // transformer_encdec's
  std::string data_path;             // what the workers read (its directory is --data_dir)
  int64_t tokens_per_step = 0;
  models::TrainGraph tg;
};

absl::StatusOr<TrainModel> BuildTrainModel(const TrainFlags& f, const TrainOptions& train,
                                           CliIo io) {
  TrainModel out;
  models::TransformerOptions& tmodel = out.tmodel;
  models::MlpOptions& mmodel = out.mmodel;
  models::EncDecOptions& emodel = out.emodel;
  std::optional<text::Vocab>& vocab = out.vocab;
  std::string& data_path = out.data_path;
  int64_t& tokens_per_step = out.tokens_per_step;
  absl::StatusOr<models::TrainGraph> tg;
  if (f.model == kEncDec) {
    ASSIGN_OR_RETURN(vocab, PrepareEncDec(f, &emodel, io));
    data_path = emodel.inputs_path;
    tokens_per_step = emodel.batch * emodel.length;
    tg = models::BuildEncDecTrainGraph(emodel, train);
  } else if (f.model == "transformer") {
    if (f.batch > 0) tmodel.batch = f.batch;
    if (f.length > 0) tmodel.length = f.length;
    if (f.d_model > 0) tmodel.d_model = f.d_model;
    if (f.heads > 0) tmodel.heads = f.heads;
    if (f.d_ff > 0) tmodel.d_ff = f.d_ff;
    if (f.layers > 0) tmodel.layers = f.layers;
    tmodel.seed = f.seed;
    RETURN_IF_ERROR(ApplyTrainData({f.data, f.data_format, f.vocab, f.eval_fraction}, &tmodel));
    if (f.eval_every < 0) return UsageError("--eval_every needs N >= 0");
    if (f.eval_every > 0 && tmodel.eval_fraction == 0) {
      return UsageError("--eval_every needs --eval_fraction F > 0 (the held-out part)");
    }
    if (!tmodel.data_path.empty() && ::access(tmodel.data_path.c_str(), R_OK) != 0) {
      const int err = errno;
      if (f.data != TrainFlags().data) {  // the user's file: its path as given and the reason
        return absl::ErrnoToStatus(err, absl::StrCat("cannot read --data ", f.data));
      }
      return absl::Status(
          absl::ErrnoToStatus(err, "").code(),
          absl::StrCat("cannot read the default training data ", tmodel.data_path, ": ",
                       std::strerror(err),
                       " (install Debian's fortunes package: tools/setup.sh does; or pass "
                       "--data FILE)"));
    }
    struct stat st;
    if (!tmodel.data_path.empty() && ::stat(tmodel.data_path.c_str(), &st) == 0 &&
        !S_ISREG(st.st_mode)) {
      return UsageError(absl::StrCat("--data ", f.data, " is ",
                                     S_ISDIR(st.st_mode) ? "a directory" : "not a regular file",
                                     ": give a text or token file"));
    }
    tokens_per_step = tmodel.batch * tmodel.length;
    data_path = tmodel.data_path;
    tg = models::BuildTransformerTrainGraph(tmodel, train);
  } else {
    if (f.data_format != "auto" || f.vocab != 0 || f.eval_fraction != 0 || f.eval_every != 0) {
      return UsageError(
          "--data_format, --vocab, --eval_fraction and --eval_every are for "
          "--model transformer");
    }
    if (f.batch > 0) mmodel.batch = f.batch;
    if (f.d_model > 0) mmodel.d_model = f.d_model;
    if (f.d_ff > 0) mmodel.d_ff = f.d_ff;
    mmodel.seed = f.seed;
    tokens_per_step = mmodel.batch;
    tg = models::BuildMlpTrainGraph(mmodel, train);
  }
  if (!tg.ok()) return WithContext(tg.status(), absl::StrCat("building the ", f.model));
  out.tg = *std::move(tg);
  return out;
}

// While it lives and is active, SIGTERM (a pod deleted, a job stopped) only sets a flag, read by
// requested(), so that the run saves a checkpoint and stops; the previous handler comes back at
// destruction. One at a time: a signal handler reaches nothing but the class's one flag.
class SigtermFlag {
 public:
  explicit SigtermFlag(bool active) : active_(active) {
    if (!active_) return;
    requested_ = 0;
    struct sigaction sa {};
    sa.sa_handler = [](int) { requested_ = 1; };
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, &previous_);
  }
  ~SigtermFlag() {
    if (active_) ::sigaction(SIGTERM, &previous_, nullptr);
  }
  SigtermFlag(const SigtermFlag&) = delete;
  SigtermFlag& operator=(const SigtermFlag&) = delete;
  bool requested() const { return active_ && requested_; }

 private:
  static volatile std::sig_atomic_t requested_;
  const bool active_;
  struct sigaction previous_ {};
};
volatile std::sig_atomic_t SigtermFlag::requested_ = 0;

// Where progress goes: a tty's progress bar is redrawn in place; events (recoveries, checkpoints,
// evaluations) get their own lines.
struct TrainLog {
  CliIo io;
  bool tty = false;
  void Event(const std::string& line) const {
    io.out << (tty ? "\n" : "") << line << "\n" << std::flush;
  }
};

// What a run is made of once its flags are checked, before anything starts.
struct TrainSetup {
  TrainModel model;                       // the model, its training graph and data
  MeshAndRules layout;                    // checked against the graph
  CheckpointPlace place;                  // --save, --restore, --checkpoint_dir and their root
  TensorMap init;                         // --init's arrays, checked against the variables
  std::pair<int64_t, int64_t> trace_steps;  // absolute; {0, 0}: the default
};

// A started run: the trainer and what it trains on. `cluster` outlives `trainer`.
struct StartedTraining {
  std::unique_ptr<LocalCluster> cluster;  // --local
  std::unique_ptr<Trainer> trainer;
  TrainingRun* training_run = nullptr;  // the trainer's run, when it trains on a coordinator
  std::string where;                    // for "training ... on WHERE"
  int64_t first_step = 0;               // steps the run starts after (a restored checkpoint's)
};

// --save / --restore / --checkpoint_dir placed (PlaceCheckpoints) and, when this process writes
// there, the root created and the names a save would refuse refused now, not after the training.
// With --coordinator the names stay relative to that coordinator's root.
absl::StatusOr<CheckpointPlace> PlaceTrainCheckpoints(const TrainFlags& f) {
  CheckpointPlace place{f.target.checkpoint_root, f.save, f.restore, f.checkpoint_dir};
  if (!f.target.coordinator.empty()) {
    if (!f.target.checkpoint_root.empty()) {
      return UsageError(
          "--checkpoint_root is for --local and --reference: with --coordinator, --save and "
          "--restore name checkpoints relative to that coordinator's --checkpoint_root");
    }
    for (const std::string* name : {&f.save, &f.restore, &f.checkpoint_dir}) {
      if (!name->empty() && (*name)[0] == '/') {
        return UsageError(absl::StrCat(
            "with --coordinator, --save and --restore name a checkpoint relative to the "
            "coordinator's --checkpoint_root, not an absolute path like ", *name));
      }
    }
    return place;
  }
  ASSIGN_OR_RETURN(place, PlaceCheckpoints(f));
  if (!f.init.empty() && f.target.checkpoint_root.empty() && place.save.empty() &&
      place.restore.empty() && place.checkpoint_dir.empty()) {
    // No checkpoint place was asked for: the imported weights go to a fresh directory in
    // $TMPDIR (else /tmp) rather than the current one.
    absl::StatusOr<std::string> dir = MakeTempDirectory("meshrt-init");
    if (!dir.ok()) return WithContext(dir.status(), "--init");
    place.root = *dir;
  }
  if (!place.save.empty() || !place.checkpoint_dir.empty() || !f.init.empty()) {
    RETURN_IF_ERROR(MakeDirs(place.root));
    ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(place.root));
    for (const auto& [name, flag] : {std::make_pair(place.save, "--save"),
                                     std::make_pair(place.checkpoint_dir, "--checkpoint_dir")}) {
      if (name.empty()) continue;
      const absl::Status s = root.Resolve(name, /*create=*/false).status();
      if (!s.ok() && s.code() != absl::StatusCode::kNotFound) return WithContext(s, flag);
    }
  }
  return place;
}

// Checks the flags, builds the model (--export_graph writes its graph), chooses and checks the
// layout, reads --init and places the checkpoints: every refusal before a daemon starts.
absl::StatusOr<TrainSetup> BuildTraining(const TrainFlags& f, CliIo io) {
  TrainSetup setup;
  setup.trace_steps = {0, 0};
  RETURN_IF_ERROR(CheckTrainFlags(f, &setup.trace_steps));
  ASSIGN_OR_RETURN(setup.model, BuildTrainModel(f, TrainOptionsFromFlags(f), io));
  const models::TrainGraph& tg = setup.model.tg;
  if (!f.export_graph.empty()) {
    RETURN_IF_ERROR(SaveGraph(tg.graph.proto(), f.export_graph));
    io.out << "wrote the training graph (" << tg.graph.proto().ops_size() << " ops, "
           << tg.variables.size() << " variables) to " << f.export_graph << "\n";
  }
  ASSIGN_OR_RETURN(
      setup.layout,
      ChooseMeshAndRules(tg.graph, MeshOrDefault(f.target.mesh, f.target.local, f.target.coordinator),
                         f.target.layout, PlanFlags{"", 0, {tg.loss}}, io.err));
  // Refuse a bad layout here, before any daemon starts.
  RETURN_IF_ERROR(CheckRulesNameGraphDims(tg.graph, setup.layout.rules));
  RETURN_IF_ERROR(ValidateLayouts(tg.graph, setup.layout.mesh, setup.layout.rules));
  if (!f.init.empty()) {
    ASSIGN_OR_RETURN(setup.init, InitialWeights(f.init, tg.graph, tg.variables));
  }
  ASSIGN_OR_RETURN(setup.place, PlaceTrainCheckpoints(f));
  return setup;
}

// --reference: the interpreter, resumed from --checkpoint_dir, else started from --init or
// --restore.
absl::StatusOr<StartedTraining> StartInProcess(const TrainFlags& f, TrainSetup& setup,
                                               const TrainLog& log) {
  const CheckpointPlace& place = setup.place;
  auto in_process = std::make_unique<InProcessTrainer>(setup.model.tg.graph, place.root,
                                                       place.checkpoint_dir, f.save_every,
                                                       static_cast<int>(f.keep));
  StartedTraining started;
  started.where = "in process (reference interpreter, 1 processor)";
  bool resumed = false;
  if (f.resume) {
    absl::StatusOr<int64_t> restored = in_process->Restore(place.checkpoint_dir);
    if (restored.ok()) {
      started.first_step = *restored;
      resumed = true;
      log.Event(absl::StrCat("resumed from checkpoint '", f.checkpoint_dir, "' (after step ",
                             started.first_step, ")"));
    } else if (restored.status().code() != absl::StatusCode::kNotFound) {
      return WithContext(restored.status(), absl::StrCat("resuming ", f.checkpoint_dir));
    }
  }
  if (!resumed && !setup.init.empty()) {
    log.Event(absl::StrCat("initialised ", setup.init.size(), " variables from ", f.init,
                           " (the others from their initializers)"));
    in_process->Import(std::move(setup.init));
  }
  if (!resumed && !f.restore.empty()) {
    absl::StatusOr<int64_t> restored = in_process->Restore(place.restore);
    if (!restored.ok()) {
      return WithContext(restored.status(), absl::StrCat("restoring ", f.restore));
    }
    started.first_step = *restored;
    log.Event(absl::StrCat("restored ", f.restore, " (after step ", started.first_step, ")"));
  }
  started.trainer = std::move(in_process);
  return started;
}

// --local N: a cluster of N workers that read the model's data and write under the checkpoint
// root, its logs in --log_dir.
absl::StatusOr<std::unique_ptr<LocalCluster>> StartTrainCluster(const TrainFlags& f,
                                                                const TrainSetup& setup,
                                                                CliIo io) {
  if (f.target.local < setup.layout.mesh.num_processors()) {
    return UsageError(absl::StrCat("--local ", f.target.local,
                                   " starts too few workers for mesh ",
                                   setup.layout.mesh.ToString()));
  }
  LocalClusterOptions options;
  options.workers = static_cast<int>(f.target.local);
  options.data_dirs = LocalDataDirs(setup.model.data_path);
  options.checkpoint_root = setup.place.root;
  ASSIGN_OR_RETURN(const std::string log_dir, LogDirectory(f.target.log_dir, "train"));
  options.log_dir = log_dir;
  io.out << "starting a local cluster: 1 coordinator + " << f.target.local
         << " worker processes (logs in " << log_dir << ")\n";
  absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(options);
  if (!started.ok()) return WithContext(started.status(), "cannot start the local cluster");
  PrintDashboardAddress(**started, io);
  return started;
}

// The TrainingRun's options: the flags' graph, layout, checkpoints and recovery on `address`.
// --init's arrays become a checkpoint (`imported`), restored partially at the start (and by a
// recovery before the first save): the other variables start from their initializers.
absl::StatusOr<TrainingRunOptions> TrainingRunOptionsFor(const TrainFlags& f,
                                                         const TrainSetup& setup,
                                                         const TrainLog& log,
                                                         std::string* imported) {
  TrainingRunOptions run;
  run.graph = setup.model.tg.forward;  // trained on the coordinator, as any client's request can
  run.training = setup.model.tg.spec;
  run.mesh = setup.layout.mesh;
  run.rules = setup.layout.rules;
  run.checkpoint = setup.place.checkpoint_dir;
  run.save_every = f.save_every;
  run.keep = static_cast<int>(f.keep);
  run.resume = f.resume;
  run.initial_checkpoint = setup.place.restore;
  if (!f.init.empty()) {
    ASSIGN_OR_RETURN(*imported, WriteInitialCheckpoint(setup.place.root, setup.init));
    run.initial_checkpoint = *imported;
    run.initial_checkpoint_partial = true;
  }
  run.recover = f.recover.empty() ? !f.checkpoint_dir.empty() : f.recover == "auto";
  run.replace_wait = absl::Seconds(f.replace_wait);
  run.log = [log](const std::string& line) { log.Event(line); };
  return run;
}

// --local or --coordinator: a TrainingRun on the cluster's coordinator.
absl::StatusOr<StartedTraining> StartOnCluster(const TrainFlags& f, const TrainSetup& setup,
                                               const TrainLog& log) {
  StartedTraining started;
  std::string address = f.target.coordinator;
  if (f.target.local > 0) {
    ASSIGN_OR_RETURN(started.cluster, StartTrainCluster(f, setup, log.io));
    address = started.cluster->address();
  }
  std::string imported;  // --init's checkpoint
  ASSIGN_OR_RETURN(TrainingRunOptions run, TrainingRunOptionsFor(f, setup, log, &imported));
  run.client.address = address;
  run.client.security =
      started.cluster == nullptr ? f.target.security : started.cluster->client_security();
  absl::StatusOr<std::unique_ptr<TrainingRun>> begun = TrainingRun::Start(std::move(run));
  if (!begun.ok()) {
    return f.restore.empty() ? begun.status()
                             : WithContext(begun.status(), absl::StrCat("restoring ", f.restore));
  }
  auto run_trainer = std::make_unique<RunTrainer>(*std::move(begun));
  started.first_step = run_trainer->step();
  const bool resumed = run_trainer->run().resumed();
  if (!f.init.empty() && !resumed) {
    log.Event(absl::StrCat("initialised ", setup.init.size(), " variables from ", f.init,
                           " (checkpoint '", imported, "'; the others from their initializers)"));
  }
  if (started.first_step > 0) {
    log.Event(absl::StrCat(resumed ? "resumed from checkpoint '" : "restored '",
                           resumed ? f.checkpoint_dir : f.restore, "' (after step ",
                           started.first_step, ")"));
  }
  started.training_run = &run_trainer->run();
  started.trainer = std::move(run_trainer);
  const std::string rules = setup.layout.rules.ToString();
  started.where = absl::StrCat(setup.layout.mesh.num_processors(), " worker processes, mesh ",
                               setup.layout.mesh.ToString(), ", layout '",
                               rules.empty() ? "(replicated)" : rules, "'");
  return started;
}

// "training MODEL (its sizes and data)"; the line ends in CheckStepsAndTrace's caller.
void PrintTrainingModel(const TrainFlags& f, const models::TransformerOptions& tmodel, CliIo io) {
  io.out << "training " << f.model;
  if (f.model != "transformer") return;
  io.out << absl::StrFormat(
      " (batch %d, length %d, d_model %d, heads %d, d_ff %d, layers %d, "
      "vocab %d; data %s%s)",
      tmodel.batch, tmodel.length, tmodel.d_model, tmodel.heads, tmodel.d_ff, tmodel.layers,
      tmodel.vocab, tmodel.data_path.empty() ? "synthetic" : tmodel.data_path,
      tmodel.data_path.empty()   ? ""
      : tmodel.eval_fraction > 0 ? absl::StrFormat(" as %s, last %g held out for eval",
                                                   tmodel.data_format, tmodel.eval_fraction)
                                 : absl::StrCat(" as ", tmodel.data_format));
}

// --steps against the step the run starts from (a restored run must have steps left), and
// --trace_steps (`trace_steps`, {0, 0}: the default, set here to the run's 2nd and 3rd steps)
// against the steps this run makes; asks the training run to trace them.
absl::Status CheckStepsAndTrace(const TrainFlags& f, const StartedTraining& started,
                                std::pair<int64_t, int64_t>* trace_steps) {
  const int64_t first_step = started.first_step, target = f.steps;
  if (first_step >= target && !f.resume) {
    return UsageError(absl::StrCat(
        f.restore.empty() ? absl::StrCat("--init ", f.init) : absl::StrCat("--restore ", f.restore),
        " starts at step ", first_step, "; --steps ", f.steps,
        " is the step the run ends at (the total), so nothing would train: pass --steps N > ",
        first_step));
  }
  if (f.trace.empty() || first_step >= target) return absl::OkStatus();
  if (trace_steps->first == 0) {  // the default: the 2nd and 3rd steps of this run
    *trace_steps = {std::min(first_step + 2, target), std::min(first_step + 3, target)};
    if (trace_steps->first <= first_step) *trace_steps = {target, target};
  }
  if (trace_steps->first <= first_step || trace_steps->second > target) {
    return UsageError(absl::StrCat("--trace_steps ", trace_steps->first, ":", trace_steps->second,
                                   ": this run makes steps ", first_step + 1, " to ", target));
  }
  if (started.training_run == nullptr) {
    return absl::InternalError("--trace without a training run on a coordinator");
  }
  started.training_run->TraceSteps(trace_steps->first, trace_steps->second);
  return absl::OkStatus();
}

// What the loop leaves for the report.
struct TrainResult {
  float loss = NAN;       // the last request's
  float eval_loss = NAN;  // the last evaluated
  std::vector<std::pair<int64_t, float>> logged;  // (step, loss) of every request
  TensorMap final_vars;   // the trainable variables the last step started from, when fetched
  int64_t done = 0;       // steps run by this process (redone ones included)
  double elapsed = 0;     // seconds
};

// The steps of one run, from its first to --steps (or --max_seconds, or SIGTERM): the requests,
// the evaluations, the CSV rows and the progress bar. Borrows everything for its lifetime.
class TrainLoop {
 public:
  TrainLoop(const TrainFlags& f, const TrainSetup& setup, StartedTraining& started,
            const TrainLog& log)
      : f_(f),
        setup_(setup),
        tg_(setup.model.tg),
        trainer_(*started.trainer),
        training_run_(started.training_run),
        log_(log),
        first_step_(started.first_step),
        target_(f.steps),
        eval_(!tg_.eval_loss.empty()),
        bleu_(f.model == kEncDec && f.eval_bleu_every > 0) {}

  // The dev set of --eval_bleu_every and the loss CSV (appended to when resumed).
  absl::Status Open();
  // Trains until the target step, the time limit or SIGTERM (then Cancelled, checkpoint saved).
  absl::StatusOr<TrainResult> Run();

 private:
  // Whether the held-out loss is fetched at `step`: the first, every --eval_every-th, the last.
  bool Evaluates(int64_t step) const {
    return eval_ && (step == first_step_ + 1 || step == target_ ||
                     (f_.eval_every > 0 && step % f_.eval_every == 0));
  }
  // transformer_encdec's dev BLEU, likewise, decoded here with the fetched weights.
  bool EvaluatesBleu(int64_t step) const {
    return bleu_ &&
           (step == first_step_ + 1 || step == target_ || step % f_.eval_bleu_every == 0);
  }
  // The next request's steps (it ends at the next evaluated step: its fetches are the last
  // step's) and fetches.
  int64_t RequestSteps() const;
  std::vector<std::string> RequestFetches(int64_t n, bool last) const;
  // The evaluations a request fetched: logged, sent to the dashboard; sets the CSV's cells.
  absl::Status RecordEvaluations(const TensorMap& out, int64_t step, std::string* eval_cell,
                                 std::string* bleu_cell);
  // The CSV row and the progress line of `step`.
  void Progress(const TensorMap& out, int64_t step, bool finished, const std::string& eval_cell,
                const std::string& bleu_cell);

  const TrainFlags& f_;
  const TrainSetup& setup_;
  const models::TrainGraph& tg_;
  Trainer& trainer_;
  TrainingRun* const training_run_;  // may be null
  const TrainLog& log_;
  const int64_t first_step_, target_;
  const bool eval_, bleu_;
  DevBleu dev_;
  std::ofstream csv_;
  int64_t written_ = 0;  // the last step with a CSV row
  absl::Time start_;
  int64_t next_report_ = 0, report_every_ = 1;
  TrainResult result_;
};

absl::Status TrainLoop::Open() {
  if (bleu_) {
    absl::StatusOr<DevBleu> loaded = LoadDevBleu(f_, *setup_.model.vocab, setup_.model.emodel.length);
    if (!loaded.ok()) return WithContext(loaded.status(), "--eval_bleu_every");
    dev_ = *std::move(loaded);
  }
  if (f_.loss_csv.empty()) return absl::OkStatus();
  const bool resumed = first_step_ > 0 && f_.resume;
  if (resumed) RETURN_IF_ERROR(TruncateLossCsv(f_.loss_csv, first_step_));
  const bool append = resumed && std::ifstream(f_.loss_csv).good();
  csv_.open(f_.loss_csv, append ? std::ios::app : std::ios::trunc);
  if (!csv_) return absl::PermissionDeniedError(absl::StrCat("cannot write --loss_csv ", f_.loss_csv));
  if (!append) {
    csv_ << "step,loss,learning_rate,tokens_per_s,elapsed_s" << (eval_ ? ",eval_loss" : "")
         << (bleu_ ? ",bleu" : "") << "\n";
  }
  return absl::OkStatus();
}

int64_t TrainLoop::RequestSteps() const {
  const int64_t step = trainer_.step();
  int64_t n = std::min(f_.log_every, target_ - step);
  for (int64_t k = step + 1; (eval_ || bleu_) && k < step + n; ++k) {
    if (Evaluates(k) || EvaluatesBleu(k)) n = k - step;
  }
  return n;
}

std::vector<std::string> TrainLoop::RequestFetches(int64_t n, bool last) const {
  const int64_t end = trainer_.step() + n;
  std::vector<std::string> fetches = {tg_.loss, tg_.learning_rate};
  if (Evaluates(end) || (eval_ && last)) fetches.push_back(tg_.eval_loss);
  if ((last && f_.sample > 0 && f_.model == "transformer") || EvaluatesBleu(end) ||
      (bleu_ && last)) {
    // The weights the last step starts from: the ones its reported loss is computed with.
    for (const std::string& v : tg_.trainable) fetches.push_back(v);
  }
  return fetches;
}

absl::Status TrainLoop::RecordEvaluations(const TensorMap& out, int64_t step,
                                          std::string* eval_cell, std::string* bleu_cell) {
  const float loss = result_.loss;
  std::vector<std::pair<std::string, double>> metrics;  // for the dashboard's session page
  if (out.count(tg_.eval_loss)) {
    result_.eval_loss = out.at(tg_.eval_loss).f32()[0];
    *eval_cell = absl::StrCat(result_.eval_loss);
    log_.Event(absl::StrFormat("step %d: eval_loss %.4f (held-out part; train loss %.4f)", step,
                               result_.eval_loss, loss));
    metrics.emplace_back("eval_loss", result_.eval_loss);
  }
  if (bleu_ && !tg_.trainable.empty() && out.count(tg_.trainable[0])) {
    TensorMap weights;
    for (const std::string& v : tg_.trainable) weights[v] = out.at(v);
    const absl::Time bleu_start = absl::Now();
    absl::StatusOr<double> score =
        EvalBleu(dev_, *setup_.model.vocab, setup_.model.emodel, weights);
    if (!score.ok()) return WithContext(score.status(), absl::StrCat("dev BLEU at step ", step));
    *bleu_cell = absl::StrFormat("%.2f", *score);
    metrics.emplace_back("dev_bleu", *score);
    log_.Event(absl::StrFormat("step %d: dev BLEU %.2f (greedy, %d lines of %s/dev.%s, %.1f s; "
                               "train loss %.4f)",
                               step, *score, dev_.sources.size(), f_.data, f_.target_lang,
                               absl::ToDoubleSeconds(absl::Now() - bleu_start), loss));
  }
  if (!metrics.empty() && training_run_ != nullptr && training_run_->session() != nullptr) {
    // The dashboard's curves: a refusal costs the run nothing (the log and CSV have the values).
    if (absl::Status s = training_run_->session()->RecordMetrics(step, metrics); !s.ok()) {
      log_.Event(absl::StrCat("step ", step, ": the coordinator did not keep the metrics for its "
                              "dashboard: ", s.message()));
    }
  }
  return absl::OkStatus();
}

void TrainLoop::Progress(const TensorMap& out, int64_t step, bool finished,
                         const std::string& eval_cell, const std::string& bleu_cell) {
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
  const double tps = setup_.model.tokens_per_step * result_.done / std::max(elapsed, 1e-9);
  if (csv_.is_open() && step > written_) {
    csv_ << step << "," << result_.loss << "," << out.at(tg_.learning_rate).f32()[0] << ","
         << absl::StrFormat("%.1f", tps) << "," << absl::StrFormat("%.3f", elapsed)
         << (eval_ ? "," + eval_cell : "") << (bleu_ ? "," + bleu_cell : "") << "\n"
         << std::flush;
    written_ = step;
  }
  const double eta = elapsed / std::max<int64_t>(result_.done, 1) * (target_ - step);
  const int width = 24;
  const int filled = static_cast<int>(width * std::min<int64_t>(step, target_) / target_);
  const std::string line = absl::StrFormat(
      "[%s%s] step %d/%d  loss %.4f  %s/s %.0f  elapsed %s  ETA %s", std::string(filled, '#'),
      std::string(width - filled, '.'), step, target_, result_.loss,
      f_.model != "mlp" ? "tokens" : "examples", tps, Duration(elapsed), Duration(eta));
  if (log_.tty) {
    log_.io.out << "\r" << line << std::flush;
  } else if (step >= next_report_ || finished) {
    log_.io.out << line << "\n" << std::flush;
    while (next_report_ <= step) next_report_ += report_every_;
  }
}

absl::StatusOr<TrainResult> TrainLoop::Run() {
  const SigtermFlag sigterm(!f_.checkpoint_dir.empty());
  start_ = absl::Now();
  written_ = first_step_;
  report_every_ = std::max<int64_t>(1, std::max<int64_t>(1, target_ - first_step_) / 20);
  next_report_ = first_step_ + report_every_;
  while (trainer_.step() < target_) {
    const int64_t n = RequestSteps();
    const bool out_of_time =
        f_.max_seconds > 0 && absl::Now() - start_ > absl::Seconds(f_.max_seconds);
    const bool last = trainer_.step() + n >= target_ || out_of_time;
    const int64_t before = trainer_.step();
    absl::StatusOr<TensorMap> out = trainer_.Steps(n, RequestFetches(n, last));
    if (!out.ok()) {
      return WithContext(out.status(),
                         absl::StrCat("training step ", before + 1, "..", before + n));
    }
    const int64_t step = trainer_.step();
    result_.done += std::max<int64_t>(0, step - before);
    result_.loss = out->at(tg_.loss).f32()[0];
    if (!std::isfinite(result_.loss)) {
      return absl::InternalError(absl::StrCat("the loss is ", result_.loss, " at step ", step,
                                              "; try a smaller --lr or --clip"));
    }
    std::vector<std::pair<int64_t, float>>& logged = result_.logged;
    while (!logged.empty() && logged.back().first >= step) logged.pop_back();  // redone
    logged.emplace_back(step, result_.loss);
    std::string eval_cell, bleu_cell;  // the CSV's: empty where not evaluated
    RETURN_IF_ERROR(RecordEvaluations(*out, step, &eval_cell, &bleu_cell));
    const bool finished = step >= target_ || (out_of_time && step > before);
    Progress(*out, step, finished, eval_cell, bleu_cell);
    if (sigterm.requested()) {
      RETURN_IF_ERROR(WithContext(trainer_.Save(setup_.place.checkpoint_dir, static_cast<int>(f_.keep)),
                                  absl::StrCat("saving ", f_.checkpoint_dir, " on SIGTERM")));
      log_.Event(absl::StrCat("SIGTERM: saved checkpoint '", f_.checkpoint_dir, "' at step ",
                              step, "; run again with --resume to continue"));
      return absl::CancelledError(
          absl::StrCat("stopped by SIGTERM after step ", step, " (checkpoint saved)"));
    }
    if (finished) {
      for (const std::string& v : tg_.trainable) {
        if (out->count(v)) result_.final_vars[v] = out->at(v);
      }
      break;
    }
  }
  if (log_.tty) log_.io.out << "\n";
  result_.elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
  return std::move(result_);
}

// The final loss and its mean over the last 50 logged steps (returned), and the eval loss.
float PrintFinalLoss(const TrainFlags& f, const TrainSetup& setup, const StartedTraining& started,
                     const TrainResult& r, CliIo io) {
  const int64_t final_step = started.trainer->step();
  // One batch's loss is noisy: also report the mean of the losses logged over the last 50 steps
  // (or all of this run's, when it ran fewer).
  const int64_t window =
      std::min<int64_t>(50, std::max<int64_t>(1, final_step - started.first_step));
  double sum = 0;
  int count = 0;
  for (const auto& [step, l] : r.logged) {
    if (step > final_step - window) {
      sum += l;
      ++count;
    }
  }
  const float smoothed = static_cast<float>(sum / std::max(count, 1));
  io.out << absl::StrFormat(
      "final loss %.4f after %d steps in %s (%.0f %s/s); mean of the losses logged over the "
      "last %s %.4f\n",
      r.loss, final_step, Duration(r.elapsed),
      setup.model.tokens_per_step * r.done / std::max(r.elapsed, 1e-9),
      f.model != "mlp" ? "tokens" : "examples",
      window == 1 ? std::string("step") : absl::StrCat(window, " steps"), smoothed);
  if (!setup.model.tg.eval_loss.empty()) {
    io.out << absl::StrFormat("final eval loss %.4f (held-out part)\n", r.eval_loss);
  }
  return smoothed;
}

// --trace's file and the recoveries of a run on a coordinator.
absl::Status ReportTraceAndRecoveries(const TrainFlags& f, const TrainSetup& setup,
                                      const TrainingRun* run, CliIo io) {
  if (!f.trace.empty()) {
    RETURN_IF_ERROR(WriteChromeTrace(f.trace, run->traces()));
    io.out << "wrote the timelines of steps " << setup.trace_steps.first << ".."
           << setup.trace_steps.second << " (" << run->traces().size() << " rank-steps) to "
           << f.trace << "\n";
  }
  if (run != nullptr && !run->recoveries().empty()) {
    const std::vector<Recovery>& recoveries = run->recoveries();
    io.out << recoveries.size() << " recover" << (recoveries.size() == 1 ? "y" : "ies") << ":";
    for (const Recovery& r : recoveries) {
      io.out << absl::StrFormat(" [step %d -> %d on %s in %.1f s]", r.failed_at, r.resumed_at,
                                r.mesh, absl::ToDoubleSeconds(r.took));
    }
    io.out << "\n";
  }
  return absl::OkStatus();
}

// The checkpoints the run ends with (--checkpoint_dir, --save) and, for transformer_encdec, the
// vocabulary in them.
absl::Status SaveTrainCheckpoints(const TrainFlags& f, const TrainSetup& setup,
                                  const StartedTraining& started, CliIo io) {
  const CheckpointPlace& place = setup.place;
  Trainer& trainer = *started.trainer;
  const int keep = static_cast<int>(f.keep);
  if (!f.checkpoint_dir.empty()) {
    if (started.training_run != nullptr) {
      RETURN_IF_ERROR(
          WithContext(started.training_run->Save(), absl::StrCat("saving ", f.checkpoint_dir)));
    } else if (f.save_every == 0 || trainer.step() % f.save_every != 0) {
      RETURN_IF_ERROR(WithContext(trainer.Save(place.checkpoint_dir, keep),
                                  absl::StrCat("saving ", f.checkpoint_dir)));
    }
  }
  if (!f.save.empty()) {
    RETURN_IF_ERROR(WithContext(trainer.Save(place.save, keep), absl::StrCat("saving ", f.save)));
    io.out << "saved a checkpoint of step " << trainer.step() << " in " << f.save << "\n";
  }
  if (f.model != kEncDec) return absl::OkStatus();
  // The checkpoint knows its vocabulary: meshrt translate reads CK/vocab.model.
  for (const std::string& name : {place.save, place.checkpoint_dir}) {
    if (name.empty()) continue;
    if (!f.target.coordinator.empty()) {
      io.out << "copy " << f.vocab_text << " to " << name
             << "/vocab.model under the coordinator's checkpoint root (or pass --vocab to "
                "meshrt translate)\n";
      continue;
    }
    ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(place.root));
    ASSIGN_OR_RETURN(const std::string dir, root.Resolve(name, /*create=*/false));
    RETURN_IF_ERROR(WithContext(CopyVocabInto(dir, f.vocab_text), "saving the vocabulary"));
  }
  return absl::OkStatus();
}

// After the loop: the summary, the trace file, the checkpoints, the sample; closes the run.
absl::Status ReportTraining(const TrainFlags& f, const TrainSetup& setup,
                            const StartedTraining& started, const TrainResult& result, CliIo io,
                            float* final_loss) {
  const float smoothed = PrintFinalLoss(f, setup, started, result, io);
  RETURN_IF_ERROR(ReportTraceAndRecoveries(f, setup, started.training_run, io));
  if (final_loss != nullptr) *final_loss = smoothed;
  RETURN_IF_ERROR(SaveTrainCheckpoints(f, setup, started, io));
  if (f.sample > 0 && f.model == "transformer") {
    RETURN_IF_ERROR(PrintSample(f, setup.model.tmodel, result.final_vars, io));
  }
  if (started.training_run != nullptr) RETURN_IF_ERROR(started.training_run->Close());
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTraining(const TrainFlags& f, CliIo io, float* final_loss) {
  ASSIGN_OR_RETURN(TrainSetup setup, BuildTraining(f, io));
  if (f.steps == 0) return SampleFromCheckpoint(f, setup.model.tmodel, setup.model.tg, setup.place, io);
  const TrainLog log{io, ::isatty(STDOUT_FILENO) && &io.out == &std::cout};
  ASSIGN_OR_RETURN(StartedTraining started, f.target.reference ? StartInProcess(f, setup, log)
                                                               : StartOnCluster(f, setup, log));
  PrintTrainingModel(f, setup.model.tmodel, io);
  RETURN_IF_ERROR(CheckStepsAndTrace(f, started, &setup.trace_steps));
  const TrainOptions train = TrainOptionsFromFlags(f);
  io.out << " with " << train.optimizer << " lr " << train.learning_rate.base << " to step "
         << f.steps << " on " << started.where << "\n";
  TrainLoop loop(f, setup, started, log);
  RETURN_IF_ERROR(loop.Open());
  if (started.first_step >= f.steps) {
    // A resumed run that had already finished (a Job restarted after its last step).
    io.out << "the run is already at step " << started.first_step << " of " << f.steps
           << ": nothing to train\n";
    if (started.training_run != nullptr) RETURN_IF_ERROR(started.training_run->Close());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const TrainResult result, loop.Run());
  return ReportTraining(f, setup, started, result, io, final_loss);
}

absl::Status TrainCommand(const std::vector<std::string>& args, CliIo io) {
  TrainFlags f;
  FlagSet flags(
      "meshrt train (--reference | --local N | --coordinator HOST:PORT) "
      "[--model transformer|transformer_encdec|mlp] [--mesh MESH --layout RULES] [--steps N] "
      "[flags]",
      "Trains a model: the paper's decoder-only Transformer LM on bytes of an English text "
      "(reading its batches on the workers), the paper's encoder-decoder Transformer on sentence "
      "pairs (English to --target_lang, encoded with a SentencePiece --vocab; --eval_bleu_every "
      "logs the dev BLEU), or an MLP regression on synthetic data. Shows a "
      "progress bar (step, loss, tokens/s, ETA), writes the loss curve with --loss_csv, and "
      "prints a greedy sample with --sample N.\n\n"
      "examples:\n"
      "  meshrt train --model transformer --mesh rows:2,cols:2 "
      "--layout batch:rows,heads:cols,d_ff:cols,vocab:cols --local 4 --steps 300 --seed 1 "
      "--loss_csv loss.csv --sample 120\n"
      "  meshrt train --model transformer_encdec --data data/ddtp-fr --vocab fr.model --mesh "
      "rows:2,cols:2 --layout batch:rows,heads:cols,d_ff:cols,vocab:cols --local 4 --steps 3000 "
      "--eval_bleu_every 500 --save ck\n"
      "  meshrt train --model mlp --mesh x:2 --layout batch:x --local 2 --steps 50");
  AddTrainFlags(flags, &f);
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "train"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) return UsageError("train takes no positional arguments");
  if (f.model != kEncDec && !f.vocab_text.empty() && !absl::SimpleAtoi(f.vocab_text, &f.vocab)) {
    return UsageError(absl::StrCat("--vocab needs a size N for --model ", f.model, ", not '",
                                   f.vocab_text, "' (a vocabulary file is for transformer_encdec)"));
  }
  return RunTraining(f, io);
}

}  // namespace meshrt
