#include "client/random_feeds.h"

#include <string>

#include "util/hash.h"

namespace meshrt {
namespace {

constexpr uint64_t kGoldenGamma = kSplitMix64Gamma;  // splitmix64's increment

uint64_t Mix(uint64_t z) { return SplitMix64(z); }
uint64_t HashName(absl::string_view name) { return Fnv1a64(name); }

}  // namespace

uint64_t RandomBits(uint64_t seed, absl::string_view name, int64_t index) {
  // Mixing the seed before combining it with the name hash keeps (seed, name) pairs apart; the
  // index then walks the splitmix64 sequence that starts at the key.
  const uint64_t key = Mix(Mix(seed) ^ HashName(name));
  return Mix(key + (static_cast<uint64_t>(index) + 1) * kGoldenGamma);
}

Tensor RandomTensor(const TensorType& type, absl::string_view name, uint64_t seed) {
  Tensor t(type.dtype, type.shape);
  const int64_t n = t.num_elements();
  if (type.dtype == DType::kFloat32) {
    float* out = t.f32();
    for (int64_t i = 0; i < n; ++i) {
      // The top 24 bits give u in [0, 1) exactly representable in float; 2u - 1 stays exact.
      const float u = static_cast<float>(RandomBits(seed, name, i) >> 40) * (1.0f / (1 << 24));
      out[i] = 2.0f * u - 1.0f;
    }
  } else {
    int32_t* out = t.i32();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(RandomBits(seed, name, i) >> 60);
  }
  return t;
}

TensorMap RandomFeeds(const Graph& graph, uint64_t seed) {
  TensorMap feeds;
  for (const std::string& name : graph.Placeholders()) {
    feeds[name] = RandomTensor(graph.type(name), name, seed);
  }
  return feeds;
}

}  // namespace meshrt
