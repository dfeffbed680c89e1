// Binding glue: a Python SessionRunHook in the native dispatch. The hook's
// own before_run/after_run are called directly, with the GIL held;
// `runner` (fastmts.hooked_session._PythonHookRunner) resolves what
// before_run asks for into plans and rebuilds its results. Per-step objects
// (run_context, options, run_metadata) live in the step state that the
// caller of run passes as StepContext::user_data. The common wish -- a
// SessionRunArgs of a flat structure of tensors, no feeds or options -- is
// resolved and its results built natively (PythonFlatFetches).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "binding/python_fetches.h"
#include "core/hooked_session.h"

namespace fastmts {

class PythonHook : public Hook {
 public:
  PythonHook(pybind11::object hook, pybind11::object runner);

  void after_create_session(const SessionRunner&) override;
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const RunRequest& request, const Fetched* outputs,
                 const std::string& run_metadata) override;
  void end(const SessionRunner&) override;

 private:
  pybind11::object before_run_, after_run_, runner_, resolve_, build_, args_type_, values_type_,
      new_tuple_;
  PythonFlatFetches flat_;
};

// Python hooks share one run context per step: a stop it requests is read
// once, after the step, and becomes the session's.
void take_python_stop_request(HookedSession& session, pybind11::handle step_state);

}  // namespace fastmts
