// "Did you mean …?" for names a user typed: the closest of the names that exist.
//
// Thread-safety: pure functions.
#ifndef MESHRT_UTIL_CLOSEST_NAME_H_
#define MESHRT_UTIL_CLOSEST_NAME_H_

#include <set>
#include <string>

#include "absl/strings/string_view.h"

namespace meshrt {

// Optimal string alignment distance between `a` and `b`: insertions, deletions, substitutions and
// swaps of neighbours (Damerau-Levenshtein without repeated edits of a substring).
int EditDistance(absl::string_view a, absl::string_view b);

// The name in `names` closest to `name` by EditDistance (case-insensitive), or "" when none is
// within max(2, |name| / 3). Ties: the first in name order.
std::string ClosestName(absl::string_view name, const std::set<std::string>& names);

}  // namespace meshrt

#endif  // MESHRT_UTIL_CLOSEST_NAME_H_
