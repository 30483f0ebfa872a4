// `meshrt vocab`: trains and inspects a SentencePiece subword vocabulary.
#ifndef MESHRT_TEXT_VOCAB_VOCAB_COMMAND_H_
#define MESHRT_TEXT_VOCAB_VOCAB_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace meshrt {
namespace text {

// Runs `meshrt vocab` with `args` (after the command name); results go to `out`. Errors are
// InvalidArgument (bad flags or input, naming the flag or file) or the I/O error naming the path.
absl::Status VocabCommand(const std::vector<std::string>& args, std::ostream& out);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_VOCAB_COMMAND_H_
