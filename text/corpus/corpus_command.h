// `meshrt data`: builds parallel corpora (translations) reproducibly: fetch, pair, split.
#ifndef MESHRT_TEXT_CORPUS_CORPUS_COMMAND_H_
#define MESHRT_TEXT_CORPUS_CORPUS_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace meshrt {
namespace text {

// Runs `meshrt data` with `args` (after the command name); results go to `out`. Errors are
// InvalidArgument (bad flags or input, naming the flag or file) or the I/O error naming the path.
absl::Status DataCommand(const std::vector<std::string>& args, std::ostream& out);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_CORPUS_COMMAND_H_
