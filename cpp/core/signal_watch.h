// Lets a loop that runs without the GIL notice signals within one step.
//
// Python runs its signal handlers only when a thread holding the GIL checks
// (PyErr_CheckSignals), so a native loop would have to take the GIL every
// step just to ask. Instead, while a SignalWatch lives, a small handler is
// chained in front of the installed handler of each watched signal: it
// counts the delivery, then calls the previous handler (Python's, which
// records the signal as usual). The loop compares the count between steps
// and takes the GIL only when it moved.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace fastmts {

class SignalWatch {
 public:
  // Chains in front of the handlers of `signals` that have a handler
  // function installed (not the default action, not ignored). Watches may
  // nest and overlap, from any thread: a signal is chained once, and
  // unchained when its last watch ends.
  explicit SignalWatch(const std::vector<int>& signals);
  // Restores each previous handler, unless something replaced ours
  // meanwhile (say, Python code that installed a new handler): then that
  // handler stays.
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // Deliveries of chained signals so far, process-wide; async-signal-safe.
  static uint64_t deliveries();

 private:
  std::vector<int> chained_;
};

// When a loop without the GIL should let Python run its signal handlers:
// when a watched signal was delivered since it last did, and at least every
// `interval` in any case, since a handler installed meanwhile (say, by a
// hook's Python code) is not watched.
class SignalCheckSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  explicit SignalCheckSchedule(Clock::duration interval = std::chrono::milliseconds(100))
      : interval_(interval), seen_(SignalWatch::deliveries()), next_(Clock::now() + interval) {}

  // Whether to check now; if so, the next check is due `interval` from now.
  bool due() {
    const uint64_t delivered = SignalWatch::deliveries();
    if (delivered == seen_ && Clock::now() < next_) return false;
    seen_ = delivered;
    next_ = Clock::now() + interval_;
    return true;
  }

 private:
  Clock::duration interval_;
  uint64_t seen_;
  Clock::time_point next_;
};

}  // namespace fastmts
