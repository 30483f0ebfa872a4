// The C interface between meshrt and its SentencePiece shim (libmeshrt_sentencepiece.so, built
// from sentencepiece_shim.cc). Only plain C types cross it, and no memory changes owner: the shim
// writes into buffers and callbacks the caller provides.
//
// Why a shim: Debian's libsentencepiece carries its own protobuf-lite 3.14 and exports its
// google::protobuf symbols, which clash with libprotobuf 3.21's in one process. meshrt links
// libprotobuf, so it never links SentencePiece: it loads the shim with dlopen(RTLD_LOCAL |
// RTLD_DEEPBIND) (sentencepiece_library.h), which binds SentencePiece to its own copy.
//
// Every function is thread-safe for distinct models; the const-model functions may run
// concurrently on one model. Training is not reentrant (SentencePiece's log level is global).
#ifndef MESHRT_TEXT_VOCAB_SENTENCEPIECE_ABI_H_
#define MESHRT_TEXT_VOCAB_SENTENCEPIECE_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped on any change to the structs below; the loader refuses a shim of another version.
#define MESHRT_SPM_ABI_VERSION 1

// An error: code is 0 for success, else an absl::StatusCode value (SentencePiece's codes have the
// same numbers); message is NUL-terminated, truncated to fit.
typedef struct MeshrtSpmError {
  int code;
  char message[2048];
} MeshrtSpmError;

// Training sentences, pulled one at a time. `next` returns 1 and sets *line / *size (valid until
// the next call) for a sentence, 0 at the end, -1 on an error (the caller keeps its own message;
// the trainer then fails with `code` Aborted).
typedef struct MeshrtSpmLineSource {
  void* context;
  int (*next)(void* context, const char** line, size_t* size);
} MeshrtSpmLineSource;

// Receives bytes (the trained model, a decoded string).
typedef struct MeshrtSpmSink {
  void* context;
  void (*append)(void* context, const char* data, size_t size);
} MeshrtSpmSink;

typedef struct MeshrtSpmModel MeshrtSpmModel;  // a loaded SentencePieceProcessor

typedef struct MeshrtSpmApi {
  int abi_version;  // MESHRT_SPM_ABI_VERSION

  // Trains with SentencePiece's flags (`keys[i]=values[i]`, e.g. "vocab_size"="8000"; no "input"
  // or "model_prefix": the sentences come from `source`) and sends the serialized ModelProto to
  // `model`. Returns error->code.
  int (*train)(const char* const* keys, const char* const* values, size_t count,
               const MeshrtSpmLineSource* source, const MeshrtSpmSink* model,
               MeshrtSpmError* error);

  // A model from the bytes of a .model file; null with `error` set when they do not parse.
  MeshrtSpmModel* (*load)(const char* bytes, size_t size, MeshrtSpmError* error);
  void (*free_model)(MeshrtSpmModel* model);

  int32_t (*piece_size)(const MeshrtSpmModel* model);
  // -1 when the model has no such symbol.
  int32_t (*special_id)(const MeshrtSpmModel* model, char which /* 'p', 'e', 'u', 'b' */);
  // The piece of `id`, 0 <= id < piece_size, pointing into the model (valid while it lives).
  const char* (*id_to_piece)(const MeshrtSpmModel* model, int32_t id, size_t* size);
  float (*score)(const MeshrtSpmModel* model, int32_t id);
  // The id of `piece`, or the unknown id.
  int32_t (*piece_to_id)(const MeshrtSpmModel* model, const char* piece, size_t size);

  // Encodes `text` into `ids`, up to `capacity` of them; *count is the full number (call again with
  // a larger buffer when it exceeds `capacity`). Returns error->code.
  int (*encode)(const MeshrtSpmModel* model, const char* text, size_t size, int32_t* ids,
                size_t capacity, size_t* count, MeshrtSpmError* error);
  // Decodes `ids` (each 0 <= id < piece_size) into `text`. Returns error->code.
  int (*decode)(const MeshrtSpmModel* model, const int32_t* ids, size_t count,
                const MeshrtSpmSink* text, MeshrtSpmError* error);
} MeshrtSpmApi;

// The shim's one exported symbol.
#define MESHRT_SPM_API_SYMBOL "meshrt_sentencepiece_api"
typedef const MeshrtSpmApi* (*MeshrtSpmApiFunction)(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // MESHRT_TEXT_VOCAB_SENTENCEPIECE_ABI_H_
