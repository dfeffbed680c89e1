// The shared state of a training Coordinator: the stop flag, the first
// error, and waiting for stop. Python's Coordinator (fastmts/coordinator.py)
// and native threads (queue runners) use the same object; native code reads
// and sets it without the GIL.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fastmts {

class Coordinator {
 public:
  struct Error {
    int code;
    std::string message;
  };

  void request_stop();
  void clear_stop();  // also forgets the error, as TF's clear_stop
  bool should_stop() const { return stop_.load(std::memory_order_acquire); }
  // Blocks until stop is requested; returns true.
  bool wait_for_stop() const;
  // Blocks until stop is requested or `timeout_secs` passed; returns
  // should_stop(). As Python's Event.wait (TF's Coordinator waits on one):
  // a timeout that is not positive (zero, negative, NaN) does not block.
  bool wait_for_stop(double timeout_secs) const;

  // A native thread failed: unless the code is a clean stop, the error is
  // kept if it is the first and stop is not yet requested; stop is requested.
  void report_error(int code, const std::string& message);
  // The Python side records an exception: true if it is the first (the
  // caller keeps it), false if an error is already held.
  bool claim_error();
  // The first error, when a native thread reported it.
  std::optional<Error> native_error() const;
  void set_clean_stop_codes(std::vector<int> codes);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable stopped_;
  std::atomic<bool> stop_{false};
  bool has_error_ = false;              // guarded by mu_
  std::optional<Error> native_error_;   // guarded by mu_
  std::vector<int> clean_stop_codes_;   // guarded by mu_
};

}  // namespace fastmts
