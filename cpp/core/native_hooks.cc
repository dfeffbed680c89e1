#include "core/native_hooks.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/tf_strings.h"

namespace fastmts {

StopAtStepHook::StopAtStepHook(Config config)
    : read_(config.global_step),
      num_steps_(config.num_steps),
      last_step_(config.last_step),
      on_last_step_(std::move(config.on_last_step)) {}

void StopAtStepHook::after_create_session(const SessionRunner& session) {
  if (last_step_) return;  // kept across re-created sessions, as in TF
  last_step_ = read_.fresh(session) + num_steps_;
  on_last_step_(*last_step_);
}

void StopAtStepHook::after_run(StepContext& ctx, const RunRequest&,
                               const Fetched* outputs, const std::string&) {
  // The value read may predate this step's increment: as TF does, confirm
  // with a fresh read before stopping.
  if (scalar_as_int64((*outputs)[0].get()) + 1 < *last_step_) return;
  if (read_.fresh(ctx.session()) >= *last_step_) ctx.request_stop();
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

NanTensorHook::NanTensorHook(Config config)
    : read_loss_(std::make_shared<RunPlan>(RunPlan{{config.loss}, {}})),
      fail_on_nan_loss_(config.fail_on_nan_loss),
      on_nan_(std::move(config.on_nan)) {}

void NanTensorHook::after_run(StepContext& ctx, const RunRequest&,
                              const Fetched* outputs, const std::string&) {
  if (!scalar_is_nan((*outputs)[0].get())) return;
  on_nan_();  // raises when failing on NaN
  if (!fail_on_nan_loss_) ctx.request_stop();
}

LoggingTensorHook::LoggingTensorHook(Config config) : config_(std::move(config)) {}

void LoggingTensorHook::before_run(StepContext&, RunRequest& request) {
  if (config_.timer.should_trigger_for_step(iter_)) request.plan = config_.tensors;
}

void LoggingTensorHook::after_run(StepContext&, const RunRequest&,
                                  const Fetched* outputs, const std::string&) {
  if (outputs) {  // the tensors were asked for: this step logs
    if (info_logged_ && !info_logged_())
      config_.timer.update_last_triggered_step(iter_);  // all TF's _log_tensors would change
    else
      config_.log(iter_, outputs->to_vector());
  }
  ++iter_;
}

CheckpointSaverHook::CheckpointSaverHook(Config config)
    : config_(std::move(config)),
      gate_(config_.global_step, config_.timer, config_.steps_per_run) {}

void CheckpointSaverHook::before_run(StepContext& ctx, RunRequest& request) {
  if (config_.writer && config_.writer->has_outcome()) {  // an atomic read, no Python
    if (config_.deliver_write()) ctx.request_stop();
  }
  request.plan = gate_.read().plan();
}

void CheckpointSaverHook::after_run(StepContext& ctx, const RunRequest&,
                                    const Fetched* outputs, const std::string&) {
  const int64_t stale = scalar_as_int64((*outputs)[0].get());
  const std::optional<int64_t> fresh = gate_.fresh_step_if_open(ctx, stale);
  if (fresh && config_.save(*fresh)) ctx.request_stop();
}

StepCounterHook::StepCounterHook(Config config)
    : config_(std::move(config)),
      gate_(config_.global_step, config_.timer, config_.steps_per_run),
      last_step_(config_.last_step),
      rates_(&gate_.timer(), std::move(config_.record)) {}

void StepCounterHook::after_create_session(const SessionRunner&) {
  flush_deferred();
  config_.after_create_session();
}

void StepCounterHook::after_run(StepContext& ctx, const RunRequest&,
                                const Fetched* outputs, const std::string&) {
  const int64_t stale = scalar_as_int64((*outputs)[0].get());
  // TF warns about a stuck step with log_first_n(..., 5): once this hook
  // has reported 5, TF's counter is past 5 and its after_run would not log.
  const bool stuck = last_step_ && *last_step_ == stale && stuck_reports_ < kStuckReports;
  if (stuck) {
    ++stuck_reports_;
    flush_deferred();  // TF's after_run reads TF's timer
    if (config_.after_run_stuck(stale)) ctx.request_stop();
  } else if (const std::optional<int64_t> fresh = gate_.fresh_step_if_open(ctx, stale)) {
    count_step_rate(ctx, *fresh);
  }
  last_step_ = stale;
  rates_.flush_if_overdue();
}

void StepCounterHook::set_summary_writer(std::shared_ptr<SummaryWriter> writer, std::string tag,
                                         InfoEnabledCheck info_logged) {
  summary_writer_ = std::move(writer);
  summary_tag_ = std::move(tag);
  info_logged_ = std::move(info_logged.fn);
}

bool StepCounterHook::write_rate(const StepRate& rate) {
  // TF divides the step count by the seconds (a zero time is TF's to
  // handle) and protobuf rounds the rate to a float.
  if (!(rate.elapsed_secs > 0)) return false;
  const double per_sec = static_cast<double>(rate.elapsed_steps) / rate.elapsed_secs;
  summary_writer_->add_simple_value(summary_tag_, static_cast<float>(per_sec), rate.global_step);
  return true;
}

void StepCounterHook::count_step_rate(const StepContext& ctx, int64_t global_step) {
  const std::optional<StepRate> rate = rates_.fire(global_step);
  if (summary_writer_ && summary_writer_->open()) {
    // TF's timer on the hook object catches up when its state is synced.
    if (!rate) return;  // the timer's first firing: nothing to write or log
    // With TF's INFO line printed, TF's own _log_and_record runs, so the
    // line is TF's record; else no Python runs.
    if (!info_logged_()) {
      ctx.before_postponing(this);  // records another hook postponed come first
      if (write_rate(*rate)) return;
    }
  }
  ctx.before_postponing(this);
  rates_.hold(rate, ctx.may_defer());
}

void StepCounterHook::end(const SessionRunner&) {
  flush_deferred();
  config_.end();
}

SummarySaverHook::SummarySaverHook(Config config)
    : ScheduledHook(config.global_step, config.timer, /*due_on_first_step=*/true,
                    std::move(config.end)),
      after_run_(std::move(config.after_run)),
      read_step_and_summaries_(read_.plan()) {}

void SummarySaverHook::set_summaries(PlanPtr summaries) {
  has_summaries_ = summaries != nullptr;
  if (!summaries) {
    read_step_and_summaries_ = read_.plan();
    return;
  }
  auto both = std::make_shared<RunPlan>(*read_.plan());
  both->fetches.insert(both->fetches.end(), summaries->fetches.begin(), summaries->fetches.end());
  both->targets = summaries->targets;
  read_step_and_summaries_ = std::move(both);
}

void SummarySaverHook::before_run(StepContext&, RunRequest& request) {
  const bool due = schedule_.due();
  request.plan = due ? read_step_and_summaries_ : read_.plan();
  if (due) StepSchedule::mark_due(request);
}

void SummarySaverHook::after_run(StepContext& ctx, const RunRequest& request,
                                 const Fetched* outputs, const std::string&) {
  const int64_t stale = scalar_as_int64((*outputs)[0].get());
  const bool due = StepSchedule::marked_due(request);
  if (skipped(stale, due)) return;
  if (schedule_.started() && !has_summaries_) {
    // With no summary op the hook acts on nothing but its first step: TF's
    // after_run only reads the step afresh and moves its timer.
    const int64_t fresh = read_.fresh(ctx.session());
    schedule_.timer().update_last_triggered_step(fresh);
    schedule_.set_next_step(fresh + 1);
    return;
  }
  if (write_natively(ctx, stale, due, *outputs)) return;
  std::vector<SharedTensor> summaries;
  if (due) summaries = outputs->to_vector(1);
  schedule_.set_next_step(
      after_run_(stale, schedule_.next_step(), due, due ? &summaries : nullptr));
}

bool SummarySaverHook::write_natively(StepContext& ctx, int64_t stale, bool due,
                                      const Fetched& outputs) {
  if (!summary_writer_ || !summary_writer_->open()) return false;
  // The step's summaries: each a serialized Summary in a string scalar.
  std::vector<std::string_view> summaries;
  if (due && has_summaries_) {
    for (size_t i = 1; i < outputs.size(); ++i) {
      const TF_Tensor* t = outputs[i].get();
      if (tf::TensorType(t) != TF_STRING || tf::NumDims(t) != 0) return false;
      summaries.push_back(string_elements(t).at(0));
    }
  }
  // TF's after_run from here on: the fresh read first, so a read that
  // fails leaves the tags unmarked, as in TF.
  const bool first = !schedule_.started();
  int64_t global_step = stale + 1;
  if (first || due) global_step = read_.fresh(ctx.session());
  std::optional<std::vector<std::string>> stripped =
      summary_writer_->tags()->strip_repeated_metadata(summaries);
  if (!stripped) return false;  // TF's Python does it all (and reads again)
  ctx.before_postponing(this);  // another hook's records of this step come first
  if (first) summary_writer_->add_session_log_start(global_step);
  if (due) {
    schedule_.timer().update_last_triggered_step(global_step);
    summary_writer_->add_stripped_summaries(*stripped, global_step);
  }
  schedule_.set_next_step(global_step + 1);
  return true;
}

ProfilerHook::ProfilerHook(Config config)
    : ScheduledHook(config.global_step, config.timer, /*due_on_first_step=*/false,
                    std::move(config.end)),
      after_run_(std::move(config.after_run)) {}

void ProfilerHook::before_run(StepContext&, RunRequest& request) {
  request.plan = read_.plan();
  if (schedule_.due()) {
    request.full_trace = true;
    StepSchedule::mark_due(request);
  }
}

void ProfilerHook::after_run(StepContext&, const RunRequest& request, const Fetched* outputs,
                             const std::string& run_metadata) {
  const int64_t stale = scalar_as_int64((*outputs)[0].get());
  const bool due = StepSchedule::marked_due(request);
  if (skipped(stale, due)) return;
  schedule_.set_next_step(after_run_(stale, schedule_.next_step(), due, run_metadata));
}

}  // namespace fastmts
