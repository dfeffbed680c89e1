// TF's SecondOrStepTimer (and NeverTriggerTimer): triggers every N steps
// and/or every S seconds of wall time, as basic_session_run_hooks does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

namespace fastmts {

class SecondOrStepTimer {
 public:
  // Unset means "not by this measure", as None in TF. Values are taken as
  // TF takes them (no validation: TF's hooks validate their own arguments,
  // and a negative or fractional value behaves as it does in Python).
  // `never` makes a NeverTriggerTimer.
  SecondOrStepTimer(std::optional<double> every_secs, std::optional<double> every_steps,
                    bool never = false)
      : every_secs_(every_secs), every_steps_(every_steps), never_(never) {}
  // Neither measure: a hook's configuration before its timer is set.
  SecondOrStepTimer() : SecondOrStepTimer(std::nullopt, std::nullopt) {}

  bool should_trigger_for_step(int64_t step) const;
  // Returns the seconds since the previous trigger, if there was one.
  std::optional<double> update_last_triggered_step(int64_t step);
  void reset() { last_step_.reset(); }
  std::optional<int64_t> last_step() const { return last_step_; }
  double last_time() const { return last_time_; }
  // Takes the state of a timer kept elsewhere (TF's Python timer of the same
  // hook, which is the reference).
  void set_state(std::optional<int64_t> last_step, double last_time) {
    last_step_ = last_step;
    last_time_ = last_time;
  }

 private:
  std::optional<double> every_secs_;
  std::optional<double> every_steps_;
  bool never_;
  std::optional<int64_t> last_step_;
  double last_time_ = 0;
};

double wall_time_seconds();  // time.time(), as set_wall_clock says

// Replaces the wall clock of every timer; an empty function restores the OS
// clock. The extension sets it once at import (python_time.h: the clock TF's
// own timers read). Not thread-safe: set it while no session is running.
void set_wall_clock(std::function<double()> clock);

}  // namespace fastmts
