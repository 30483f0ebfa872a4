#include "util/closest_name.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"

namespace meshrt {

int EditDistance(absl::string_view a, absl::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string ClosestName(absl::string_view name, const std::set<std::string>& names) {
  const std::string lower = absl::AsciiStrToLower(name);
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 3);
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& candidate : names) {
    const int distance = EditDistance(lower, absl::AsciiStrToLower(candidate));
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace meshrt
