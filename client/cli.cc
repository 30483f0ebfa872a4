#include "client/cli.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cli_commands.h"
#include "client/cli_sample.h"
#include "client/cli_train.h"
#include "client/cli_translate.h"
#include "coordinator/coordinator_main.h"
#include "rpc/grpc_util.h"
#include "text/bleu/bleu_command.h"
#include "text/corpus/corpus_command.h"
#include "text/vocab/vocab_command.h"
#include "worker/worker_main.h"

namespace meshrt {
namespace {

constexpr char kUsagePayload[] = "type.meshrt.dev/cli.UsageError";

constexpr char kQuickStart[] =
    "meshrt run examples/graphs/mlp_forward.pbtxt --mesh rows:2,cols:2 "
    "--layout batch:rows,hidden:cols --local 4 --random_feeds 1 --print";

// Calls a daemon entry point with `args` as its argv[1..] (argv[0] = "meshrt NAME").
int RunDaemon(int (*main_fn)(int, char**), const std::string& name,
              const std::vector<std::string>& args) {
  std::vector<std::string> storage = {"meshrt " + name};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  return main_fn(static_cast<int>(storage.size()), argv.data());
}

}  // namespace

absl::Status UsageError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayload, absl::Cord("usage"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayload).has_value();
}

absl::Status WithContext(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(prefix, ": ", status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

std::string TopLevelHelp() {
  return absl::StrCat(
      "meshrt: run Mesh-TensorFlow-style graphs (named dims, layout rules) on a mesh of "
      "workers.\n\n"
      "usage: meshrt COMMAND [ARGS] [FLAGS]      meshrt COMMAND --help for its flags\n\n"
      "commands:\n"
      "  run      run a graph: feeds from .npy files or random, fetches to .npy files or the "
      "terminal;\n"
      "           in process (--reference), on a local cluster (--local N) or a coordinator\n"
      "  explain  show how a graph is laid out and lowered on a mesh: slices, collectives, "
      "bytes\n"
      "  calibrate  measure a cluster's GEMM, memory and collective speeds for the planner\n"
      "  local    start a local cluster (a coordinator and N worker processes) until Ctrl-C\n"
      "  status   what a coordinator knows: workers, ranks, sessions, sessions waiting for "
      "workers;\n"
      "           --session ID: every rank's current step, op and collective, live\n"
      "  sessions list a coordinator's sessions (owner, mesh, state, step) or close one;\n"
      "           a session whose client died expires after --session_lease (coordinator)\n"
      "  health   ask a daemon's gRPC health service, as a Kubernetes probe does\n"
      "  ops      list every op: family, inputs, gradient, collectives its lowering may emit\n"
      "  train    train the Transformer LM, the encoder-decoder (transformer_encdec) or the MLP:\n"
      "           progress bar, loss CSV, greedy sample, dev BLEU\n"
      "  export   write a checkpoint's variables, whole, to a NumPy .npz file (no cluster)\n"
      "  data     build a parallel corpus: `data translations --source ddtp --lang fr --out DIR`\n"
      "  vocab    train (`vocab train`) or inspect a SentencePiece subword vocabulary\n"
      "  translate  translate a text file with a transformer_encdec checkpoint, on the mesh\n"
      "  sample   continue a prompt with a transformer checkpoint, on the mesh: greedy or\n"
      "           sampled (--temperature, --top_k), the same text on every layout\n"
      "  bleu     corpus BLEU of a hypothesis file against references, as sacreBLEU's default\n"
      "  demo     train the Transformer on a local 4-worker cluster (2x2 mesh, data x model "
      "parallel)\n"
      "  help     this help; `meshrt help COMMAND` is `meshrt COMMAND --help`\n"
      "  version  the version (also --version, on every command and daemon)\n\n"
      "quick start:\n  ",
      kQuickStart,
      "\n\nGraphs are protobuf text (.pbtxt, see examples/graphs/ and proto/graph.proto) or "
      "binary (.pb).\n");
}

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CliIo io{out, err};
  if (args.empty()) {
    err << "meshrt: error: no command given; see meshrt --help" << std::endl;
    return 2;
  }
  const std::string& command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "coordinator") return RunDaemon(&CoordinatorMain, command, rest);
  if (command == "worker") return RunDaemon(&WorkerMain, command, rest);

  // `meshrt --version`, `meshrt version`, and --version given to any command.
  const auto flags_end = std::find(args.begin(), args.end(), "--");
  if (command == "version" || std::find(args.begin(), flags_end, "--version") != flags_end) {
    out << VersionText("meshrt");
    return 0;
  }

  absl::Status status;
  if (command == "--help" || command == "-h" || command == "help") {
    if (command == "help" && !rest.empty() && rest[0] != "help") {
      return RunCli({rest[0], "--help"}, out, err);
    }
    out << TopLevelHelp();
    return 0;
  } else if (command == "run") {
    status = RunCommand(rest, io);
  } else if (command == "explain") {
    status = ExplainCommand(rest, io);
  } else if (command == "ops") {
    status = OpsCommand(rest, io);
  } else if (command == "health") {
    status = HealthCommand(rest, io);
  } else if (command == "status") {
    status = StatusCommand(rest, io);
  } else if (command == "sessions") {
    status = SessionsCommand(rest, io);
  } else if (command == "local") {
    status = LocalCommand(rest, io);
  } else if (command == "export") {
    status = ExportCommand(rest, io);
  } else if (command == "train") {
    status = TrainCommand(rest, io);
  } else if (command == "demo") {
    status = DemoCommand(rest, io);
  } else if (command == "calibrate") {
    status = CalibrateCommand(rest, io);
  } else if (command == "data") {
    status = text::DataCommand(rest, out);
  } else if (command == "vocab") {
    status = text::VocabCommand(rest, out);
  } else if (command == "translate") {
    status = TranslateCommand(rest, io);
  } else if (command == "sample") {
    status = SampleCommand(rest, io);
  } else if (command == "bleu") {
    status = text::BleuCommand(rest, out);
  } else {
    status = UsageError(
        absl::StrCat("unknown command '", command,
                     "'; the commands are run, train, explain, calibrate, local, status, sessions, "
                     "health, ops, demo, data, vocab, translate, sample, bleu, help "
                     "(see meshrt --help)"));
  }
  if (status.ok()) return 0;
  // One line whatever the message holds, so scripts can rely on it.
  const std::string message =
      absl::StrReplaceAll(status.message(), {{"\r\n", " "}, {"\n", " "}, {"\r", " "}});
  err << "meshrt: error: " << message << std::endl;
  return IsUsageError(status) ? 2 : 1;
}

int RunCli(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // The daemons get the real argv so their flag parsing sees exactly what was typed.
  if (!args.empty() && args[0] == "coordinator") return CoordinatorMain(argc - 1, argv + 1);
  if (!args.empty() && args[0] == "worker") return WorkerMain(argc - 1, argv + 1);
  return RunCli(args, std::cout, std::cerr);
}

}  // namespace meshrt
