// StepCounterHook's step rates on their way to TF's _log_and_record, batched
// (StepRateBatch, core/step_rate_batch.h), alone: the timer fires on a wall
// clock the test sets, and the batch's steady clock (how long rates have
// waited) is the test's too. What TF's StepCounterHook computes (the steps
// and seconds since the previous firing, none on the first) and fastmts's
// own part: what waits inside a loop, what goes over together with the
// timer's state, and when a wait is overdue (StepRateBatch::kMaxRecordDelay
// after the first waiting rate). The hook around it:
// step_counter_hook_test.cc.
#include "core/step_rate_batch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "core/timers.h"
#include "tests/step_rates.h"

namespace fastmts {
namespace {

using testing::Rate;
using testing::Record;
using testing::same_rates;
using testing::show;

// The batch's steady clock.
double batch_clock_now = 0;
double batch_clock() { return batch_clock_now; }

class StepRateBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_wall_clock([this] { return wall_; });
    batch_clock_now = 1000.0;
  }
  void TearDown() override { set_wall_clock(nullptr); }

  // The timer fires for `step` at wall time `at`; its rate is held.
  void fire_and_hold(int64_t step, double at, bool may_wait = true) {
    wall_ = at;
    ASSERT_TRUE(timer_.should_trigger_for_step(step));
    batch_.hold(batch_.fire(step), may_wait);
  }

  double wall_ = 100.0;
  SecondOrStepTimer timer_{std::nullopt, 1.0};
  std::vector<Record> records_;
  StepRateBatch batch_{&timer_,
                       [this](const std::vector<Rate>& rates, std::optional<int64_t> last_step,
                              double last_time) {
                         records_.push_back({rates, last_step, last_time});
                       },
                       &batch_clock};
};

TEST_F(StepRateBatchTest, TheFirstFiringHasNoRateTheNextOnesTheStepsAndSecondsSince) {
  wall_ = 100.0;
  EXPECT_FALSE(batch_.fire(1).has_value());
  wall_ = 101.5;
  const std::optional<Rate> rate = batch_.fire(4);
  ASSERT_TRUE(rate.has_value());
  EXPECT_TRUE(same_rates({*rate}, {{3, 1.5, 4, 101.5}})) << show({*rate});
  EXPECT_EQ(timer_.last_step(), 4);
  EXPECT_TRUE(records_.empty());  // firing hands nothing over
}

TEST_F(StepRateBatchTest, WaitingRatesGoOverInOneCallWithTheTimersStateThen) {
  fire_and_hold(1, 100.0);  // the timer's first move: no rate, still handed over
  fire_and_hold(2, 101.0);
  fire_and_hold(3, 103.0);
  EXPECT_TRUE(records_.empty());
  batch_.flush();
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_TRUE(same_rates(records_[0].rates, {{1, 1.0, 2, 101.0}, {1, 2.0, 3, 103.0}}))
      << show(records_[0].rates);
  EXPECT_EQ(records_[0].timer_last_step, 3);
  EXPECT_DOUBLE_EQ(records_[0].timer_last_time, 103.0);
  batch_.flush();  // nothing new: no call
  EXPECT_EQ(records_.size(), 1u);
}

TEST_F(StepRateBatchTest, TheTimersFirstMoveAloneIsHandedOver) {
  fire_and_hold(1, 100.0);
  batch_.flush();
  ASSERT_EQ(records_.size(), 1u);  // TF's timer on the hook object must move too
  EXPECT_TRUE(records_[0].rates.empty());
  EXPECT_EQ(records_[0].timer_last_step, 1);
  EXPECT_DOUBLE_EQ(records_[0].timer_last_time, 100.0);
}

TEST_F(StepRateBatchTest, WithoutWaitingEachFiringIsHandedOverAtOnce) {
  fire_and_hold(1, 100.0, /*may_wait=*/false);
  fire_and_hold(2, 100.5, /*may_wait=*/false);
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_TRUE(records_[0].rates.empty());
  EXPECT_TRUE(same_rates(records_[1].rates, {{1, 0.5, 2, 100.5}})) << show(records_[1].rates);
  EXPECT_EQ(records_[1].timer_last_step, 2);
}

TEST_F(StepRateBatchTest, OverdueOnceTheFirstWaitingRateHasWaitedTheMaxDelay) {
  const double delay = StepRateBatch::kMaxRecordDelay;
  fire_and_hold(1, 100.0);  // no rate: nothing waits for the delay
  batch_clock_now += 10 * delay;
  batch_.flush_if_overdue();
  EXPECT_TRUE(records_.empty());
  fire_and_hold(2, 101.0);  // the first waiting rate, from 1000 + 10 delays
  const double since = batch_clock_now;
  batch_clock_now = since + 0.6 * delay;
  fire_and_hold(3, 102.0);  // a later one does not restart the wait
  batch_.flush_if_overdue();
  EXPECT_TRUE(records_.empty());
  batch_clock_now = since + 1.1 * delay;
  batch_.flush_if_overdue();
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_TRUE(same_rates(records_[0].rates, {{1, 1.0, 2, 101.0}, {1, 1.0, 3, 102.0}}))
      << show(records_[0].rates);
  // Handed over: the next rate waits from its own time.
  fire_and_hold(4, 103.0);
  batch_clock_now += 0.6 * delay;
  batch_.flush_if_overdue();
  EXPECT_EQ(records_.size(), 1u);
  batch_clock_now += 0.6 * delay;
  batch_.flush_if_overdue();
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_TRUE(same_rates(records_[1].rates, {{1, 1.0, 4, 103.0}})) << show(records_[1].rates);
}

TEST_F(StepRateBatchTest, AFlushByOtherMeansRestartsTheWait) {
  const double delay = StepRateBatch::kMaxRecordDelay;
  fire_and_hold(1, 100.0);
  fire_and_hold(2, 101.0);
  batch_clock_now += 0.9 * delay;
  batch_.flush();  // e.g. another hook postponed work
  ASSERT_EQ(records_.size(), 1u);
  fire_and_hold(3, 102.0);
  batch_clock_now += 0.9 * delay;  // 1.8 delays after the first rate, 0.9 after this one
  batch_.flush_if_overdue();
  EXPECT_EQ(records_.size(), 1u);
}

TEST_F(StepRateBatchTest, TwoThreadsFiringLoseNoRate) {
  std::atomic<int64_t> next{1};
  auto stepper = [&] {
    for (int i = 0; i < 500; ++i) {
      const int64_t step = next.fetch_add(1);
      batch_.hold(batch_.fire(step), /*may_wait=*/true);
    }
  };
  std::thread a(stepper), b(stepper);
  a.join();
  b.join();
  batch_.flush();
  // One hand-over, and every firing after the first made a rate.
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_EQ(records_[0].rates.size(), 999u);
}

}  // namespace
}  // namespace fastmts
