// The bytes of libmeshrt_sentencepiece.so (sentencepiece_shim.cc), compiled into meshrt by the
// genrule :sentencepiece_shim_embed so the binary needs no file beside it (deploy/ copies binaries
// alone); sentencepiece_library.cc hands them to dlopen.
#ifndef MESHRT_TEXT_VOCAB_SENTENCEPIECE_SHIM_EMBED_H_
#define MESHRT_TEXT_VOCAB_SENTENCEPIECE_SHIM_EMBED_H_

#include <cstddef>

namespace meshrt {
namespace text {

extern const unsigned char kSentencePieceShim[];
extern const size_t kSentencePieceShimSize;

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_SENTENCEPIECE_SHIM_EMBED_H_
