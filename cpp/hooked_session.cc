#include "hooked_session.h"

#include <chrono>
#include <unordered_map>

namespace fastmts {

namespace {

// Collects the fetches, targets and feeds of all parties of one step into one
// TF_SessionRun, deduplicating fetches and targets, and remembers where each
// party's outputs are in the merged list.
class StepMerger {
 public:
  // Returns the indices of the plan's fetches in the merged output list.
  std::vector<size_t> add_plan(const RunPlan& plan) {
    std::vector<size_t> where;
    where.reserve(plan.fetches.size());
    for (const TF_Output& out : plan.fetches) where.push_back(add_fetch(out));
    for (TF_Operation* op : plan.targets) add_target(op);
    return where;
  }

  // Adds a party's feeds. TF compares feed_dict keys: the same key object fed
  // twice is a conflict (`conflict_message`); two spellings of one tensor (a
  // Tensor and its name) are not, and the later one wins.
  void add_feeds(const RunRequest& request, const char* conflict_message) {
    if (!request.feed_plan) return;
    const FeedPlan& plan = *request.feed_plan;
    std::vector<std::string> conflicts;
    for (size_t i = 0; i < plan.keys.size(); ++i) {
      size_t j = 0;
      while (j < feed_keys.size() && !same_output(feed_keys[j], plan.keys[i])) ++j;
      if (j == feed_keys.size()) {
        feed_keys.push_back(plan.keys[i]);
        feed_values.push_back(request.feed_values[i].get());
        feed_labels.push_back(plan.labels[i]);
        continue;
      }
      if (feed_labels[j] == plan.labels[i]) conflicts.push_back(plan.labels[i]);
      feed_values[j] = request.feed_values[i].get();
      feed_labels[j] = plan.labels[i];
    }
    if (!conflicts.empty()) {
      std::string message = conflict_message;
      message += " Conflict(s): [";
      for (size_t i = 0; i < conflicts.size(); ++i) {
        if (i) message += ", ";
        message += conflicts[i];
      }
      message += "]";
      throw FeedConflictError(message);
    }
  }

  std::vector<TF_Output> fetches;
  std::vector<TF_Operation*> targets;
  std::vector<TF_Output> feed_keys;
  std::vector<TF_Tensor*> feed_values;
  std::vector<std::string> feed_labels;

 private:
  size_t add_fetch(const TF_Output& out) {
    if (fetches.size() < kLinearLimit) {
      for (size_t i = 0; i < fetches.size(); ++i)
        if (same_output(fetches[i], out)) return i;
    } else {
      if (index_.empty())
        for (size_t i = 0; i < fetches.size(); ++i) index_.emplace(key(fetches[i]), i);
      auto it = index_.find(key(out));
      if (it != index_.end()) return it->second;
      index_.emplace(key(out), fetches.size());
    }
    fetches.push_back(out);
    return fetches.size() - 1;
  }

  void add_target(TF_Operation* op) {
    for (TF_Operation* t : targets)
      if (t == op) return;
    targets.push_back(op);
  }

  static std::pair<TF_Operation*, int> key(const TF_Output& o) { return {o.oper, o.index}; }
  struct PairHash {
    size_t operator()(const std::pair<TF_Operation*, int>& p) const {
      return std::hash<void*>()(p.first) ^ (static_cast<size_t>(p.second) * 0x9e3779b97f4a7c15ULL);
    }
  };
  static constexpr size_t kLinearLimit = 32;
  std::unordered_map<std::pair<TF_Operation*, int>, size_t, PairHash> index_;
};

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

// TF's RunOptions.trace_level (field 1) set to FULL_TRACE (3), serialized:
// appended to serialized options it overrides their trace level.
constexpr char kFullTraceOption[] = "\x08\x03";

std::vector<SharedTensor> pick(const std::vector<SharedTensor>& all,
                               const std::vector<size_t>& where) {
  std::vector<SharedTensor> out;
  out.reserve(where.size());
  for (size_t i : where) out.push_back(all[i]);
  return out;
}

}  // namespace

void HookedSession::attach(TF_Session* session, const BlockingCallGuard* guard) {
  runner_ = SessionRunner(session, guard);
  stop_requested_.store(false, std::memory_order_release);
  for (auto& hook : hooks_) hook->after_create_session(runner_);
}

void HookedSession::detach() { runner_ = SessionRunner(nullptr); }

void HookedSession::end() {
  for (auto& hook : hooks_) hook->end(runner_);
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

int64_t HookedSession::run_loop(const RunRequest& caller, const LoopControl& control,
                                RunResult* last) {
  int64_t done = 0;
  while (!stop_requested() && !(control.coordinator && control.coordinator->should_stop()) &&
         (control.max_steps < 0 || done < control.max_steps)) {
    if (done && control.between_steps) control.between_steps();
    void* user_data = control.begin_step ? control.begin_step() : nullptr;
    *last = run(caller, false, user_data);
    ++done;
    if (control.end_step) control.end_step(user_data);
  }
  return done;
}

RunResult HookedSession::run(const RunRequest& caller, bool want_metadata, void* user_data) {
  if (stop_requested()) throw StoppedError("Run called even after should_stop requested.");
  StepContext ctx(runner_, user_data);
  HookCosts* costs = costs_.get();

  // Hooks are asked in order; as in TF, a feed conflict stops the round at
  // the hook that causes it.
  std::vector<RunRequest> requests(hooks_.size());
  std::vector<std::vector<size_t>> hook_where(hooks_.size());
  std::unique_ptr<StepMerger> merger;  // only when some hook asks for anything
  const std::string* options = &caller.run_options;
  bool full_trace = false;
  for (size_t i = 0; i < hooks_.size(); ++i) {
    timed(costs ? &costs->before_run_seconds[i] : nullptr,
          [&] { hooks_[i]->before_run(ctx, requests[i]); });
    const RunRequest& r = requests[i];
    if (!r.plan && !r.feed_plan && r.run_options.empty() && !r.full_trace) continue;
    if (!merger) merger = std::make_unique<StepMerger>();
    if (r.plan) hook_where[i] = merger->add_plan(*r.plan);
    merger->add_feeds(r, "Same tensor is fed by two hooks.");
    if (!r.run_options.empty()) options = &r.run_options;
    full_trace = full_trace || r.full_trace;
  }
  std::string traced_options;
  if (full_trace) {
    traced_options = *options + kFullTraceOption;
    options = &traced_options;
  }

  RunResult merged;
  std::vector<size_t> caller_where;
  timed(costs ? &costs->run_seconds : nullptr, [&] {
    if (!merger) {
      // The common fast path: only the caller asks for anything.
      merged = runner_.run(caller, want_metadata);
    } else {
      if (caller.plan) caller_where = merger->add_plan(*caller.plan);
      merger->add_feeds(caller, "Same tensor is fed by a SessionRunHook and user.");
      runner_.run(merger->feed_keys, merger->feed_values, merger->fetches, merger->targets,
                  *options, want_metadata || !options->empty(), &merged);
    }
  });
  ++steps_run_;
  if (costs) ++costs->steps;

  for (size_t i = 0; i < hooks_.size(); ++i) {
    timed(costs ? &costs->after_run_seconds[i] : nullptr, [&] {
      if (requests[i].plan) {
        std::vector<SharedTensor> mine = pick(merged.outputs, hook_where[i]);
        hooks_[i]->after_run(ctx, requests[i], &mine, merged.run_metadata);
      } else {
        hooks_[i]->after_run(ctx, requests[i], nullptr, merged.run_metadata);
      }
    });
  }
  if (ctx.stop_requested()) request_stop();

  if (merger && caller.plan) merged.outputs = pick(merged.outputs, caller_where);
  return merged;
}

}  // namespace fastmts
