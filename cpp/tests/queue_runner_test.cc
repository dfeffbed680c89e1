// Native queue-runner threads under a Coordinator (core/queue_runner.h), as
// TF's queue_runner_impl.py runs them: one thread per enqueue op, each
// running it until the coordinator stops; an error goes to the coordinator
// (which keeps the first and stops the others); an enqueue failing because
// its queue closed ends that thread quietly, and the last one to end so runs
// the close op; one more thread waits for stop and runs the cancel op, which
// releases enqueues blocked in TF. So these are the threads a Coordinator's
// join waits for: they stop when it stops. TF_SessionRun is a fake
// (tests/fake_tf.h) whose runs all fail once a deadline has passed, so a
// thread that does not stop ends the test with an error instead of a hang.
#include "core/queue_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/native_threads.h"
#include "tests/fake_tf.h"

namespace fastmts {
namespace {

using testing::FakeTf;
using testing::fake_op;
using Clock = std::chrono::steady_clock;

constexpr int kCancelled = 1, kInvalidArgument = 3, kOutOfRange = 11, kInternal = 13;

class QueueRunnerTest : public ::testing::Test {
 protected:
  TF_Operation* const enqueue_a = fake_op(10);
  TF_Operation* const enqueue_b = fake_op(11);
  TF_Operation* const close_op = fake_op(12);
  TF_Operation* const cancel_op = fake_op(13);

  void SetUp() override {
    threads_before_ = live_native_threads();
    fake_.set_run([this](const testing::RunCall& call, TF_Tensor**, TF_Status* status) {
      TF_Operation* op = call.targets.at(0);
      std::function<void(TF_Status*)> behaviour;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++runs_[op];
        auto it = behaviours_.find(op);
        if (it != behaviours_.end()) behaviour = it->second;
      }
      cv_.notify_all();
      if (Clock::now() > deadline_) {
        FakeTf::fail(status, kInternal, "the test's deadline passed");
        return;
      }
      if (behaviour) behaviour(status);
    });
  }

  QueueRunnerSpec spec(std::vector<TF_Operation*> enqueues) {
    QueueRunnerSpec s;
    for (size_t i = 0; i < enqueues.size(); ++i) s.thread_names.push_back("enqueue");
    s.thread_names.push_back("close_on_stop");
    s.enqueue_ops = std::move(enqueues);
    s.close_op = close_op;
    s.cancel_op = cancel_op;
    s.queue_closed_codes = {kOutOfRange, kCancelled};
    return s;
  }

  // What a run of `op` does (nothing: it succeeds).
  void on_run(TF_Operation* op, std::function<void(TF_Status*)> behaviour) {
    std::lock_guard<std::mutex> lock(mu_);
    behaviours_[op] = std::move(behaviour);
  }
  int runs(TF_Operation* op) {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_[op];
  }
  // Waits (bounded) until `done` holds (called under the lock: it reads
  // runs_locked), checked again after each run.
  bool wait_until(const std::function<bool()>& done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline_, done);
  }
  int runs_locked(TF_Operation* op) { return runs_[op]; }

  const Clock::time_point deadline_ = Clock::now() + std::chrono::seconds(10);
  int threads_before_ = 0;
  FakeTf fake_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<TF_Operation*, int> runs_;
  std::map<TF_Operation*, std::function<void(TF_Status*)>> behaviours_;
};

TEST_F(QueueRunnerTest, EnqueueThreadsRunUntilTheCoordinatorStops) {
  auto coord = std::make_shared<Coordinator>();
  QueueRunnerThreads threads(testing::fake_session(), spec({enqueue_a, enqueue_b}), coord);
  EXPECT_EQ(threads.size(), 3u);
  EXPECT_EQ(live_native_threads(), threads_before_ + 3);
  ASSERT_TRUE(
      wait_until([&] { return runs_locked(enqueue_a) >= 3 && runs_locked(enqueue_b) >= 3; }));
  EXPECT_EQ(runs(cancel_op), 0);  // only once stop is requested
  coord->request_stop();
  threads.join();
  for (size_t i = 0; i < threads.size(); ++i) EXPECT_FALSE(threads.alive(i)) << i;
  EXPECT_EQ(live_native_threads(), threads_before_);
  EXPECT_EQ(runs(cancel_op), 1);
  EXPECT_EQ(runs(close_op), 0);
  EXPECT_FALSE(coord->native_error().has_value());
}

TEST_F(QueueRunnerTest, AnEnqueueErrorGoesToTheCoordinatorAndStopsTheOthers) {
  auto coord = std::make_shared<Coordinator>();
  on_run(enqueue_a, [this](TF_Status* status) {
    if (runs(enqueue_a) == 3) FakeTf::fail(status, kInvalidArgument, "Invalid argument: boom");
  });
  QueueRunnerThreads threads(testing::fake_session(), spec({enqueue_a, enqueue_b}), coord);
  EXPECT_TRUE(coord->wait_for_stop(10.0));
  threads.join();
  const std::optional<Coordinator::Error> error = coord->native_error();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code, kInvalidArgument);
  EXPECT_EQ(error->message, "Invalid argument: boom");
  EXPECT_EQ(runs(enqueue_a), 3);  // the failing thread ran no more
  EXPECT_EQ(runs(cancel_op), 1);
  EXPECT_EQ(live_native_threads(), threads_before_);
}

TEST_F(QueueRunnerTest, WhenEveryQueueClosesTheLastThreadRunsTheCloseOp) {
  auto coord = std::make_shared<Coordinator>();
  for (TF_Operation* op : {enqueue_a, enqueue_b})
    on_run(op, [this, op](TF_Status* status) {
      if (runs(op) >= 2) FakeTf::fail(status, kOutOfRange, "Queue is closed");
    });
  {
    QueueRunnerThreads threads(testing::fake_session(), spec({enqueue_a, enqueue_b}), coord);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while ((threads.alive(0) || threads.alive(1)) && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_FALSE(threads.alive(0) || threads.alive(1));
    // A closed queue is no error and no stop; the close op ran once.
    EXPECT_FALSE(coord->should_stop());
    EXPECT_EQ(runs(close_op), 1);
    EXPECT_TRUE(threads.alive(2));  // the cancel thread waits for stop
  }  // the destructor requests stop and joins
  EXPECT_TRUE(coord->should_stop());
  EXPECT_FALSE(coord->native_error().has_value());
  EXPECT_EQ(runs(cancel_op), 1);
  EXPECT_EQ(live_native_threads(), threads_before_);
}

TEST_F(QueueRunnerTest, AnEnqueueBlockedInTensorFlowIsReleasedByTheCancelOp) {
  auto coord = std::make_shared<Coordinator>();
  bool released_by_cancel = false;
  // The enqueue blocks as on a full queue until the cancel op runs; then it
  // fails as TF's cancelled enqueues do.
  on_run(enqueue_a, [this, &released_by_cancel](TF_Status* status) {
    std::unique_lock<std::mutex> lock(mu_);
    released_by_cancel = cv_.wait_until(lock, deadline_, [&] { return runs_locked(cancel_op) > 0; });
    FakeTf::fail(status, kCancelled, "Enqueue operation was cancelled");
  });
  QueueRunnerThreads threads(testing::fake_session(), spec({enqueue_a}), coord);
  ASSERT_TRUE(wait_until([&] { return runs_locked(enqueue_a) >= 1; }));
  coord->request_stop();
  threads.join();
  EXPECT_TRUE(released_by_cancel);
  EXPECT_EQ(runs(enqueue_a), 1);
  EXPECT_EQ(runs(close_op), 1);  // cancelled counts as closed: the last thread closes
  EXPECT_FALSE(coord->native_error().has_value());
  EXPECT_LT(Clock::now(), deadline_);
}

}  // namespace
}  // namespace fastmts
