// Checkpoint shard checksums: FNV-1a (the old kind, still read) against XXH3 (what saves write),
// and against writing the same bytes to a file (what a save does besides checksumming), on one
// 256 MiB buffer. Median of 5; GB/s = 1e9 bytes per second.
//   bazel run -c opt //bench:checksum_bench [-- --mib 256]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "runtime/checkpoint.h"
#include "util/file.h"

namespace meshrt {
namespace {

template <typename F>
double MedianSeconds(F&& f) {
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  return Median(t);
}

int Main(int argc, char** argv) {
  size_t mib = 256;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--mib") mib = std::strtoul(argv[i + 1], nullptr, 10);
  }
  if (mib == 0) bench::Die("--mib needs N >= 1");
  std::vector<char> data(mib << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);
  volatile uint64_t sink = 0;
  const double bytes = static_cast<double>(data.size());
  std::printf("checksum of a %zu MiB shard (median of 5)\n", mib);
  std::printf("%-34s %10s %8s\n", "what", "ms", "GB/s");
  for (const auto& [name, kind] : {std::make_pair("FNV-1a 64 (old shards)", v1::CHECKSUM_FNV1A_64),
                                   std::make_pair("XXH3 64 (saves now)", v1::CHECKSUM_XXH3_64)}) {
    const double s = MedianSeconds([&, kind = kind] {
      sink = sink + *ShardChecksum(kind, data.data(), data.size(), "bench");
    });
    std::printf("%-34s %10.1f %8.2f\n", name, s * 1e3, bytes / s / 1e9);
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/checksum_bench.shard";
  const double w = MedianSeconds([&] {
    bench::CheckOk(WriteFileAtomically(path, absl::string_view(data.data(), data.size())));
  });
  std::remove(path.c_str());
  std::printf("%-34s %10.1f %8.2f\n", "write + fsync the shard (for scale)", w * 1e3, bytes / w / 1e9);
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
