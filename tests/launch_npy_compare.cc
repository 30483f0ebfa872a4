// launch_npy_compare GOT_DIR WANT_DIR: every WANT_DIR/*.npy has a GOT_DIR twin with the same
// dtype and shape and values within 1e-5 relative (float32; int32 exactly). Prints one line per
// file; exit 0 when all match, 1 otherwise (or when WANT_DIR holds no .npy file). For
// tests/launch_manifests_test.sh.
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/npy.h"

namespace {

std::vector<std::string> NpyFiles(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Empty when equal enough, else why not.
std::string Compare(const meshrt::NpyArray& got, const meshrt::NpyArray& want) {
  if (got.dtype != want.dtype) return "dtypes differ";
  if (got.dims != want.dims) {
    return "shape " + meshrt::NpyShapeString(got.dims) + " != " + meshrt::NpyShapeString(want.dims);
  }
  const size_t n = want.data.size() / 4;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    if (want.dtype == meshrt::DType::kInt32) {
      if (std::memcmp(got.data.data() + 4 * i, want.data.data() + 4 * i, 4) != 0) {
        return "int32 element " + std::to_string(i) + " differs";
      }
      continue;
    }
    float a, b;
    std::memcpy(&a, got.data.data() + 4 * i, 4);
    std::memcpy(&b, want.data.data() + 4 * i, 4);
    const double err = std::fabs(double(a) - double(b)) / std::max(1.0, std::fabs(double(b)));
    if (!(err <= 1e-5)) {
      return "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
    }
    worst = std::max(worst, err);
  }
  std::printf("  max relative error %.3g over %zu values\n", worst, n);
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: launch_npy_compare GOT_DIR WANT_DIR\n");
    return 2;
  }
  const std::vector<std::string> names = NpyFiles(argv[2]);
  if (names.empty()) {
    std::printf("no .npy files in %s\n", argv[2]);
    return 1;
  }
  int bad = 0;
  for (const std::string& name : names) {
    auto want = meshrt::ReadNpy(std::string(argv[2]) + "/" + name);
    auto got = meshrt::ReadNpy(std::string(argv[1]) + "/" + name);
    std::string why;
    if (!want.ok())
      why = std::string(want.status().message());
    else if (!got.ok())
      why = std::string(got.status().message());
    else
      why = Compare(*got, *want);
    std::printf("%s: %s\n", name.c_str(), why.empty() ? "equal" : why.c_str());
    bad += !why.empty();
  }
  return bad == 0 ? 0 : 1;
}
