// One monitored step, as TF's _HookedSession.run: every hook's before_run in
// order, one TF_SessionRun with the caller's and hooks' fetches and feeds
// merged, every hook's after_run in order, and the stop decision. A caller
// holding a lock (the GIL) passes a BlockingCallGuard at attach: it is
// released around every TF call and held for the hooks.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "run_plan.h"

namespace fastmts {

// Raised when two parties feed the same tensor (TF raises RuntimeError).
class FeedConflictError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Raised by run() once a hook has requested stop (TF: RuntimeError).
class StoppedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Per-step state shared by the hooks, as TF's SessionRunContext.
class StepContext {
 public:
  StepContext(const SessionRunner& session, void* user_data)
      : session_(session), user_data_(user_data) {}
  const SessionRunner& session() const { return session_; }
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }
  // Opaque per-step data of whoever called HookedSession::run (the Python
  // binding keeps its per-step objects here for the Python hooks).
  void* user_data() const { return user_data_; }

 private:
  const SessionRunner& session_;
  void* user_data_;
  bool stop_requested_ = false;
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
  // `outputs` holds one value per fetch of the plan given in before_run, or
  // is null when the hook asked for no plan.
  virtual void after_run(StepContext& ctx, const std::vector<SharedTensor>* outputs,
                         const std::string& run_metadata) {}
  virtual void end(const SessionRunner& session) {}
};
using HookPtr = std::shared_ptr<Hook>;

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

  bool stop_requested() const { return stop_requested_.load(std::memory_order_acquire); }
  // For a stop decided outside the hooks' after_run (e.g. Python hooks that
  // share one run context, read once per step).
  void request_stop() { stop_requested_.store(true, std::memory_order_release); }
  const std::vector<HookPtr>& hooks() const { return hooks_; }

 private:
  std::vector<HookPtr> hooks_;
  SessionRunner runner_{nullptr};
  std::atomic<bool> stop_requested_{false};
};

}  // namespace fastmts
