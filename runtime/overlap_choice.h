// Whether an executor overlaps its collectives with compute, chosen by measuring both
// (ExecutorOptions::choose_overlap; the worker's --overlap_comm=auto, its default).
//
// Why: overlap pays when a core is free to run the communication thread (or the wire is slow);
// on a host whose cores the workers' step threads already fill (a local cluster of one worker per
// core) the communication thread only takes CPU from them: on a 2-core Intel Xeon the MLP
// benchmark's data-parallel step took 70.3 ms with overlap and 67.5 ms without (medians of 4
// interleaved runs each). Which one wins depends on the host, so it is measured, never assumed.
//
// How: the first `warmup` runs overlap (untimed: caches, the buffer pool and the communication
// thread settle); the next 2 * `trials` runs alternate on, off, on, off, ... and are timed; then
// overlap stays off only if off's median is faster than on's by more than `margin` (a fraction),
// else on. Runs that failed are not counted (the caller records only successful ones). Results
// are the same bits either way (executor.h, "Overlap"), so the choice changes only speed.
//
// Thread-safety: thread-compatible (an executor's calling thread owns it).
#ifndef MESHRT_RUNTIME_OVERLAP_CHOICE_H_
#define MESHRT_RUNTIME_OVERLAP_CHOICE_H_

#include <string>
#include <vector>

namespace meshrt {

class OverlapChoice {
 public:
  explicit OverlapChoice(int warmup = 2, int trials = 3, double margin = 0.02);

  // Whether the next run overlaps.
  bool NextOverlap() const;
  // Records a successful run that overlapped (or not) as NextOverlap said, taking `seconds`.
  // Returns true when this record made the decision; ignored (false) once decided.
  bool Record(bool overlapped, double seconds);

  bool decided() const { return decided_; }
  // Meaningful once decided().
  bool overlap() const { return overlap_; }
  // E.g. "off (step medians: on 70.3 ms, off 67.5 ms, 3 steps each; off is kept only when faster
  // by more than 2%)"; "measuring (k of n steps)" before the decision.
  std::string Summary() const;

 private:
  const int warmup_, trials_;
  const double margin_;
  int runs_ = 0;  // recorded runs, warmup included
  std::vector<double> on_, off_;
  bool decided_ = false, overlap_ = true;
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_OVERLAP_CHOICE_H_
