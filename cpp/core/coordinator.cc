#include "core/coordinator.h"

#include <algorithm>
#include <chrono>

namespace fastmts {

void Coordinator::request_stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_.store(true, std::memory_order_release);
  stopped_.notify_all();
}

void Coordinator::clear_stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_.store(false, std::memory_order_release);
  has_error_ = false;
  native_error_.reset();
}

bool Coordinator::wait_for_stop() const {
  std::unique_lock<std::mutex> lock(mu_);
  stopped_.wait(lock, [this] { return stop_.load(std::memory_order_acquire); });
  return true;
}

bool Coordinator::wait_for_stop(double timeout_secs) const {
  if (!(timeout_secs > 0)) return should_stop();  // NaN too
  // Beyond what steady_clock's nanoseconds can add to now without overflow
  // (about 292 years in all), waiting is waiting for stop.
  constexpr double kForever = 1e9;  // seconds, some 31 years
  if (timeout_secs >= kForever) return wait_for_stop();
  std::unique_lock<std::mutex> lock(mu_);
  return stopped_.wait_for(lock, std::chrono::duration<double>(timeout_secs),
                           [this] { return stop_.load(std::memory_order_acquire); });
}

void Coordinator::report_error(int code, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool clean =
      std::find(clean_stop_codes_.begin(), clean_stop_codes_.end(), code) != clean_stop_codes_.end();
  // As TF: an error reported once stop was requested is dropped.
  if (!clean && !has_error_ && !stop_.load(std::memory_order_acquire)) {
    has_error_ = true;
    native_error_ = Error{code, message};
  }
  stop_.store(true, std::memory_order_release);
  stopped_.notify_all();
}

bool Coordinator::claim_error() {
  std::lock_guard<std::mutex> lock(mu_);
  if (has_error_) return false;
  has_error_ = true;
  return true;
}

std::optional<Coordinator::Error> Coordinator::native_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return native_error_;
}

void Coordinator::set_clean_stop_codes(std::vector<int> codes) {
  std::lock_guard<std::mutex> lock(mu_);
  clean_stop_codes_ = std::move(codes);
}

}  // namespace fastmts
