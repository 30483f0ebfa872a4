// `meshrt bleu`: corpus BLEU of a hypothesis file against reference files, as sacreBLEU's default.
#ifndef MESHRT_TEXT_BLEU_BLEU_COMMAND_H_
#define MESHRT_TEXT_BLEU_BLEU_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace meshrt {
namespace text {

// Runs `meshrt bleu` with `args` (after the command name); results go to `out`. Errors are
// InvalidArgument (bad flags or input, naming the flag or file) or the I/O error naming the path.
absl::Status BleuCommand(const std::vector<std::string>& args, std::ostream& out);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_BLEU_BLEU_COMMAND_H_
