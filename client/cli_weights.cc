// Weights in and out of checkpoints: `meshrt export` (a checkpoint directory's variables, whole,
// to a .npz file, no cluster needed) and what `meshrt train --init FILE.npz` uses to make a .npz
// file's arrays the initial values of a model's variables (client/cli_train.h).
#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli_commands.h"
#include "client/cli_train.h"
#include "client/npy.h"
#include "client/npz.h"
#include "runtime/checkpoint_store.h"
#include "runtime/checkpoint_tensors.h"
#include "util/flags.h"
#include "util/status_macros.h"

namespace meshrt {

absl::StatusOr<TensorMap> InitialWeights(const std::string& npz_path, const Graph& graph,
                                         const std::vector<std::string>& variables) {
  const std::string what = absl::StrCat("--init ", npz_path);
  absl::StatusOr<std::map<std::string, NpyArray>> arrays = ReadNpz(npz_path);
  if (!arrays.ok()) return WithContext(arrays.status(), "--init");
  const std::set<std::string> known(variables.begin(), variables.end());
  TensorMap out;
  for (const auto& [key, array] : *arrays) {
    if (!known.count(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": '", key, "' is not a variable of the model (its variables: ",
          absl::StrJoin(variables, ", "), ")"));
    }
    const TensorType& type = graph.type(key);
    ASSIGN_OR_RETURN(Tensor t,
                     NpyToTensor(array, type.shape, absl::StrCat(what, ": variable '", key, "'")));
    if (t.dtype() != type.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": variable '", key, "' is ",
                                                     DTypeName(type.dtype), ", the array ",
                                                     DTypeName(t.dtype())));
    }
    out.emplace(key, std::move(t));
  }
  return out;
}

absl::Status ExportCommand(const std::vector<std::string>& args, CliIo io) {
  std::string root_dir, variables_text;
  FlagSet flags(
      "meshrt export CHECKPOINT FILE.npz [--checkpoint_root DIR] [--variables a,b,...]",
      "Writes the variables of a checkpoint (the version its CURRENT commits, or an old-format "
      "one) to a NumPy .npz file: one array per variable, keyed by its name (names with '/' "
      "included), at its whole (global) shape, whatever mesh and layout it was saved on; a "
      "partial-sum variable's addends are summed. Every shard's checksum is verified. Reads the "
      "files only: no cluster is needed. numpy.load(FILE) reads the result; `meshrt train "
      "--init FILE` makes such arrays initial values.\n\n"
      "examples:\n"
      "  meshrt export runs/ck weights.npz --checkpoint_root /shared/checkpoints\n"
      "  meshrt export /tmp/ck w.npz --variables w1,w2");
  flags.String("checkpoint_root", &root_dir,
               "the directory CHECKPOINT is named relative to, as a coordinator's "
               "--checkpoint_root (default: CHECKPOINT is a path)");
  flags.String("variables", &variables_text,
               "only these variables, comma-separated (default: every variable: weights, "
               "optimizer slots, step and data counters)");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "export"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (positional.size() != 2) {
    return UsageError("meshrt export takes CHECKPOINT and FILE.npz (see meshrt export --help)");
  }
  const std::string& checkpoint = positional[0];
  const std::string& path = positional[1];
  std::string dir = checkpoint;
  if (!root_dir.empty()) {
    ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(root_dir));
    ASSIGN_OR_RETURN(dir, root.Resolve(checkpoint, /*create=*/false));
  }
  absl::StatusOr<CheckpointTensors> read = ReadCheckpointTensors(dir);
  if (!read.ok()) return WithContext(read.status(), absl::StrCat("reading ", checkpoint));
  std::map<std::string, Tensor> chosen;
  if (variables_text.empty()) {
    chosen = std::move(read->tensors);
  } else {
    const std::vector<std::string> names = absl::StrSplit(variables_text, ',');
    for (const std::string& name : names) {
      auto it = read->tensors.find(name);
      if (it == read->tensors.end()) {
        std::vector<std::string> saved;
        for (const auto& [n, t] : read->tensors) saved.push_back(n);
        return absl::InvalidArgumentError(absl::StrCat(
            "--variables: checkpoint ", checkpoint, " has no variable '", name, "' (it has ",
            absl::StrJoin(saved, ", "), ")"));
      }
      chosen.emplace(name, it->second);
    }
  }
  RETURN_IF_ERROR(WriteNpz(path, chosen));
  io.out << "wrote " << chosen.size() << " arrays of checkpoint " << checkpoint << " (step "
         << read->step << ") to " << path << "\n";
  return absl::OkStatus();
}

}  // namespace meshrt
