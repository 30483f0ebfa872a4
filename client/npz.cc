#include "client/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// Record signatures and sizes (PKWARE APPNOTE.TXT, sections 4.3 and 4.5).
constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kEnd64Signature = 0x06064b50;
constexpr uint32_t kLocator64Signature = 0x07064b50;
constexpr uint64_t kLocalSize = 30;
constexpr uint64_t kCentralSize = 46;
constexpr uint64_t kEndSize = 22;
constexpr uint64_t kEnd64Size = 56;
constexpr uint64_t kLocator64Size = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kStored = 0;
constexpr uint16_t kDeflated = 8;
constexpr uint16_t kVersion = 20;       // 2.0: stored / deflate
constexpr uint16_t kVersionZip64 = 45;  // 4.5: ZIP64 records
constexpr uint16_t kDate1980 = (0 << 9) | (1 << 5) | 1;  // MS-DOS date 1980-01-01
constexpr uint64_t kMax16 = 0xffff;
constexpr uint64_t kMax32 = 0xffffffff;
constexpr char kSuffix[] = ".npy";
constexpr size_t kSuffixSize = 4;
// Deflate expands at most 1032:1; a recorded size beyond that is damage, not a reason to allocate.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr size_t kZlibChunk = size_t{1} << 30;  // zlib counts in 32 bits

void Put(uint64_t v, int width, std::string* out) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t Crc32(absl::string_view data) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

// Bounds-checked little-endian reads of the archive.
class Bytes {
 public:
  explicit Bytes(absl::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const { return bytes_.size(); }
  bool Has(uint64_t offset, uint64_t n) const {
    return offset <= bytes_.size() && n <= bytes_.size() - offset;
  }
  // Precondition: Has(offset, width).
  uint64_t Get(uint64_t offset, int width) const {
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) {
      v = (v << 8) | static_cast<unsigned char>(bytes_[offset + i]);
    }
    return v;
  }
  absl::string_view Sub(uint64_t offset, uint64_t n) const { return bytes_.substr(offset, n); }

 private:
  absl::string_view bytes_;
};

// Where the central directory is, from the end records.
struct Directory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

absl::StatusOr<Directory> FindDirectory(const Bytes& b, absl::string_view source) {
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes.
  uint64_t end = b.size() + 1;  // "none"
  if (b.size() >= kEndSize) {
    const uint64_t lowest = b.size() - kEndSize > kMax16 ? b.size() - kEndSize - kMax16 : 0;
    for (uint64_t p = b.size() - kEndSize + 1; p-- > lowest;) {
      if (b.Get(p, 4) == kEndSignature && p + kEndSize + b.Get(p + 20, 2) == b.size()) {
        end = p;
        break;
      }
    }
  }
  if (end > b.size()) {
    if (b.Has(0, 4) && b.Get(0, 4) == kLocalSignature) {
      return absl::DataLossError(absl::StrCat(
          source, ": the ZIP archive has no end of central directory record (truncated?)"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a .npz file (it is not a ZIP archive)"));
  }
  Directory d;
  uint64_t disk = b.Get(end + 4, 2), directory_disk = b.Get(end + 6, 2);
  d.entries = b.Get(end + 10, 2);
  d.size = b.Get(end + 12, 4);
  d.offset = b.Get(end + 16, 4);
  if (end >= kLocator64Size && b.Get(end - kLocator64Size, 4) == kLocator64Signature) {
    const uint64_t at = b.Get(end - kLocator64Size + 8, 8);
    if (!b.Has(at, kEnd64Size) || at + kEnd64Size > end - kLocator64Size) {
      return absl::DataLossError(
          absl::StrCat(source, ": the ZIP64 end of central directory record lies outside the "
                               "archive (truncated or corrupted)"));
    }
    if (b.Get(at, 4) != kEnd64Signature) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": bad signature of the ZIP64 end of central directory record"));
    }
    disk = b.Get(at + 16, 4);
    directory_disk = b.Get(at + 20, 4);
    d.entries = b.Get(at + 32, 8);
    d.size = b.Get(at + 40, 8);
    d.offset = b.Get(at + 48, 8);
  }
  if (disk != 0 || directory_disk != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": a ZIP archive split over several files is not supported"));
  }
  if (!b.Has(d.offset, d.size) || d.entries > d.size / kCentralSize) {
    return absl::DataLossError(absl::StrCat(
        source, ": the ZIP central directory (", d.entries, " entries, ", d.size,
        " bytes at offset ", d.offset, ") does not fit in the ", b.size(),
        "-byte archive (truncated or corrupted)"));
  }
  return d;
}

// One central directory entry.
struct Entry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0;
  uint64_t size = 0;
  uint64_t local_offset = 0;
  uint64_t record_size = 0;  // of the central directory entry
};

// Parses the central directory entry at `at`, which must end by `limit`. `source` names the file
// in errors.
absl::StatusOr<Entry> ParseEntry(const Bytes& b, uint64_t at, uint64_t limit,
                                 absl::string_view source) {
  if (at + kCentralSize > limit) {
    return absl::DataLossError(
        absl::StrCat(source, ": the ZIP central directory ends inside an entry (corrupted)"));
  }
  if (b.Get(at, 4) != kCentralSignature) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": bad signature of a ZIP central directory entry at offset ", at));
  }
  Entry e;
  e.flags = static_cast<uint16_t>(b.Get(at + 8, 2));
  e.method = static_cast<uint16_t>(b.Get(at + 10, 2));
  e.crc = static_cast<uint32_t>(b.Get(at + 16, 4));
  e.compressed = b.Get(at + 20, 4);
  e.size = b.Get(at + 24, 4);
  const uint64_t name_size = b.Get(at + 28, 2), extra_size = b.Get(at + 30, 2),
                 comment_size = b.Get(at + 32, 2);
  e.local_offset = b.Get(at + 42, 4);
  e.record_size = kCentralSize + name_size + extra_size + comment_size;
  if (at + e.record_size > limit) {
    return absl::DataLossError(
        absl::StrCat(source, ": the ZIP central directory ends inside an entry (corrupted)"));
  }
  e.name = std::string(b.Sub(at + kCentralSize, name_size));
  // The ZIP64 extra field holds the 8-byte values of the fields saturated at 0xffffffff, in this
  // order.
  uint64_t p = at + kCentralSize + name_size;
  const uint64_t extra_end = p + extra_size;
  while (p + 4 <= extra_end) {
    const uint64_t id = b.Get(p, 2), n = b.Get(p + 2, 2);
    if (p + 4 + n > extra_end) break;
    if (id == kZip64ExtraId) {
      uint64_t q = p + 4;
      for (uint64_t* field : {&e.size, &e.compressed, &e.local_offset}) {
        if (*field != kMax32) continue;
        if (q + 8 > p + 4 + n) {
          return absl::InvalidArgumentError(absl::StrCat(
              source, ": member '", e.name, "': its ZIP64 extra field is too short"));
        }
        *field = b.Get(q, 8);
        q += 8;
      }
    }
    p += 4 + n;
  }
  return e;
}

absl::StatusOr<std::string> Inflate(absl::string_view in, uint64_t size, const std::string& what) {
  if (size > in.size() * kMaxDeflateRatio + 1024) {
    return absl::DataLossError(absl::StrCat(what, ": ", in.size(),
                                            " deflated bytes cannot inflate to the recorded ",
                                            size, " (corrupted)"));
  }
  std::string out(size + 1, '\0');  // one byte more shows a stream longer than recorded
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) {  // raw deflate, as ZIP stores it
    return absl::InternalError(absl::StrCat(what, ": cannot initialise zlib"));
  }
  const Bytef* const in_begin = reinterpret_cast<const Bytef*>(in.data());
  Bytef* const out_begin = reinterpret_cast<Bytef*>(out.data());
  z.next_in = const_cast<Bytef*>(in_begin);
  z.next_out = out_begin;
  int rc = Z_OK;
  while (rc == Z_OK) {
    const size_t in_left = in.size() - static_cast<size_t>(z.next_in - in_begin);
    const size_t out_left = out.size() - static_cast<size_t>(z.next_out - out_begin);
    z.avail_in = static_cast<uInt>(std::min(in_left, kZlibChunk));
    z.avail_out = static_cast<uInt>(std::min(out_left, kZlibChunk));
    rc = inflate(&z, Z_NO_FLUSH);
  }
  const uint64_t produced = static_cast<uint64_t>(z.next_out - out_begin);
  const std::string message = z.msg != nullptr ? z.msg : "";
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(
        what, ": the deflate stream is ",
        produced > size ? "longer than recorded" : "corrupted or truncated",
        message.empty() ? "" : absl::StrCat(" (zlib: ", message, ")")));
  }
  if (produced != size) {
    return absl::DataLossError(absl::StrCat(what, ": inflates to ", produced,
                                            " bytes, the archive says ", size, " (corrupted)"));
  }
  out.resize(size);
  return out;
}

// The uncompressed bytes of `e`, CRC verified.
absl::StatusOr<std::string> MemberBytes(const Bytes& b, const Entry& e, const std::string& what) {
  if (!b.Has(e.local_offset, kLocalSize)) {
    return absl::DataLossError(
        absl::StrCat(what, ": its local header lies past the end of the archive (truncated)"));
  }
  if (b.Get(e.local_offset, 4) != kLocalSignature) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad local header signature"));
  }
  const uint64_t start =
      e.local_offset + kLocalSize + b.Get(e.local_offset + 26, 2) + b.Get(e.local_offset + 28, 2);
  if (!b.Has(start, e.compressed)) {
    return absl::DataLossError(absl::StrCat(what, ": its ", e.compressed,
                                            " bytes run past the end of the archive (truncated)"));
  }
  const absl::string_view raw = b.Sub(start, e.compressed);
  std::string data;
  if (e.method == kStored) {
    if (e.compressed != e.size) {
      return absl::DataLossError(absl::StrCat(what, ": stored with ", e.compressed,
                                              " bytes but recorded as ", e.size, " (corrupted)"));
    }
    data = std::string(raw);
  } else {
    ASSIGN_OR_RETURN(data, Inflate(raw, e.size, what));
  }
  const uint32_t crc = Crc32(data);
  if (crc != e.crc) {
    return absl::DataLossError(absl::StrFormat(
        "%s is corrupted: its CRC-32 is %08x, the archive says %08x", what, crc, e.crc));
  }
  return data;
}

}  // namespace

absl::StatusOr<std::string> EncodeNpz(const std::map<std::string, Tensor>& arrays,
                                      const NpzWriteOptions& options) {
  std::string out, central;
  for (const auto& [key, tensor] : arrays) {
    if (key.empty() || key.size() > kMax16 - kSuffixSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write array '", key.substr(0, 64), "' to a .npz file: a key must have 1 to ",
          kMax16 - kSuffixSize, " bytes"));
    }
    const std::string name = key + kSuffix;
    const std::string data = EncodeNpy(tensor);
    const uint32_t crc = Crc32(data);
    const uint64_t offset = out.size();
    const bool zip64 = options.force_zip64 || data.size() >= kMax32 || offset >= kMax32;
    const uint16_t version = zip64 ? kVersionZip64 : kVersion;
    // The fields a local header and a central directory entry share, from "version needed" to
    // the extra field's length.
    auto put_common = [&](uint64_t extra_size, std::string* to) {
      Put(version, 2, to);
      Put(0, 2, to);  // flags
      Put(kStored, 2, to);
      Put(0, 2, to);  // time 00:00
      Put(kDate1980, 2, to);
      Put(crc, 4, to);
      Put(zip64 ? kMax32 : data.size(), 4, to);  // compressed
      Put(zip64 ? kMax32 : data.size(), 4, to);  // uncompressed
      Put(name.size(), 2, to);
      Put(zip64 ? extra_size : 0, 2, to);
    };
    // Local header; with ZIP64 both sizes are in its extra field.
    Put(kLocalSignature, 4, &out);
    put_common(20, &out);
    out += name;
    if (zip64) {
      Put(kZip64ExtraId, 2, &out);
      Put(16, 2, &out);
      Put(data.size(), 8, &out);
      Put(data.size(), 8, &out);
    }
    out += data;
    // Its central directory entry; with ZIP64 the sizes and the offset are in the extra field.
    Put(kCentralSignature, 4, &central);
    Put(version, 2, &central);  // made by (MS-DOS attributes)
    put_common(28, &central);
    Put(0, 2, &central);  // comment
    Put(0, 2, &central);  // disk
    Put(0, 2, &central);  // internal attributes
    Put(0, 4, &central);  // external attributes
    Put(zip64 ? kMax32 : offset, 4, &central);
    central += name;
    if (zip64) {
      Put(kZip64ExtraId, 2, &central);
      Put(24, 2, &central);
      Put(data.size(), 8, &central);
      Put(data.size(), 8, &central);
      Put(offset, 8, &central);
    }
  }
  const uint64_t count = arrays.size();
  const uint64_t directory_offset = out.size();
  const uint64_t directory_size = central.size();
  out += central;
  const bool zip64 = options.force_zip64 || count >= kMax16 || directory_offset >= kMax32 ||
                     directory_size >= kMax32;
  if (zip64) {
    const uint64_t end64 = out.size();
    Put(kEnd64Signature, 4, &out);
    Put(kEnd64Size - 12, 8, &out);  // the size of the rest of the record
    Put(kVersionZip64, 2, &out);
    Put(kVersionZip64, 2, &out);
    Put(0, 4, &out);  // this disk
    Put(0, 4, &out);  // the central directory's disk
    Put(count, 8, &out);
    Put(count, 8, &out);
    Put(directory_size, 8, &out);
    Put(directory_offset, 8, &out);
    Put(kLocator64Signature, 4, &out);
    Put(0, 4, &out);
    Put(end64, 8, &out);
    Put(1, 4, &out);  // disks in all
  }
  Put(kEndSignature, 4, &out);
  Put(0, 2, &out);
  Put(0, 2, &out);
  Put(zip64 ? kMax16 : count, 2, &out);
  Put(zip64 ? kMax16 : count, 2, &out);
  Put(zip64 ? kMax32 : directory_size, 4, &out);
  Put(zip64 ? kMax32 : directory_offset, 4, &out);
  Put(0, 2, &out);  // comment
  return out;
}

absl::Status WriteNpz(const std::string& path, const std::map<std::string, Tensor>& arrays,
                      const NpzWriteOptions& options) {
  absl::StatusOr<std::string> bytes = EncodeNpz(arrays, options);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat(path, ": ", bytes.status().message()));
  }
  return WriteFileBytes(path, *bytes);
}

absl::StatusOr<std::map<std::string, NpyArray>> ParseNpz(absl::string_view bytes,
                                                         absl::string_view source) {
  const Bytes b(bytes);
  ASSIGN_OR_RETURN(const Directory d, FindDirectory(b, source));
  std::map<std::string, NpyArray> arrays;
  uint64_t at = d.offset;
  for (uint64_t i = 0; i < d.entries; ++i) {
    ASSIGN_OR_RETURN(const Entry e, ParseEntry(b, at, d.offset + d.size, source));
    at += e.record_size;
    const std::string what = absl::StrCat(source, ": member '", e.name, "'");
    if (e.name.size() <= kSuffixSize ||
        e.name.compare(e.name.size() - kSuffixSize, kSuffixSize, kSuffix) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": a .npz member's name must be <key>.npy"));
    }
    const std::string key = e.name.substr(0, e.name.size() - kSuffixSize);
    if (arrays.count(key) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": key '", key, "' appears twice"));
    }
    if ((e.flags & 1) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": encrypted members are not supported"));
    }
    if (e.method != kStored && e.method != kDeflated) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": compression method ", e.method,
          " is not supported (only stored and deflate, as numpy.savez and savez_compressed write)"));
    }
    ASSIGN_OR_RETURN(const std::string data, MemberBytes(b, e, what));
    ASSIGN_OR_RETURN(NpyArray array, ParseNpy(data, what));
    arrays.emplace(key, std::move(array));
  }
  return arrays;
}

absl::StatusOr<std::map<std::string, NpyArray>> ReadNpz(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileBytes(path));
  return ParseNpz(bytes, path);
}

}  // namespace meshrt
