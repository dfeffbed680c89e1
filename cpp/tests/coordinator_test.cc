// The native state of a training Coordinator (core/coordinator.h), as TF's
// coordinator.py keeps it: request_stop sets the stop flag once and for all
// until clear_stop; should_stop reads it; wait_for_stop blocks until it is
// set, or for a timeout as threading.Event.wait (a timeout that is not
// positive does not block); the first error is kept and later ones dropped,
// as is one reported after stop was requested or of a clean-stop type
// (OutOfRangeError by default); clear_stop forgets the error too. In C++ the
// first error is the native error a native thread reported (code and
// message; Python's join re-raises it as the matching tf.errors class), or
// the Python side's claim to hold one (claim_error). join() and its grace
// period are Python's (python/fastmts/coordinator.py): the native object
// has no threads of its own to join; queue_runner_test.cc covers native
// threads stopping with it. Every wait here is bounded.
#include "core/coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

namespace fastmts {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(CoordinatorTest, StopIsRequestedOnceUntilCleared) {
  Coordinator coord;
  EXPECT_FALSE(coord.should_stop());
  coord.request_stop();
  EXPECT_TRUE(coord.should_stop());
  coord.request_stop();  // again: still stopped, nothing else
  EXPECT_TRUE(coord.should_stop());
  coord.clear_stop();
  EXPECT_FALSE(coord.should_stop());
}

TEST(CoordinatorTest, WaitForStopTimesOutWhenNobodyStops) {
  Coordinator coord;
  const auto start = Clock::now();
  EXPECT_FALSE(coord.wait_for_stop(0.05));
  EXPECT_GE(seconds_since(start), 0.05);
  EXPECT_LT(seconds_since(start), 10.0);
}

TEST(CoordinatorTest, ATimeoutThatIsNotPositiveDoesNotBlock) {
  Coordinator coord;
  const auto start = Clock::now();
  EXPECT_FALSE(coord.wait_for_stop(0.0));
  EXPECT_FALSE(coord.wait_for_stop(-1.0));
  EXPECT_FALSE(coord.wait_for_stop(std::nan("")));
  EXPECT_LT(seconds_since(start), 1.0);
  coord.request_stop();
  EXPECT_TRUE(coord.wait_for_stop(-1.0));
  EXPECT_TRUE(coord.wait_for_stop(0.0));
}

TEST(CoordinatorTest, AStoppedCoordinatorDoesNotBlockAnyWait) {
  Coordinator coord;
  coord.request_stop();
  const auto start = Clock::now();
  EXPECT_TRUE(coord.wait_for_stop());
  EXPECT_TRUE(coord.wait_for_stop(30.0));
  EXPECT_TRUE(coord.wait_for_stop(1e12));  // "forever": the untimed wait
  EXPECT_TRUE(coord.wait_for_stop(std::numeric_limits<double>::infinity()));
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(CoordinatorTest, AStopWakesEveryWaitingThread) {
  // The waiters share the coordinator and are detached: one that is never
  // woken fails the test instead of hanging it.
  auto coord = std::make_shared<Coordinator>();
  constexpr int kWaiters = 4;
  auto started = std::make_shared<std::atomic<int>>(0);
  std::vector<std::future<bool>> waits;
  // Two wait without a timeout, two with one far longer than the test.
  for (int i = 0; i < kWaiters; ++i) {
    auto woke = std::make_shared<std::promise<bool>>();
    waits.push_back(woke->get_future());
    std::thread([coord, started, woke, i] {
      started->fetch_add(1);
      woke->set_value(i % 2 ? coord->wait_for_stop() : coord->wait_for_stop(60.0));
    }).detach();
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (started->load() < kWaiters && Clock::now() < deadline) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (auto& w : waits)  // none has returned before the stop
    EXPECT_EQ(w.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  coord->request_stop();
  for (auto& w : waits) {
    const bool woke = w.wait_until(deadline) == std::future_status::ready;
    EXPECT_TRUE(woke) << "a waiter was not woken";
    if (woke) {
      EXPECT_TRUE(w.get());
    }
  }
}

TEST(CoordinatorTest, AThreadsErrorIsKeptAndStopsTheOthers) {
  Coordinator coord;
  std::thread failing([&] { coord.report_error(3, "Invalid argument: bad input"); });
  EXPECT_TRUE(coord.wait_for_stop(10.0));
  failing.join();
  const std::optional<Coordinator::Error> error = coord.native_error();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, 3);
  EXPECT_EQ(error->message, "Invalid argument: bad input");
}

TEST(CoordinatorTest, OnlyTheFirstErrorIsKept) {
  Coordinator coord;
  coord.report_error(3, "first");
  coord.report_error(13, "second");
  EXPECT_EQ(coord.native_error()->message, "first");
  EXPECT_FALSE(coord.claim_error());  // the Python side's exception comes later: not kept
  EXPECT_EQ(coord.native_error()->code, 3);
}

TEST(CoordinatorTest, AnErrorReportedAfterStopIsDropped) {
  Coordinator coord;
  coord.request_stop();
  coord.report_error(3, "too late");
  EXPECT_FALSE(coord.native_error().has_value());
  EXPECT_TRUE(coord.claim_error());  // no error held: the Python side's is kept
}

TEST(CoordinatorTest, APythonErrorClaimedFirstWins) {
  Coordinator coord;
  EXPECT_TRUE(coord.claim_error());
  EXPECT_FALSE(coord.claim_error());
  coord.report_error(3, "after Python's");
  EXPECT_FALSE(coord.native_error().has_value());
  EXPECT_TRUE(coord.should_stop());  // the report still stops
}

TEST(CoordinatorTest, ACleanStopCodeStopsWithoutError) {
  Coordinator coord;
  constexpr int kOutOfRange = 11;
  coord.set_clean_stop_codes({kOutOfRange});
  coord.report_error(kOutOfRange, "End of sequence");
  EXPECT_TRUE(coord.should_stop());
  EXPECT_FALSE(coord.native_error().has_value());
  // Without it among the clean codes the same report is an error.
  Coordinator strict;
  strict.set_clean_stop_codes({});
  strict.report_error(kOutOfRange, "End of sequence");
  ASSERT_TRUE(strict.native_error().has_value());
  EXPECT_EQ(strict.native_error()->code, kOutOfRange);
}

TEST(CoordinatorTest, ClearStopForgetsTheErrorToo) {
  Coordinator coord;
  coord.report_error(3, "first run");
  coord.clear_stop();
  EXPECT_FALSE(coord.should_stop());
  EXPECT_FALSE(coord.native_error().has_value());
  EXPECT_FALSE(coord.wait_for_stop(0.01));
  coord.report_error(13, "second run");  // a new first error
  EXPECT_EQ(coord.native_error()->message, "second run");
  coord.clear_stop();
  EXPECT_TRUE(coord.claim_error());
}

TEST(CoordinatorTest, ManyThreadsReportingKeepExactlyOneOfTheirErrors) {
  Coordinator coord;
  constexpr int kThreads = 8;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      coord.report_error(100 + i, "thread " + std::to_string(i));
    });
  go = true;
  for (std::thread& t : threads) t.join();
  const std::optional<Coordinator::Error> error = coord.native_error();
  ASSERT_TRUE(error.has_value());
  EXPECT_GE(error->code, 100);
  EXPECT_LT(error->code, 100 + kThreads);
  EXPECT_EQ(error->message, "thread " + std::to_string(error->code - 100));
}

}  // namespace
}  // namespace fastmts
