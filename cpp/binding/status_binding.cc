#include "binding/status_binding.h"

#include <exception>

#include "binding/python_compat.h"
#include "core/fetch_merge.h"
#include "core/hooked_session.h"
#include "core/tf_status.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// Leaked on purpose: it must outlive the interpreter's module teardown.
py::exception<TFError>* g_status_error = nullptr;
py::exception<StoppedError>* g_run_after_stop_error = nullptr;

}  // namespace

void register_status_errors(py::module_& m) {
  g_status_error = new py::exception<TFError>(m, "StatusError");
  // A RuntimeError, TF's type for it; its own subclass so that Python
  // recognises it by type, never by its message.
  g_run_after_stop_error =
      new py::exception<StoppedError>(m, "RunAfterStopError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TFError& e) {
      py::object args = py::make_tuple(e.code(), py::str(e.what()));
      PyErr_SetObject(g_status_error->ptr(), args.ptr());
    } catch (const FeedConflictError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const StoppedError& e) {
      PyErr_SetString(g_run_after_stop_error->ptr(), e.what());
    }
  });
}

py::handle status_error_type() { return *g_status_error; }

py::handle run_after_stop_error_type() { return *g_run_after_stop_error; }

// Rethrows the exception inside a pybind11 function, whose dispatcher
// translates it. Only failures pay for this.
void set_python_error_from_current() {
  static const py::handle rethrow = py::cpp_function([](py::capsule held) {
    std::rethrow_exception(*held.get_pointer<std::exception_ptr>());
  }).release();  // leaked on purpose, as the exception type
  try {
    py::capsule held(new std::exception_ptr(std::current_exception()),
                     [](void* p) { delete static_cast<std::exception_ptr*>(p); });
    Py_XDECREF(PyObject_CallOneArg(rethrow.ptr(), held.ptr()));  // raises, returns null
  } catch (...) {
    PyErr_SetString(PyExc_MemoryError, "fastmts: could not convert a C++ exception");
  }
}

}  // namespace fastmts
