#include "core/hooked_session.h"

#include <chrono>
#include <optional>

#include "core/run_options.h"

namespace fastmts {

namespace {

// Times one call into `total` when tracking costs (null: not tracking).
template <typename Fn>
void timed(double* total, Fn&& fn) {
  if (!total) return fn();
  const auto start = std::chrono::steady_clock::now();
  struct Add {  // also on throw: a raising hook's time counts
    double* total;
    std::chrono::steady_clock::time_point start;
    ~Add() { *total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  } add{total, start};
  fn();
}

thread_local HookedSession* t_deferring_loop = nullptr;

// t_deferring_loop for the length of one run_loop (loops may nest: a hook's
// Python code may drive another session).
class DeferringLoopScope {
 public:
  explicit DeferringLoopScope(HookedSession* session) : previous_(t_deferring_loop) {
    t_deferring_loop = session;
  }
  ~DeferringLoopScope() { t_deferring_loop = previous_; }

 private:
  HookedSession* previous_;
};

}  // namespace

void PostponedWork::before_postponing(Hook* hook) {
  Hook* previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    previous = holder_;
    holder_ = hook;
  }
  if (previous && previous != hook) previous->flush_deferred();
}

void HookedSession::attach(TF_Session* session, const BlockingCallGuard* guard) {
  runner_ = SessionRunner(session, guard);
  stop_requested_.store(false, std::memory_order_release);
  for (auto& hook : hooks_) hook->after_create_session(runner_);
}

void HookedSession::detach() { runner_ = SessionRunner(nullptr); }

void HookedSession::end() {
  for (auto& hook : hooks_) hook->end(runner_);
}

void HookedSession::flush_deferred() {
  for (auto& hook : hooks_) hook->flush_deferred();
}

void HookedSession::track_costs(bool on) {
  if (!on) {
    costs_.reset();
    return;
  }
  costs_ = std::make_unique<HookCosts>();
  costs_->before_run_seconds.assign(hooks_.size(), 0.0);
  costs_->after_run_seconds.assign(hooks_.size(), 0.0);
}

HookedSession* HookedSession::deferring_loop_on_this_thread() { return t_deferring_loop; }

int64_t HookedSession::run_loop(const RunRequest& caller, const LoopControl& control,
                                RunResult* last) {
  const SessionRunner unguarded(runner_.session());
  const SessionRunner& runner = control.lock_held ? runner_ : unguarded;
  std::optional<DeferringLoopScope> deferring;
  if (control.may_defer) deferring.emplace(this);
  int64_t done = 0;
  auto should_end = [&] {
    return stop_requested() || (control.coordinator && control.coordinator->should_stop()) ||
           (control.max_steps >= 0 && done >= control.max_steps);
  };
  while (!should_end()) {
    if (done && control.between_steps) {
      control.between_steps();
      // A signal handler that just ran may have stopped the loop (a
      // SIGTERM policy, a handler that stops the coordinator): no step after it.
      if (should_end()) break;
    }
    void* user_data = control.begin_step ? control.begin_step() : nullptr;
    run_on(runner, caller, false, user_data, control.may_defer, last);
    ++done;
    if (control.steps_done) *control.steps_done = done;
    if (control.end_step) control.end_step(user_data);
    settle_stop(runner);
  }
  return done;
}

RunResult HookedSession::run(const RunRequest& caller, bool want_metadata, void* user_data) {
  RunResult result;
  run_on(runner_, caller, want_metadata, user_data, false, &result);
  return result;
}

namespace {
// A step's scratch, handed back to its pool emptied when the step ends,
// also by an exception: no hook's request or fetched value outlives it.
class ScratchLease {
 public:
  ScratchLease(StepScratchPool& pool, size_t hooks) : pool_(pool), scratch_(pool.take()) {
    scratch_->requests.resize(hooks);
  }
  ~ScratchLease() {
    for (RunRequest& r : scratch_->requests) r.clear();
    scratch_->merged.outputs.clear();
    scratch_->merged.run_metadata.clear();
    pool_.give_back(std::move(scratch_));
  }
  StepScratch& operator*() { return *scratch_; }

 private:
  StepScratchPool& pool_;
  std::unique_ptr<StepScratch> scratch_;
};
}  // namespace

struct HookedSession::HooksAsked {
  bool anything = false;              // did any hook ask for anything?
  std::unique_ptr<FeedMerger> feeds;  // only when some hook feeds
  const std::string* options = nullptr;
  bool full_trace = false;
};

void HookedSession::ask_hooks(StepContext& ctx, const SessionRunner& runner,
                              std::vector<RunRequest>& requests, HooksAsked* asked) {
  // Hooks are asked in order; as in TF, a feed conflict stops the round at
  // the hook that causes it. What they ask is gathered in locals, which stay
  // in registers across the hooks' calls (through `asked`, each hook's call
  // would store and reload it; with tell_hooks's hoisted size, callgrind
  // counted 5,261 instructions of fastmts's own a step against 5,340).
  HookDispatchLock::Round round(dispatch_, runner.guard());
  HookCosts* costs = costs_.get();
  bool anything = false;
  bool full_trace = false;
  const std::string* options = asked->options;
  const size_t n = hooks_.size();
  for (size_t i = 0; i < n; ++i) {
    timed(costs ? &costs->before_run_seconds[i] : nullptr,
          [&] { hooks_[i]->before_run(ctx, requests[i]); });
    const RunRequest& r = requests[i];
    anything = anything || r.plan || r.feed_plan || !r.run_options.empty() || r.full_trace;
    if (r.feed_plan) {
      if (!asked->feeds) asked->feeds = std::make_unique<FeedMerger>();
      asked->feeds->add(r, "Same tensor is fed by two hooks.");
    }
    if (!r.run_options.empty()) options = &r.run_options;
    full_trace = full_trace || r.full_trace;
  }
  asked->anything = anything;
  asked->options = options;
  asked->full_trace = full_trace;
}

void HookedSession::tell_hooks(StepContext& ctx, const SessionRunner& runner,
                               const std::vector<RunRequest>& requests, const RunResult& merged,
                               const MergedFetches* fetches, double run_seconds) {
  HookDispatchLock::Round round(dispatch_, runner.guard());
  HookCosts* costs = costs_.get();
  if (costs) {
    costs->run_seconds += run_seconds;
    ++costs->steps;
  }
  const size_t n = hooks_.size();
  for (size_t i = 0; i < n; ++i) {
    timed(costs ? &costs->after_run_seconds[i] : nullptr, [&] {
      if (requests[i].plan) {
        const Fetched mine(merged.outputs, fetches->where[i]);
        hooks_[i]->after_run(ctx, requests[i], &mine, merged.run_metadata);
      } else {
        hooks_[i]->after_run(ctx, requests[i], nullptr, merged.run_metadata);
      }
    });
  }
  // Only now is the step done: one whose after_run raised (an AbortedError
  // included, after which TF runs the step again) is not counted. Written
  // under the lock, read by anyone.
  steps_run_.store(steps_run_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void HookedSession::run_on(const SessionRunner& runner, const RunRequest& caller,
                           bool want_metadata, void* user_data, bool may_defer,
                           RunResult* result) {
  if (stop_requested()) throw StoppedError("Run called even after should_stop requested.");
  StepContext ctx(runner, user_data, may_defer ? &postponed_ : nullptr);
  const size_t n = hooks_.size();
  ScratchLease lease(scratches_, n);
  StepScratch& scratch = *lease;
  std::vector<RunRequest>& requests = scratch.requests;

  HooksAsked hooks_asked;
  hooks_asked.options = &caller.run_options;
  ask_hooks(ctx, runner, requests, &hooks_asked);
  const bool asked = hooks_asked.anything;
  std::unique_ptr<FeedMerger>& feeds = hooks_asked.feeds;
  const std::string* options = hooks_asked.options;
  std::string traced_options;
  if (hooks_asked.full_trace) {
    traced_options = with_full_trace(*options);
    options = &traced_options;
    ctx.set_full_trace();
  }

  // The common fast path, where only the caller asks for anything, runs
  // straight into `result`; otherwise the merged run's values are the
  // scratch's and the caller's own are picked out at the end. Other steps'
  // hook rounds may run meanwhile: its time is added up under the lock.
  RunResult& merged = asked ? scratch.merged : *result;
  const MergedFetches* fetches = nullptr;
  double run_seconds = 0;
  timed(costs_ ? &run_seconds : nullptr, [&] {
    if (!asked) {
      runner.run(caller, want_metadata, result);
      return;
    }
    fetches = &scratch.merge.get(merged_fetches_, n + 1, [&](size_t i) {
      return i < n ? PartyFetches{requests[i].plan, hooks_[i]->keeps_values(requests[i])}
                   : PartyFetches{caller.plan, true};
    });
    if (caller.feed_plan) {
      if (!feeds) feeds = std::make_unique<FeedMerger>();
      feeds->add(caller, "Same tensor is fed by a SessionRunHook and user.");
    }
    static const std::vector<TF_Output> kNoKeys;
    static const std::vector<TF_Tensor*> kNoValues;
    runner.run(feeds ? feeds->keys : kNoKeys, feeds ? feeds->values : kNoValues,
                fetches->fetches, fetches->targets, *options,
                want_metadata || !options->empty(), &merged, &fetches->must_own);
  });

  tell_hooks(ctx, runner, requests, merged, fetches, run_seconds);
  if (ctx.stop_requested()) request_stop();

  if (asked) {
    result->outputs.clear();
    if (caller.plan)
      for (size_t i : fetches->where[n]) result->outputs.push_back(merged.outputs[i]);
    result->run_metadata.swap(merged.run_metadata);
  }
  result->hooks_traced = hooks_asked.full_trace;
}

}  // namespace fastmts
