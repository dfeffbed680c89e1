#include "binding/python_time.h"

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>

#include "binding/python_compat.h"
#include "core/timers.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// References taken at import and never released: they must outlive the
// interpreter's module teardown, as timers may read the clock until then.
struct PythonTime {
  PyObject* hooks_globals;  // basic_session_run_hooks.__dict__
  PyObject* time_module;
  PyObject* time_globals;  // time.__dict__
  PyObject* builtin_time;  // time.time as it was at import
  PyObject* name;          // interned "time"
};

PythonTime* python_time = nullptr;

// What the last lookup made with the GIL found, for timers that run in a
// native loop without it. The loop's entry looks (notice_python_time), so
// only a patch made from another thread during the loop goes unseen, until
// the loop next takes the GIL for a Python call.
std::atomic<bool> patched_seen{false};

double os_wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The object TF's `time.time()` would call (a new reference), or null while
// that is the builtin. The GIL must be held.
py::object patched_time_function() {
  PyObject* time_global = PyDict_GetItemWithError(python_time->hooks_globals, python_time->name);
  if (time_global == python_time->time_module) {
    PyObject* fn = PyDict_GetItemWithError(python_time->time_globals, python_time->name);
    if (fn == python_time->builtin_time) return py::object();
    if (fn != nullptr) return py::reinterpret_borrow<py::object>(fn);
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  // Another module object, a mock, or time.time deleted: attribute lookup,
  // as Python's `time.time` does (raising what it raises).
  PyObject* global = time_global != nullptr ? time_global : python_time->time_module;
  PyObject* fn = PyObject_GetAttr(global, python_time->name);
  if (fn == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(fn);
}

double python_wall_time_with_gil() {
  py::object fn = patched_time_function();
  patched_seen.store(bool(fn), std::memory_order_relaxed);
  if (!fn) return os_wall_time();
  py::object now = py::reinterpret_steal<py::object>(PyObject_CallNoArgs(fn.ptr()));
  if (!now) throw py::error_already_set();
  const double seconds = PyFloat_AsDouble(now.ptr());  // TypeError for non-numbers
  if (seconds == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return seconds;
}

double python_wall_time() {
  // Not the current thread state: before Python 3.12 that is the GIL
  // holder's, whichever thread asks.
  if (PyGILState_Check()) return python_wall_time_with_gil();
  if (!patched_seen.load(std::memory_order_relaxed)) return os_wall_time();
  py::gil_scoped_acquire gil;
  return python_wall_time_with_gil();
}

}  // namespace

void notice_python_time() { patched_seen.store(bool(patched_time_function()), std::memory_order_relaxed); }

void follow_python_time() {
  py::module_ hooks = py::module_::import("tensorflow.python.training.basic_session_run_hooks");
  py::module_ time = py::module_::import("time");
  PyObject* time_globals = PyModule_GetDict(time.ptr());  // borrowed
  PyObject* builtin_time = PyDict_GetItemString(time_globals, "time");  // borrowed
  Py_INCREF(time_globals);
  Py_XINCREF(builtin_time);
  python_time = new PythonTime{py::object(hooks.attr("__dict__")).release().ptr(),
                               time.release().ptr(), time_globals, builtin_time,
                               PyUnicode_InternFromString("time")};
  set_wall_clock(python_wall_time);
}

}  // namespace fastmts
