// RunProcess: runs a program with a fixed argv (no shell, so no argument is ever interpreted) and
// collects its exit status, standard output and standard error. Used to call apt-get and
// apt-helper for the DDTP fetch. Thread-safe in the sense of fork/exec: no shared state, but the
// child inherits the caller's environment and working directory.
#ifndef MESHRT_TEXT_CORPUS_SUBPROCESS_H_
#define MESHRT_TEXT_CORPUS_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace meshrt {
namespace text {

struct ProcessResult {
  int exit_code = 0;        // the program's exit status (0 = success); -N if killed by signal N
  std::string stdout_text;  // everything it wrote to standard output
  std::string stderr_text;  // everything it wrote to standard error
};

// Runs argv[0] (an absolute path, or a name searched in PATH) with arguments argv[1..], stdin
// from /dev/null. Returns its result whatever its exit status. Errors: InvalidArgument for an
// empty argv; NotFound/PermissionDenied/Internal naming the program when it cannot be started;
// DeadlineExceeded naming it when it runs longer than `timeout` (it is then killed).
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         absl::Duration timeout = absl::Minutes(10));

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_SUBPROCESS_H_
