// What one TF_SessionRun needs, resolved once and reused: the fetched
// outputs, the target operations and the fed inputs. Knows nothing of Python.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor_convert.h"
#include "core/tf_c_api.h"

namespace fastmts {

// The fetches of one fetch structure, already deduplicated (as TF's
// _FetchHandler does). Resolved once per distinct structure and cached.
struct RunPlan {
  std::vector<TF_Output> fetches;
  std::vector<TF_Operation*> targets;
};
using PlanPtr = std::shared_ptr<const RunPlan>;

// The inputs of one feed_dict key set. `labels` are the caller's keys as TF
// prints them in its conflict errors (repr of the key).
struct FeedPlan {
  std::vector<TF_Output> keys;
  std::vector<TF_DataType> dtypes;
  std::vector<std::string> labels;
};
using FeedPlanPtr = std::shared_ptr<const FeedPlan>;

// One party's wishes for one step: the caller's, or one hook's.
struct RunRequest {
  PlanPtr plan;                       // may be null: nothing to fetch
  FeedPlanPtr feed_plan;              // may be null: nothing to feed
  std::vector<TensorPtr> feed_values; // one per feed_plan key
  // Serialized RunOptions. Empty means defaults. Hooks' options are merged
  // field by field by the caller of run, so a non-empty value from a later
  // party replaces an earlier one.
  std::string run_options;
  // A native hook asking for a FULL_TRACE of this step (ProfilerHook). TF
  // merges trace levels by maximum and FULL_TRACE is the highest, so this
  // always wins over the merged options' level.
  bool full_trace = false;
  // The hook's own per-step state, handed back to its after_run (opaque to
  // the core): a hook decides in before_run and acts in after_run, and two
  // threads may run steps on one session at once.
  std::shared_ptr<const void> hook_state;

  // Back to empty, keeping its buffers (a step's requests are reused).
  void clear() {
    plan.reset();
    feed_plan.reset();
    feed_values.clear();
    run_options.clear();
    full_trace = false;
    hook_state.reset();
  }
};

// RunOptions{inter_op_thread_pool: -1}, serialized: run in the calling
// thread. TF offers this for runs too small to be worth a hand-off to its
// inter-op pool; a hook's read of the step is one such (measured on a
// trivial graph: 5-6 us in the calling thread, 12-30 us through the pool).
extern const std::string kRunInCallerThread;

struct RunResult {
  std::vector<SharedTensor> outputs;  // one per plan fetch
  std::string run_metadata;           // serialized RunMetadata, if asked for
  // A hook asked for a full trace: TF merges it into the caller's RunOptions.
  bool hooks_traced = false;
};

inline bool same_output(const TF_Output& a, const TF_Output& b) {
  return a.oper == b.oper && a.index == b.index;
}

// Lets a caller that holds a lock while it drives the core (the Python
// binding and its GIL) give it up around each blocking TF call. The token
// returned by release() is handed back to reacquire() on the same thread.
class BlockingCallGuard {
 public:
  virtual ~BlockingCallGuard() = default;
  virtual void* release() const = 0;
  virtual void reacquire(void* token) const = 0;
};

// One TF_SessionRun on a session that stays owned by TF's Python Session
// object. Thread-safe as TF_SessionRun is. Throws TFError on failure.
class SessionRunner {
 public:
  explicit SessionRunner(TF_Session* session, const BlockingCallGuard* guard = nullptr)
      : session_(session), guard_(guard) {}

  // `must_own` (null: all) says which fetched values must be the step's own:
  // TF may return a view of live state (a variable's buffer), which is fine
  // to read right away but is moved or copied before anyone keeps it.
  void run(const std::vector<TF_Output>& inputs, const std::vector<TF_Tensor*>& input_values,
           const std::vector<TF_Output>& fetches, const std::vector<TF_Operation*>& targets,
           const std::string& run_options, bool want_metadata, RunResult* result,
           const std::vector<char>* must_own = nullptr) const;

  // A plain run of one request, as hooks' own session.run() calls do.
  RunResult run(const RunRequest& request, bool want_metadata = false) const;
  // The same into `result`, whose buffers are reused.
  void run(const RunRequest& request, bool want_metadata, RunResult* result) const;

  TF_Session* session() const { return session_; }
  // The lock this runner gives up around TF calls (null: none).
  const BlockingCallGuard* guard() const { return guard_; }

 private:
  TF_Session* session_;
  const BlockingCallGuard* guard_;
};

}  // namespace fastmts
