// A fake of the part of TensorFlow's C API the core calls (core/tf_c_api.h),
// for the unit tests of core logic that runs steps: HookedSession, the native
// hooks, queue-runner threads. The core calls TF only through the function
// pointers of tf_c_api.h, which bind_tf_c_api fills at import; a FakeTf fills
// them with the functions here for its lifetime (and empties them after), so
// nothing of TF is loaded or linked.
//
// Tensors are host buffers with a dtype and dims (FakeTensor); statuses carry
// a code and a message; TF_SessionRun is a handler the test gives, and every
// call is recorded (RunCall). A FakeGraph handler stands in for the usual
// training graph: a global step that a train op increments, fetched as TF
// fetches it in the same run (before the increment: the "stale" value hooks
// read afresh), and other outputs with values the test sets.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/run_plan.h"
#include "core/tf_c_api.h"

namespace fastmts {
namespace testing {

// Distinct TF_Operation* values that are never dereferenced.
TF_Operation* fake_op(int i);
inline TF_Output fake_output(int op, int index = 0) { return TF_Output{fake_op(op), index}; }
// A TF_Session* that is never dereferenced.
TF_Session* fake_session();

// What one TF_SessionRun was asked to do.
struct RunCall {
  TF_Session* session = nullptr;
  std::string run_options;  // serialized RunOptions ("" when none given)
  bool want_metadata = false;
  std::vector<TF_Output> inputs;
  std::vector<int64_t> input_scalars;  // each fed int32 or int64 scalar's value (0 if not one)
  std::vector<TF_Output> fetches;
  std::vector<TF_Operation*> targets;

  bool fetches_output(const TF_Output& o) const;
  bool runs_target(TF_Operation* op) const;
};

// Makes `outputs[i]` for each fetch of `call`, or sets an error on `status`
// (FakeTf::fail). Called from whichever thread runs the step.
using RunHandler =
    std::function<void(const RunCall& call, TF_Tensor** outputs, TF_Status* status)>;

class FakeTf {
 public:
  // Binds the fake; only one FakeTf at a time.
  FakeTf();
  // Unbinds it (every function pointer null again, as before bind_tf_c_api).
  ~FakeTf();
  FakeTf(const FakeTf&) = delete;
  FakeTf& operator=(const FakeTf&) = delete;

  void set_run(RunHandler handler);
  // What each TF_SessionRun since the last clear was asked (a copy).
  std::vector<RunCall> calls() const;
  size_t call_count() const;
  void clear_calls();
  // Tensors allocated and not yet deleted (the core owns and frees fetched ones).
  int live_tensors() const;
  // The RunMetadata bytes a run asked for metadata returns.
  void set_run_metadata(std::string bytes);

  static TF_Tensor* int64_scalar(int64_t value);
  static TF_Tensor* int32_scalar(int32_t value);
  static TF_Tensor* float_scalar(float value);
  static int64_t as_int64(const TF_Tensor* t);  // an int64 scalar's value
  static void fail(TF_Status* status, int code, const std::string& message);
};

// The usual graph: `step` (an int64 variable) incremented by `train_op`
// after the run's fetches are read; `values` gives other outputs (by op).
// An unknown fetch fails the run with INVALID_ARGUMENT.
struct FakeGraph {
  std::atomic<int64_t> global_step{0};
  std::atomic<int64_t> step_increment{1};  // what one train_op run adds
  TF_Output step = fake_output(1);
  TF_Operation* train_op = fake_op(2);
  std::mutex mu;
  std::map<TF_Operation*, std::function<TF_Tensor*()>> values;  // guarded by mu

  void set_value(TF_Output o, std::function<TF_Tensor*()> make) {
    std::lock_guard<std::mutex> lock(mu);
    values[o.oper] = std::move(make);
  }
  RunHandler handler();
  // Whether `call` is a hook's own read of the global step (TF's "fresh
  // read": session.run(global_step), in the calling thread).
  bool is_fresh_read(const RunCall& call) const {
    return call.targets.empty() && call.fetches.size() == 1 && same_output(call.fetches[0], step) &&
           call.run_options == kRunInCallerThread;
  }
};

// The caller's usual training step: run train_op, fetch nothing.
RunRequest train_step(const FakeGraph& graph);
// A step that runs an op other than train_op: the global step stays.
RunRequest idle_step();
// A plan fetching `fetches` and running `targets`.
PlanPtr make_plan(std::vector<TF_Output> fetches, std::vector<TF_Operation*> targets = {});

}  // namespace testing
}  // namespace fastmts
