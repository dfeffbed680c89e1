// The parts the stock hooks' native classes are built from, as TF's hooks
// share them: reading the global step, the gate of CheckpointSaverHook and
// StepCounterHook, the schedule of SummarySaverHook and ProfilerHook and
// the base class and Config they share (and TF's SecondOrStepTimer,
// core/timers.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "core/hook_config.h"
#include "core/hooked_session.h"
#include "core/timers.h"

namespace fastmts {

// Reads an integer scalar (int32 or int64) such as the global step.
int64_t scalar_as_int64(const TF_Tensor* t);

// The global step as a hook fetches it: the plan of its before_run, and the
// hook's own session.run(global_step) (TF's "fresh read").
class GlobalStepRead {
 public:
  explicit GlobalStepRead(TF_Output global_step);
  const PlanPtr& plan() const { return plan_; }
  int64_t fresh(const SessionRunner& session) const;

 private:
  PlanPtr plan_;
};

// The per-step gate of TF's CheckpointSaverHook and StepCounterHook: the step
// fetched with the run may predate its increment, so when the timer fires for
// (that step + steps_per_run) the step is read afresh and the gate opens only
// if the timer also fires for the fresh value.
class GlobalStepGate {
 public:
  GlobalStepGate(TF_Output global_step, SecondOrStepTimer timer, int64_t steps_per_run)
      : read_(global_step), timer_(timer), steps_per_run_(steps_per_run) {}
  const GlobalStepRead& read() const { return read_; }
  // The fresh step when the gate opens on this step; empty when it stays shut.
  std::optional<int64_t> fresh_step_if_open(const StepContext& ctx, int64_t stale) const {
    if (!timer_.should_trigger_for_step(stale + steps_per_run_)) return std::nullopt;
    const int64_t fresh = read_.fresh(ctx.session());
    if (!timer_.should_trigger_for_step(fresh)) return std::nullopt;
    return fresh;
  }
  SecondOrStepTimer& timer() { return timer_; }
  const SecondOrStepTimer& timer() const { return timer_; }

 private:
  GlobalStepRead read_;
  SecondOrStepTimer timer_;
  int64_t steps_per_run_;
};

// The schedule of TF's SummarySaverHook and ProfilerHook: the step the hook
// expects next (unset before its first step) and its timer. A step is due
// when the timer fires for the expected step; the first step is due when the
// hook acts on it. A due step is marked on its request (hook_state), since
// several steps may run at once.
class StepSchedule {
 public:
  StepSchedule(SecondOrStepTimer timer, bool due_on_first_step)
      : timer_(timer), due_on_first_step_(due_on_first_step) {}
  bool due() const {
    return next_step_ ? timer_.should_trigger_for_step(*next_step_) : due_on_first_step_;
  }
  static void mark_due(RunRequest& request) { request.hook_state = kDueMark; }
  static bool marked_due(const RunRequest& request) { return request.hook_state == kDueMark; }
  bool started() const { return next_step_.has_value(); }
  std::optional<int64_t> next_step() const { return next_step_; }
  void set_next_step(std::optional<int64_t> step) { next_step_ = step; }
  SecondOrStepTimer& timer() { return timer_; }
  const SecondOrStepTimer& timer() const { return timer_; }

 private:
  inline static const std::shared_ptr<const void> kDueMark = std::make_shared<const int>(1);

  SecondOrStepTimer timer_;
  bool due_on_first_step_;
  std::optional<int64_t> next_step_;
};

// The configuration of a ScheduledHook: `after_run` is TF's own after_run on
// the hook object (it returns the step the hook expects next), `end` TF's end.
template <typename AfterRunFn>
struct ScheduledHookConfig {
  TF_Output global_step;
  SecondOrStepTimer timer;
  AfterRunFn after_run;
  std::function<void()> end;
  static auto fields() {
    using C = ScheduledHookConfig;
    return std::make_tuple(field("global_step", &C::global_step), field("timer", &C::timer),
                           field("after_run", &C::after_run), field("end", &C::end));
  }
};

// What SummarySaverHook and ProfilerHook share: the global step fetched every
// step, the schedule (StepSchedule), TF's own end; only a due step's values go
// on to Python.
class ScheduledHook : public Hook {
 public:
  bool keeps_values(const RunRequest& request) const override {
    return StepSchedule::marked_due(request);
  }
  void end(const SessionRunner&) override { end_(); }
  std::optional<int64_t> next_step() const { return schedule_.next_step(); }
  SecondOrStepTimer& timer() { return schedule_.timer(); }

 protected:
  ScheduledHook(TF_Output global_step, SecondOrStepTimer timer, bool due_on_first_step,
                std::function<void()> end)
      : read_(global_step), schedule_(timer, due_on_first_step), end_(std::move(end)) {}
  // Past the first step, a step that is not due only moves the step
  // expected next (as TF: the step after this one's, stale + 1); true then.
  bool skipped(int64_t stale, bool due) {
    if (!schedule_.started() || due) return false;
    schedule_.set_next_step(stale + 2);
    return true;
  }

  GlobalStepRead read_;
  StepSchedule schedule_;

 private:
  std::function<void()> end_;
};

}  // namespace fastmts
