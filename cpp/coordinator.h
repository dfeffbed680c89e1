// The stop state of a training Coordinator, shared by Python and native
// code: native loops and threads read it without the GIL.
#pragma once

#include <atomic>

namespace fastmts {

class Coordinator {
 public:
  void request_stop() { stop_.store(true, std::memory_order_release); }
  void clear_stop() { stop_.store(false, std::memory_order_release); }
  bool should_stop() const { return stop_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> stop_{false};
};

}  // namespace fastmts
