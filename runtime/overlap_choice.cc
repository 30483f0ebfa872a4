#include "runtime/overlap_choice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/median.h"

namespace meshrt {

OverlapChoice::OverlapChoice(int warmup, int trials, double margin)
    : warmup_(std::max(warmup, 0)), trials_(std::max(trials, 1)), margin_(margin) {}

bool OverlapChoice::NextOverlap() const {
  if (decided_) return overlap_;
  if (runs_ < warmup_) return true;
  return (runs_ - warmup_) % 2 == 0;  // on, off, on, off, ...
}

bool OverlapChoice::Record(bool overlapped, double seconds) {
  if (decided_) return false;
  if (runs_++ < warmup_) return false;
  (overlapped ? on_ : off_).push_back(seconds);
  if (static_cast<int>(on_.size()) < trials_ || static_cast<int>(off_.size()) < trials_) {
    return false;
  }
  decided_ = true;
  overlap_ = !(Median(off_) < Median(on_) * (1.0 - margin_));
  return true;
}

std::string OverlapChoice::Summary() const {
  if (!decided_) {
    return absl::StrCat("measuring (", runs_, " of ", warmup_ + 2 * trials_, " steps)");
  }
  return absl::StrFormat(
      "%s (step medians: on %.1f ms, off %.1f ms, %d steps each; off is kept only when faster by "
      "more than %g%%)",
      overlap_ ? "on" : "off", 1e3 * Median(on_), 1e3 * Median(off_), trials_, 100 * margin_);
}

}  // namespace meshrt
