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
// finish.
//
// Its own lock rather than std::recursive_mutex, because every step takes it
// twice: uncontended, a round is one compare-and-swap to take it and a plain
// release store to give it back, and a thread waits on a condition variable
// only when another holds it. pthread's recursive mutex cost 140 instructions
// a step; with this lock fastmts's own instructions a step on trivial/full
// fell from 5,454 to 5,356 (callgrind, bench/instructions.py).
//
// Giving it back is a plain store, not a locked exchange (~20 cycles each
// on x86, twice a step), until a thread has had to wait: a waiter counts
// itself, then looks at the owner; an unlock stores the owner, then looks at
// the count. Without a full barrier between that store and that load, both
// can miss the other (a lost wakeup), so from the first wait on, the lock is
// `contended_` and every unlock puts the barrier in. The one unlock that may
// race the first waiter's flag can still miss it: waiters look again every
// kRecheck, which bounds that one delay.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/run_plan.h"

namespace fastmts {

class HookDispatchLock {
 public:
  // Holds the lock for one round of hook calls.
  class Round {
   public:
    Round(HookDispatchLock& lock, const BlockingCallGuard* guard) : lock_(lock) {
      if (lock_.try_lock()) return;
      if (guard == nullptr) {
        lock_.wait_and_lock();
        return;
      }
      void* token = guard->release();
      lock_.wait_and_lock();
      guard->reacquire(token);
    }
    ~Round() { lock_.unlock(); }
    Round(const Round&) = delete;
    Round& operator=(const Round&) = delete;

   private:
    HookDispatchLock& lock_;
  };

 private:
  static constexpr std::chrono::microseconds kRecheck{200};

  bool try_lock() {
    const std::thread::id me = std::this_thread::get_id();
    // Only this thread ever stores its own id here, so seeing it means it
    // holds the lock (a nested round).
    if (owner_.load(std::memory_order_relaxed) == me) {
      ++depth_;
      return true;
    }
    std::thread::id none;
    // Acquire: what the previous owner's hooks wrote (their state, released
    // by its unlock) is seen by this one's (aarch64 is weakly ordered).
    if (!owner_.compare_exchange_strong(none, me, std::memory_order_acquire,
                                        std::memory_order_relaxed))
      return false;
    depth_ = 1;
    return true;
  }

  void wait_and_lock() {
    std::unique_lock<std::mutex> lock(wait_mu_);
    contended_.store(true, std::memory_order_seq_cst);
    // Counted before the owner is looked at again (seq_cst, as a contended
    // unlock's barrier): that unlock either sees this waiter and notifies it
    // under wait_mu_, or comes before the look, which then finds it free.
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    // The waiter's half of the pairing with unlock's fence: the count is
    // visible before the owner is read (the C++ model asks for a fence on
    // both sides; x86's locked add and aarch64's ldaxr/stlxr give it anyway).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while (!try_lock()) wakeup_.wait_for(lock, kRecheck);
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }

  void unlock() {
    if (--depth_ > 0) return;
    owner_.store(std::thread::id(), std::memory_order_release);
    if (!contended_.load(std::memory_order_relaxed)) return;  // no thread ever waited
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_relaxed) != 0) {
      std::lock_guard<std::mutex> lock(wait_mu_);
      wakeup_.notify_one();
    }
  }

  std::atomic<std::thread::id> owner_{std::thread::id()};
  int depth_ = 0;  // the owner's nesting; only the owner touches it
  std::atomic<bool> contended_{false};  // a thread has waited: unlocks fence
  std::atomic<int> waiters_{0};
  std::mutex wait_mu_;
  std::condition_variable wakeup_;
};

}  // namespace fastmts
