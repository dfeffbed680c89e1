// Hooks whose per-step work is all C++. Their graph-side set-up (finding the
// global step tensor, validating arguments) happens once in Python.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "core/hooked_session.h"
#include "core/file_formats/summary_writer.h"
#include "core/timers.h"

namespace fastmts {

// Reads an integer scalar (int32 or int64) such as the global step.
int64_t scalar_as_int64(const TF_Tensor* t);

// TF's StopAtStepHook: stop once the global step reaches last_step; with
// num_steps, last_step is counted from the global step at the first session
// and handed to `on_last_step` at once (TF's hook object keeps it then, even
// if a later hook's after_create_session fails).
class StopAtStepHook : public Hook {
 public:
  // Without last_step, num_steps counts from the first session's step.
  StopAtStepHook(TF_Output global_step, int64_t num_steps, std::optional<int64_t> last_step,
                 std::function<void(int64_t)> on_last_step);

  void after_create_session(const SessionRunner& session) override;
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  bool keeps_values(const RunRequest&) const override { return false; }

 private:
  PlanPtr read_step_;
  int64_t num_steps_;
  std::optional<int64_t> last_step_;
  std::function<void(int64_t)> on_last_step_;
};

// TF's NanTensorHook on a float scalar loss: on NaN, `on_nan` runs (TF logs,
// and raises NanLossDuringTrainingError when failing), then stop is requested.
class NanTensorHook : public Hook {
 public:
  NanTensorHook(TF_Output loss, bool fail_on_nan_loss, std::function<void()> on_nan);
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  bool keeps_values(const RunRequest&) const override { return false; }

 private:
  PlanPtr read_loss_;
  bool fail_on_nan_loss_;
  std::function<void()> on_nan_;
};

// TF's LoggingTensorHook: the trigger decision per step is native; when it
// triggers, the tensors are fetched and `log` formats and logs them (TF's own
// _log_tensors, which also moves TF's timer: the caller hands that timer's
// state back through adopt_timer, even when logging raises).
// `on_end` is TF's own end (it logs once more with at_end).
//
// With `set_quiet_unless(info_logged)` (TF's default formatting, which has
// no effect but the line and the timer), a firing step on which TF's logger
// would not print INFO only moves the timer, natively: the tensors are still
// fetched, as TF fetches them, but no Python runs and nothing is formatted.
// The caller brings TF's timer up to timer() before TF's code reads it.
class LoggingTensorHook : public Hook {
 public:
  using LogFn = std::function<void(int64_t iter, const std::vector<SharedTensor>& values)>;
  void adopt_timer(std::optional<int64_t> last_step, double last_time) {
    timer_.set_state(last_step, last_time);
  }
  LoggingTensorHook(PlanPtr tensors, SecondOrStepTimer timer, LogFn log,
                    std::function<void()> on_end);
  void set_quiet_unless(std::function<bool()> info_logged) { info_logged_ = std::move(info_logged); }
  const SecondOrStepTimer& timer() const { return timer_; }
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  void end(const SessionRunner& session) override;
  // TF's _iter_count: the steps run since the session was created.
  int64_t iter_count() const { return iter_; }

 private:
  PlanPtr tensors_;
  SecondOrStepTimer timer_;
  LogFn log_;
  std::function<void()> on_end_;
  std::function<bool()> info_logged_;  // empty: every firing step logs
  int64_t iter_ = 0;
};

// The per-step gate of TF's CheckpointSaverHook and StepCounterHook: both
// fetch the global step every step, and when their timer fires for (stale
// step + steps_per_run) read the step afresh and act only if the timer also
// fires for that fresh step. This hook does all of that natively -- fetch,
// timer, fresh read -- and calls Python only to act.
//
// CheckpointSaverHook: `on_trigger` runs TF's own code for a firing step
// (update TF's timer, then save; it may request stop). StepCounterHook:
// the timer moves natively and each firing after the first counts a step
// rate (steps and seconds since the previous one); `record` hands the rates
// to TF's own _log_and_record (global_step/sec, as a summary and a log
// line) together with the timer's state. Inside a loop that allows it
// (StepContext::may_defer) rates are handed over in batches -- before any
// other Python code of the hooks runs, before another hook postpones work
// (PostponedWork), when the loop ends, and at the latest kMaxRecordDelay
// after the first waiting one -- since each Python call costs more than
// many steps of a small model; otherwise at once.
//
// CheckpointSaverHook with asynchronous checkpoints: before each step,
// `background_ended` (a poll that calls no Python) says whether a write
// ended; then `report` (TF's listeners' after_save, or the write's error)
// runs and may request stop.
//
// StepCounterHook also warns, at most 5 times, when the step did not move:
// on such a step `act` runs TF's whole after_run, so the warning is TF's own
// log line. after_create_session and end are TF's own. The caller hands
// TF's timer state back (adopt_timer) after each of its Python calls that
// may move it, so both agree on when it last fired.
//
// StepCounterHook writing to a native SummaryWriter (set_summary_writer)
// writes its global_step/sec records itself, at once, with no Python, unless
// TF's logger would print its INFO line (`info_logged`): then TF's own
// _log_and_record runs as above.
class GlobalStepGatedHook : public Hook {
 public:
  struct StepRate {
    int64_t elapsed_steps;
    double elapsed_secs;
    int64_t global_step;
    double triggered_at;  // the timer's time for this firing
  };
  // `act` (TF's after_run) and `on_trigger` return whether stop was requested.
  using ActFn = std::function<bool(int64_t stale_step)>;
  using TriggerFn = std::function<bool(int64_t fresh_step)>;
  using RecordFn = std::function<void(const std::vector<StepRate>& rates,
                                      std::optional<int64_t> timer_last_step,
                                      double timer_last_time)>;
  using LifecycleFn = std::function<void()>;
  using PollFn = std::function<bool()>;
  using ReportFn = std::function<bool()>;  // returns whether stop was requested
  static constexpr double kMaxRecordDelay = 0.1;  // seconds

  // Exactly one of `on_trigger` and `record` is set; `background_ended` and
  // `report` are both set or neither.
  GlobalStepGatedHook(TF_Output global_step, SecondOrStepTimer timer, int64_t steps_per_run,
                      bool track_stuck_step, std::optional<int64_t> last_step, ActFn act,
                      TriggerFn on_trigger, RecordFn record, LifecycleFn after_create_session,
                      LifecycleFn end, PollFn background_ended = {}, ReportFn report = {});
  void after_create_session(const SessionRunner& session) override;
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  bool keeps_values(const RunRequest&) const override { return false; }
  void end(const SessionRunner& session) override;
  void flush_deferred() override;
  // Called by the caller after each Python call into the hook, even one that
  // raised: TF's timer is the reference.
  void adopt_timer(std::optional<int64_t> last_step, double last_time) {
    timer_.set_state(last_step, last_time);
  }
  // StepCounterHook's _last_global_step: the step its last after_run fetched.
  std::optional<int64_t> last_step() const { return last_step_; }
  // StepCounterHook's writer, its summary tag, and whether TF's INFO log
  // line would be printed now (asked once per record).
  void set_summary_writer(std::shared_ptr<SummaryWriter> writer, std::string tag,
                          std::function<bool()> info_logged);
  const SecondOrStepTimer& timer() const { return timer_; }

 private:
  void count_step_rate(const StepContext& ctx, int64_t global_step);
  // Writes the record to the open native writer; false when TF's Python must.
  bool write_rate(const StepRate& rate);

  PlanPtr read_step_;
  SecondOrStepTimer timer_;
  int64_t steps_per_run_;
  bool track_stuck_step_;
  std::optional<int64_t> last_step_;  // StepCounterHook's _last_global_step
  static constexpr int kStuckReports = 5;
  int stuck_reports_ = 0;
  ActFn act_;
  TriggerFn on_trigger_;
  RecordFn record_;
  LifecycleFn after_create_session_, end_;
  PollFn background_ended_;
  ReportFn report_;
  std::shared_ptr<SummaryWriter> summary_writer_;
  std::string summary_tag_;
  std::function<bool()> info_logged_;
  // Rates waiting for `record`, and whether the timer moved since the last
  // hand-over. Guarded: two threads may step one session.
  std::mutex rates_mu_;
  std::vector<StepRate> rates_;
  bool timer_moved_ = false;
  std::atomic<double> first_rate_waiting_since_{0};  // steady seconds; 0: none
};

// The schedule of TF's SummarySaverHook and ProfilerHook: both fetch the
// global step every step, remember the step they expect next, and decide in
// before_run whether to act on this step (their timer fires for the expected
// step; SummarySaverHook also acts on its first step). On those steps the
// hook also fetches `extra` (the summaries) or asks for a full trace
// (the profile), and `act` -- TF's own after_run on the hook object -- runs
// and returns the step it expects next. On the first step `act` runs too (TF
// starts the summary log or the timer there). Every other step is native.
// `on_end` is TF's own end (SummarySaverHook flushes its writer).
// SummarySaverHook writing to a native SummaryWriter (set_summary_writer)
// does all of its after_run natively (the fresh read, the START session log,
// the summaries): `act` runs only when TF's Python must write them.
class StepScheduledHook : public Hook {
 public:
  using ActFn = std::function<std::optional<int64_t>(
      int64_t stale_step, std::optional<int64_t> next_step, bool requested,
      const std::vector<SharedTensor>* extra, const std::string& run_metadata)>;

  StepScheduledHook(TF_Output global_step, SecondOrStepTimer timer, bool act_on_first_step,
                    bool full_trace, ActFn act, std::function<void()> on_end);
  // The summaries to fetch when acting (resolved after session creation,
  // when the Scaffold has its summary op); null for none.
  void set_extra(PlanPtr extra);
  void set_summary_writer(std::shared_ptr<SummaryWriter> writer) {
    summary_writer_ = std::move(writer);
  }
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  // Only the summaries or trace of a step it acts on go on to Python.
  bool keeps_values(const RunRequest& request) const override;
  void end(const SessionRunner&) override { on_end_(); }
  std::optional<int64_t> next_step() const { return next_step_; }
  void adopt_timer(std::optional<int64_t> last_step, double last_time) {
    timer_.set_state(last_step, last_time);
  }
  const SecondOrStepTimer& timer() const { return timer_; }

 private:
  // TF's after_run written natively; false (nothing done) when it cannot be.
  bool write_natively(StepContext& ctx, int64_t stale, bool requested, const Fetched& outputs);

  PlanPtr read_step_, read_step_and_extra_;
  SecondOrStepTimer timer_;
  bool act_on_first_step_;
  bool full_trace_;
  bool has_extra_ = false;
  ActFn act_;
  std::function<void()> on_end_;
  std::optional<int64_t> next_step_;
  std::shared_ptr<SummaryWriter> summary_writer_;
};

// True when a float scalar (half, float, double, bfloat16) is NaN.
bool scalar_is_nan(const TF_Tensor* t);

}  // namespace fastmts
