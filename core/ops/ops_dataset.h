// Internal to //core: the dataset op family (ops_dataset.cc, lower_dataset.cc) — worker-side input.
// Training steps read their data on the workers: every processor reads only the bytes of its own
// slice of the batch from a local file, so the coordinator is never in the per-step data path.
//
//   text_windows(step)  step: scalar (shape []) float32 or int32, the training step s;
//                       shape [batch, length] (exactly two dims, any names); dtype int32 (or unset);
//                       attrs {path: s (the data file), offset: i = 0 (0 = inputs, 1 = targets),
//                              format: s = "bytes", vocab: i, split: s = "all",
//                              eval_fraction: f (with split train or eval)}.
//   format              the file's T tokens:
//                         "bytes"   every byte is a token (0..255), T = file size (the default:
//                                   a text file);
//                         "npy"     a 1-D C-order little-endian .npy of int32 ('<i4') or uint16
//                                   ('<u2'), versions 1.0/2.0 (util/npy_header.h), T = its
//                                   shape; the data starts after the header;
//                         "uint16"  raw little-endian uint16 (nanoGPT's train.bin),
//                                   T = file size / 2 (an odd size is refused).
//   vocab               every token read must be in [0, vocab) (>= 1; required for npy and
//                       uint16, default 256 for bytes).
//   split               "all" reads every token; with eval_fraction f in (0, 1), the last
//                       E = round(f * T) tokens are the eval part and the first T - E the train
//                       part, and "train" / "eval" read only within that part (disjoint, and
//                       together every token).
//                       With P the chosen part's size and n = P - (length + 1) (must be > 0),
//                       global row r of step s is the `length` tokens starting at part token
//                           ((s * batch + r) * length) mod n + offset
//                       (mod is non-negative; computed without overflow). offset 0 gives a language
//                       model's inputs and offset 1 its next-token targets: the first and last
//                       `length` tokens of the window of length + 1 tokens at that start — with
//                       bytes and split all exactly ../shared/peers/transformer_bench.py's
//                       make_batches (starts = (arange(nsteps * B) * L) % n).
//
//   token_rows(step)    step as text_windows'; shape [batch, length] (two dims, any names); dtype
//                       int32 (or unset); attrs {path: s (a 2-D C-order int32 .npy [N, length],
//                       e.g. one padded sentence per row), vocab: i (ids in [0, vocab))}.
//                       Global row r of step s is file row (s * batch + r) mod N: the file's rows
//                       in order, epoch after epoch (shuffle when writing the file). The file's
//                       row length must equal the op's length. Same reading, access rules and
//                       errors as text_windows, and the same lowering.
//
// The step input (also the optional input of random_uniform / random_normal, core/ops/ops_random.h) is
// a scalar float32 or int32; a float32 step must be a finite whole number (float32 counts exactly
// up to 2^24 steps; use int32 beyond). It is the graph's `global_step` or any scalar tensor.
//
// Reading: the kernel reads only its slice's rows and columns (`_slice_begin`/`_global_sizes`, set
// by the executor since needs_slice_begin; absent = the whole tensor, as in the interpreter), one
// pread per row (at the data offset + token x element size; an npy file's header is read too, a
// few hundred bytes), on a file descriptor cached per path in the process (thread-safe; pread
// shares the descriptor). The path is stat()ed every step: a file replaced on disk (new inode) is
// reopened. Nothing is loaded whole; the page cache keeps a hot file in memory.
//
// What may be read: only what the caller's KernelContext allows (util/file_access.h). A worker
// daemon reads only under its --data_dir directories (none given: no file at all); the path is
// resolved (realpath) every step and a path leading out of them ("..", a symlink, an absolute path
// elsewhere) is PermissionDenied naming the path and --data_dir. The reference interpreter and the
// simulated mesh allow every file.
//
// Errors, each naming the op and the path: a missing file is NotFound; an unreadable file, a
// directory, a file too short for one window (n <= 0, naming the part), a bad npy header (magic,
// version, dict, a dtype other than int32/uint16, not 1-D, data shorter or longer than its shape),
// an odd-sized uint16 file, and a token id outside [0, vocab) (naming its token position and
// value) are InvalidArgument. They come from the kernel, on the processor that reads: shape
// inference (Graph::Build) runs on the coordinator, which need not hold the workers' data files,
// so it checks only the attributes (unknown format or split, vocab < 1 or missing for npy/uint16,
// eval_fraction outside (0, 1) with a split or set with split all: InvalidArgument naming the op
// and the attr).
//
// Lowering: one local op on every processor in the output's rule layout (like the random ops); the
// step is resharded to the replicated layout (resolving a partial sum if it is one). No
// communication.
//
// Thread-safe (the descriptor cache is guarded by a mutex).
#ifndef MESHRT_CORE_OPS_OPS_DATASET_H_
#define MESHRT_CORE_OPS_OPS_DATASET_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/program_builder.h"
#include "core/ir/tensor.h"
#include "core/ops/ops.h"
#include "proto/graph.pb.h"

namespace meshrt {

struct LoweringContext;

namespace dataset {

// OK when `step` is a scalar float32 or int32; else InvalidArgument naming the op.
absl::Status CheckStepType(const v1::Op& op, const TensorType& step);
// The step's value: an int32 as is, a float32 when it is a finite whole number in int64's range;
// else InvalidArgument naming the op.
absl::StatusOr<int64_t> StepValue(const v1::Op& op, const Tensor& step);

// Start of global row `row` of step `step` in a part of P tokens with n = P - (length + 1) > 0:
// ((step * batch + row) * length) mod n, in [0, n) (relative to the part's first token).
int64_t WindowStart(int64_t step, int64_t batch, int64_t row, int64_t length, int64_t n);

// text_windows' lowering (lower_dataset.cc).
absl::StatusOr<LaidOutTensor> LowerTextWindows(LoweringContext& ctx, const v1::Op& op,
                                               const std::vector<LaidOutTensor>& inputs);

}  // namespace dataset
}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_DATASET_H_
