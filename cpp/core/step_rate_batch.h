// StepCounterHook's step rates on their way to TF's _log_and_record
// (python/fastmts/basic_session_run_hooks.py), one class: each firing of the
// hook's timer moves the timer and, after its first, makes a rate (the steps
// and seconds since the previous firing). A rate, or the timer's first move,
// is handed to `record` together with the timer's state then, so that TF's
// timer on the hook object can be set to it. Inside a loop that allows it
// (StepContext::may_defer) they wait and go over in one batch, since each
// Python call costs more than many steps of a small model:
//   - when the hook flushes (flush(): before any other Python code of the
//     hooks runs, before another hook postpones work (PostponedWork), when
//     the loop ends, at end());
//   - after the step in which the first waiting rate became
//     kMaxRecordDelay old (flush_if_overdue()), so a slow record still
//     reaches the event file promptly;
// otherwise at once. Two threads may step one session: the timer moves and
// the batch is taken under one lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "core/timers.h"

namespace fastmts {

class StepRateBatch {
 public:
  struct StepRate {
    int64_t elapsed_steps;
    double elapsed_secs;
    int64_t global_step;
    double triggered_at;  // the timer's time for this firing
  };
  using RecordFn = std::function<void(const std::vector<StepRate>& rates,
                                      std::optional<int64_t> timer_last_step,
                                      double timer_last_time)>;
  // Seconds on a steady clock (never 0), for how long rates have waited.
  using Clock = double (*)();
  static constexpr double kMaxRecordDelay = 0.1;  // seconds

  static double steady_seconds();

  // `timer` is the hook's own (its gate's): it outlives the batch.
  StepRateBatch(SecondOrStepTimer* timer, RecordFn record, Clock clock = &steady_seconds);

  // The timer fired for `global_step`: moves it, and returns the rate since
  // its previous firing (none on its first).
  std::optional<StepRate> fire(int64_t global_step);
  // Leaves what `fire` returned (a rate, or none: the timer's move alone)
  // for `record`: waiting if `may_wait`, else handed over at once.
  void hold(const std::optional<StepRate>& rate, bool may_wait);
  // Hands over what waits (nothing if the timer did not move since the last
  // hand-over) in one call of `record`.
  void flush();
  // Once a step: flush() if the first waiting rate is kMaxRecordDelay old.
  // One relaxed atomic load when nothing waits.
  void flush_if_overdue() {
    const double since = first_waiting_since_.load(std::memory_order_relaxed);
    if (since != 0 && clock_() - since >= kMaxRecordDelay) flush();
  }

 private:
  SecondOrStepTimer* timer_;
  RecordFn record_;
  Clock clock_;
  std::mutex mu_;
  std::vector<StepRate> waiting_;
  bool timer_moved_ = false;  // since the last hand-over
  std::atomic<double> first_waiting_since_{0};  // clock_() seconds; 0: none waits
};

}  // namespace fastmts
