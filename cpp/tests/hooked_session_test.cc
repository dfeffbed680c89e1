// One monitored step (core/hooked_session.h), as TF's _HookedSession.run in
// monitored_session.py: every hook's before_run in order, one TF_SessionRun
// with the hooks' and the caller's fetches and feeds merged, every hook's
// after_run in order; a stop a hook requests through its SessionRunContext
// (session_run_hook.py) takes effect after the step, and a run after it
// raises "Run called even after should_stop requested."; two hooks feeding
// one tensor raise "Same tensor is fed by two hooks.", a hook and the caller
// "Same tensor is fed by a SessionRunHook and user." (_call_hook_before_run,
// _HookedSession.run). Also fastmts's own count of completed steps (a step
// whose after_run raises is not one: recovery runs it again) and its
// multi-step loop. TF_SessionRun is a fake (tests/fake_tf.h); the hooks are
// fakes that log what they are called with. Over 400 lines: one test per
// rule of the step, on the one fixture they share.
#include "core/hooked_session.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/coordinator.h"
#include "core/tensor_convert.h"
#include "core/tf_status.h"
#include "tests/fake_tf.h"

namespace fastmts {
namespace {

using testing::FakeGraph;
using testing::FakeTf;
using testing::fake_op;
using testing::fake_output;
using testing::fake_session;
using testing::make_plan;
using testing::train_step;

// The calls into hooks and TF of a test, in order.
struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  void add(std::string line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(std::move(line));
  }
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    out.swap(lines);
    return out;
  }
};

using Lines = std::vector<std::string>;

// A hook that logs each call ("before:A") and does what the test gives it.
class FakeHook : public Hook {
 public:
  FakeHook(std::string name, Log* log) : name_(std::move(name)), log_(log) {}

  std::function<void(StepContext&, RunRequest&)> on_before;
  std::function<void(StepContext&, const RunRequest&, const Fetched*)> on_after;
  // Per after_run: its outputs read as int64 scalars, and whether it got
  // none at all (null: its before_run asked for no plan).
  std::vector<std::vector<int64_t>> seen;
  std::vector<bool> seen_null;

  void after_create_session(const SessionRunner&) override { log_->add("create:" + name_); }
  void before_run(StepContext& ctx, RunRequest& request) override {
    log_->add("before:" + name_);
    if (on_before) on_before(ctx, request);
  }
  void after_run(StepContext& ctx, const RunRequest& request, const Fetched* outputs,
                 const std::string&) override {
    log_->add("after:" + name_);
    seen_null.push_back(outputs == nullptr);
    std::vector<int64_t> values;
    if (outputs)
      for (size_t i = 0; i < outputs->size(); ++i) values.push_back(FakeTf::as_int64((*outputs)[i].get()));
    seen.push_back(values);
    if (on_after) on_after(ctx, request, outputs);
  }
  void end(const SessionRunner&) override { log_->add("end:" + name_); }

 private:
  std::string name_;
  Log* log_;
};

// A request feeding `key` (shown as `label` in conflicts) an int64 scalar.
void feed(RunRequest& request, TF_Output key, const std::string& label, int64_t value) {
  auto plan = std::make_shared<FeedPlan>();
  plan->keys.push_back(key);
  plan->dtypes.push_back(TF_INT64);
  plan->labels.push_back(label);
  request.feed_plan = plan;
  request.feed_values.clear();
  request.feed_values.emplace_back(FakeTf::int64_scalar(value));
}

class HookedSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.set_run([this, run = graph_.handler()](const testing::RunCall& call, TF_Tensor** outputs,
                                                 TF_Status* status) {
      log_.add("run");
      run(call, outputs, status);
    });
  }

  // Fake hooks named `names` (also in hooks_).
  std::vector<HookPtr> hooks_of(const std::vector<std::string>& names) {
    std::vector<HookPtr> hooks;
    for (const std::string& name : names) {
      hooks_.push_back(std::make_shared<FakeHook>(name, &log_));
      hooks.push_back(hooks_.back());
    }
    return hooks;
  }

  // A session of hooks named `names`, attached to the fake session.
  std::unique_ptr<HookedSession> session_of(const std::vector<std::string>& names) {
    auto session = std::make_unique<HookedSession>(hooks_of(names));
    session->attach(fake_session());
    log_.take();  // the after_create_session calls
    return session;
  }

  FakeTf fake_;
  FakeGraph graph_;
  Log log_;
  std::vector<std::shared_ptr<FakeHook>> hooks_;
};

TEST_F(HookedSessionTest, HooksAreCalledInOrderAroundOneRun) {
  HookedSession session(hooks_of({"A", "B", "C"}));
  session.attach(fake_session());
  EXPECT_EQ(log_.take(), (Lines{"create:A", "create:B", "create:C"}));
  session.run(train_step(graph_), false, nullptr);
  EXPECT_EQ(log_.take(),
            (Lines{"before:A", "before:B", "before:C", "run", "after:A", "after:B", "after:C"}));
  session.run(train_step(graph_), false, nullptr);
  EXPECT_EQ(log_.take(),
            (Lines{"before:A", "before:B", "before:C", "run", "after:A", "after:B", "after:C"}));
  session.end();
  EXPECT_EQ(log_.take(), (Lines{"end:A", "end:B", "end:C"}));
  EXPECT_EQ(fake_.call_count(), 2u);
  EXPECT_EQ(graph_.global_step.load(), 2);
}

TEST_F(HookedSessionTest, EachHookGetsItsOwnValuesFromOneMergedRun) {
  auto session = session_of({"A", "B", "C"});
  const TF_Output loss = fake_output(5);
  graph_.set_value(loss, [] { return FakeTf::int64_scalar(42); });
  hooks_[0]->on_before = [&](StepContext&, RunRequest& r) { r.plan = make_plan({graph_.step}); };
  // B asks nothing: its after_run gets no outputs.
  hooks_[2]->on_before = [&](StepContext&, RunRequest& r) {
    r.plan = make_plan({loss, graph_.step});
  };
  graph_.global_step = 7;
  RunRequest caller = train_step(graph_);
  caller.plan = make_plan({loss}, {graph_.train_op});
  {
    const RunResult result = session->run(caller, false, nullptr);
    ASSERT_EQ(result.outputs.size(), 1u);
    EXPECT_EQ(FakeTf::as_int64(result.outputs[0].get()), 42);
  }
  const std::vector<testing::RunCall> calls = fake_.calls();
  ASSERT_EQ(calls.size(), 1u);  // one run for all parties, each fetch once
  ASSERT_EQ(calls[0].fetches.size(), 2u);
  EXPECT_TRUE(calls[0].fetches_output(graph_.step));
  EXPECT_TRUE(calls[0].fetches_output(loss));
  EXPECT_EQ(calls[0].targets, (std::vector<TF_Operation*>{graph_.train_op}));
  EXPECT_EQ(hooks_[0]->seen, (std::vector<std::vector<int64_t>>{{7}}));
  EXPECT_EQ(hooks_[1]->seen_null, (std::vector<bool>{true}));
  EXPECT_EQ(hooks_[2]->seen, (std::vector<std::vector<int64_t>>{{42, 7}}));
  EXPECT_EQ(fake_.live_tensors(), 0);  // every fetched value freed with the step
}

TEST_F(HookedSessionTest, WhenNoHookAsksAnythingTheCallersRunIsTheStep) {
  auto session = session_of({"A"});
  const RunResult result = session->run(train_step(graph_), false, nullptr);
  EXPECT_TRUE(result.outputs.empty());
  ASSERT_EQ(fake_.call_count(), 1u);
  EXPECT_TRUE(fake_.calls()[0].fetches.empty());
  EXPECT_TRUE(hooks_[0]->seen_null.at(0));
  // Nothing to fetch and nothing to run: no TF_SessionRun at all, as TF's
  // Session.run; the hooks are still called.
  fake_.clear_calls();
  session->run(RunRequest(), false, nullptr);
  EXPECT_EQ(fake_.call_count(), 0u);
  EXPECT_EQ(log_.take(), (Lines{"before:A", "run", "after:A", "before:A", "after:A"}));
}

TEST_F(HookedSessionTest, AStopRequestedInAfterRunTakesEffectAfterTheStep) {
  auto session = session_of({"A", "B", "C"});
  int b_calls = 0;
  hooks_[1]->on_after = [&](StepContext& ctx, const RunRequest&, const Fetched*) {
    if (++b_calls == 2) ctx.request_stop();
  };
  session->run(train_step(graph_), false, nullptr);
  EXPECT_FALSE(session->stop_requested());
  log_.take();
  session->run(train_step(graph_), false, nullptr);
  // The step is whole: the hooks after B still see it.
  EXPECT_EQ(log_.take(),
            (Lines{"before:A", "before:B", "before:C", "run", "after:A", "after:B", "after:C"}));
  EXPECT_TRUE(session->stop_requested());
  EXPECT_EQ(session->steps_run(), 2);
  try {
    session->run(train_step(graph_), false, nullptr);
    FAIL() << "no StoppedError";
  } catch (const StoppedError& e) {
    EXPECT_STREQ(e.what(), "Run called even after should_stop requested.");
  }
  EXPECT_TRUE(log_.take().empty());  // no hook called, nothing run
  EXPECT_EQ(fake_.call_count(), 2u);
  EXPECT_EQ(session->steps_run(), 2);
}

TEST_F(HookedSessionTest, AStopRequestedInBeforeRunStillRunsThatStep) {
  // TF's SessionRunContext is one per step: a stop requested in before_run
  // is read after every after_run.
  auto session = session_of({"A", "B"});
  hooks_[0]->on_before = [](StepContext& ctx, RunRequest&) { ctx.request_stop(); };
  session->run(train_step(graph_), false, nullptr);
  EXPECT_EQ(log_.take(), (Lines{"before:A", "before:B", "run", "after:A", "after:B"}));
  EXPECT_TRUE(session->stop_requested());
  EXPECT_THROW(session->run(train_step(graph_), false, nullptr), StoppedError);
}

TEST_F(HookedSessionTest, ANewSessionStartsWithoutTheStop) {
  // TF builds a new _HookedSession for each session it creates (recovery
  // included), so an old stop request does not carry over.
  auto session = session_of({"A"});
  session->request_stop();
  EXPECT_THROW(session->run(train_step(graph_), false, nullptr), StoppedError);
  session->attach(fake_session());
  EXPECT_FALSE(session->stop_requested());
  EXPECT_NO_THROW(session->run(train_step(graph_), false, nullptr));
}

TEST_F(HookedSessionTest, TwoHooksFeedingOneTensorIsAnErrorBeforeTheRun) {
  auto session = session_of({"A", "B", "C"});
  const TF_Output x = fake_output(9);
  hooks_[0]->on_before = [&](StepContext&, RunRequest& r) { feed(r, x, "'x:0'", 1); };
  hooks_[1]->on_before = [&](StepContext&, RunRequest& r) { feed(r, x, "'x:0'", 2); };
  try {
    session->run(train_step(graph_), false, nullptr);
    FAIL() << "no feed conflict";
  } catch (const FeedConflictError& e) {
    EXPECT_STREQ(e.what(), "Same tensor is fed by two hooks. Conflict(s): ['x:0']");
  }
  // The round stops at the hook that conflicts; nothing runs.
  EXPECT_EQ(log_.take(), (Lines{"before:A", "before:B"}));
  EXPECT_EQ(fake_.call_count(), 0u);
  EXPECT_EQ(session->steps_run(), 0);
  EXPECT_FALSE(session->stop_requested());
}

TEST_F(HookedSessionTest, AHookAndTheCallerFeedingOneTensorIsAnError) {
  auto session = session_of({"A"});
  const TF_Output x = fake_output(9);
  hooks_[0]->on_before = [&](StepContext&, RunRequest& r) { feed(r, x, "'x:0'", 1); };
  RunRequest caller = train_step(graph_);
  feed(caller, x, "'x:0'", 2);
  try {
    session->run(caller, false, nullptr);
    FAIL() << "no feed conflict";
  } catch (const FeedConflictError& e) {
    EXPECT_STREQ(e.what(), "Same tensor is fed by a SessionRunHook and user. Conflict(s): ['x:0']");
  }
  EXPECT_EQ(fake_.call_count(), 0u);
}

TEST_F(HookedSessionTest, HooksAndCallersFeedsGoToTheRunInOrder) {
  auto session = session_of({"A", "B"});
  hooks_[0]->on_before = [&](StepContext&, RunRequest& r) { feed(r, fake_output(9), "'x:0'", 11); };
  hooks_[1]->on_before = [&](StepContext&, RunRequest& r) { feed(r, fake_output(8), "'y:0'", 22); };
  RunRequest caller = train_step(graph_);
  feed(caller, fake_output(7), "'z:0'", 33);
  session->run(caller, false, nullptr);
  const testing::RunCall call = fake_.calls().at(0);
  ASSERT_EQ(call.inputs.size(), 3u);
  EXPECT_TRUE(same_output(call.inputs[0], fake_output(9)));
  EXPECT_TRUE(same_output(call.inputs[1], fake_output(8)));
  EXPECT_TRUE(same_output(call.inputs[2], fake_output(7)));
  EXPECT_EQ(call.input_scalars, (std::vector<int64_t>{11, 22, 33}));
}

TEST_F(HookedSessionTest, AStepWhoseAfterRunRaisesIsNotCounted) {
  auto session = session_of({"A", "B", "C"});
  session->run(train_step(graph_), false, nullptr);
  session->run(train_step(graph_), false, nullptr);
  EXPECT_EQ(session->steps_run(), 2);
  hooks_[1]->on_after = [](StepContext&, const RunRequest&, const Fetched*) {
    throw std::runtime_error("after_run failed");
  };
  log_.take();
  EXPECT_THROW(session->run(train_step(graph_), false, nullptr), std::runtime_error);
  // The error leaves the step at B, as a Python exception leaves TF's loop.
  EXPECT_EQ(log_.take(), (Lines{"before:A", "before:B", "before:C", "run", "after:A", "after:B"}));
  EXPECT_EQ(session->steps_run(), 2);
  hooks_[1]->on_after = nullptr;
  session->run(train_step(graph_), false, nullptr);
  EXPECT_EQ(session->steps_run(), 3);
}

TEST_F(HookedSessionTest, ATensorFlowErrorReachesTheCallerAndNoAfterRunRuns) {
  auto session = session_of({"A"});
  hooks_[0]->on_before = [&](StepContext&, RunRequest& r) { r.plan = make_plan({graph_.step}); };
  fake_.set_run([this](const testing::RunCall&, TF_Tensor** outputs, TF_Status* status) {
    log_.add("run");
    outputs[0] = FakeTf::int64_scalar(1);  // a value TF made before failing: freed
    FakeTf::fail(status, 10, "Aborted: the session was lost");
  });
  try {
    session->run(train_step(graph_), false, nullptr);
    FAIL() << "no TFError";
  } catch (const TFError& e) {
    EXPECT_EQ(e.code(), 10);
    EXPECT_STREQ(e.what(), "Aborted: the session was lost");
  }
  EXPECT_EQ(log_.take(), (Lines{"before:A", "run"}));
  EXPECT_EQ(session->steps_run(), 0);
  EXPECT_EQ(fake_.live_tensors(), 0);
}

TEST_F(HookedSessionTest, AHooksFullTraceIsAddedToTheRunOptionsAndMetadataAsked) {
  std::vector<HookPtr> hooks = hooks_of({"A", "B"});
  fake_.set_run_metadata("metadata bytes");
  std::string metadata_seen;
  bool b_saw_trace = false;
  hooks_[0]->on_before = [&](StepContext&, RunRequest& r) {
    r.plan = make_plan({graph_.step});
    r.full_trace = true;
  };
  hooks_[1]->on_after = [&](StepContext& ctx, const RunRequest&, const Fetched*) {
    b_saw_trace = ctx.full_trace();
  };
  // The metadata reaches after_run: a hook records it from there.
  struct MetadataHook : Hook {
    std::string* out;
    void after_run(StepContext&, const RunRequest&, const Fetched*,
                   const std::string& run_metadata) override {
      *out = run_metadata;
    }
  };
  auto metadata_hook = std::make_shared<MetadataHook>();
  metadata_hook->out = &metadata_seen;
  hooks.push_back(metadata_hook);
  HookedSession traced(hooks);
  traced.attach(fake_session());
  RunRequest caller = train_step(graph_);
  caller.run_options = "\x10\x01";  // the caller's own options come first
  const RunResult result = traced.run(caller, false, nullptr);
  const testing::RunCall call = fake_.calls().at(0);
  EXPECT_EQ(call.run_options, std::string("\x10\x01\x08\x03"));  // + trace_level: FULL_TRACE
  EXPECT_TRUE(call.want_metadata);
  EXPECT_TRUE(result.hooks_traced);
  EXPECT_TRUE(b_saw_trace);
  EXPECT_EQ(metadata_seen, "metadata bytes");
}

// Records the guard's release and reacquire in the test's log.
class LoggingGuard : public BlockingCallGuard {
 public:
  explicit LoggingGuard(Log* log) : log_(log) {}
  void* release() const override {
    log_->add("release");
    return nullptr;
  }
  void reacquire(void*) const override { log_->add("reacquire"); }

 private:
  Log* log_;
};

TEST_F(HookedSessionTest, TheGuardIsGivenUpAroundTheRunAndHeldForTheHooks) {
  auto session = session_of({"A", "B"});
  LoggingGuard guard(&log_);
  session->attach(fake_session(), &guard);
  log_.take();
  session->run(train_step(graph_), false, nullptr);
  EXPECT_EQ(log_.take(), (Lines{"before:A", "before:B", "release", "run", "reacquire",
                                "after:A", "after:B"}));
}

TEST_F(HookedSessionTest, TheLoopStepsUntilAHookStopsIt) {
  auto session = session_of({"A", "B"});
  hooks_[1]->on_after = [&](StepContext& ctx, const RunRequest&, const Fetched*) {
    if (graph_.global_step.load() == 5) ctx.request_stop();
  };
  int between = 0;
  int64_t steps_done = 0;
  LoopControl control;
  control.steps_done = &steps_done;
  control.between_steps = [&] { ++between; };
  RunResult last;
  EXPECT_EQ(session->run_loop(train_step(graph_), control, &last), 5);
  EXPECT_EQ(steps_done, 5);
  EXPECT_EQ(between, 4);  // between steps only
  EXPECT_EQ(session->steps_run(), 5);
  EXPECT_TRUE(session->stop_requested());
  EXPECT_EQ(session->run_loop(train_step(graph_), control, &last), 0);  // stopped: no step
}

TEST_F(HookedSessionTest, TheLoopEndsAtMaxStepsOrWhenTheCoordinatorStops) {
  auto session = session_of({"A"});
  LoopControl control;
  control.max_steps = 3;
  RunResult last;
  EXPECT_EQ(session->run_loop(train_step(graph_), control, &last), 3);
  EXPECT_FALSE(session->stop_requested());  // not a stop: the next loop steps on

  Coordinator coordinator;
  control.max_steps = -1;
  control.coordinator = &coordinator;
  int between = 0;
  // A coordinator stopped between steps (a signal's handler) ends the loop
  // before the next step.
  control.between_steps = [&] {
    if (++between == 2) coordinator.request_stop();
  };
  EXPECT_EQ(session->run_loop(train_step(graph_), control, &last), 2);
  EXPECT_EQ(session->steps_run(), 5);
  EXPECT_EQ(graph_.global_step.load(), 5);
}

}  // namespace
}  // namespace fastmts
