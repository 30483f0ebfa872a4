// `meshrt demo` (what `make demo` runs): the main job — an embedded cluster of a coordinator and 4
// worker processes on loopback trains the paper's decoder-only Transformer LM on a 2x2 mesh with
// data and model parallelism at once (batch:rows, heads:cols, d_ff:cols, vocab:cols), reading its
// batches of English text on the workers, with a progress bar; then prints the final loss and a
// greedy sample. Fails (exit 1) unless the loss falls below the documented target.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "client/cli_train.h"
#include "kernels/blas.h"
#include "util/status_macros.h"

namespace meshrt {

absl::Status DemoCommand(const std::vector<std::string>& args, CliIo io) {
  TrainFlags f;
  f.model = "transformer";
  f.target.mesh = "rows:2,cols:2";
  f.target.layout = "batch:rows,heads:cols,d_ff:cols,vocab:cols";
  f.target.local = 4;
  f.steps = 2500;
  f.max_seconds = 420;
  f.log_every = 10;  // the workers run 10 steps per request; the loss comes back every 10
  f.optimizer = "adam";
  f.lr = 0.003;
  f.schedule = "linear_warmup";
  f.warmup = 50;
  f.sample = 160;
  f.prompt = "The ";
  f.loss_csv = "";
  double target = 2.0;
  FlagSet flags(
      "meshrt demo [--steps N] [--max_seconds S] [--loss_csv FILE]",
      "Starts a local cluster (coordinator + 4 worker processes) and trains the paper's "
      "decoder-only Transformer LM (byte level, on Debian's fortunes text) on a 2x2 mesh, data "
      "parallel over rows and model parallel over cols (heads, d_ff and vocab split), for a few "
      "minutes; prints the final loss and a greedy sample. Fails unless the final loss is below "
      "--target.\n\nBefore training it prints the live dashboard's address, "
      "http://127.0.0.1:PORT/?token=TOKEN: open it in a browser to watch the workers, the "
      "session, its layout and its loss curve while the demo trains (the cluster, and the "
      "address, end with the demo). The token is the demo cluster's operator token, in a 0600 "
      "file in the cluster's private directory.");
  flags.Int("steps", &f.steps, "training steps (default 2500)");
  flags.Int("max_seconds", &f.max_seconds, "stop early after this many seconds (default 420)");
  flags.String("loss_csv", &f.loss_csv, "write the loss curve here");
  flags.Double("target", &target,
               "mean loss (nats per byte) over the last 50 steps the run must reach (default 2.0)");
  flags.Int("sample", &f.sample, "bytes of greedy sample to print (default 160)");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "demo"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) return UsageError("demo takes no arguments");
  io.out << "meshrt demo: the Mesh-TensorFlow paper's Transformer LM, data x model parallel on a "
            "2x2 mesh of worker processes\n";
  io.out << "kernels: OpenBLAS core " << kernels::GetBlas().corename() << " ("
         << kernels::GetBlas().reason() << ")\n";
  io.out << "layout: " << f.target.layout << " on mesh " << f.target.mesh
         << " (batch split over rows; heads, d_ff and vocab over cols)\n";
  float final_loss = 0;
  RETURN_IF_ERROR(RunTraining(f, io, &final_loss));
  if (!(final_loss <= target)) {
    return absl::InternalError(absl::StrFormat(
        "demo: the final loss %.4f did not reach the target %.2f", final_loss, target));
  }
  io.out << absl::StrFormat("demo: PASS - final loss %.4f <= target %.2f\n", final_loss, target);
  return absl::OkStatus();
}

}  // namespace meshrt
