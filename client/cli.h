// The `meshrt` command-line tool: run a graph (in process, on an embedded local cluster, or on a
// running coordinator) with .npy feeds and fetches, explain a layout, list ops, start a local
// cluster. `meshrt --help` and `meshrt COMMAND --help` describe every command and flag.
//
// Exit codes: 0 success; 1 bad input or a failed run (a graph, file, layout or feed problem, or
// an error from the cluster); 2 a usage error (unknown command or flag, missing argument). On any
// error exactly one line "meshrt: error: <message>" goes to the error stream.
//
// Not thread-safe: `meshrt local` installs SIGINT/SIGTERM handlers while it runs.
#ifndef MESHRT_CLIENT_CLI_H_
#define MESHRT_CLIENT_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace meshrt {

// The binary's entry point. argv[0] is the program name. Also dispatches the hidden daemon
// subcommands `coordinator` and `worker` (what LocalCluster starts by default).
int RunCli(int argc, char** argv);

// The same with the arguments after the program name, writing to `out` and `err` instead of
// stdout and stderr (for tests). The daemons' own logging still goes to the process's streams.
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CLI_H_
