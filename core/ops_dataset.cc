// The dataset op family: text_windows' shape inference, its kernel (the reference kernel is the
// only one: //kernels falls back to it) and registration; the step-input helpers the random ops
// share. Conventions in core/ops_dataset.h.
#include "core/ops_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/file_access.h"
#include "core/kernel_runner.h"
#include "core/program_builder.h"  // LaidOutTensor, for the lowering hooks
#include "core/status_macros.h"

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

absl::StatusOr<TensorType> InferTextWindows(const v1::Op& op, const std::vector<TensorType>& in) {
  RETURN_IF_ERROR(CheckStepType(op, in[0]));
  auto shape = Shape::FromProto(op.shape(), absl::StrCat("op '", op.name(), "' shape"));
  if (!shape.ok()) return OpError(op, shape.status().message());
  if (shape->rank() != 2) {
    return OpError(op, absl::StrCat("shape must be [batch, length], not ", shape->ToString()));
  }
  if (op.dtype() != v1::DT_INVALID && op.dtype() != v1::DT_INT32) {
    return OpError(op, "outputs int32 bytes only");
  }
  const std::string path = StringAttrOr(op, "path", "");
  if (path.empty()) return OpError(op, "needs attrs {path: \"a byte file\"}");
  const int64_t offset = IntAttrOr(op, "offset", 0);
  if (offset != 0 && offset != 1) {
    return OpError(op, absl::StrCat("offset must be 0 (inputs) or 1 (targets), not ", offset));
  }
  return TensorType{*std::move(shape), DType::kInt32};
}

absl::Status TextWindowsKernel(const v1::Op& op, absl::Span<const Tensor* const> in, Tensor* out,
                               const KernelContext& context) {
  if (in.size() != 1) return OpError(op, "takes one input (the step)");
  ASSIGN_OR_RETURN(const int64_t step, StepValue(op, *in[0]));
  if (out->dtype() != DType::kInt32 || out->shape().rank() != 2) {
    return OpError(op, "produces an int32 [batch, length] tensor");
  }
  ASSIGN_OR_RETURN(const std::string path, StringAttr(op, "path"));
  const int64_t offset = IntAttrOr(op, "offset", 0);
  if (offset != 0 && offset != 1) return OpError(op, "offset must be 0 or 1");
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
  RETURN_IF_ERROR(OpenData(op, path, *context.files, &fd, &size));
  const int64_t n = size - (length + 1);
  if (n <= 0) {
    return OpError(op, absl::StrCat("data file '", path, "' has ", size,
                                    " bytes; windows of length ", length,
                                    " need more than length + 1 = ", length + 1));
  }
  std::vector<unsigned char> buf(static_cast<size_t>(cols));
  int32_t* o = out->i32();
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t pos = WindowStart(step, batch, begin[0] + i, length, n) + offset + begin[1];
    RETURN_IF_ERROR(ReadAt(op, path, fd, pos, cols, buf.data()));
    for (int64_t j = 0; j < cols; ++j) o[i * cols + j] = buf[j];
  }
  return absl::OkStatus();
}

OpInfo TextWindows() {
  OpInfo info;
  info.type = "text_windows";
  info.family = OpFamily::kSource;
  info.min_inputs = 1;
  info.max_inputs = 1;
  info.differentiable = false;
  info.summary =
      "int32 bytes of attrs.path: row r of step s starts at ((s*batch + r)*length) mod "
      "(file size - length - 1) + attrs.offset; each processor preads its slice";
  info.collectives = "none (the step is replicated)";
  info.needs_slice_begin = true;
  info.infer = InferTextWindows;
  info.reference_in_context = TextWindowsKernel;
  info.lower = LowerTextWindows;
  return info;
}

const bool kRegistered = RegisterOps({TextWindows()});

}  // namespace
}  // namespace dataset
}  // namespace meshrt
