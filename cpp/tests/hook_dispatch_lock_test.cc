// The per-session lock around each step's hook rounds (core/hook_dispatch_lock.h):
// nested rounds on one thread, mutual exclusion between threads, and a
// waiter that gives up its guard (the GIL) while it waits.
#include "core/hook_dispatch_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace fastmts {
namespace {

// Counts release/reacquire pairs, as the GIL guard would give the GIL up.
class CountingGuard : public BlockingCallGuard {
 public:
  void* release() const override {
    released.fetch_add(1);
    return const_cast<CountingGuard*>(this);
  }
  void reacquire(void* token) const override {
    EXPECT_EQ(token, this);
    reacquired.fetch_add(1);
  }
  mutable std::atomic<int> released{0}, reacquired{0};
};

void wait_until(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!flag.load()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
    std::this_thread::yield();
  }
}

TEST(HookDispatchLockTest, NestedRoundsOnOneThreadDoNotBlock) {
  HookDispatchLock lock;
  CountingGuard guard;
  {
    HookDispatchLock::Round outer(lock, &guard);
    HookDispatchLock::Round inner(lock, &guard);
    HookDispatchLock::Round innermost(lock, nullptr);
  }
  HookDispatchLock::Round again(lock, &guard);  // free after the outermost
  EXPECT_EQ(guard.released.load(), 0);
}

TEST(HookDispatchLockTest, ThreadsNeverOverlapAndNoRoundIsLost) {
  HookDispatchLock lock;
  constexpr int kThreads = 8, kRounds = 20000;
  int64_t counter = 0;  // plain: only the lock guards it
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CountingGuard guard;
      for (int i = 0; i < kRounds; ++i) {
        HookDispatchLock::Round round(lock, t % 2 ? &guard : nullptr);
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        if (i % 7 == 0) {  // a nested round now and then
          HookDispatchLock::Round nested(lock, &guard);
          ++counter;
        } else {
          ++counter;
        }
        inside.fetch_sub(1);
      }
      EXPECT_EQ(guard.released.load(), guard.reacquired.load());
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, int64_t{kThreads} * kRounds);
}

TEST(HookDispatchLockTest, AWaiterGivesUpItsGuardUntilTheHolderLeaves) {
  HookDispatchLock lock;
  CountingGuard guard;
  std::atomic<bool> held{false}, waiter_blocked{false}, waiter_in{false};
  std::thread holder([&] {
    HookDispatchLock::Round outer(lock, nullptr);
    HookDispatchLock::Round nested(lock, nullptr);
    held = true;
    wait_until(waiter_blocked);
    // The waiter has given its guard up; it must stay out while this
    // thread's rounds last, the outer one included.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(waiter_in.load());
  });
  wait_until(held);
  std::thread waiter([&] {
    struct Signalling : CountingGuard {
      explicit Signalling(std::atomic<bool>& blocked) : blocked_(blocked) {}
      void* release() const override {
        blocked_ = true;
        return CountingGuard::release();
      }
      std::atomic<bool>& blocked_;
    } signalling(waiter_blocked);
    HookDispatchLock::Round round(lock, &signalling);
    waiter_in = true;
    EXPECT_EQ(signalling.released.load(), 1);
    EXPECT_EQ(signalling.reacquired.load(), 1);
  });
  holder.join();
  waiter.join();
  EXPECT_TRUE(waiter_in.load());
  EXPECT_EQ(guard.released.load(), 0);
}

}  // namespace
}  // namespace fastmts
