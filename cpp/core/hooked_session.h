// One monitored step, as TF's _HookedSession.run: every hook's before_run in
// order, one TF_SessionRun with the caller's and hooks' fetches and feeds
// merged, every hook's after_run in order, and the stop decision. A caller
// holding a lock (the GIL) passes a BlockingCallGuard at attach: it is
// released around every TF call and held for the hooks.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/agreed_stop.h"
#include "core/coordinator.h"
#include "core/fetch_merge.h"
#include "core/hook_dispatch_lock.h"
#include "core/run_plan.h"

namespace fastmts {

// Raised by run() once a hook has requested stop (TF: RuntimeError); its own
// type so that callers recognise it without comparing messages.
class StoppedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Hook;

// Which hook holds Python work it postponed (StepContext::may_defer). TF runs
// the hooks' Python actions step by step, hook by hook, so a hook about to
// postpone work first has another's postponed work handed over: at most one
// hook holds any at a time, and batches reach Python in TF's order.
class PostponedWork {
 public:
  void before_postponing(Hook* hook);

 private:
  std::mutex mu_;
  Hook* holder_ = nullptr;
};

// Per-step state shared by the hooks, as TF's SessionRunContext.
class StepContext {
 public:
  // `postponed` is given when hooks may postpone Python work (may_defer).
  StepContext(const SessionRunner& session, void* user_data,
              PostponedWork* postponed = nullptr)
      : session_(session), user_data_(user_data), postponed_(postponed) {}
  const SessionRunner& session() const { return session_; }
  // Whether a hook may postpone Python work that has no say in this step
  // (see Hook::flush_deferred): only inside a loop whose caller hands
  // postponed work over before anything else could observe it.
  bool may_defer() const { return postponed_ != nullptr; }
  // A hook calls this before it postpones work (see PostponedWork).
  void before_postponing(Hook* hook) const {
    if (postponed_) postponed_->before_postponing(hook);
  }
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }
  // Whether a hook's before_run asked for a full trace (known to after_run):
  // by TF's RunOptions merge rule the step's options then carry
  // trace_level FULL_TRACE, as every hook's after_run sees them.
  void set_full_trace() { full_trace_ = true; }
  bool full_trace() const { return full_trace_; }
  // Opaque per-step data of whoever called HookedSession::run (the Python
  // binding keeps its per-step objects here for the Python hooks).
  void* user_data() const { return user_data_; }

 private:
  const SessionRunner& session_;
  void* user_data_;
  PostponedWork* postponed_;
  bool stop_requested_ = false;
  bool full_trace_ = false;
};

// One party's values within a step's merged outputs, in the order of its
// plan's fetches. A view, valid during the after_run it is given to.
class Fetched {
 public:
  Fetched(const std::vector<SharedTensor>& all, const std::vector<size_t>& where)
      : all_(all), where_(where) {}
  size_t size() const { return where_.size(); }
  const SharedTensor& operator[](size_t i) const { return all_[where_[i]]; }
  // The values from `first` on, for whoever keeps them (shared, not copied).
  std::vector<SharedTensor> to_vector(size_t first = 0) const {
    std::vector<SharedTensor> out;
    out.reserve(where_.size() > first ? where_.size() - first : 0);
    for (size_t i = first; i < where_.size(); ++i) out.push_back(all_[where_[i]]);
    return out;
  }

 private:
  const std::vector<SharedTensor>& all_;
  const std::vector<size_t>& where_;
};

// The SessionRunHook protocol from session creation on. begin() is graph
// construction (it may add ops), so it stays in Python: a native hook is
// built by its Python wrapper's begin().
class Hook {
 public:
  virtual ~Hook() = default;
  virtual void after_create_session(const SessionRunner& session) {}
  // Fill `request` with what this hook wants from this step (or leave it empty).
  virtual void before_run(StepContext& ctx, RunRequest& request) {}
  // `request` is what this hook's before_run filled in for this same step:
  // state a hook needs from one to the other goes there (request.hook_state),
  // never in the hook, since several steps may run at once on one session.
  // `outputs` holds one value per fetch of request.plan, or is null when
  // the hook asked for no plan.
  virtual void after_run(StepContext& ctx, const RunRequest& request, const Fetched* outputs,
                         const std::string& run_metadata) {}
  // Whether the values fetched for `request` may outlive after_run or reach
  // Python. A fetched tensor can alias live state (a variable's buffer);
  // only values that are kept are made the step's own (moved, or copied),
  // so a hook that just reads them during after_run says false.
  virtual bool keeps_values(const RunRequest& request) const { return true; }
  virtual void end(const SessionRunner& session) {}
  // Hands over the Python work this hook postponed (StepContext::may_defer).
  // The loop's caller calls it before any other Python code of the hooks
  // runs and when the loop ends, so Python sees that work in TF's order.
  virtual void flush_deferred() {}
};
using HookPtr = std::shared_ptr<Hook>;

// Where the time of the steps went, when cost tracking is on: totals since
// it was turned on, one entry per hook in dispatch order.
struct HookCosts {
  int64_t steps = 0;
  double run_seconds = 0;  // in TF_SessionRun
  std::vector<double> before_run_seconds, after_run_seconds;
};

// How a multi-step loop (HookedSession::run_loop) is driven.
struct LoopControl {
  int64_t max_steps = -1;                    // < 0: no bound
  // If given, the loop's steps so far, moved as each completes: what the
  // caller learns of them when the loop throws (other threads' steps on the
  // same session are not in it).
  int64_t* steps_done = nullptr;
  const Coordinator* coordinator = nullptr;  // the loop ends when it stops
  // Per-step data for the hooks (StepContext::user_data) and its release,
  // which may also request stop; both may be empty.
  std::function<void*()> begin_step;
  std::function<void(void*)> end_step;
  // Runs between steps; throws to end the loop (e.g. on a pending signal),
  // or stops it (request_stop, the coordinator) before the next step.
  std::function<void()> between_steps;
  // Whether the caller holds the lock given at attach during the loop. A
  // caller whose hooks all take that lock themselves when they need it can
  // give it up for the whole loop: no release and reacquire around each TF
  // call then.
  bool lock_held = true;
  // Whether hooks may postpone Python work (StepContext::may_defer): the
  // caller then calls flush_deferred before any hook's Python code and
  // after the loop.
  bool may_defer = false;
};

// What a step needs besides the hooks themselves: their requests, the merged
// run's results, the merge of the last step's plans. Kept from step to step
// (StepScratchPool) so that a training step allocates nothing of its own.
struct StepScratch {
  std::vector<RunRequest> requests;  // one per hook, cleared after each step
  RunResult merged;                  // emptied after each step
  MergedFetchMemo merge;
};

// Scratches for the steps of one session: one spare, kept between steps.
// Several threads may step one session at once (and a hook's Python code
// may step it again from inside a step); whoever finds no spare makes one.
class StepScratchPool {
 public:
  StepScratchPool() = default;
  StepScratchPool(const StepScratchPool&) = delete;
  StepScratchPool& operator=(const StepScratchPool&) = delete;
  ~StepScratchPool() { delete spare_.load(); }

  std::unique_ptr<StepScratch> take() {
    StepScratch* spare = spare_.exchange(nullptr, std::memory_order_acquire);
    return spare ? std::unique_ptr<StepScratch>(spare) : std::make_unique<StepScratch>();
  }
  // `scratch` must be emptied (its requests cleared, its results dropped).
  void give_back(std::unique_ptr<StepScratch> scratch) {
    delete spare_.exchange(scratch.release(), std::memory_order_acq_rel);
  }

 private:
  std::atomic<StepScratch*> spare_{nullptr};
};

class HookedSession {
 public:
  explicit HookedSession(std::vector<HookPtr> hooks) : hooks_(std::move(hooks)) {}

  // Binds a freshly created session (also after recovery) and tells the
  // hooks. `guard` (may be null) is released around every TF call.
  void attach(TF_Session* session, const BlockingCallGuard* guard = nullptr);
  void detach();
  bool attached() const { return runner_.session() != nullptr; }
  const SessionRunner& runner() const { return runner_; }

  // One step. Throws StoppedError if a hook already requested stop, TFError
  // when TF fails, and whatever a hook throws.
  RunResult run(const RunRequest& caller, bool want_metadata, void* user_data);
  void end();

  // Steps until a hook requests stop, the coordinator stops, max_steps
  // steps ran, or an error (thrown as by run). Returns the number of steps
  // run by this call; `last` gets the last step's result (its buffers are
  // reused from step to step).
  int64_t run_loop(const RunRequest& caller, const LoopControl& control, RunResult* last);

  // Steps run since construction, failed ones excluded (recovery counts the
  // steps a loop still owes with it); exact with several threads stepping.
  int64_t steps_run() const { return steps_run_.load(std::memory_order_relaxed); }

  // Every hook's flush_deferred, in order.
  void flush_deferred();

  // The session whose run_loop runs on this thread with hooks that may
  // postpone Python work (LoopControl::may_defer), or null. Whoever calls
  // Python from a hook first lets it flush_deferred: that work came earlier
  // in TF's order.
  static HookedSession* deferring_loop_on_this_thread();

  void track_costs(bool on);
  const HookCosts* costs() const { return costs_.get(); }

  bool stop_requested() const { return stop_requested_.load(std::memory_order_acquire); }
  // For a stop decided outside the hooks' after_run (e.g. Python hooks that
  // share one run context, read once per step; a stop signal). With an
  // agreement it is this rank's wish, which the next vote settles.
  void request_stop() {
    if (agreement_) {
      agreement_->wish(1);
      return;
    }
    stop_requested_.store(true, std::memory_order_release);
  }
  // Opt-in, before the first attach: stops are agreed between ranks.
  void set_agreement(std::shared_ptr<StopAgreement> agreement) {
    agreement_ = std::move(agreement);
  }
  // A completed step's stop requests are all in (the Python hooks' ones
  // included): with an agreement, its vote every n-th step, on `runner`,
  // and the stop if the ranks agreed. Nothing without one.
  void settle_stop(const SessionRunner& runner) {
    if (agreement_ && !stop_requested() && agreement_->after_step(runner))
      stop_requested_.store(true, std::memory_order_release);
  }
  const std::vector<HookPtr>& hooks() const { return hooks_; }

 private:
  // One step on `runner` (the attached session, with or without the guard),
  // its result into `result`.
  void run_on(const SessionRunner& runner, const RunRequest& caller, bool want_metadata,
              void* user_data, bool may_defer, RunResult* result);
  // What the hooks' before_run round asked of one step (hooked_session.cc).
  struct HooksAsked;
  // run_on's parts: every hook's before_run in order, under the dispatch
  // lock; then every hook's after_run in order, under it again.
  void ask_hooks(StepContext& ctx, const SessionRunner& runner, std::vector<RunRequest>& requests,
                 HooksAsked* asked);
  void tell_hooks(StepContext& ctx, const SessionRunner& runner,
                  const std::vector<RunRequest>& requests, const RunResult& merged,
                  const MergedFetches* fetches, double run_seconds);

  std::vector<HookPtr> hooks_;
  PostponedWork postponed_;
  MergedFetchCache merged_fetches_;
  StepScratchPool scratches_;
  SessionRunner runner_{nullptr};
  std::atomic<bool> stop_requested_{false};
  std::shared_ptr<StopAgreement> agreement_;  // null unless agreed stops are on
  HookDispatchLock dispatch_;          // each step's hook rounds (see its header)
  std::atomic<int64_t> steps_run_{0};  // moved under dispatch_
  std::unique_ptr<HookCosts> costs_;   // null unless tracking; moved under dispatch_
};

}  // namespace fastmts
