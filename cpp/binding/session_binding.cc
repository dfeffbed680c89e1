#include "binding/session_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "binding/python_compat.h"
#include "binding/python_conversion.h"
#include "binding/python_fetches.h"
#include "binding/python_gil.h"
#include "binding/python_hook.h"
#include "binding/python_time.h"
#include "binding/status_binding.h"
#include "core/coordinator.h"
#include "core/hooked_session.h"
#include "core/signal_watch.h"
#include "core/tf_status.h"
#include "tf_access/tf_python_handles.h"

namespace py = pybind11;

namespace fastmts {
namespace {

const GilRelease kGilRelease;

void check_attached(const HookedSession& session) {
  if (!session.attached()) throw std::logic_error("fastmts: run on a detached session");
}

// One step with hooks: (outputs, serialized RunMetadata or None, whether a
// native hook traced the step in full). `step_state` is the Python hooks'
// state for this step (None: no Python hooks). The GIL stays held for the
// hooks; the core gives it up around TF calls.
py::tuple run_step(HookedSession& session, py::handle plan, py::handle feed_plan,
                   py::handle feed_values, py::handle run_options, bool want_metadata,
                   py::object step_state) {
  check_attached(session);
  RunRequest caller = request_from_python(plan, feed_plan, feed_values, run_options);
  RunResult result = session.run(caller, want_metadata, &step_state);
  take_python_stop_request(session, step_state);
  session.settle_stop(session.runner());
  py::object metadata = result.run_metadata.empty() ? py::object(py::none())
                                                    : py::object(py::bytes(result.run_metadata));
  return py::make_tuple(outputs_to_python(result.outputs), metadata, result.hooks_traced);
}

// Steps in C++ until stop, max_steps or an error. `make_state` (None when
// there are no Python hooks) makes each step's state for the Python hooks.
// A pending signal (Ctrl-C) ends the loop between steps with its exception.
// Returns the last step's outputs, or None when no step ran.
//
// Without Python hooks the loop gives up the GIL for its whole length (the
// native hooks take it on the steps where they call TF's Python code), so
// it cannot ask Python about signals each step: it watches
// `python_signals` (those with a Python handler) and takes the GIL to let
// Python handle them when one arrives (SignalCheckSchedule).
py::object run_loop_counted(HookedSession& session, py::handle plan, py::handle feed_plan,
                            py::handle feed_values, int64_t max_steps,
                            const Coordinator* coordinator, py::object make_state,
                            const std::vector<int>& python_signals, int64_t& steps) {
  check_attached(session);
  RunRequest caller = request_from_python(plan, feed_plan, feed_values, py::none());
  LoopControl control;
  control.max_steps = max_steps;
  control.coordinator = coordinator;
  control.steps_done = &steps;
  RunResult last;
  if (make_state.is_none()) {
    SignalWatch watch(python_signals);
    SignalCheckSchedule signal_checks;
    control.lock_held = false;
    control.may_defer = true;
    notice_python_time();  // the clock the timers will read without the GIL
    control.between_steps = [&] {
      if (!signal_checks.due()) return;
      py::gil_scoped_acquire gil;
      session.flush_deferred();  // what the handler may see came first
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
    try {
      py::gil_scoped_release nogil;
      steps = session.run_loop(caller, control, &last);
    } catch (...) {
      // Postponed work came before the error in TF's order: hand it over
      // (should that raise, its error is the one TF would have raised).
      session.flush_deferred();
      throw;
    }
    session.flush_deferred();
  } else {
    py::object state = py::none();
    control.begin_step = [&]() -> void* {
      state = make_state();
      return &state;
    };
    control.end_step = [&](void*) { take_python_stop_request(session, state); };
    control.between_steps = [] {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
    steps = session.run_loop(caller, control, &last);
  }
  if (steps == 0) return py::none();
  return outputs_to_python(last.outputs);
}

// The loop above; `progress.steps` (progress may be None) gets its steps,
// also when it raises: another thread's steps on the session are not in
// HookedSession::steps_run's difference.
py::object run_loop(HookedSession& session, py::handle plan, py::handle feed_plan,
                    py::handle feed_values, int64_t max_steps, const Coordinator* coordinator,
                    py::object make_state, const std::vector<int>& python_signals,
                    py::object progress) {
  int64_t steps = 0;
  auto report = [&] {
    if (!progress.is_none()) progress.attr("steps") = steps;
  };
  try {
    py::object outputs = run_loop_counted(session, plan, feed_plan, feed_values, max_steps,
                                          coordinator, std::move(make_state), python_signals,
                                          steps);
    report();
    return outputs;
  } catch (...) {
    report();
    throw;
  }
}

// `MonitoredSession.run(fetches)` with no feeds, options or metadata, where
// `fetches` is a flat structure (PythonFlatFetches): the plan is found by
// the leaves' identity and the step runs and its results are built here, so
// with only native hooks no Python runs (`make_state`, given when there are
// Python hooks, makes their step state). Anything else goes to `slow` (the
// Python path, same arguments), and every failure to `failed(error,
// fetches)`, which raises or retries as the session's wrappers do.
class FastRun {
 public:
  FastRun(py::object hooked, py::tuple leaf_types, py::object describe, py::object make_state,
          py::object slow, py::object failed)
      : hooked_owner_(std::move(hooked)),
        session_(hooked_owner_.cast<HookedSession*>()),
        plans_(std::move(leaf_types), std::move(describe)),
        make_state_(std::move(make_state)),
        slow_(std::move(slow)),
        failed_(std::move(failed)) {}

  py::object call(py::handle fetches, py::handle feed_dict, py::handle options,
                  py::handle run_metadata) {
    if (!feed_dict.is_none() || !options.is_none() || !run_metadata.is_none() ||
        !session_->attached())
      return slow_(fetches, feed_dict, options, run_metadata);
    FlatFetchPlanPtr plan = plans_.find(fetches);
    if (!plan) return slow_(fetches, feed_dict, options, run_metadata);
    py::object state = make_state_.is_none() ? py::object(py::none()) : make_state_(fetches);
    RunResult result;
    try {
      result = session_->run(plan->request, false, &state);
      take_python_stop_request(*session_, state);
      session_->settle_stop(session_->runner());
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt and the like
      return failed_(e.value(), fetches);
    } catch (const TFError& e) {
      return failed_(status_error_type()(e.code(), py::str(e.what())), fetches);
    } catch (const StoppedError& e) {
      return failed_(run_after_stop_error_type()(py::str(e.what())), fetches);
    } catch (const std::runtime_error& e) {  // feed conflicts
      return failed_(py::reinterpret_steal<py::object>(
                         PyObject_CallFunction(PyExc_RuntimeError, "s", e.what())),
                     fetches);
    }
    return PythonFlatFetches::build(*plan, result.outputs);
  }

 private:
  py::object hooked_owner_;  // keeps session_ alive
  HookedSession* session_;
  PythonFlatFetches plans_;
  py::object make_state_, slow_, failed_;
};

// ---- run() without pybind11's dispatcher -----------------------------------

// run(fetches, feed_dict=None, options=None, run_metadata=None) as a
// builtin function bound to a FastRun, called through vectorcall: pybind11's
// dispatcher costs ~150 ns a call (measured), a tenth of fastmts's whole
// per-step cost over the floor on a trivial step. Any call that does not
// give run's own arguments by position or name goes unchanged to
// `fallback` (the Python run), so argument errors are Python's own.
struct FastRunEntry {
  py::object owner;  // the FastRun, kept alive
  FastRun* run;
  py::object fallback;
};
constexpr const char* kFastRunEntryName = "fastmts.FastRunEntry";

PyObject* fast_run_entry_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                              PyObject* kwnames) {
  auto* entry = static_cast<FastRunEntry*>(PyCapsule_GetPointer(self, kFastRunEntryName));
  if (!entry) return nullptr;
  static const char* const kNames[] = {"fetches", "feed_dict", "options", "run_metadata"};
  PyObject* given[4] = {nullptr, nullptr, nullptr, nullptr};
  bool plain = nargs <= 4;
  for (Py_ssize_t i = 0; plain && i < nargs; ++i) given[i] = args[i];
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; plain && k < nkw; ++k) {
    int slot = -1;
    for (int j = 0; j < 4 && slot < 0; ++j)
      if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), kNames[j]) == 0) slot = j;
    plain = slot >= 0 && !given[slot];
    if (plain) given[slot] = args[nargs + k];
  }
  if (!plain || !given[0])
    return PyObject_Vectorcall(entry->fallback.ptr(), args, static_cast<size_t>(nargs), kwnames);
  try {
    auto arg = [&](int i) { return given[i] ? py::handle(given[i]) : py::handle(Py_None); };
    return entry->run->call(arg(0), arg(1), arg(2), arg(3)).release().ptr();
  } catch (...) {
    set_python_error_from_current();
    return nullptr;
  }
}

PyMethodDef fast_run_entry_def = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_run_entry_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "run(fetches, feed_dict=None, options=None, run_metadata=None)\n--\n\n"
    "Runs one step with hooks; same arguments and results as `tf.Session.run`."};

py::object make_fast_run_entry(py::object fast_run, py::object fallback) {
  auto* entry = new FastRunEntry{fast_run, fast_run.cast<FastRun*>(), std::move(fallback)};
  PyObject* capsule = PyCapsule_New(entry, kFastRunEntryName, [](PyObject* cap) {
    delete static_cast<FastRunEntry*>(PyCapsule_GetPointer(cap, kFastRunEntryName));
  });
  if (!capsule) {
    delete entry;
    throw py::error_already_set();
  }
  py::object owner = py::reinterpret_steal<py::object>(capsule);
  PyObject* function = PyCFunction_New(&fast_run_entry_def, owner.ptr());
  if (!function) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(function);
}

}  // namespace

void register_session(py::module_& m) {
  py::class_<HookedSession>(m, "HookedSession")
      .def(py::init<std::vector<HookPtr>>(), py::arg("hooks"))
      .def("attach",
           [](HookedSession& s, py::handle tf_session) {
             s.attach(session_pointer(tf_session), &kGilRelease);
           },
           py::arg("tf_session"))
      .def("detach", &HookedSession::detach)
      .def("end", &HookedSession::end)
      .def_property_readonly("stop_requested", &HookedSession::stop_requested)
      // As a hook's stop request; lock-free, so a signal handler may call it.
      .def("request_stop", &HookedSession::request_stop)
      .def("run", &run_step, py::arg("plan"), py::arg("feed_plan"), py::arg("feed_values"),
           py::arg("run_options"), py::arg("want_metadata"), py::arg("step_state"))
      .def("run_loop", &run_loop, py::arg("plan"), py::arg("feed_plan"),
           py::arg("feed_values"), py::arg("max_steps"), py::arg("coordinator"),
           py::arg("make_state"), py::arg("python_signals"), py::arg("progress") = py::none())
      .def_property_readonly("steps_run", &HookedSession::steps_run)
      .def("set_agreement", &HookedSession::set_agreement, py::arg("agreement"))
      // A plain run on the attached session, no hooks (for TF's own hook code).
      .def("run_plain",
           [](const HookedSession& s, const std::shared_ptr<RunPlan>& plan) {
             check_attached(s);
             RunRequest request;
             request.plan = plan;
             return outputs_to_python(s.runner().run(request).outputs);
           },
           py::arg("plan"))
      .def("track_costs", &HookedSession::track_costs, py::arg("on"))
      .def("costs", [](const HookedSession& s) -> py::object {
        const HookCosts* c = s.costs();
        if (!c) return py::none();
        return py::make_tuple(c->steps, c->run_seconds, c->before_run_seconds,
                              c->after_run_seconds);
      });

  py::class_<FastRun>(m, "FastRun")
      .def(py::init<py::object, py::tuple, py::object, py::object, py::object, py::object>(),
           py::arg("hooked"), py::arg("leaf_types"), py::arg("describe"), py::arg("make_state"),
           py::arg("slow"), py::arg("failed"))
      .def("__call__", &FastRun::call, py::arg("fetches"), py::arg("feed_dict") = py::none(),
           py::arg("options") = py::none(), py::arg("run_metadata") = py::none());
  m.def("fast_run_entry", &make_fast_run_entry, py::arg("fast_run"), py::arg("fallback"));
}

}  // namespace fastmts
