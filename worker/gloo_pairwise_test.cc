#include "worker/gloo_pairwise.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"
#include "runtime/kv_store.h"
#include "worker/gloo_store.h"

namespace meshrt {
namespace {

// Two connected ranks (threads) over loopback. Gloo throws on failure; gtest reports it.
class PairwiseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::thread threads[2];
    for (int r = 0; r < 2; ++r) {
      threads[r] = std::thread([this, r] {
        gloo::transport::tcp::attr attr;
        attr.hostname = "127.0.0.1";
        auto device = gloo::transport::tcp::CreateDevice(attr);
        auto context = std::make_shared<gloo::rendezvous::Context>(r, 2);
        context->setTimeout(std::chrono::seconds(10));
        context->connectFullMesh(store_, device);
        contexts_[r] = context;
      });
    }
    for (std::thread& t : threads) t.join();
  }

  // Runs fn(rank, context) on two threads.
  void OnBoth(const std::function<void(int, const std::shared_ptr<gloo::Context>&)>& fn) {
    std::thread threads[2];
    for (int r = 0; r < 2; ++r) threads[r] = std::thread([&, r] { fn(r, contexts_[r]); });
    for (std::thread& t : threads) t.join();
  }

  InMemoryKeyValueStore kv_;
  GlooStore store_{&kv_, absl::Seconds(10)};
  std::shared_ptr<gloo::Context> contexts_[2];
};

void SumInt32(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<int32_t*>(c)[i] =
        static_cast<const int32_t*>(a)[i] + static_cast<const int32_t*>(b)[i];
  }
}

TEST_F(PairwiseTest, SumsEveryElementForAwkwardSizesSegmentsAndWindows) {
  for (size_t count : {1, 2, 3, 17, 1000, 4099}) {
    for (size_t segment_bytes : {4, 12, 64, 1 << 20}) {
      for (size_t window : {1, 2, 5}) {
        PairwiseAllreduceOptions options;
        options.segment_bytes = segment_bytes;
        options.window = window;
        std::vector<int32_t> data[2];
        OnBoth([&](int r, const std::shared_ptr<gloo::Context>& context) {
          data[r].resize(count);
          for (size_t i = 0; i < count; ++i) data[r][i] = static_cast<int32_t>(i * (r + 1) + r);
          PairwiseAllreduce(context, data[r].data(), count, sizeof(int32_t), &SumInt32,
                            std::chrono::seconds(10), options);
        });
        const std::string where =
            absl::StrCat("count ", count, " segment ", segment_bytes, " window ", window);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(data[0][i], static_cast<int32_t>(3 * i + 1)) << where << " element " << i;
          ASSERT_EQ(data[1][i], data[0][i]) << where << " element " << i;
        }
      }
    }
  }
}

TEST_F(PairwiseTest, FloatResultsAreBitwiseEqualOnBothRanks) {
  const size_t count = 100003;
  std::vector<float> data[2];
  OnBoth([&](int r, const std::shared_ptr<gloo::Context>& context) {
    data[r].resize(count);
    for (size_t i = 0; i < count; ++i) data[r][i] = 0.1f * i / (r + 3.0f);
    PairwiseAllreduceOptions options;
    options.segment_bytes = 4096;
    PairwiseAllreduce(
        context, data[r].data(), count, sizeof(float),
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>),
        std::chrono::seconds(10), options);
  });
  EXPECT_EQ(std::memcmp(data[0].data(), data[1].data(), count * sizeof(float)), 0);
  EXPECT_FLOAT_EQ(data[0][1000], 100.0f / 3 + 100.0f / 4);
}

TEST_F(PairwiseTest, BackToBackCallsDoNotMix) {
  OnBoth([&](int r, const std::shared_ptr<gloo::Context>& context) {
    for (int it = 0; it < 20; ++it) {
      std::vector<int32_t> v(333 + it, it + r);
      PairwiseAllreduceOptions options;
      options.segment_bytes = 40;
      options.window = 3;
      PairwiseAllreduce(context, v.data(), v.size(), sizeof(int32_t), &SumInt32,
                        std::chrono::seconds(10), options);
      for (int32_t x : v) ASSERT_EQ(x, 2 * it + 1) << "rank " << r << " iteration " << it;
    }
  });
}

}  // namespace
}  // namespace meshrt
