#include "core/step_rate_batch.h"

#include <chrono>
#include <utility>

namespace fastmts {

double StepRateBatch::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StepRateBatch::StepRateBatch(SecondOrStepTimer* timer, RecordFn record, Clock clock)
    : timer_(timer), record_(std::move(record)), clock_(clock) {}

std::optional<StepRateBatch::StepRate> StepRateBatch::fire(int64_t global_step) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<int64_t> previous = timer_->last_step();
  const std::optional<double> elapsed_secs = timer_->update_last_triggered_step(global_step);
  if (!elapsed_secs) return std::nullopt;
  return StepRate{global_step - *previous, *elapsed_secs, global_step, timer_->last_time()};
}

void StepRateBatch::hold(const std::optional<StepRate>& rate, bool may_wait) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    timer_moved_ = true;
    if (rate) {
      if (waiting_.empty()) first_waiting_since_.store(clock_());
      waiting_.push_back(*rate);
    }
  }
  if (!may_wait) flush();
}

void StepRateBatch::flush() {
  std::vector<StepRate> rates;
  std::optional<int64_t> timer_last_step;
  double timer_last_time;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!timer_moved_) return;
    rates.swap(waiting_);
    timer_moved_ = false;
    first_waiting_since_.store(0);
    timer_last_step = timer_->last_step();
    timer_last_time = timer_->last_time();
  }
  record_(rates, timer_last_step, timer_last_time);
}

}  // namespace fastmts
