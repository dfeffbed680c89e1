// The per-step decisions of the native stock hooks (core/native_hooks.h,
// core/callback_hooks.h, built from core/hook_components.h), as TF's hooks in
// basic_session_run_hooks.py make them: on which steps each hook fetches
// what, reads the global step afresh, acts (saves, logs, writes summaries,
// traces) and requests stop. StopAtStepHook's last step and its confirming
// fresh read; the gate of CheckpointSaverHook (stale step + steps_per_run,
// then the fresh step); LoggingTensorHook's every_n_iter on its own
// iteration count; the schedule of SummarySaverHook (due on its first step)
// and ProfilerHook (not), whose due steps fetch the summaries or ask for a
// full trace; NanTensorHook; GlobalStepWaiterHook and FeedFnHook.
// StepCounterHook has its own file (step_counter_hook_test.cc). The Python
// parts TF runs (its save, _log_tensors, after_run) are stand-ins that move
// the hook's timer as TF's do. TF_SessionRun is a fake (tests/fake_tf.h);
// timers count steps only, on a clock the test holds still.
#include "core/native_hooks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/timers.h"
#include "tests/fake_tf.h"

namespace fastmts {
namespace {

using testing::FakeGraph;
using testing::FakeTf;
using testing::RunCall;
using testing::fake_output;
using testing::fake_session;
using testing::make_plan;
using testing::train_step;

SecondOrStepTimer every_steps(double n) { return SecondOrStepTimer(std::nullopt, n); }

class NativeHooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_wall_clock([] { return 1000.0; });
    fake_.set_run(graph_.handler());
  }
  void TearDown() override { set_wall_clock(nullptr); }

  // A session of `hooks`, attached; the runs so far forgotten.
  std::unique_ptr<HookedSession> session_of(std::vector<HookPtr> hooks) {
    auto session = std::make_unique<HookedSession>(std::move(hooks));
    session->attach(testing::fake_session());
    return session;
  }
  // Runs `n` training steps; returns, per step, the TF runs it made.
  std::vector<std::vector<RunCall>> steps(HookedSession& session, int n) {
    std::vector<std::vector<RunCall>> out;
    for (int i = 0; i < n; ++i) {
      fake_.clear_calls();
      session.run(train_step(graph_), false, nullptr);
      out.push_back(fake_.calls());
    }
    return out;
  }
  int fresh_reads(const std::vector<RunCall>& calls) const {
    int n = 0;
    for (const RunCall& c : calls) n += graph_.is_fresh_read(c);
    return n;
  }

  FakeTf fake_;
  FakeGraph graph_;
};

// StopAtStepHook ------------------------------------------------------------

TEST_F(NativeHooksTest, StopAtStepCountsNumStepsFromTheFirstSessionsStep) {
  graph_.global_step = 10;
  std::vector<int64_t> announced;
  StopAtStepHook::Config config;
  config.global_step = graph_.step;
  config.num_steps = 3;
  config.on_last_step = [&](int64_t last) { announced.push_back(last); };
  auto hook = std::make_shared<StopAtStepHook>(config);
  auto session = session_of({hook});
  EXPECT_EQ(announced, (std::vector<int64_t>{13}));
  EXPECT_EQ(fresh_reads(fake_.calls()), 1);  // after_create_session's read
  fake_.clear_calls();
  RunResult last;
  EXPECT_EQ(session->run_loop(train_step(graph_), LoopControl(), &last), 3);
  EXPECT_EQ(graph_.global_step.load(), 13);
  // Only the step whose stale value + 1 reaches the last step reads afresh.
  EXPECT_EQ(fresh_reads(fake_.calls()), 1);
  // A new session (recovery) keeps the last step: no read, no announcement.
  fake_.clear_calls();
  session->attach(fake_session());
  EXPECT_EQ(announced.size(), 1u);
  EXPECT_EQ(fake_.call_count(), 0u);
}

TEST_F(NativeHooksTest, StopAtStepStopsOnlyWhenTheFreshReadReachesTheLastStep) {
  StopAtStepHook::Config config;
  config.global_step = graph_.step;
  config.last_step = 2;
  config.on_last_step = [](int64_t) { FAIL() << "last_step was given"; };
  auto session = session_of({std::make_shared<StopAtStepHook>(config)});
  EXPECT_EQ(fake_.call_count(), 0u);  // last_step given: no read at creation
  graph_.global_step = 1;
  // A step that runs no train op: stale 1 + 1 reaches 2, the fresh read (1) does not.
  session->run(testing::idle_step(), false, nullptr);
  EXPECT_FALSE(session->stop_requested());
  session->run(train_step(graph_), false, nullptr);  // 1 -> 2
  EXPECT_TRUE(session->stop_requested());
}

// CheckpointSaverHook's gate ------------------------------------------------

struct SaverFixture {
  std::vector<int64_t> saves;
  std::shared_ptr<CheckpointSaverHook> hook;
  bool stop_after_save = false;
};

// TF's save moves TF's timer, which the caller copies into the native one;
// TF's after_create_session saves and moves it at the session's step.
std::shared_ptr<CheckpointSaverHook> make_saver(SaverFixture& f, FakeGraph& graph,
                                                 double every, int64_t steps_per_run) {
  CheckpointSaverHook::Config config;
  config.global_step = graph.step;
  config.timer = every_steps(every);
  config.steps_per_run = steps_per_run;
  config.save = [&f](int64_t fresh) {
    f.saves.push_back(fresh);
    f.hook->timer().update_last_triggered_step(fresh);
    return f.stop_after_save;
  };
  config.after_create_session = [&f, &graph] {
    f.hook->timer().update_last_triggered_step(graph.global_step.load());
  };
  config.end = [] {};
  f.hook = std::make_shared<CheckpointSaverHook>(config);
  return f.hook;
}

TEST_F(NativeHooksTest, CheckpointSaverSavesEveryNStepsAtTheFreshStep) {
  SaverFixture f;
  auto session = session_of({make_saver(f, graph_, 3, 1)});
  const auto runs = steps(*session, 10);
  EXPECT_EQ(f.saves, (std::vector<int64_t>{3, 6, 9}));
  // A fresh read only where the stale step + 1 triggers (steps 3, 6, 9).
  for (size_t i = 0; i < runs.size(); ++i)
    EXPECT_EQ(fresh_reads(runs[i]), (i + 1) % 3 == 0 ? 1 : 0) << "step " << i + 1;
}

TEST_F(NativeHooksTest, CheckpointSaverLooksStepsPerRunAhead) {
  graph_.step_increment = 2;  // each run is two steps
  SaverFixture f;
  auto session = session_of({make_saver(f, graph_, 4, 2)});
  steps(*session, 5);
  EXPECT_EQ(f.saves, (std::vector<int64_t>{4, 8}));
}

TEST_F(NativeHooksTest, CheckpointSaverStaysShutWhenTheFreshStepDoesNotTrigger) {
  SaverFixture f;
  auto session = session_of({make_saver(f, graph_, 1, 1)});
  // Runs that do not move the step: stale 0 + 1 triggers, the fresh 0 does not.
  for (int i = 0; i < 3; ++i)
    session->run(testing::idle_step(), false, nullptr);
  EXPECT_TRUE(f.saves.empty());
  EXPECT_EQ(fresh_reads(fake_.calls()), 3);
  session->run(train_step(graph_), false, nullptr);
  EXPECT_EQ(f.saves, (std::vector<int64_t>{1}));
}

TEST_F(NativeHooksTest, ASaveThatAsksToStopStopsAfterTheStep) {
  SaverFixture f;
  f.stop_after_save = true;
  auto session = session_of({make_saver(f, graph_, 2, 1)});
  RunResult last;
  EXPECT_EQ(session->run_loop(train_step(graph_), LoopControl(), &last), 2);
  EXPECT_EQ(f.saves, (std::vector<int64_t>{2}));
}

// LoggingTensorHook ---------------------------------------------------------

TEST_F(NativeHooksTest, LoggingTensorHookFetchesAndLogsEveryNIterations) {
  const TF_Output loss = fake_output(5);
  graph_.set_value(loss, [] { return FakeTf::int64_scalar(7); });
  std::vector<int64_t> logged;
  std::shared_ptr<LoggingTensorHook> hook;
  LoggingTensorHook::Config config;
  config.tensors = make_plan({loss});
  config.timer = every_steps(3);
  config.log = [&](int64_t iter, const std::vector<SharedTensor>& values) {
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(FakeTf::as_int64(values[0].get()), 7);
    logged.push_back(iter);
    hook->timer().update_last_triggered_step(iter);  // TF's _log_tensors
  };
  bool ended = false;
  config.end = [&] { ended = true; };
  hook = std::make_shared<LoggingTensorHook>(config);
  graph_.global_step = 100;  // its own count, not the global step
  auto session = session_of({hook});
  const auto runs = steps(*session, 8);
  EXPECT_EQ(logged, (std::vector<int64_t>{0, 3, 6}));
  for (size_t i = 0; i < runs.size(); ++i)
    EXPECT_EQ(runs[i].at(0).fetches_output(loss), i % 3 == 0) << "iteration " << i;
  EXPECT_EQ(hook->iter_count(), 8);
  session->end();
  EXPECT_TRUE(ended);
}

TEST_F(NativeHooksTest, LoggingTensorHookQuietMovesTheTimerWithoutLogging) {
  const TF_Output loss = fake_output(5);
  graph_.set_value(loss, [] { return FakeTf::int64_scalar(7); });
  int logged = 0;
  LoggingTensorHook::Config config;
  config.tensors = make_plan({loss});
  config.timer = every_steps(2);
  config.log = [&](int64_t, const std::vector<SharedTensor>&) { ++logged; };
  config.end = [] {};
  auto hook = std::make_shared<LoggingTensorHook>(config);
  hook->set_quiet_unless(InfoEnabledCheck{[] { return false; }});
  auto session = session_of({hook});
  const auto runs = steps(*session, 5);
  EXPECT_EQ(logged, 0);
  // Still fetched as TF fetches them, on TF's schedule.
  for (size_t i = 0; i < runs.size(); ++i)
    EXPECT_EQ(runs[i].at(0).fetches_output(loss), i % 2 == 0) << "iteration " << i;
  EXPECT_EQ(hook->timer().last_step(), 4);
}

// SummarySaverHook and ProfilerHook -----------------------------------------

struct ScheduledCall {
  int64_t stale;
  std::optional<int64_t> next;
  bool due;
  size_t summaries;  // values handed over (0 when none)
  std::string metadata;
  bool operator==(const ScheduledCall& o) const {
    return stale == o.stale && next == o.next && due == o.due && summaries == o.summaries &&
           metadata == o.metadata;
  }
};
std::ostream& operator<<(std::ostream& os, const ScheduledCall& c) {
  return os << "{stale " << c.stale << ", next " << (c.next ? std::to_string(*c.next) : "None")
            << ", due " << c.due << ", summaries " << c.summaries << ", '" << c.metadata << "'}";
}

// A SummarySaverHook or ProfilerHook every `every` steps, with `after_run`
// as TF's own.
template <typename HookT, typename AfterRunFn>
std::shared_ptr<HookT> scheduled_hook(const FakeGraph& graph, double every, AfterRunFn after_run) {
  typename HookT::Config config;
  config.global_step = graph.step;
  config.timer = every_steps(every);
  config.after_run = std::move(after_run);
  config.end = [] {};
  return std::make_shared<HookT>(config);
}

TEST_F(NativeHooksTest, SummarySaverIsDueOnItsFirstStepThenEveryNSteps) {
  const TF_Output summary = fake_output(6);
  graph_.set_value(summary, [] { return FakeTf::int64_scalar(99); });
  std::vector<ScheduledCall> calls;
  std::shared_ptr<SummarySaverHook> hook;
  // TF's after_run: the fresh step when first or due, the timer moved when due.
  hook = scheduled_hook<SummarySaverHook>(
      graph_, 3,
      [&](int64_t stale, std::optional<int64_t> next, bool due,
          const std::vector<SharedTensor>* summaries) -> std::optional<int64_t> {
        calls.push_back({stale, next, due, summaries ? summaries->size() : 0, ""});
        int64_t global_step = stale + 1;
        if (!next || due) global_step = graph_.global_step.load();
        if (due) hook->timer().update_last_triggered_step(global_step);
        return global_step + 1;
      });
  hook->set_summaries(make_plan({summary}));
  auto session = session_of({hook});
  const auto runs = steps(*session, 8);
  EXPECT_EQ(calls, (std::vector<ScheduledCall>{{0, std::nullopt, true, 1, ""},
                                               {3, 4, true, 1, ""},
                                               {6, 7, true, 1, ""}}));
  for (size_t i = 0; i < runs.size(); ++i)
    EXPECT_EQ(runs[i].at(0).fetches_output(summary), i % 3 == 0) << "step " << i + 1;
  EXPECT_EQ(hook->next_step(), 9);  // stale 7 + 2, moved natively
}

TEST_F(NativeHooksTest, ProfilerTracesItsDueStepsButNotItsFirst) {
  fake_.set_run_metadata("trace");
  std::vector<ScheduledCall> calls;
  std::shared_ptr<ProfilerHook> hook;
  // TF's after_run: the first step starts the timer at the stale step.
  hook = scheduled_hook<ProfilerHook>(
      graph_, 3,
      [&](int64_t stale, std::optional<int64_t> next, bool due,
          const std::string& metadata) -> std::optional<int64_t> {
        calls.push_back({stale, next, due, 0, metadata});
        if (!next) hook->timer().update_last_triggered_step(stale);
        int64_t global_step = stale + 1;
        if (due) {
          global_step = graph_.global_step.load();
          hook->timer().update_last_triggered_step(global_step);
        }
        return global_step + 1;
      });
  auto session = session_of({hook});
  const auto runs = steps(*session, 7);
  EXPECT_EQ(calls, (std::vector<ScheduledCall>{{0, std::nullopt, false, 0, ""},
                                               {2, 3, true, 0, "trace"},
                                               {5, 6, true, 0, "trace"}}));
  for (size_t i = 0; i < runs.size(); ++i) {
    const bool due = i == 2 || i == 5;
    EXPECT_EQ(runs[i].at(0).run_options, due ? std::string("\x08\x03") : std::string())
        << "step " << i + 1;
    EXPECT_EQ(runs[i].at(0).want_metadata, due) << "step " << i + 1;
  }
}

// NanTensorHook -------------------------------------------------------------

std::shared_ptr<NanTensorHook> nan_hook(TF_Output loss, bool fail, int* nans) {
  NanTensorHook::Config config;
  config.loss = loss;
  config.fail_on_nan_loss = fail;
  config.on_nan = [nans, fail] {
    ++*nans;
    if (fail) throw std::runtime_error("NaN loss during training.");  // TF raises
  };
  return std::make_shared<NanTensorHook>(config);
}

TEST_F(NativeHooksTest, NanLossStopsOrRaises) {
  const TF_Output loss = fake_output(5);
  graph_.set_value(loss, [this] {
    return FakeTf::float_scalar(graph_.global_step.load() == 2
                                    ? std::numeric_limits<float>::quiet_NaN()
                                    : 0.5f);
  });
  int nans = 0;
  auto session = session_of({nan_hook(loss, /*fail=*/false, &nans)});
  RunResult last;
  EXPECT_EQ(session->run_loop(train_step(graph_), LoopControl(), &last), 3);
  EXPECT_EQ(nans, 1);

  graph_.global_step = 0;
  nans = 0;
  auto failing = session_of({nan_hook(loss, /*fail=*/true, &nans)});
  steps(*failing, 2);
  EXPECT_THROW(failing->run(train_step(graph_), false, nullptr), std::runtime_error);
  EXPECT_EQ(nans, 1);
  EXPECT_EQ(failing->steps_run(), 2);
}

// GlobalStepWaiterHook and FeedFnHook ---------------------------------------

TEST_F(NativeHooksTest, GlobalStepWaiterWaitsOnlyUntilTheWorkerHasStarted) {
  int waits = 0;
  auto session = session_of({std::make_shared<GlobalStepWaiterHook>(
      GlobalStepWaiterHook::Config{[&] { return ++waits == 3; }})});
  steps(*session, 6);
  EXPECT_EQ(waits, 3);
}

TEST_F(NativeHooksTest, FeedFnFeedsEveryStep) {
  int64_t n = 0;
  auto fill = [&](RunRequest& request) {
    auto plan = std::make_shared<FeedPlan>();
    plan->keys.push_back(fake_output(9));
    plan->dtypes.push_back(TF_INT64);
    plan->labels.push_back("'x:0'");
    request.feed_plan = plan;
    request.feed_values.emplace_back(FakeTf::int64_scalar(++n));
  };
  auto session = session_of({std::make_shared<FeedFnHook>(FeedFnHook::Config{{fill}})});
  const auto runs = steps(*session, 3);
  for (size_t i = 0; i < runs.size(); ++i)
    EXPECT_EQ(runs[i].at(0).input_scalars, (std::vector<int64_t>{static_cast<int64_t>(i) + 1}));
}

}  // namespace
}  // namespace fastmts
