// The dataset op family: text_windows' shape inference, its kernel (the reference kernel is the
// only one: //kernels falls back to it) and registration; the step-input helpers the random ops
// share. Conventions in core/ops/ops_dataset.h.
#include "core/ops/ops_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/ir/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/ops/kernel_runner.h"
#include "util/file_access.h"
#include "util/npy_header.h"
#include "util/status_macros.h"

namespace meshrt {
namespace dataset {

absl::Status CheckStepType(const v1::Op& op, const TensorType& step) {
  if (step.shape.rank() != 0) {
    return OpError(op, absl::StrCat("the step must be a scalar (shape []), not ",
                                    step.shape.ToString()));
  }
  if (step.dtype != DType::kFloat32 && step.dtype != DType::kInt32) {
    return OpError(op, absl::StrCat("the step must be float32 or int32, not ",
                                    DTypeName(step.dtype)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> StepValue(const v1::Op& op, const Tensor& step) {
  RETURN_IF_ERROR(CheckStepType(op, TensorType{step.shape(), step.dtype()}));
  if (step.dtype() == DType::kInt32) return static_cast<int64_t>(step.i32()[0]);
  const float v = step.f32()[0];
  // 2^63 is exactly representable; every float below it in magnitude fits int64.
  if (!std::isfinite(v) || v != std::trunc(v) || std::fabs(v) >= 9.2233720368547758e18f) {
    return OpError(op, absl::StrCat("the float32 step must be a whole number, not ", v));
  }
  return static_cast<int64_t>(v);
}

int64_t WindowStart(int64_t step, int64_t batch, int64_t row, int64_t length, int64_t n) {
  const __int128 v = (static_cast<__int128>(step) * batch + row) * length;
  __int128 m = v % n;
  if (m < 0) m += n;
  return static_cast<int64_t>(m);
}

namespace {

// An open data file: its descriptor and the identity it had when opened.
struct OpenFile {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

std::mutex& CacheMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
// path -> open file. Never shrinks; a descriptor replaced by a reopen stays open, since another
// thread may still be reading through it.
std::map<std::string, OpenFile>& Cache() {
  static auto* cache = new std::map<std::string, OpenFile>;
  return *cache;
}

absl::Status FileError(const v1::Op& op, const std::string& path, int err) {
  const std::string msg =
      absl::StrCat(OpLabel(op), ": cannot read data file '", path, "': ", std::strerror(err));
  return err == ENOENT || err == ENOTDIR ? absl::NotFoundError(msg)
                                         : absl::InvalidArgumentError(msg);
}

// The cached descriptor of `path` (opened or reopened as needed) and the file's size. `files`
// decides whether the path may be read, on the path as it resolves now (every step): a path that
// was allowed and now leads elsewhere (a symlink changed) is refused like any other.
absl::Status OpenData(const v1::Op& op, const std::string& path, const FileAccessPolicy& files,
                      int* fd, int64_t* size) {
  absl::StatusOr<std::string> resolved = files.Resolve(path, "data file");
  if (!resolved.ok()) return resolved.status();  // the runner names the op
  struct stat st;
  if (::stat(resolved->c_str(), &st) != 0) return FileError(op, path, errno);
  if (!S_ISREG(st.st_mode)) {
    return OpError(op, absl::StrCat("data file '", path, "' is not a regular file"));
  }
  std::lock_guard<std::mutex> lock(CacheMutex());
  auto it = Cache().find(*resolved);
  if (it == Cache().end() || it->second.dev != st.st_dev || it->second.ino != st.st_ino) {
    absl::StatusOr<FileAccessPolicy::OpenedFile> opened =
        files.OpenRegularFile(*resolved, "data file");
    if (!opened.ok()) return opened.status();
    st = opened->st;
    it = Cache()
             .insert_or_assign(*resolved, OpenFile{opened->fd, st.st_dev, st.st_ino})
             .first;
  }
  *fd = it->second.fd;
  *size = static_cast<int64_t>(st.st_size);
  return absl::OkStatus();
}

// Reads exactly `count` bytes at `pos`.
absl::Status ReadAt(const v1::Op& op, const std::string& path, int fd, int64_t pos, int64_t count,
                    unsigned char* buf) {
  while (count > 0) {
    const ssize_t got = ::pread(fd, buf, static_cast<size_t>(count), static_cast<off_t>(pos));
    if (got < 0) {
      if (errno == EINTR) continue;
      return FileError(op, path, errno);
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(OpLabel(op), ": data file '", path,
                                              "' ended at byte ", pos, " (shrunk while read?)"));
    }
    buf += got;
    pos += got;
    count -= got;
  }
  return absl::OkStatus();
}

// text_windows' attrs (core/ops/ops_dataset.h), checked: the same checks at shape inference and in
// the kernel (a program may come from elsewhere than a built graph).
struct WindowsAttrs {
  std::string path;
  int64_t offset = 0;
  std::string format;  // bytes | npy | uint16
  int64_t vocab = 256;
  std::string split;  // all | train | eval
  float eval_fraction = 0;
};

absl::StatusOr<WindowsAttrs> ParseWindowsAttrs(const v1::Op& op) {
  WindowsAttrs a;
  a.path = StringAttrOr(op, "path", "");
  if (a.path.empty()) return OpError(op, "needs attrs {path: \"a data file\"}");
  a.offset = IntAttrOr(op, "offset", 0);
  if (a.offset != 0 && a.offset != 1) {
    return OpError(op, absl::StrCat("offset must be 0 (inputs) or 1 (targets), not ", a.offset));
  }
  a.format = StringAttrOr(op, "format", "bytes");
  if (a.format != "bytes" && a.format != "npy" && a.format != "uint16") {
    return OpError(op, absl::StrCat("attr format must be bytes, npy or uint16, not '", a.format,
                                    "'"));
  }
  if (a.format != "bytes" && !op.attrs().count("vocab")) {
    return OpError(op, absl::StrCat("format ", a.format,
                                    " needs attrs {vocab: i} (token ids are in [0, vocab))"));
  }
  a.vocab = IntAttrOr(op, "vocab", 256);
  if (a.vocab < 1) return OpError(op, absl::StrCat("attr vocab must be >= 1, not ", a.vocab));
  a.split = StringAttrOr(op, "split", "all");
  if (a.split != "all" && a.split != "train" && a.split != "eval") {
    return OpError(op, absl::StrCat("attr split must be all, train or eval, not '", a.split, "'"));
  }
  a.eval_fraction = FloatAttrOr(op, "eval_fraction", 0);
  if (a.split == "all" && a.eval_fraction != 0) {
    return OpError(op, "attr eval_fraction needs split train or eval (split all reads every token)");
  }
  if (a.split != "all" && !(a.eval_fraction > 0 && a.eval_fraction < 1)) {
    return OpError(op, absl::StrCat("attr eval_fraction must be in (0, 1) with split ", a.split,
                                    ", not ", a.eval_fraction));
  }
  return a;
}

// Where the token ids of a data file are: `tokens` elements of `element_size` bytes (1: uint8,
// 2: little-endian uint16, 4: little-endian int32) from byte `data_offset`.
struct TokenFile {
  int64_t data_offset = 0;
  int element_size = 1;
  int64_t tokens = 0;
};

absl::StatusOr<TokenFile> LocateTokens(const v1::Op& op, const WindowsAttrs& a, int fd,
                                       int64_t size) {
  if (a.format == "bytes") return TokenFile{0, 1, size};
  if (a.format == "uint16") {
    if (size % 2 != 0) {
      return OpError(op, absl::StrCat("data file '", a.path, "' has an odd number of bytes (",
                                      size, "): not a file of uint16 token ids"));
    }
    return TokenFile{0, 2, size / 2};
  }
  // npy: the preamble says how long the header is; read exactly that much.
  const std::string source = absl::StrCat(OpLabel(op), ": data file '", a.path, "'");
  std::string head(static_cast<size_t>(std::min<int64_t>(size, kNpyPreambleSize)), '\0');
  RETURN_IF_ERROR(ReadAt(op, a.path, fd, 0, head.size(),
                         reinterpret_cast<unsigned char*>(head.data())));
  ASSIGN_OR_RETURN(const size_t data_offset, NpyDataOffset(head, source));
  head.resize(static_cast<size_t>(std::min<int64_t>(size, static_cast<int64_t>(data_offset))));
  RETURN_IF_ERROR(ReadAt(op, a.path, fd, 0, head.size(),
                         reinterpret_cast<unsigned char*>(head.data())));
  ASSIGN_OR_RETURN(const NpyHeader header, ParseNpyHeader(head, source));
  TokenFile t;
  t.data_offset = static_cast<int64_t>(header.data_offset);
  if (header.descr == "<i4") {
    t.element_size = 4;
  } else if (header.descr == "<u2") {
    t.element_size = 2;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": token ids must be int32 ('<i4') or uint16 ('<u2'), not '", header.descr, "'"));
  }
  if (header.fortran_order || header.dims.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": token ids must be a 1-D C-order array, not shape ",
        NpyShapeString(header.dims), header.fortran_order ? " in Fortran order" : ""));
  }
  t.tokens = header.dims[0];
  const int64_t data = size - t.data_offset;
  if (t.tokens > data / t.element_size || data != t.tokens * t.element_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": shape ", NpyShapeString(header.dims), " of '", header.descr, "' needs ",
        t.tokens, " x ", t.element_size, " data bytes, the file has ", data));
  }
  return t;
}

int64_t DecodeToken(const unsigned char* p, int element_size) {
  switch (element_size) {
    case 1:
      return p[0];
    case 2:
      return static_cast<int64_t>(p[0] | (p[1] << 8));
    default: {
      const uint32_t u = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
      return static_cast<int32_t>(u);
    }
  }
}

absl::StatusOr<TensorType> InferTextWindows(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(CheckStepType(op, in[0]));
  auto shape = Shape::FromProto(op.shape(), absl::StrCat("op '", op.name(), "' shape"));
  if (!shape.ok()) return OpError(op, shape.status().message());
  if (shape->rank() != 2) {
    return OpError(op, absl::StrCat("shape must be [batch, length], not ", shape->ToString()));
  }
  if (op.dtype() != v1::DT_INVALID && op.dtype() != v1::DT_INT32) {
    return OpError(op, "outputs int32 token ids only");
  }
  RETURN_IF_ERROR(ParseWindowsAttrs(op).status());
  return TensorType{*std::move(shape), DType::kInt32};
}

absl::Status TextWindowsKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out,
                               const KernelContext& context) {
  if (in.size() != 1) return OpError(op, "takes one input (the step)");
  ASSIGN_OR_RETURN(const int64_t step, StepValue(op, *in[0]));
  if (out->dtype() != DType::kInt32 || out->shape().rank() != 2) {
    return OpError(op, "produces an int32 [batch, length] tensor");
  }
  ASSIGN_OR_RETURN(const WindowsAttrs a, ParseWindowsAttrs(op));
  const int64_t rows = out->shape().dim(0).size, cols = out->shape().dim(1).size;
  std::vector<int64_t> begin = {0, 0}, global = {rows, cols};
  if (op.attrs().count("_slice_begin")) {
    ASSIGN_OR_RETURN(begin, IntListAttr(op, "_slice_begin"));
    ASSIGN_OR_RETURN(global, IntListAttr(op, "_global_sizes"));
  }
  if (begin.size() != 2 || global.size() != 2 || begin[0] < 0 || begin[1] < 0 ||
      begin[0] + rows > global[0] || begin[1] + cols > global[1]) {
    return OpError(op, "_slice_begin/_global_sizes do not place the slice inside the tensor");
  }
  const int64_t batch = global[0], length = global[1];
  int fd = -1;
  int64_t size = 0;
  RETURN_IF_ERROR(OpenData(op, a.path, *context.files, &fd, &size));
  ASSIGN_OR_RETURN(const TokenFile file, LocateTokens(op, a, fd, size));
  // The eval part is the last round(eval_fraction * T) tokens, the train part the rest.
  const int64_t eval_tokens =
      a.split == "all" ? 0
                       : std::llround(static_cast<double>(a.eval_fraction) *
                                      static_cast<double>(file.tokens));
  const int64_t part_begin = a.split == "eval" ? file.tokens - eval_tokens : 0;
  const int64_t part_size = a.split == "all"     ? file.tokens
                            : a.split == "train" ? file.tokens - eval_tokens
                                                 : eval_tokens;
  const int64_t n = part_size - (length + 1);
  if (n <= 0) {
    const std::string has =
        a.split != "all"       ? absl::StrCat(file.tokens, " tokens, of which its ", a.split,
                                              " part (eval_fraction ", a.eval_fraction, ") has ",
                                              part_size)
        : a.format == "bytes" ? absl::StrCat(size, " bytes")
                              : absl::StrCat(file.tokens, " tokens");
    return OpError(op, absl::StrCat("data file '", a.path, "' has ", has,
                                    "; windows of length ", length,
                                    " need more than length + 1 = ", length + 1));
  }
  std::vector<unsigned char> buf(static_cast<size_t>(cols * file.element_size));
  int32_t* o = out->i32();
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t token =
        part_begin + WindowStart(step, batch, begin[0] + i, length, n) + a.offset + begin[1];
    RETURN_IF_ERROR(ReadAt(op, a.path, fd, file.data_offset + token * file.element_size,
                           cols * file.element_size, buf.data()));
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t id = DecodeToken(&buf[j * file.element_size], file.element_size);
      if (id < 0 || id >= a.vocab) {
        return OpError(op, absl::StrCat("data file '", a.path, "' holds token id ", id,
                                        " at token position ", token + j, ", outside [0, vocab ",
                                        a.vocab, ")"));
      }
      o[i * cols + j] = static_cast<int32_t>(id);
    }
  }
  return absl::OkStatus();
}

// ---- token_rows ------------------------------------------------------------------------------

// token_rows' attrs, checked (at shape inference and in the kernel).
struct RowsAttrs {
  std::string path;
  int64_t vocab = 0;
};

absl::StatusOr<RowsAttrs> ParseRowsAttrs(const v1::Op& op) {
  RowsAttrs a;
  a.path = StringAttrOr(op, "path", "");
  if (a.path.empty()) return OpError(op, "needs attrs {path: \"a 2-D int32 .npy file\"}");
  if (!op.attrs().count("vocab")) {
    return OpError(op, "needs attrs {vocab: i} (token ids are in [0, vocab))");
  }
  a.vocab = IntAttrOr(op, "vocab", 0);
  if (a.vocab < 1) return OpError(op, absl::StrCat("attr vocab must be >= 1, not ", a.vocab));
  return a;
}

// Where the rows of a token_rows file are: `rows` x `cols` little-endian int32 from `data_offset`.
struct RowsFile {
  int64_t data_offset = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

absl::StatusOr<RowsFile> LocateRows(const v1::Op& op, const RowsAttrs& a, int fd, int64_t size) {
  const std::string source = absl::StrCat(OpLabel(op), ": data file '", a.path, "'");
  std::string head(static_cast<size_t>(std::min<int64_t>(size, kNpyPreambleSize)), '\0');
  RETURN_IF_ERROR(ReadAt(op, a.path, fd, 0, head.size(),
                         reinterpret_cast<unsigned char*>(head.data())));
  ASSIGN_OR_RETURN(const size_t data_offset, NpyDataOffset(head, source));
  head.resize(static_cast<size_t>(std::min<int64_t>(size, static_cast<int64_t>(data_offset))));
  RETURN_IF_ERROR(ReadAt(op, a.path, fd, 0, head.size(),
                         reinterpret_cast<unsigned char*>(head.data())));
  ASSIGN_OR_RETURN(const NpyHeader header, ParseNpyHeader(head, source));
  if (header.descr != "<i4" || header.fortran_order || header.dims.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": token rows must be a 2-D C-order int32 ('<i4') array, not '", header.descr,
        "' of shape ", NpyShapeString(header.dims), header.fortran_order ? " in Fortran order" : ""));
  }
  RowsFile f{static_cast<int64_t>(header.data_offset), header.dims[0], header.dims[1]};
  const int64_t data = size - f.data_offset;
  if (f.rows < 1 || f.cols < 1 || f.rows > data / 4 / f.cols || data != f.rows * f.cols * 4) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": shape ",
                                                   NpyShapeString(header.dims),
                                                   " needs that many int32 rows; the file has ",
                                                   data, " data bytes"));
  }
  return f;
}

absl::StatusOr<TensorType> InferTokenRows(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(CheckStepType(op, in[0]));
  auto shape = Shape::FromProto(op.shape(), absl::StrCat("op '", op.name(), "' shape"));
  if (!shape.ok()) return OpError(op, shape.status().message());
  if (shape->rank() != 2) {
    return OpError(op, absl::StrCat("shape must be [batch, length], not ", shape->ToString()));
  }
  if (op.dtype() != v1::DT_INVALID && op.dtype() != v1::DT_INT32) {
    return OpError(op, "outputs int32 token ids only");
  }
  RETURN_IF_ERROR(ParseRowsAttrs(op).status());
  return TensorType{*std::move(shape), DType::kInt32};
}

absl::Status TokenRowsKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out,
                             const KernelContext& context) {
  if (in.size() != 1) return OpError(op, "takes one input (the step)");
  ASSIGN_OR_RETURN(const int64_t step, StepValue(op, *in[0]));
  if (out->dtype() != DType::kInt32 || out->shape().rank() != 2) {
    return OpError(op, "produces an int32 [batch, length] tensor");
  }
  ASSIGN_OR_RETURN(const RowsAttrs a, ParseRowsAttrs(op));
  const int64_t rows = out->shape().dim(0).size, cols = out->shape().dim(1).size;
  std::vector<int64_t> begin = {0, 0}, global = {rows, cols};
  if (op.attrs().count("_slice_begin")) {
    ASSIGN_OR_RETURN(begin, IntListAttr(op, "_slice_begin"));
    ASSIGN_OR_RETURN(global, IntListAttr(op, "_global_sizes"));
  }
  if (begin.size() != 2 || global.size() != 2 || begin[0] < 0 || begin[1] < 0 ||
      begin[0] + rows > global[0] || begin[1] + cols > global[1]) {
    return OpError(op, "_slice_begin/_global_sizes do not place the slice inside the tensor");
  }
  int fd = -1;
  int64_t size = 0;
  RETURN_IF_ERROR(OpenData(op, a.path, *context.files, &fd, &size));
  ASSIGN_OR_RETURN(const RowsFile file, LocateRows(op, a, fd, size));
  if (file.cols != global[1]) {
    return OpError(op, absl::StrCat("data file '", a.path, "' holds rows of ", file.cols,
                                    " tokens; the op's length is ", global[1]));
  }
  std::vector<unsigned char> buf(static_cast<size_t>(cols * 4));
  int32_t* o = out->i32();
  for (int64_t i = 0; i < rows; ++i) {
    // Global row r of step s is file row (s * batch + r) mod rows: epochs in file order.
    const int64_t row = WindowStart(step, global[0], begin[0] + i, 1, file.rows);
    const int64_t pos = file.data_offset + (row * file.cols + begin[1]) * 4;
    RETURN_IF_ERROR(ReadAt(op, a.path, fd, pos, cols * 4, buf.data()));
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t id = DecodeToken(&buf[j * 4], 4);
      if (id < 0 || id >= a.vocab) {
        return OpError(op, absl::StrCat("data file '", a.path, "' holds token id ", id,
                                        " at row ", row, " column ", begin[1] + j,
                                        ", outside [0, vocab ", a.vocab, ")"));
      }
      o[i * cols + j] = static_cast<int32_t>(id);
    }
  }
  return absl::OkStatus();
}

OpInfo TokenRows() {
  OpInfo info;
  info.type = "token_rows";
  info.family = OpFamily::kSource;
  info.min_inputs = 1;
  info.max_inputs = 1;
  info.differentiable = false;
  info.summary =
      "int32 token ids: rows of the 2-D int32 .npy attrs.path (one padded sentence per row); row r "
      "of step s is file row (s*batch + r) mod rows; each processor preads its slice";
  info.collectives = "none (the step is replicated)";
  info.needs_slice_begin = true;
  info.infer = InferTokenRows;
  info.reference_in_context = TokenRowsKernel;
  info.lower = LowerTextWindows;
  return info;
}

OpInfo TextWindows() {
  OpInfo info;
  info.type = "text_windows";
  info.family = OpFamily::kSource;
  info.min_inputs = 1;
  info.max_inputs = 1;
  info.differentiable = false;
  info.summary =
      "int32 token ids of attrs.path (bytes, .npy int32/uint16 or raw uint16; optionally its "
      "train or eval part): row r of step s starts at ((s*batch + r)*length) mod "
      "(part size - length - 1) + attrs.offset; each processor preads its slice";
  info.collectives = "none (the step is replicated)";
  info.needs_slice_begin = true;
  info.infer = InferTextWindows;
  info.reference_in_context = TextWindowsKernel;
  info.lower = LowerTextWindows;
  return info;
}

const bool kRegistered = RegisterOps({TextWindows(), TokenRows()});

}  // namespace
}  // namespace dataset
}  // namespace meshrt
