// The median of a sample of timings: the middle value, or the mean of the two middle values of an
// even count. Shared by what decides from measurements (runtime/overlap_choice.h) and the
// benchmarks (bench/bench_util.h). `v` must not be empty.
#ifndef MESHRT_UTIL_MEDIAN_H_
#define MESHRT_UTIL_MEDIAN_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace meshrt {

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace meshrt

#endif  // MESHRT_UTIL_MEDIAN_H_
