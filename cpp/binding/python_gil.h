// Binding glue: the GIL around the core. The core runs hooks with the GIL
// held and gives it up around each blocking TF call (GilRelease); native
// hooks' callbacks into TF's Python hook code take it (holding_gil).
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "core/hooked_session.h"
#include "core/run_plan.h"

namespace fastmts {

// The BlockingCallGuard a HookedSession is attached with: TF_SessionRun
// runs without the GIL.
class GilRelease : public BlockingCallGuard {
 public:
  void* release() const override { return PyEval_SaveThread(); }
  void reacquire(void* token) const override {
    PyEval_RestoreThread(static_cast<PyThreadState*>(token));
  }
};

// Wraps a callback into Python for a native hook. The native loop may run
// without the GIL, so each call takes it (cheaply when the caller already
// holds it), and first lets the loop's hooks hand over the Python work they
// postponed, which came earlier in TF's order.
template <typename Fn>
auto holding_gil(Fn fn) {
  return [fn = std::move(fn)](auto&&... args) {
    pybind11::gil_scoped_acquire gil;
    if (HookedSession* loop = HookedSession::deferring_loop_on_this_thread()) loop->flush_deferred();
    return fn(std::forward<decltype(args)>(args)...);
  };
}

}  // namespace fastmts
