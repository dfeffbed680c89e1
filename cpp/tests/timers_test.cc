// TF's SecondOrStepTimer rules (basic_session_run_hooks.py), natively
// (core/timers.h), on a clock the test moves.
#include "core/timers.h"

#include <gtest/gtest.h>

namespace fastmts {
namespace {

class TimerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_wall_clock([this] { return now_; });
  }
  void TearDown() override { set_wall_clock(nullptr); }
  double now_ = 1000.0;
};

TEST_F(TimerTest, TriggersFirstThenEveryNSteps) {
  SecondOrStepTimer timer(std::nullopt, 10.0);
  EXPECT_TRUE(timer.should_trigger_for_step(1));  // never triggered yet
  EXPECT_EQ(timer.update_last_triggered_step(1), std::nullopt);
  EXPECT_FALSE(timer.should_trigger_for_step(1));  // the same step: never twice
  EXPECT_FALSE(timer.should_trigger_for_step(10));
  EXPECT_TRUE(timer.should_trigger_for_step(11));
  EXPECT_TRUE(timer.should_trigger_for_step(50));  // at or past the interval
  EXPECT_EQ(timer.last_step(), 1);
}

TEST_F(TimerTest, TriggersEveryNSecondsOfWallTime) {
  SecondOrStepTimer timer(5.0, std::nullopt);
  timer.update_last_triggered_step(3);
  now_ += 4.9;
  EXPECT_FALSE(timer.should_trigger_for_step(100));
  now_ += 0.1;
  EXPECT_TRUE(timer.should_trigger_for_step(4));
  EXPECT_FALSE(timer.should_trigger_for_step(3));  // the step last triggered
}

TEST_F(TimerTest, UpdateReturnsSecondsSinceThePreviousTrigger) {
  SecondOrStepTimer timer(std::nullopt, 1.0);
  EXPECT_EQ(timer.update_last_triggered_step(0), std::nullopt);
  now_ += 2.5;
  EXPECT_DOUBLE_EQ(*timer.update_last_triggered_step(5), 2.5);
  EXPECT_DOUBLE_EQ(timer.last_time(), now_);
}

TEST_F(TimerTest, EitherMeasureTriggers) {
  SecondOrStepTimer timer(60.0, 100.0);
  timer.update_last_triggered_step(0);
  EXPECT_TRUE(timer.should_trigger_for_step(100));  // by steps
  now_ += 60;
  EXPECT_TRUE(timer.should_trigger_for_step(1));  // by seconds
}

TEST_F(TimerTest, ResetForgetsTheLastTrigger) {
  SecondOrStepTimer timer(std::nullopt, 10.0);
  timer.update_last_triggered_step(7);
  timer.reset();
  EXPECT_EQ(timer.last_step(), std::nullopt);
  EXPECT_TRUE(timer.should_trigger_for_step(7));
}

TEST_F(TimerTest, AdoptsAStateKeptElsewhere) {
  SecondOrStepTimer timer(std::nullopt, 10.0);
  timer.set_state(20, 990.0);
  EXPECT_FALSE(timer.should_trigger_for_step(29));
  EXPECT_TRUE(timer.should_trigger_for_step(30));
  EXPECT_DOUBLE_EQ(*timer.update_last_triggered_step(30), 10.0);
}

TEST_F(TimerTest, NeverTriggerTimerNeverTriggers) {
  SecondOrStepTimer timer(std::nullopt, std::nullopt, /*never=*/true);
  EXPECT_FALSE(timer.should_trigger_for_step(0));
  timer.update_last_triggered_step(0);
  EXPECT_FALSE(timer.should_trigger_for_step(1000));
}

TEST_F(TimerTest, NeitherMeasureTriggersOnlyTheFirstTime) {
  // SecondOrStepTimer(None, None) in Python: TF's hooks refuse it, the timer
  // itself triggers at its first step only.
  SecondOrStepTimer timer(std::nullopt, std::nullopt);
  EXPECT_TRUE(timer.should_trigger_for_step(0));
  timer.update_last_triggered_step(0);
  now_ += 1e6;
  EXPECT_FALSE(timer.should_trigger_for_step(1000));
}

TEST_F(TimerTest, FractionalStepsCompareAsPythonDoes) {
  SecondOrStepTimer timer(std::nullopt, 2.5);
  timer.update_last_triggered_step(0);
  EXPECT_FALSE(timer.should_trigger_for_step(2));
  EXPECT_TRUE(timer.should_trigger_for_step(3));
}

}  // namespace
}  // namespace fastmts
