#include "runtime/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/slicing.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "util/file.h"
#include "util/status_macros.h"
#include "xxhash.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "shard files hold the slices' bytes as they are in memory: little-endian only");

namespace meshrt {
namespace {

std::string JoinPath(const std::string& dir, const std::string& file) {
  if (!dir.empty() && dir.back() == '/') return dir + file;
  return absl::StrCat(dir, "/", file);
}

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::ErrnoToStatus(err, what);
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

absl::Status CheckDirectory(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    return ErrnoError(err, absl::StrCat("checkpoint directory ", dir,
                                        " is not accessible here (it must be on a filesystem "
                                        "shared by the coordinator and every worker)"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint path ", dir, " is not a directory"));
  }
  return absl::OkStatus();
}

// The processor at `coord` writes the slice when it sits at 0 on every mesh axis the layout does
// not split over and the variable is no partial sum over (the other copies of its slice are
// replicas; along a partial axis every processor holds an addend of its own).
bool OwnsSlice(const TensorLayout& layout, const std::vector<int>& partial,
               const std::vector<int64_t>& coord) {
  for (size_t a = 0; a < coord.size(); ++a) {
    const int axis = static_cast<int>(a);
    if (coord[a] != 0 &&
        std::find(layout.mesh_axis.begin(), layout.mesh_axis.end(), axis) ==
            layout.mesh_axis.end() &&
        std::find(partial.begin(), partial.end(), axis) == partial.end()) {
      return false;
    }
  }
  return true;
}

// Copies the intersection of box `src` (sizes src_sizes, starting at global src_begin) and box
// `dst` from src to dst; returns the number of elements copied.
int64_t CopyOverlap(const char* src, const std::vector<int64_t>& src_begin,
                    const std::vector<int64_t>& src_sizes, char* dst,
                    const std::vector<int64_t>& dst_begin, const std::vector<int64_t>& dst_sizes,
                    int64_t elem) {
  const int rank = static_cast<int>(src_sizes.size());
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return 1;
  }
  std::vector<int64_t> lo(rank), hi(rank);
  for (int d = 0; d < rank; ++d) {
    lo[d] = std::max(src_begin[d], dst_begin[d]);
    hi[d] = std::min(src_begin[d] + src_sizes[d], dst_begin[d] + dst_sizes[d]);
    if (lo[d] >= hi[d]) return 0;
  }
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) {
    src_stride[d] = src_stride[d + 1] * src_sizes[d + 1];
    dst_stride[d] = dst_stride[d + 1] * dst_sizes[d + 1];
  }
  const int64_t run = hi[rank - 1] - lo[rank - 1];
  std::vector<int64_t> idx(lo);  // global index of the current run's first element
  int64_t copied = 0;
  while (true) {
    int64_t so = 0, doff = 0;
    for (int d = 0; d < rank; ++d) {
      so += (idx[d] - src_begin[d]) * src_stride[d];
      doff += (idx[d] - dst_begin[d]) * dst_stride[d];
    }
    std::memcpy(dst + doff * elem, src + so * elem, run * elem);
    copied += run;
    int d = rank - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
    }
    if (d < 0) break;
  }
  return copied;
}

bool BoxesOverlap(const v1::CheckpointShard& a, const v1::CheckpointShard& b) {
  for (int d = 0; d < a.begin_size(); ++d) {
    if (std::max(a.begin(d), b.begin(d)) >=
        std::min(a.begin(d) + a.slice_shape(d), b.begin(d) + b.slice_shape(d))) {
      return false;
    }
  }
  return true;
}

std::string BeginString(const v1::CheckpointShard& s) {
  return absl::StrCat("[", absl::StrJoin(s.begin(), ","), "]");
}

// The manifest's own consistency: known format, valid variables, shards inside their variables
// tiling each exactly once, with sizes that match and plain relative file names.
absl::Status CheckConsistent(const v1::CheckpointManifest& m) {
  if (m.format_version() < kOldestCheckpointFormatVersion ||
      m.format_version() > kCheckpointFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint format version ", m.format_version(), " is not supported (this build reads "
        "versions ", kOldestCheckpointFormatVersion, " to ", kCheckpointFormatVersion, ")"));
  }
  std::map<std::string, std::pair<Shape, DType>> vars;
  std::map<std::string, int> addends;
  for (const v1::CheckpointVariable& v : m.variables()) {
    ASSIGN_OR_RETURN(Shape shape, Shape::FromProto(v.shape(), absl::StrCat("variable '", v.name(), "'")));
    ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(v.dtype()));
    if (v.name().empty() || !vars.emplace(v.name(), std::make_pair(shape, dtype)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", v.name(), "' is listed twice or has no name"));
    }
    if (v.addends() < 0 || v.addends() > kMaxCheckpointAddends ||
        (v.addends() > 1 && m.format_version() < 3)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", v.name(), "' has ", v.addends(), " addends (at most ",
          kMaxCheckpointAddends, ", and more than 1 only from format 3 on)"));
    }
    addends[v.name()] = std::max(1, v.addends());
  }
  // By variable and addend: the shards of each addend tile the variable.
  std::map<std::pair<std::string, int>, std::vector<const v1::CheckpointShard*>> by_var;
  std::set<std::string> files;
  for (const v1::CheckpointShard& s : m.shards()) {
    auto it = vars.find(s.variable());
    if (it == vars.end()) {
      return absl::InvalidArgumentError(absl::StrCat("shard '", s.file(), "' belongs to variable '",
                                                     s.variable(), "', which is not listed"));
    }
    if (s.file().empty() || s.file().find('/') != std::string::npos || s.file() == "." ||
        s.file() == ".." || !files.insert(s.file()).second) {
      return absl::InvalidArgumentError(absl::StrCat("shard of variable '", s.variable(),
                                                     "' has a bad or repeated file name '",
                                                     s.file(), "'"));
    }
    const Shape& shape = it->second.first;
    if (s.begin_size() != shape.rank() || s.slice_shape_size() != shape.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("shard '", s.file(), "' of variable '",
                                                     s.variable(), "' has the wrong rank"));
    }
    int64_t n = 1;
    for (int d = 0; d < shape.rank(); ++d) {
      if (s.begin(d) < 0 || s.slice_shape(d) < 1 ||
          s.begin(d) + s.slice_shape(d) > shape.dim(d).size) {
        return absl::InvalidArgumentError(
            absl::StrCat("shard '", s.file(), "' of variable '", s.variable(), "' (begin ",
                         BeginString(s), ", shape [", absl::StrJoin(s.slice_shape(), ","),
                         "]) lies outside its shape ", shape.ToString()));
      }
      n *= s.slice_shape(d);
    }
    if (s.byte_size() != n * DTypeSize(it->second.second)) {
      return absl::InvalidArgumentError(absl::StrCat("shard '", s.file(), "' of variable '",
                                                     s.variable(), "' says ", s.byte_size(),
                                                     " bytes for ", n, " elements"));
    }
    if (s.addend() < 0 || s.addend() >= addends[s.variable()]) {
      return absl::InvalidArgumentError(absl::StrCat("shard '", s.file(), "' of variable '",
                                                     s.variable(), "' is addend ", s.addend(),
                                                     " of ", addends[s.variable()]));
    }
    by_var[{s.variable(), s.addend()}].push_back(&s);
  }
  for (const auto& [key, sv] : [&] {
         // Every (variable, addend) pair, with the variable's type.
         std::vector<std::pair<std::pair<std::string, int>, std::pair<Shape, DType>>> all;
         for (const auto& [name, type] : vars) {
           for (int k = 0; k < addends[name]; ++k) all.push_back({{name, k}, type});
         }
         return all;
       }()) {
    const std::string& name = key.first;
    const std::vector<const v1::CheckpointShard*>& shards = by_var[key];
    int64_t covered = 0;
    for (size_t i = 0; i < shards.size(); ++i) {
      covered += shards[i]->byte_size() / DTypeSize(sv.second);
      for (size_t j = 0; j < i; ++j) {
        if (BoxesOverlap(*shards[i], *shards[j])) {
          return absl::InvalidArgumentError(absl::StrCat("shards '", shards[j]->file(), "' and '",
                                                         shards[i]->file(), "' of variable '",
                                                         name, "' overlap"));
        }
      }
    }
    if (covered != sv.first.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the shards of variable '", name, "'",
          addends[name] > 1 ? absl::StrCat(" (addend ", key.second, ")") : "", " cover ", covered,
          " of its ", sv.first.num_elements(), " elements"));
    }
  }
  return absl::OkStatus();
}

struct VariableInfo {
  Shape shape;
  DType dtype = DType::kFloat32;
  TensorLayout layout;
  std::vector<int> partial;  // sorted partial-sum axes (proto ProgramVariable)
};

absl::StatusOr<VariableInfo> ParseVariable(const v1::ProgramVariable& v) {
  VariableInfo info;
  ASSIGN_OR_RETURN(info.shape, Shape::FromProto(v.shape(), absl::StrCat("variable '", v.name(), "'")));
  ASSIGN_OR_RETURN(info.dtype, DTypeFromProto(v.dtype()));
  info.layout = TensorLayout::FromProto(v.layout());
  if (static_cast<int>(info.layout.mesh_axis.size()) != info.shape.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", v.name(), "' has a layout of the wrong rank"));
  }
  info.partial.assign(v.partial_sum_axes().begin(), v.partial_sum_axes().end());
  std::sort(info.partial.begin(), info.partial.end());
  return info;
}

// InvalidArgument unless every partial axis of variable `name` is an axis of `mesh`.
absl::Status CheckPartialAxes(const std::string& name, const std::vector<int>& partial,
                              const Mesh& mesh) {
  for (int a : partial) {
    if (a < 0 || a >= mesh.ndims()) {
      return absl::InvalidArgumentError(absl::StrCat("variable '", name,
                                                     "' is a partial sum over mesh axis ", a,
                                                     ", which mesh ", mesh.ToString(), " lacks"));
    }
  }
  return absl::OkStatus();
}

// This processor's slice of variable `name` (`info`, under the program's mesh) from the shards of
// `manifest` overlapping it: the sum of its addends first_addend..end_addend-1, each assembled as
// one tiling.
absl::StatusOr<Tensor> LoadSlice(const v1::CheckpointManifest& manifest,
                                 const std::string& directory, const std::string& name,
                                 const VariableInfo& info, const Shape& slice_shape,
                                 int first_addend, int end_addend, const Mesh& mesh,
                                 const std::vector<int64_t>& coordinate) {
  const std::vector<int64_t> begin = SliceBegin(info.shape, info.layout, mesh, coordinate);
  const std::vector<int64_t> sizes = slice_shape.Sizes();
  const int addends = end_addend - first_addend;
  Tensor sum(info.dtype, slice_shape);
  for (int addend = first_addend; addend < end_addend; ++addend) {
    Tensor slice(info.dtype, slice_shape);
    int64_t covered = 0;
    for (const v1::CheckpointShard& s : manifest.shards()) {
      if (s.variable() != name || s.addend() != addend) continue;
      const std::vector<int64_t> sb(s.begin().begin(), s.begin().end());
      const std::vector<int64_t> ss(s.slice_shape().begin(), s.slice_shape().end());
      bool overlaps = true;
      for (int d = 0; d < info.shape.rank(); ++d) {
        if (std::max(sb[d], begin[d]) >= std::min(sb[d] + ss[d], begin[d] + sizes[d])) {
          overlaps = false;
        }
      }
      if (!overlaps) continue;
      const std::string path = JoinPath(directory, s.file());
      const std::string what =
          absl::StrCat("shard file '", s.file(), "' of variable '", name, "' in ", directory);
      absl::StatusOr<std::string> data = ReadFile(path);
      if (!data.ok()) {
        if (data.status().code() == absl::StatusCode::kNotFound) {
          return absl::NotFoundError(absl::StrCat(what, " is missing"));
        }
        return absl::Status(data.status().code(),
                            absl::StrCat(what, ": ", data.status().message()));
      }
      if (static_cast<int64_t>(data->size()) != s.byte_size()) {
        return absl::DataLossError(absl::StrCat(what, " has ", data->size(),
                                                " bytes, the manifest says ", s.byte_size(),
                                                " (truncated or corrupted)"));
      }
      ASSIGN_OR_RETURN(const uint64_t sum,
                       ShardChecksum(s.checksum_kind(), data->data(), data->size(), what));
      if (sum != s.checksum()) {
        return absl::DataLossError(absl::StrFormat(
            "%s is corrupted: its checksum is %016x, the manifest says %016x", what, sum,
            s.checksum()));
      }
      covered += CopyOverlap(data->data(), sb, ss, static_cast<char*>(TensorData(&slice)), begin,
                             sizes, DTypeSize(info.dtype));
    }
    if (covered != slice.num_elements()) {
      return absl::DataLossError(absl::StrCat(
          "the shards of variable '", name, "'",
          addends > 1 ? absl::StrCat(" (addend ", addend, ")") : "", " cover ", covered,
          " of the ", slice.num_elements(), " elements of this processor's slice"));
    }
    if (addends == 1) return slice;
    AddInto(slice, &sum);  // in addend order: the same sum on every processor and mesh
  }
  return sum;
}


}  // namespace

absl::StatusOr<uint64_t> ShardChecksum(int kind, const void* data, size_t n,
                                       absl::string_view what) {
  switch (kind) {
    case v1::CHECKSUM_FNV1A_64:
      return Fnv1a64(data, n);
    case v1::CHECKSUM_XXH3_64:
      return XXH3_64bits(data, n);
    default:
      return absl::FailedPreconditionError(absl::StrCat(
          what, " has checksum kind ", kind,
          ", which this meshrt does not know: the checkpoint was written by a newer version"));
  }
}

std::string ShardFileName(const std::string& variable, const std::vector<int64_t>& begin,
                          int addend) {
  std::string name;
  for (unsigned char c : variable) {
    if (std::isalnum(c) || c == '_' || c == '-') {
      name.push_back(static_cast<char>(c));
    } else {
      name += absl::StrFormat("%%%02X", c);  // '/', '.', '%' and the rest
    }
  }
  return absl::StrCat(name, ".", absl::StrJoin(begin, "_"),
                      addend >= 0 ? absl::StrCat(".a", addend) : "", ".shard");
}

absl::StatusOr<std::vector<v1::CheckpointShard>> SaveShards(
    const v1::Program& program, const std::vector<int64_t>& coordinate,
    const std::map<std::string, Tensor>& variables, const std::string& directory) {
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::FromProto(program.mesh()));
  if (static_cast<int>(coordinate.size()) != mesh.ndims()) {
    return absl::InvalidArgumentError("coordinate does not fit the program's mesh");
  }
  RETURN_IF_ERROR(CheckDirectory(directory));
  // Check everything before writing anything.
  std::vector<std::tuple<const v1::ProgramVariable*, VariableInfo, const Tensor*>> owned;
  for (const v1::ProgramVariable& v : program.variables()) {
    ASSIGN_OR_RETURN(VariableInfo info, ParseVariable(v));
    RETURN_IF_ERROR(CheckPartialAxes(v.name(), info.partial, mesh));
    auto it = variables.find(v.name());
    if (it == variables.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("variable '", v.name(), "' has no value yet: run a step before saving"));
    }
    const Shape want = SliceShape(info.shape, info.layout, mesh);
    if (it->second.shape() != want || it->second.dtype() != info.dtype) {
      return absl::InternalError(absl::StrCat("variable '", v.name(), "' holds a slice of shape ",
                                              it->second.shape().ToString(), ", expected ",
                                              want.ToString()));
    }
    if (OwnsSlice(info.layout, info.partial, coordinate)) {
      owned.emplace_back(&v, info, &it->second);
    }
  }
  std::vector<v1::CheckpointShard> shards;
  for (const auto& [v, info, slice] : owned) {
    const std::vector<int64_t> begin = SliceBegin(info.shape, info.layout, mesh, coordinate);
    v1::CheckpointShard shard;
    shard.set_variable(v->name());
    // A partial sum: this processor's slice is addend `rank along the partial axes`.
    const int addend = info.partial.empty() ? -1 : mesh.RankInGroup(info.partial, coordinate);
    shard.set_file(ShardFileName(v->name(), begin, addend));
    shard.set_addend(std::max(addend, 0));
    for (int64_t b : begin) shard.add_begin(b);
    for (const Dim& d : slice->shape().dims()) shard.add_slice_shape(d.size);
    const int64_t bytes = TensorBytes(*slice);
    shard.set_byte_size(bytes);
    shard.set_checksum_kind(kShardChecksumKind);
    ASSIGN_OR_RETURN(const uint64_t sum, ShardChecksum(kShardChecksumKind, TensorData(*slice),
                                                       static_cast<size_t>(bytes), shard.file()));
    shard.set_checksum(sum);
    RETURN_IF_ERROR(WriteFileAtomically(
        JoinPath(directory, shard.file()),
        absl::string_view(static_cast<const char*>(TensorData(*slice)), bytes)));
    shards.push_back(std::move(shard));
  }
  return shards;
}

absl::StatusOr<v1::CheckpointManifest> BuildManifest(const v1::Program& program, int64_t step,
                                                     std::vector<v1::CheckpointShard> shards) {
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::FromProto(program.mesh()));
  v1::CheckpointManifest m;
  m.set_format_version(2);  // 3 below when a variable is saved as addends
  *m.mutable_mesh() = program.mesh();
  *m.mutable_rules() = program.rules();
  m.set_step(step);
  std::vector<const v1::ProgramVariable*> vars;
  for (const v1::ProgramVariable& v : program.variables()) vars.push_back(&v);
  std::sort(vars.begin(), vars.end(),
            [](const auto* a, const auto* b) { return a->name() < b->name(); });
  for (const v1::ProgramVariable* v : vars) {
    v1::CheckpointVariable* cv = m.add_variables();
    cv->set_name(v->name());
    *cv->mutable_shape() = v->shape();
    cv->set_dtype(v->dtype());
    *cv->mutable_layout() = v->layout();
    if (v->partial_sum_axes_size() > 0) {
      ASSIGN_OR_RETURN(VariableInfo info, ParseVariable(*v));
      RETURN_IF_ERROR(CheckPartialAxes(v->name(), info.partial, mesh));
      cv->set_addends(mesh.GroupSize(info.partial));
      if (cv->addends() > 1) m.set_format_version(kCheckpointFormatVersion);
    }
  }
  std::sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) {
    if (a.variable() != b.variable()) return a.variable() < b.variable();
    return std::lexicographical_compare(a.begin().begin(), a.begin().end(), b.begin().begin(),
                                        b.begin().end());
  });
  for (v1::CheckpointShard& s : shards) *m.add_shards() = std::move(s);
  if (absl::Status s = CheckConsistent(m); !s.ok()) {
    return absl::InternalError(absl::StrCat("the workers' shards make no checkpoint: ", s.message()));
  }
  return m;
}

uint64_t ManifestChecksum(const v1::CheckpointManifest& manifest) {
  v1::CheckpointManifest m = manifest;
  m.clear_manifest_checksum();
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&out);
  }
  return Fnv1a64(bytes.data(), bytes.size());
}

absl::Status WriteManifest(const std::string& directory, const v1::CheckpointManifest& manifest) {
  v1::CheckpointManifest m = manifest;
  m.set_manifest_checksum(ManifestChecksum(m));
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(m, &text)) {
    return absl::InternalError("cannot print the checkpoint manifest");
  }
  text = absl::StrCat("# meshrt checkpoint manifest (proto meshrt.v1.CheckpointManifest)\n", text);
  return WriteFileAtomically(JoinPath(directory, kCheckpointManifestFile), text);
}

absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& directory) {
  RETURN_IF_ERROR(CheckDirectory(directory));
  const std::string path = JoinPath(directory, kCheckpointManifestFile);
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat(
          directory, " holds no ", kCheckpointManifestFile,
          ": it is not a checkpoint, or an incomplete one (its save did not finish)"));
    }
    return text.status();
  }
  v1::CheckpointManifest m;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &m)) {
    return absl::DataLossError(absl::StrCat(path, " does not parse as a checkpoint manifest"));
  }
  // Format 1 had no checksum; from format 2 on every field is covered.
  if (m.format_version() >= 2 || m.manifest_checksum() != 0) {
    const uint64_t sum = ManifestChecksum(m);
    if (sum != m.manifest_checksum()) {
      return absl::DataLossError(absl::StrFormat(
          "%s was changed or corrupted: its contents hash to %016x, its manifest_checksum says "
          "%016x (the checksum covers the step, the variables and the shards)",
          path, sum, m.manifest_checksum()));
    }
  }
  if (absl::Status s = CheckConsistent(m); !s.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", s.message()));
  }
  return m;
}

absl::Status CheckManifestForProgram(const v1::CheckpointManifest& manifest,
                                     const v1::Program& program) {
  std::map<std::string, const v1::CheckpointVariable*> saved;
  for (const v1::CheckpointVariable& v : manifest.variables()) saved[v.name()] = &v;
  std::vector<std::string> missing, mismatched;
  for (const v1::ProgramVariable& v : program.variables()) {
    auto it = saved.find(v.name());
    if (it == saved.end()) {
      missing.push_back(absl::StrCat("'", v.name(), "'"));
      continue;
    }
    ASSIGN_OR_RETURN(VariableInfo want, ParseVariable(v));
    absl::StatusOr<Shape> got = Shape::FromProto(it->second->shape());
    absl::StatusOr<DType> got_dtype = DTypeFromProto(it->second->dtype());
    if (!got.ok() || !got_dtype.ok() || *got != want.shape || *got_dtype != want.dtype) {
      mismatched.push_back(absl::StrCat(
          "'", v.name(), "' is ", DTypeName(want.dtype), " ", want.shape.ToString(),
          " in the session but ", got_dtype.ok() ? DTypeName(*got_dtype) : "?", " ",
          got.ok() ? got->ToString() : "?", " in the checkpoint"));
    }
    saved.erase(it);
  }
  if (missing.empty() && mismatched.empty() && saved.empty()) return absl::OkStatus();
  std::vector<std::string> parts;
  if (!missing.empty()) {
    parts.push_back(absl::StrCat("variables missing from the checkpoint: ",
                                 absl::StrJoin(missing, ", ")));
  }
  if (!saved.empty()) {
    std::vector<std::string> extra;
    for (const auto& [name, v] : saved) extra.push_back(absl::StrCat("'", name, "'"));
    parts.push_back(absl::StrCat("variables in the checkpoint that the session does not have: ",
                                 absl::StrJoin(extra, ", ")));
  }
  if (!mismatched.empty()) {
    parts.push_back(absl::StrCat("variables that differ: ", absl::StrJoin(mismatched, "; ")));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the checkpoint does not fit the session's variables (the mesh and layout may differ, the "
      "variables may not): ", absl::StrJoin(parts, "; ")));
}

v1::Program ProgramWithSavedVariables(const v1::Program& program,
                                      const v1::CheckpointManifest& manifest) {
  std::set<std::string> saved;
  for (const v1::CheckpointVariable& v : manifest.variables()) saved.insert(v.name());
  v1::Program out;
  *out.mutable_mesh() = program.mesh();
  *out.mutable_rules() = program.rules();
  for (const v1::ProgramVariable& v : program.variables()) {
    if (saved.count(v.name())) *out.add_variables() = v;
  }
  return out;
}

absl::StatusOr<std::map<std::string, Tensor>> LoadSlices(const v1::CheckpointManifest& manifest,
                                                         const std::string& directory,
                                                         const v1::Program& program,
                                                         const std::vector<int64_t>& coordinate) {
  RETURN_IF_ERROR(CheckConsistent(manifest));
  RETURN_IF_ERROR(CheckManifestForProgram(manifest, program));
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::FromProto(program.mesh()));
  if (static_cast<int>(coordinate.size()) != mesh.ndims()) {
    return absl::InvalidArgumentError("coordinate does not fit the program's mesh");
  }
  RETURN_IF_ERROR(CheckDirectory(directory));
  std::map<std::string, int> addends;
  for (const v1::CheckpointVariable& v : manifest.variables()) {
    addends[v.name()] = std::max(1, v.addends());
  }
  std::map<std::string, Tensor> out;
  for (const v1::ProgramVariable& v : program.variables()) {
    ASSIGN_OR_RETURN(VariableInfo info, ParseVariable(v));
    RETURN_IF_ERROR(CheckPartialAxes(v.name(), info.partial, mesh));
    const Shape slice_shape = SliceShape(info.shape, info.layout, mesh);
    const int saved = addends[v.name()];
    int first = 0, end = saved;  // the addends this processor sums
    if (!info.partial.empty()) {
      const int rank = mesh.RankInGroup(info.partial, coordinate);
      if (mesh.GroupSize(info.partial) == saved) {
        // As many processors along the partial axes as addends: rank r takes addend r (the same
        // sum; restored where it was saved, every processor gets its own slices back bitwise).
        first = rank;
        end = rank + 1;
      } else if (rank != 0) {
        // Otherwise the processor at 0 along the axes takes the sum; the others start from zeros.
        out.emplace(v.name(), Tensor(info.dtype, slice_shape));
        continue;
      }
    }
    ASSIGN_OR_RETURN(Tensor slice, LoadSlice(manifest, directory, v.name(), info, slice_shape,
                                             first, end, mesh, coordinate));
    out.emplace(v.name(), std::move(slice));
  }
  return out;
}



}  // namespace meshrt
