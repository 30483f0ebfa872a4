// `meshrt vocab`: trains, inspects and applies the SentencePiece subword vocabulary (vocab.h):
// `meshrt vocab train|inspect|encode ...`, usage in vocab_command.cc and README.md.
#ifndef MESHRT_TEXT_VOCAB_VOCAB_COMMAND_H_
#define MESHRT_TEXT_VOCAB_VOCAB_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace meshrt {
namespace text {

// Runs `meshrt vocab` with `args` (after the command name); results go to `out`. Errors are
// InvalidArgument (bad flags or input, naming the flag or file; an unknown subcommand, listing
// train, inspect, encode), the I/O error naming the path, or FailedPrecondition when SentencePiece
// is not installed.
absl::Status VocabCommand(const std::vector<std::string>& args, std::ostream& out);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_VOCAB_COMMAND_H_
