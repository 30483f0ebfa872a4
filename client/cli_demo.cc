// `meshrt demo` (what `make demo` runs): starts an embedded cluster of a coordinator and 4 worker
// processes on loopback, runs the MLP forward graph on a 2x2 mesh under two layouts, prints the
// layout report and every output's error against the single-process reference interpreter.
// Fails (exit 1) unless every output matches within 1e-5 relative.
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_commands.h"
#include "client/client.h"
#include "client/graph_io.h"
#include "client/local_cluster.h"
#include "client/random_feeds.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "kernels/blas.h"

namespace meshrt {
namespace {

constexpr double kTolerance = 1e-5;

v1::Graph MlpGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef w2 = b.Placeholder("w2", Shape({{"hidden", 32}, {"d_out", 8}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}}), "h"), "r");
  TensorRef y = b.Einsum({h, w2}, Shape({{"batch", 8}, {"d_out", 8}}), "y");
  b.MarkOutput(y);
  b.MarkOutput(b.ReduceSum(y, {"d_out"}, "s"));
  return b.proto();
}

}  // namespace

absl::Status DemoCommand(const std::vector<std::string>& args, CliIo io) {
  FlagSet flags("meshrt demo",
                "Starts a local cluster (coordinator + 4 workers), runs the MLP forward graph on a "
                "2x2 mesh under two layouts, and compares every output with the reference "
                "interpreter.");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "demo"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) return UsageError("demo takes no arguments");

  io.out << "meshrt demo: y = relu(x[batch:8,d_in:16] . w1[d_in,hidden:32]) . w2[hidden,d_out:8],"
            " s = sum over d_out of y\n";
  io.out << "kernels: OpenBLAS core " << kernels::GetBlas().corename() << " ("
         << kernels::GetBlas().reason() << ")\n";
  const v1::Graph proto = MlpGraph();
  ASSIGN_OR_RETURN(Graph graph, Graph::Build(proto));
  const TensorMap feeds = RandomFeeds(graph, 42);
  ASSIGN_OR_RETURN(TensorMap expected, Interpret(graph, feeds));

  char log_dir[] = "/tmp/meshrt-demo-XXXXXX";
  if (mkdtemp(log_dir) == nullptr) return absl::InternalError("cannot make a log directory");
  LocalClusterOptions options;
  options.workers = 4;
  options.log_dir = log_dir;
  io.out << "starting a local cluster: 1 coordinator + 4 worker processes (logs in " << log_dir
         << ")\n";
  ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(options));
  ClientOptions client_options;
  client_options.address = cluster->address();
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(client_options));
  io.out << "coordinator at " << cluster->address() << "\n";

  bool all_ok = true;
  for (const char* layout_text : {"batch:rows,hidden:cols", "d_in:rows,hidden:cols"}) {
    ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse("rows:2,cols:2"));
    ASSIGN_OR_RETURN(LayoutRules rules, LayoutRules::Parse(layout_text, mesh));
    io.out << "\n== mesh " << mesh.ToString() << ", layout " << layout_text << " ==\n";
    ASSIGN_OR_RETURN(std::unique_ptr<Session> session, client->CreateSession(proto, mesh, rules));
    io.out << session->explain();
    ASSIGN_OR_RETURN(TensorMap got, session->Run(feeds, {}));
    io.out << "4 worker processes (gRPC + Gloo) vs reference interpreter:\n";
    for (const std::string& name : graph.Outputs()) {
      const double err = MaxRelativeError(got.at(name), expected.at(name));
      all_ok = all_ok && err <= kTolerance;
      io.out << absl::StrFormat("  %-3s max relative error %.2e  %s\n", name, err,
                                err <= kTolerance ? "ok" : "MISMATCH");
    }
    RETURN_IF_ERROR(session->Close());
  }
  if (!all_ok) return absl::InternalError("demo: an output differs from the reference");
  io.out << "\ndemo: PASS - both layouts on 4 worker processes equal the reference interpreter\n";
  return absl::OkStatus();
}

}  // namespace meshrt
