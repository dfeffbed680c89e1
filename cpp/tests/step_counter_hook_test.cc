// StepCounterHook's rates (core/native_hooks.h; their batching alone,
// StepRateBatch, in step_rate_batch_test.cc), as TF's StepCounterHook in
// basic_session_run_hooks.py computes them: when its timer fires for the
// fresh global step, the steps and seconds since the previous firing (none on
// the first), handed to TF's _log_and_record; a step whose stale global step
// did not move runs TF's whole after_run (its warning, log_first_n(..., 5)),
// at most 5 times. fastmts's own part: inside a loop that allows it
// (LoopControl::may_defer) the rates are handed over in batches -- when the
// loop's caller flushes, at end(), when another hook postpones work
// (PostponedWork: so Python sees all hooks' work in TF's order), and once
// the first waiting rate is StepCounterHook::kMaxRecordDelay old --
// otherwise at once. With a native SummaryWriter the rates are written to
// the event file natively, unless TF's INFO line would be printed or no time
// passed (then TF's own code does it). `record` stands in for TF's
// _log_and_record; the wall clock is the test's. TF_SessionRun is a fake
// (tests/fake_tf.h).
#include "core/native_hooks.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/file_formats/event_file.h"
#include "core/file_formats/event_writer.h"
#include "core/file_formats/summary_writer.h"
#include "core/timers.h"
#include "tests/fake_tf.h"
#include "tests/step_rates.h"
#include "tests/test_bytes.h"

namespace fastmts {
namespace {

using testing::FakeGraph;
using testing::FakeTf;
using testing::train_step;
using Rate = StepCounterHook::StepRate;
using testing::Record;
using testing::same_rates;
using testing::show;

class StepCounterHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_wall_clock([this] { return now_; });
    fake_.set_run(graph_.handler());
  }
  void TearDown() override {
    if (events_) events_->close();
    for (const std::string& name : files_) unlink(name.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
    set_wall_clock(nullptr);
  }

  // A native summary writer whose event files go to a fresh directory, each
  // starting with the record "first".
  std::shared_ptr<SummaryWriter> native_writer() {
    char dir[] = "/tmp/fastmts_step_counter_XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    events_ = std::make_shared<EventWriter>("", 10, 120, 0, [this]() -> std::optional<std::string> {
      std::string name = dir_ + "/events." + std::to_string(files_.size());
      std::ofstream(name, std::ios::binary) << tfrecord("first");
      files_.push_back(name);
      return name;
    });
    return std::make_shared<SummaryWriter>(events_, std::make_shared<SeenSummaryTags>());
  }
  // What the native writer wrote after its first record.
  std::string written() {
    events_->flush();
    if (files_.empty()) return "";
    return testing::read_file(files_.back()).substr(tfrecord("first").size());
  }

  // A hook firing every `every` steps whose records (and stuck steps) the test keeps.
  std::shared_ptr<StepCounterHook> make_hook(double every, int64_t steps_per_run = 1) {
    StepCounterHook::Config config;
    config.global_step = graph_.step;
    config.timer = SecondOrStepTimer(std::nullopt, every);
    config.steps_per_run = steps_per_run;
    config.after_run_stuck = [this](int64_t stale) {
      stuck_.push_back(stale);
      log_.push_back("stuck");
      return stop_when_stuck_;
    };
    config.record = [this](const std::vector<Rate>& rates, std::optional<int64_t> last_step,
                           double last_time) {
      records_.push_back({rates, last_step, last_time});
      log_.push_back("record " + std::to_string(rates.size()));
    };
    config.after_create_session = [] {};
    config.end = [this] { log_.push_back("end"); };
    return std::make_shared<StepCounterHook>(config);
  }

  // A loop of `n` steps that may postpone, the clock 0.5 s further before each.
  int64_t deferring_loop(HookedSession& session, int64_t n) {
    LoopControl control;
    control.max_steps = n;
    control.may_defer = true;
    control.begin_step = [this]() -> void* {
      now_ += 0.5;
      return nullptr;
    };
    RunResult last;
    return session.run_loop(train_step(graph_), control, &last);
  }

  FakeTf fake_;
  FakeGraph graph_;
  double now_ = 100.0;
  std::vector<Record> records_;
  std::vector<int64_t> stuck_;
  std::vector<std::string> log_;
  bool stop_when_stuck_ = false;
  std::string dir_;
  std::vector<std::string> files_;  // written by the writer thread only
  std::shared_ptr<EventWriter> events_;
};

// A global_step/sec record as TF's _log_and_record writes it.
std::string rate_record(double wall_time, int64_t step, float per_sec) {
  return tfrecord(event_bytes(wall_time, step, EventWhat::kSummary,
                              simple_value_summary("global_step/sec", per_sec)));
}

TEST_F(StepCounterHookTest, EachFiringRecordsTheStepsAndSecondsSinceThePrevious) {
  auto hook = make_hook(3);
  HookedSession session({hook});
  session.attach(testing::fake_session());
  for (int step = 1; step <= 8; ++step) {
    now_ = 100.0 + 0.5 * step;
    session.run(train_step(graph_), false, nullptr);  // not a loop: handed over at once
  }
  // Fired at the fresh steps 1 (the first: no rate), 4 and 7.
  ASSERT_EQ(records_.size(), 3u);
  EXPECT_TRUE(records_[0].rates.empty());
  EXPECT_EQ(records_[0].timer_last_step, 1);
  EXPECT_DOUBLE_EQ(records_[0].timer_last_time, 100.5);
  EXPECT_TRUE(same_rates(records_[1].rates, {{3, 1.5, 4, 102.0}})) << show(records_[1].rates);
  EXPECT_EQ(records_[1].timer_last_step, 4);
  EXPECT_TRUE(same_rates(records_[2].rates, {{3, 1.5, 7, 103.5}})) << show(records_[2].rates);
  EXPECT_EQ(hook->last_step(), 7);  // TF's _last_global_step: the last stale step
  EXPECT_TRUE(stuck_.empty());
}

TEST_F(StepCounterHookTest, WithStepsPerRunTheTimerLooksThatFarAhead) {
  graph_.step_increment = 4;  // each run is four steps
  auto hook = make_hook(8, /*steps_per_run=*/4);
  HookedSession session({hook});
  session.attach(testing::fake_session());
  for (int run = 1; run <= 5; ++run) {
    now_ = 100.0 + run;
    session.run(train_step(graph_), false, nullptr);
  }
  // Fires where stale + 4 and the fresh step are 8 past the last firing.
  ASSERT_EQ(records_.size(), 3u);
  EXPECT_TRUE(records_[0].rates.empty());
  EXPECT_EQ(records_[0].timer_last_step, 4);
  EXPECT_TRUE(same_rates(records_[1].rates, {{8, 2.0, 12, 103.0}})) << show(records_[1].rates);
  EXPECT_TRUE(same_rates(records_[2].rates, {{8, 2.0, 20, 105.0}})) << show(records_[2].rates);
}

TEST_F(StepCounterHookTest, InALoopRatesWaitForTheFlushAsOneBatch) {
  auto hook = make_hook(3);
  HookedSession session({hook});
  session.attach(testing::fake_session());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(deferring_loop(session, 10), 10);
  const double loop_secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Unless the loop itself took kMaxRecordDelay (a stalled machine), nothing
  // was handed over during it.
  const size_t during = records_.size();
  if (loop_secs < StepCounterHook::kMaxRecordDelay) {
    EXPECT_EQ(during, 0u);
  }
  session.flush_deferred();
  std::vector<Rate> all;
  for (const Record& r : records_) all.insert(all.end(), r.rates.begin(), r.rates.end());
  EXPECT_TRUE(same_rates(all, {{3, 1.5, 4, 102.0}, {3, 1.5, 7, 103.5}, {3, 1.5, 10, 105.0}}))
      << show(all);
  if (during == 0) {
    ASSERT_EQ(records_.size(), 1u);  // one Python call for the loop's rates
    EXPECT_EQ(records_[0].timer_last_step, 10);
    EXPECT_DOUBLE_EQ(records_[0].timer_last_time, 105.0);
  }
  session.flush_deferred();  // nothing more to hand over
  EXPECT_EQ(records_.size(), during + 1);
}

TEST_F(StepCounterHookTest, EndHandsOverWhatWaitsBeforeTFsEnd) {
  auto hook = make_hook(1);
  HookedSession session({hook});
  session.attach(testing::fake_session());
  deferring_loop(session, 1);  // the first firing: no rate, the timer moved
  EXPECT_TRUE(log_.empty());
  session.end();
  EXPECT_EQ(log_, (std::vector<std::string>{"record 0", "end"}));
  EXPECT_EQ(records_.at(0).timer_last_step, 1);
}

TEST_F(StepCounterHookTest, ARateWaitingLongerThanTheMaxDelayIsHandedOverAtTheNextStep) {
  auto hook = make_hook(1);
  HookedSession session({hook});
  session.attach(testing::fake_session());
  LoopControl control;
  control.max_steps = 3;
  control.may_defer = true;
  int64_t between = 0;
  control.between_steps = [&] {
    now_ += 1.0;
    // Before the third step, the second step's rate has waited past the delay.
    if (++between == 2)
      std::this_thread::sleep_for(
          std::chrono::duration<double>(StepCounterHook::kMaxRecordDelay * 1.2));
  };
  RunResult last;
  session.run_loop(train_step(graph_), control, &last);
  ASSERT_EQ(records_.size(), 1u);  // handed over in the loop, no flush asked
  EXPECT_TRUE(same_rates(records_[0].rates, {{1, 1.0, 2, 101.0}, {1, 1.0, 3, 102.0}}))
      << show(records_[0].rates);
}

TEST_F(StepCounterHookTest, AStuckStepRunsTFsAfterRunAtMostFiveTimes) {
  auto hook = make_hook(1);
  HookedSession session({hook});
  session.attach(testing::fake_session());
  const RunRequest no_train = testing::idle_step();
  for (int i = 0; i < 10; ++i) session.run(no_train, false, nullptr);
  EXPECT_EQ(stuck_, (std::vector<int64_t>(5, 0)));
  // The first step fired the timer (at 0); a step that stays has no rate.
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_TRUE(records_[0].rates.empty());
  EXPECT_EQ(hook->last_step(), 0);
}

TEST_F(StepCounterHookTest, TFsAfterRunOnAStuckStepMayStop) {
  stop_when_stuck_ = true;
  auto hook = make_hook(1);
  HookedSession session({hook});
  session.attach(testing::fake_session());
  const RunRequest no_train = testing::idle_step();
  session.run(no_train, false, nullptr);
  EXPECT_FALSE(session.stop_requested());
  session.run(no_train, false, nullptr);
  EXPECT_TRUE(session.stop_requested());
}

// Another hook that postpones Python work, as StepCounterHook does.
class PostponingHook : public Hook {
 public:
  explicit PostponingHook(std::vector<std::string>* log) : log_(log) {}
  void after_run(StepContext& ctx, const RunRequest&, const Fetched*, const std::string&) override {
    ctx.before_postponing(this);
    pending_ = true;
    log_->push_back("other postponed");
  }
  void flush_deferred() override {
    if (!pending_) return;
    pending_ = false;
    log_->push_back("other flushed");
  }

 private:
  std::vector<std::string>* log_;
  bool pending_ = false;
};

TEST_F(StepCounterHookTest, PostponedWorkOfTwoHooksReachesPythonInTFsOrder) {
  auto counter = make_hook(1);
  HookedSession session({counter, std::make_shared<PostponingHook>(&log_)});
  session.attach(testing::fake_session());
  deferring_loop(session, 3);
  session.flush_deferred();
  // Each hook's postponed work is handed over before the other postpones:
  // step by step, hook by hook, as TF runs them.
  EXPECT_EQ(log_, (std::vector<std::string>{
                      "record 0", "other postponed",                   // step 1
                      "other flushed", "record 1", "other postponed",  // step 2
                      "other flushed", "record 1", "other postponed",  // step 3
                      "other flushed"}));
}

TEST_F(StepCounterHookTest, WithANativeWriterTheRatesAreWrittenWithoutPython) {
  auto hook = make_hook(3);
  hook->set_summary_writer(native_writer(), "global_step/sec", InfoEnabledCheck{[] { return false; }});
  HookedSession session({hook});
  session.attach(testing::fake_session());
  for (int step = 1; step <= 8; ++step) {
    now_ = 100.0 + 0.5 * step;
    session.run(train_step(graph_), false, nullptr);
  }
  session.flush_deferred();
  EXPECT_TRUE(records_.empty());  // TF's _log_and_record never ran
  // 3 steps in 1.5 s at the fresh steps 4 and 7, stamped with the clock then.
  EXPECT_EQ(written(), rate_record(102.0, 4, 2.0f) + rate_record(103.5, 7, 2.0f));
  EXPECT_EQ(hook->timer().last_step(), 7);
}

TEST_F(StepCounterHookTest, TFsLogLineOrAZeroTimeLeavesTheRecordToPython) {
  bool info_logged = true;
  auto hook = make_hook(1);
  hook->set_summary_writer(native_writer(), "global_step/sec",
                           InfoEnabledCheck{[&] { return info_logged; }});
  HookedSession session({hook});
  session.attach(testing::fake_session());
  session.run(train_step(graph_), false, nullptr);  // the first firing: nothing to write
  EXPECT_TRUE(records_.empty());
  now_ += 2.0;
  session.run(train_step(graph_), false, nullptr);  // TF would print INFO: its own record
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_TRUE(same_rates(records_[0].rates, {{1, 2.0, 2, 102.0}})) << show(records_[0].rates);
  info_logged = false;
  session.run(train_step(graph_), false, nullptr);  // no time passed: TF divides by zero
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_TRUE(same_rates(records_[1].rates, {{1, 0.0, 3, 102.0}})) << show(records_[1].rates);
  EXPECT_EQ(written(), "");
}

}  // namespace
}  // namespace fastmts
