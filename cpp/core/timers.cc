#include "core/timers.h"

#include <chrono>

namespace fastmts {

namespace {
std::function<double()>& wall_clock() {
  static auto* clock = new std::function<double()>();
  return *clock;
}
}  // namespace

void set_wall_clock(std::function<double()> clock) { wall_clock() = std::move(clock); }

double wall_time_seconds() {
  if (wall_clock()) return wall_clock()();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool SecondOrStepTimer::should_trigger_for_step(int64_t step) const {
  if (never_) return false;
  if (!last_step_) return true;
  if (*last_step_ == step) return false;
  if (every_secs_ && wall_time_seconds() >= last_time_ + *every_secs_) return true;
  if (every_steps_ && static_cast<double>(step) >= static_cast<double>(*last_step_) + *every_steps_)
    return true;
  return false;
}

std::optional<double> SecondOrStepTimer::update_last_triggered_step(int64_t step) {
  const double now = wall_time_seconds();
  std::optional<double> elapsed;
  if (last_step_) elapsed = now - last_time_;
  last_time_ = now;
  last_step_ = step;
  return elapsed;
}

}  // namespace fastmts
