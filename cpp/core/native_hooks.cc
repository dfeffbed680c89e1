#include "core/native_hooks.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/tf_strings.h"

namespace fastmts {

int64_t scalar_as_int64(const TF_Tensor* t) {
  const void* data = tf::TensorData(t);
  switch (tf::TensorType(t)) {
    case TF_INT64: return *static_cast<const int64_t*>(data);
    case TF_INT32: return *static_cast<const int32_t*>(data);
    case TF_UINT64: return static_cast<int64_t>(*static_cast<const uint64_t*>(data));
    case TF_UINT32: return *static_cast<const uint32_t*>(data);
    default: throw std::invalid_argument("global step must be an integer scalar");
  }
}

namespace {
// A hook's own session.run(global_step): one plain run of its read plan.
int64_t read_global_step(const SessionRunner& session, const PlanPtr& read_step) {
  RunRequest read;
  read.plan = read_step;
  read.run_options = kRunInCallerThread;
  return scalar_as_int64(session.run(read).outputs.at(0).get());
}
}  // namespace

StopAtStepHook::StopAtStepHook(TF_Output global_step, int64_t num_steps,
                               std::optional<int64_t> last_step,
                               std::function<void(int64_t)> on_last_step)
    : read_step_(std::make_shared<RunPlan>(RunPlan{{global_step}, {}})),
      num_steps_(num_steps),
      last_step_(last_step),
      on_last_step_(std::move(on_last_step)) {}

void StopAtStepHook::after_create_session(const SessionRunner& session) {
  if (last_step_) return;  // kept across re-created sessions, as in TF
  last_step_ = read_global_step(session, read_step_) + num_steps_;
  on_last_step_(*last_step_);
}

void StopAtStepHook::before_run(StepContext&, RunRequest& request) { request.plan = read_step_; }

void StopAtStepHook::after_run(StepContext& ctx, const RunRequest&,
                               const Fetched* outputs, const std::string&) {
  // The value read may predate this step's increment: as TF does, confirm
  // with a fresh read before stopping.
  if (scalar_as_int64((*outputs)[0].get()) + 1 < *last_step_) return;
  if (read_global_step(ctx.session(), read_step_) >= *last_step_) ctx.request_stop();
}

bool scalar_is_nan(const TF_Tensor* t) {
  const void* data = tf::TensorData(t);
  switch (tf::TensorType(t)) {
    case TF_FLOAT: return std::isnan(*static_cast<const float*>(data));
    case TF_DOUBLE: return std::isnan(*static_cast<const double*>(data));
    case TF_HALF: {
      uint16_t bits;
      std::memcpy(&bits, data, sizeof bits);
      return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0;
    }
    case TF_BFLOAT16: {
      uint16_t bits;
      std::memcpy(&bits, data, sizeof bits);
      return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0;
    }
    default: throw std::invalid_argument("NanTensorHook: loss must be a float scalar");
  }
}

NanTensorHook::NanTensorHook(TF_Output loss, bool fail_on_nan_loss, std::function<void()> on_nan)
    : read_loss_(std::make_shared<RunPlan>(RunPlan{{loss}, {}})),
      fail_on_nan_loss_(fail_on_nan_loss),
      on_nan_(std::move(on_nan)) {}

void NanTensorHook::before_run(StepContext&, RunRequest& request) { request.plan = read_loss_; }

void NanTensorHook::after_run(StepContext& ctx, const RunRequest&,
                              const Fetched* outputs, const std::string&) {
  if (!scalar_is_nan((*outputs)[0].get())) return;
  on_nan_();  // raises when failing on NaN
  if (!fail_on_nan_loss_) ctx.request_stop();
}

LoggingTensorHook::LoggingTensorHook(PlanPtr tensors, SecondOrStepTimer timer, LogFn log,
                                     std::function<void()> on_end)
    : tensors_(std::move(tensors)),
      timer_(timer),
      log_(std::move(log)),
      on_end_(std::move(on_end)) {}

void LoggingTensorHook::before_run(StepContext&, RunRequest& request) {
  if (timer_.should_trigger_for_step(iter_)) request.plan = tensors_;
}

void LoggingTensorHook::after_run(StepContext&, const RunRequest&,
                                  const Fetched* outputs, const std::string&) {
  if (outputs) {  // the tensors were asked for: this step logs
    if (info_logged_ && !info_logged_())
      timer_.update_last_triggered_step(iter_);  // all TF's _log_tensors would change
    else
      log_(iter_, outputs->to_vector());
  }
  ++iter_;
}

void LoggingTensorHook::end(const SessionRunner&) { on_end_(); }

GlobalStepGatedHook::GlobalStepGatedHook(TF_Output global_step, SecondOrStepTimer timer,
                                         int64_t steps_per_run, bool track_stuck_step,
                                         std::optional<int64_t> last_step, ActFn act,
                                         TriggerFn on_trigger, RecordFn record,
                                         LifecycleFn after_create_session, LifecycleFn end,
                                         PollFn background_ended, ReportFn report)
    : read_step_(std::make_shared<RunPlan>(RunPlan{{global_step}, {}})),
      timer_(timer),
      steps_per_run_(steps_per_run),
      track_stuck_step_(track_stuck_step),
      last_step_(last_step),
      act_(std::move(act)),
      on_trigger_(std::move(on_trigger)),
      record_(std::move(record)),
      after_create_session_(std::move(after_create_session)),
      end_(std::move(end)),
      background_ended_(std::move(background_ended)),
      report_(std::move(report)) {}

void GlobalStepGatedHook::after_create_session(const SessionRunner&) {
  flush_deferred();
  after_create_session_();
}

void GlobalStepGatedHook::before_run(StepContext& ctx, RunRequest& request) {
  if (background_ended_ && background_ended_()) {
    flush_deferred();
    if (report_()) ctx.request_stop();
  }
  request.plan = read_step_;
}

namespace {
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void GlobalStepGatedHook::after_run(StepContext& ctx, const RunRequest&,
                                    const Fetched* outputs, const std::string&) {
  const int64_t stale = scalar_as_int64((*outputs)[0].get());
  // TF warns about a stuck step with log_first_n(..., 5): once this hook
  // has reported 5, TF's counter is past 5 and its after_run would not log.
  const bool stuck = track_stuck_step_ && last_step_ && *last_step_ == stale &&
                     stuck_reports_ < kStuckReports;
  if (stuck) {
    ++stuck_reports_;
    flush_deferred();  // TF's after_run reads TF's timer
    if (act_(stale)) ctx.request_stop();
  } else if (timer_.should_trigger_for_step(stale + steps_per_run_)) {
    // The fetched step may predate this step's increment: TF reads it
    // again and acts only if the timer fires for that value too.
    const int64_t fresh = read_global_step(ctx.session(), read_step_);
    if (timer_.should_trigger_for_step(fresh)) {
      if (record_)
        count_step_rate(ctx, fresh);
      else if (on_trigger_(fresh))
        ctx.request_stop();
    }
  }
  if (track_stuck_step_) last_step_ = stale;
  const double waiting_since = first_rate_waiting_since_.load(std::memory_order_relaxed);
  if (waiting_since != 0 && steady_seconds() - waiting_since >= kMaxRecordDelay)
    flush_deferred();
}

void GlobalStepGatedHook::set_summary_writer(std::shared_ptr<SummaryWriter> writer,
                                             std::string tag,
                                             std::function<bool()> info_logged) {
  summary_writer_ = std::move(writer);
  summary_tag_ = std::move(tag);
  info_logged_ = std::move(info_logged);
}

bool GlobalStepGatedHook::write_rate(const StepRate& rate) {
  // TF divides the step count by the seconds (a zero time is TF's to
  // handle) and protobuf rounds the rate to a float.
  if (!(rate.elapsed_secs > 0)) return false;
  const double per_sec = static_cast<double>(rate.elapsed_steps) / rate.elapsed_secs;
  summary_writer_->add_simple_value(summary_tag_, static_cast<float>(per_sec), rate.global_step);
  return true;
}

void GlobalStepGatedHook::count_step_rate(const StepContext& ctx, int64_t global_step) {
  std::optional<StepRate> rate;
  {
    std::lock_guard<std::mutex> lock(rates_mu_);
    const std::optional<int64_t> previous = timer_.last_step();
    const std::optional<double> elapsed_secs = timer_.update_last_triggered_step(global_step);
    if (elapsed_secs)
      rate = StepRate{global_step - *previous, *elapsed_secs, global_step, timer_.last_time()};
  }
  if (summary_writer_ && summary_writer_->open()) {
    // TF's timer on the hook object catches up at hand-back.
    if (!rate) return;  // the timer's first firing: nothing to write or log
    // With TF's INFO line printed, TF's own _log_and_record runs, so the
    // line is TF's record; else no Python runs.
    if (!info_logged_()) {
      ctx.before_postponing(this);  // records another hook postponed come first
      if (write_rate(*rate)) return;
    }
  }
  ctx.before_postponing(this);
  {
    std::lock_guard<std::mutex> lock(rates_mu_);
    timer_moved_ = true;
    if (rate) {
      if (rates_.empty()) first_rate_waiting_since_.store(steady_seconds());
      rates_.push_back(*rate);
    }
  }
  if (!ctx.may_defer()) flush_deferred();
}

void GlobalStepGatedHook::flush_deferred() {
  if (!record_) return;
  std::vector<StepRate> rates;
  std::optional<int64_t> timer_last_step;
  double timer_last_time;
  {
    std::lock_guard<std::mutex> lock(rates_mu_);
    if (!timer_moved_) return;
    rates.swap(rates_);
    timer_moved_ = false;
    first_rate_waiting_since_.store(0);
    timer_last_step = timer_.last_step();
    timer_last_time = timer_.last_time();
  }
  record_(rates, timer_last_step, timer_last_time);
}

void GlobalStepGatedHook::end(const SessionRunner&) {
  flush_deferred();
  end_();
}

StepScheduledHook::StepScheduledHook(TF_Output global_step, SecondOrStepTimer timer,
                                     bool act_on_first_step, bool full_trace, ActFn act,
                                     std::function<void()> on_end)
    : read_step_(std::make_shared<RunPlan>(RunPlan{{global_step}, {}})),
      read_step_and_extra_(read_step_),
      timer_(timer),
      act_on_first_step_(act_on_first_step),
      full_trace_(full_trace),
      act_(std::move(act)),
      on_end_(std::move(on_end)) {}

void StepScheduledHook::set_extra(PlanPtr extra) {
  has_extra_ = extra != nullptr;
  if (!extra) {
    read_step_and_extra_ = read_step_;
    return;
  }
  auto both = std::make_shared<RunPlan>(*read_step_);
  both->fetches.insert(both->fetches.end(), extra->fetches.begin(), extra->fetches.end());
  both->targets = extra->targets;
  read_step_and_extra_ = std::move(both);
}

namespace {
// StepScheduledHook's mark on its request: this step is one it acts on.
const auto kRequested = std::make_shared<const int>(1);
}  // namespace

void StepScheduledHook::before_run(StepContext&, RunRequest& request) {
  const bool requested =
      next_step_ ? timer_.should_trigger_for_step(*next_step_) : act_on_first_step_;
  request.plan = requested ? read_step_and_extra_ : read_step_;
  request.full_trace = requested && full_trace_;
  if (requested) request.hook_state = kRequested;
}

bool StepScheduledHook::keeps_values(const RunRequest& request) const {
  return request.hook_state == kRequested;
}

void StepScheduledHook::after_run(StepContext& ctx, const RunRequest& request,
                                  const Fetched* outputs,
                                  const std::string& run_metadata) {
  const int64_t stale = scalar_as_int64((*outputs)[0].get());
  const bool requested = request.hook_state == kRequested;
  if (next_step_ && !requested) {
    next_step_ = stale + 2;  // as TF: the step after this one's (stale + 1)
    return;
  }
  if (next_step_ && !has_extra_ && !full_trace_) {
    // A SummarySaverHook with no summary op acts on nothing but its first
    // step: TF's after_run only reads the step afresh and moves its timer.
    const int64_t fresh = read_global_step(ctx.session(), read_step_);
    timer_.update_last_triggered_step(fresh);
    next_step_ = fresh + 1;
    return;
  }
  if (write_natively(ctx, stale, requested, *outputs)) return;
  std::vector<SharedTensor> extra;
  if (requested) extra = outputs->to_vector(1);
  next_step_ = act_(stale, next_step_, requested, requested ? &extra : nullptr, run_metadata);
}

bool StepScheduledHook::write_natively(StepContext& ctx, int64_t stale, bool requested,
                                       const Fetched& outputs) {
  if (full_trace_ || !summary_writer_ || !summary_writer_->open()) return false;
  // The step's summaries: each a serialized Summary in a string scalar.
  std::vector<std::string_view> summaries;
  if (requested && has_extra_) {
    for (size_t i = 1; i < outputs.size(); ++i) {
      const TF_Tensor* t = outputs[i].get();
      if (tf::TensorType(t) != TF_STRING || tf::NumDims(t) != 0) return false;
      summaries.push_back(string_elements(t).at(0));
    }
  }
  // TF's after_run from here on: the fresh read first, so a read that
  // fails leaves the tags unmarked, as in TF.
  const bool first = !next_step_;
  int64_t global_step = stale + 1;
  if (first || requested) global_step = read_global_step(ctx.session(), read_step_);
  std::optional<std::vector<std::string>> stripped =
      summary_writer_->tags()->strip_repeated_metadata(summaries);
  if (!stripped) return false;  // TF's Python does it all (and reads again)
  ctx.before_postponing(this);  // another hook's records of this step come first
  if (first) summary_writer_->add_session_log_start(global_step);
  if (requested) {
    timer_.update_last_triggered_step(global_step);
    summary_writer_->add_stripped_summaries(*stripped, global_step);
  }
  next_step_ = global_step + 1;
  return true;
}

}  // namespace fastmts
