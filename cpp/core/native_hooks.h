// Hooks whose per-step work is all C++. Their graph-side set-up (finding the
// global step tensor, validating arguments) happens once in Python.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "core/callback_hooks.h"
#include "core/checkpoint_writer.h"
#include "core/hook_components.h"
#include "core/hook_config.h"
#include "core/hooked_session.h"
#include "core/step_rate_batch.h"
#include "core/file_formats/summary_writer.h"
#include "core/timers.h"

namespace fastmts {

// TF's StopAtStepHook: stop once the global step reaches last_step; with
// num_steps, last_step is counted from the global step at the first session
// and handed to `on_last_step` at once (TF's hook object keeps it then, even
// if a later hook's after_create_session fails).
class StopAtStepHook : public Hook {
 public:
  static constexpr const char* kName = "StopAtStepHook";
  struct Config {
    TF_Output global_step;
    int64_t num_steps = 0;  // counted from the first session's step when last_step is unset
    std::optional<int64_t> last_step;
    std::function<void(int64_t)> on_last_step;
    static auto fields() {
      return std::make_tuple(field("global_step", &Config::global_step),
                             field("num_steps", &Config::num_steps),
                             field("last_step", &Config::last_step),
                             field("on_last_step", &Config::on_last_step));
    }
  };
  explicit StopAtStepHook(Config config);

  void after_create_session(const SessionRunner& session) override;
  void before_run(StepContext&, RunRequest& request) override { request.plan = read_.plan(); }
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  bool keeps_values(const RunRequest&) const override { return false; }

 private:
  GlobalStepRead read_;
  int64_t num_steps_;
  std::optional<int64_t> last_step_;
  std::function<void(int64_t)> on_last_step_;
};

// TF's NanTensorHook on a float scalar loss: on NaN, `on_nan` runs (TF logs,
// and raises NanLossDuringTrainingError when failing), then stop is requested.
class NanTensorHook : public Hook {
 public:
  static constexpr const char* kName = "NanTensorHook";
  struct Config {
    TF_Output loss;
    bool fail_on_nan_loss = true;
    std::function<void()> on_nan;
    static auto fields() {
      return std::make_tuple(field("loss", &Config::loss),
                             field("fail_on_nan_loss", &Config::fail_on_nan_loss),
                             field("on_nan", &Config::on_nan));
    }
  };
  explicit NanTensorHook(Config config);
  void before_run(StepContext&, RunRequest& request) override { request.plan = read_loss_; }
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
// _log_tensors, which also moves TF's timer: the caller copies that timer
// into timer() afterwards, even when logging raises). `end` is TF's own (it
// logs once more with at_end).
//
// With `set_quiet_unless(info_logged)` (TF's default formatting, which has
// no effect but the line and the timer), a firing step on which TF's logger
// would not print INFO only moves the timer, natively: the tensors are still
// fetched, as TF fetches them, but no Python runs and nothing is formatted.
// The caller brings TF's timer up to timer() before TF's code reads it.
class LoggingTensorHook : public Hook {
 public:
  static constexpr const char* kName = "LoggingTensorHook";
  using LogFn = std::function<void(int64_t iter, const std::vector<SharedTensor>& values)>;
  struct Config {
    PlanPtr tensors;
    SecondOrStepTimer timer;
    LogFn log;
    std::function<void()> end;
    static auto fields() {
      return std::make_tuple(field("tensors", &Config::tensors), field("timer", &Config::timer),
                             field("log", &Config::log), field("end", &Config::end));
    }
  };
  static auto properties() {
    return std::make_tuple(property("iter_count", &LoggingTensorHook::iter_count));
  }
  static auto methods() {
    return std::make_tuple(
        method("set_quiet_unless_logged_by", &LoggingTensorHook::set_quiet_unless, "logger"));
  }
  explicit LoggingTensorHook(Config config);
  void set_quiet_unless(InfoEnabledCheck info_logged) { info_logged_ = std::move(info_logged.fn); }
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  void end(const SessionRunner&) override { config_.end(); }
  // TF's _iter_count: the steps run since the session was created.
  int64_t iter_count() const { return iter_; }
  SecondOrStepTimer& timer() { return config_.timer; }

 private:
  Config config_;
  std::function<bool()> info_logged_;  // empty: every firing step logs
  int64_t iter_ = 0;
};

// TF's CheckpointSaverHook: the global step is fetched every step and its
// gate (GlobalStepGate) kept natively; Python runs only when the gate opens:
// `save` is TF's own code for that fresh step (TF's timer decides, moves,
// then TF's _save; it returns whether stop was requested).
//
// With asynchronous checkpoints, before each step the `writer` is polled
// (no Python) for an ended write; then `deliver_write` (TF's listeners'
// after_save, or the write's error) runs and returns whether stop was
// requested.
//
// TF's timer on the hook object is the reference: the caller copies it into
// timer() after each Python call that may move it (HookStateSync, in
// python/fastmts/basic_session_run_hooks.py).
class CheckpointSaverHook : public Hook {
 public:
  static constexpr const char* kName = "CheckpointSaverHook";
  struct Config {
    TF_Output global_step;
    SecondOrStepTimer timer;
    int64_t steps_per_run = 1;
    std::function<bool(int64_t fresh_step)> save;
    std::function<void()> after_create_session;  // TF's own
    std::function<void()> end;                   // TF's own
    std::shared_ptr<CheckpointWriter> writer;    // null: synchronous saves
    std::function<bool()> deliver_write;         // set with writer
    static auto fields() {
      return std::make_tuple(
          field("global_step", &Config::global_step), field("timer", &Config::timer),
          field("steps_per_run", &Config::steps_per_run), field("save", &Config::save),
          field("after_create_session", &Config::after_create_session),
          field("end", &Config::end), optional_field("writer", &Config::writer),
          optional_field("deliver_write", &Config::deliver_write));
    }
  };
  explicit CheckpointSaverHook(Config config);

  void after_create_session(const SessionRunner&) override { config_.after_create_session(); }
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  bool keeps_values(const RunRequest&) const override { return false; }
  void end(const SessionRunner&) override { config_.end(); }
  SecondOrStepTimer& timer() { return gate_.timer(); }

 private:
  Config config_;
  GlobalStepGate gate_;
};

// TF's StepCounterHook: the global step is fetched every step and its gate
// (GlobalStepGate) kept natively; each opening after the first counts a step
// rate (steps and seconds since the previous one), and `record` hands the
// rates to TF's own _log_and_record (global_step/sec, as a summary and a log
// line) together with the timer's state, in batches inside a loop that
// allows it: StepRateBatch (core/step_rate_batch.h) does both.
//
// It also warns, at most 5 times, when the step did not move: on such a step
// `after_run_stuck` runs TF's whole after_run, so the warning is TF's own log
// line. after_create_session and end are TF's own. The caller copies TF's
// timer into timer() after each of its Python calls that may move it, so
// both agree on when it last fired.
//
// Writing to a native SummaryWriter (set_summary_writer) it writes its
// global_step/sec records itself, at once, with no Python, unless TF's
// logger would print its INFO line (`info_logged`): then TF's own
// _log_and_record runs as above.
class StepCounterHook : public Hook {
 public:
  using StepRate = StepRateBatch::StepRate;
  using RecordFn = StepRateBatch::RecordFn;
  struct Config {
    TF_Output global_step;
    SecondOrStepTimer timer;
    int64_t steps_per_run = 1;
    std::optional<int64_t> last_step;  // TF's _last_global_step of the hook object
    std::function<bool(int64_t stale_step)> after_run_stuck;  // returns stop requested
    RecordFn record;
    std::function<void()> after_create_session;  // TF's own
    std::function<void()> end;                   // TF's own
    static auto fields() {
      return std::make_tuple(
          field("global_step", &Config::global_step), field("timer", &Config::timer),
          field("steps_per_run", &Config::steps_per_run), field("last_step", &Config::last_step),
          field("after_run_stuck", &Config::after_run_stuck), field("record", &Config::record),
          field("after_create_session", &Config::after_create_session),
          field("end", &Config::end));
    }
  };
  static constexpr const char* kName = "StepCounterHook";
  static auto properties() {
    return std::make_tuple(property("last_step", &StepCounterHook::last_step));
  }
  static auto methods() {
    return std::make_tuple(method("set_summary_writer", &StepCounterHook::set_summary_writer,
                                  "writer", "tag", "logger"));
  }
  static constexpr double kMaxRecordDelay = StepRateBatch::kMaxRecordDelay;

  explicit StepCounterHook(Config config);
  void after_create_session(const SessionRunner& session) override;
  void before_run(StepContext&, RunRequest& request) override {
    request.plan = gate_.read().plan();
  }
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;
  bool keeps_values(const RunRequest&) const override { return false; }
  void end(const SessionRunner& session) override;
  void flush_deferred() override { rates_.flush(); }
  // TF's _last_global_step: the step its last after_run fetched.
  std::optional<int64_t> last_step() const { return last_step_; }
  // The writer, its summary tag, and whether TF's INFO log line would be
  // printed now (asked once per record).
  void set_summary_writer(std::shared_ptr<SummaryWriter> writer, std::string tag,
                          InfoEnabledCheck info_logged);
  SecondOrStepTimer& timer() { return gate_.timer(); }

 private:
  void count_step_rate(const StepContext& ctx, int64_t global_step);
  // Writes the record to the open native writer; false when TF's Python must.
  bool write_rate(const StepRate& rate);

  Config config_;
  GlobalStepGate gate_;
  std::optional<int64_t> last_step_;
  static constexpr int kStuckReports = 5;
  int stuck_reports_ = 0;
  std::shared_ptr<SummaryWriter> summary_writer_;
  std::string summary_tag_;
  std::function<bool()> info_logged_;
  StepRateBatch rates_;  // over gate_'s timer: declared after it
};

// TF's SummarySaverHook: the global step is fetched every step and its
// schedule (StepSchedule, due on its first step too) kept natively; on a due
// step the summaries (set_summaries) are fetched as well. Writing to a native
// SummaryWriter (set_summary_writer) it does all of TF's after_run natively
// (the fresh read, the START session log, the summaries); otherwise, and on
// its first step, `after_run` -- TF's own after_run on the hook object --
// runs and returns the step it expects next. Every other step is native.
// `end` is TF's own (it flushes the writer).
class SummarySaverHook : public ScheduledHook {
 public:
  // TF's after_run: (stale step, expected step, due, the summaries fetched
  // or null) -> the step expected next.
  using AfterRunFn = std::function<std::optional<int64_t>(
      int64_t stale_step, std::optional<int64_t> next_step, bool due,
      const std::vector<SharedTensor>* summaries)>;
  using Config = ScheduledHookConfig<AfterRunFn>;
  static constexpr const char* kName = "SummarySaverHook";
  static auto properties() {
    return std::make_tuple(property("next_step", &SummarySaverHook::next_step));
  }
  static auto methods() {
    return std::make_tuple(method("set_summaries", &SummarySaverHook::set_summaries, "plan"),
                           method("set_summary_writer", &SummarySaverHook::set_summary_writer,
                                  "writer"));
  }
  explicit SummarySaverHook(Config config);
  // The summaries to fetch on due steps (resolved after session creation,
  // when the Scaffold has its summary op); null for none.
  void set_summaries(PlanPtr summaries);
  void set_summary_writer(std::shared_ptr<SummaryWriter> writer) {
    summary_writer_ = std::move(writer);
  }
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;

 private:
  // TF's after_run written natively; false (nothing done) when it cannot be.
  bool write_natively(StepContext& ctx, int64_t stale, bool due, const Fetched& outputs);

  AfterRunFn after_run_;
  PlanPtr read_step_and_summaries_;
  bool has_summaries_ = false;
  std::shared_ptr<SummaryWriter> summary_writer_;
};

// TF's ProfilerHook: the global step is fetched every step and its schedule
// (StepSchedule) kept natively; a due step asks for a full trace and
// `after_run` -- TF's own after_run on the hook object, which writes the
// timeline -- runs with the step's RunMetadata and returns the step it
// expects next; so does the first step (TF starts its timer there). Every
// other step is native. `end` is TF's own.
class ProfilerHook : public ScheduledHook {
 public:
  // TF's after_run: (stale step, expected step, due, serialized
  // RunMetadata) -> the step expected next.
  using AfterRunFn = std::function<std::optional<int64_t>(
      int64_t stale_step, std::optional<int64_t> next_step, bool due,
      const std::string& run_metadata)>;
  using Config = ScheduledHookConfig<AfterRunFn>;
  static constexpr const char* kName = "ProfilerHook";
  static auto properties() {
    return std::make_tuple(property("next_step", &ProfilerHook::next_step));
  }
  explicit ProfilerHook(Config config);
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override;

 private:
  AfterRunFn after_run_;
};

// True when a float scalar (half, float, double, bfloat16) is NaN.
bool scalar_is_nan(const TF_Tensor* t);

// Every native hook class the binding registers (as _native.<kName>).
using NativeHookClasses =
    HookList<StopAtStepHook, NanTensorHook, LoggingTensorHook, CheckpointSaverHook,
             StepCounterHook, SummarySaverHook, ProfilerHook, EndOnlyHook, FeedFnHook,
             GlobalStepWaiterHook>;

}  // namespace fastmts
