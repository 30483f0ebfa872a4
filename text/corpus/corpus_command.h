// `meshrt data`: builds parallel corpora (translations) reproducibly: fetch, pair, split.
#ifndef MESHRT_TEXT_CORPUS_CORPUS_COMMAND_H_
#define MESHRT_TEXT_CORPUS_CORPUS_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace meshrt {
namespace text {

// Runs `meshrt data` with `args` (after the command name); progress and a summary go to `out`.
// `meshrt data translations` writes DIR/{train,dev,test}.{en,LANG} and DIR/SOURCES
// (text/corpus/README.md). Errors: InvalidArgument for bad flags or input (naming the flag, or the
// file and line); NotFound for a language DDTP does not have (listing those it has); Unavailable
// when apt-get fails; the I/O error naming the path otherwise.
absl::Status DataCommand(const std::vector<std::string>& args, std::ostream& out);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_CORPUS_COMMAND_H_
