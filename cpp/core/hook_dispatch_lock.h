// Several threads may step one session at once (feeder threads, RL
// learners). TF_SessionRun is thread-safe, the hooks are not: TF's own are
// plain Python objects whose state the GIL happens to guard between
// bytecodes, and fastmts's native ones keep theirs in plain members. So each
// step's hook dispatch, its before_run round and its after_run round, holds
// one lock per session, while the TF run between them does not. The lock is
// recursive, since a hook's Python code may step the same session again from
// inside its own dispatch.
//
// A thread that holds the guard's lock (the GIL) gives it up while it waits
// for the dispatch lock: the holder may be a hook that needs the GIL to
// finish. The uncontended case is one try_lock and one unlock: nothing a
// single-threaded step can measure.
#pragma once

#include <mutex>

#include "core/run_plan.h"

namespace fastmts {

class HookDispatchLock {
 public:
  // Holds the lock for one round of hook calls.
  class Round {
   public:
    Round(HookDispatchLock& lock, const BlockingCallGuard* guard) : mu_(lock.mu_) {
      if (mu_.try_lock()) return;
      if (guard == nullptr) {
        mu_.lock();
        return;
      }
      void* token = guard->release();
      mu_.lock();
      guard->reacquire(token);
    }
    ~Round() { mu_.unlock(); }
    Round(const Round&) = delete;
    Round& operator=(const Round&) = delete;

   private:
    std::recursive_mutex& mu_;
  };

 private:
  std::recursive_mutex mu_;
};

}  // namespace fastmts
