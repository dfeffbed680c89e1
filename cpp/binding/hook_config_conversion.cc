#include "binding/hook_config_conversion.h"

#include "binding/python_compat.h"
#include "binding/python_conversion.h"
#include "tf_access/tf_python_handles.h"

namespace py = pybind11;

namespace fastmts {

py::object to_python(int64_t value) { return py::int_(value); }
py::object to_python(double value) { return py::float_(value); }
py::object to_python(bool value) { return py::bool_(value); }
py::object to_python(std::optional<int64_t> step) { return optional_step(step); }
py::object to_python(const std::vector<SharedTensor>& values) { return outputs_to_python(values); }

py::object to_python(const std::vector<SharedTensor>* values) {
  return values ? py::object(outputs_to_python(*values)) : py::object(py::none());
}

py::object to_python(const std::string& serialized) {
  return serialized.empty() ? py::object(py::none()) : py::object(py::bytes(serialized));
}

py::object to_python(const std::vector<StepCounterHook::StepRate>& rates) {
  py::list out;
  for (const auto& r : rates)
    out.append(py::make_tuple(r.elapsed_steps, r.elapsed_secs, r.global_step, r.triggered_at));
  return std::move(out);
}

std::string registered_type_name(const std::type_info& type) {
  const py::detail::type_info* info = py::detail::get_type_info(type);
  return info ? std::string(info->type->tp_name) : "object";
}

void require_callable(py::handle value) {
  if (!PyCallable_Check(value.ptr()))
    throw py::type_error("expected a callable, got " + std::string(py::str(py::type::of(value))));
}

PythonCallback::PythonCallback(py::handle value) {
  require_callable(value);
  if (PyMethod_Check(value.ptr())) {
    PyObject* self = PyMethod_GET_SELF(value.ptr());
    self_ = py::reinterpret_steal<py::object>(PyWeakref_NewRef(self, nullptr));
    if (self_) {
      fn_ = py::reinterpret_borrow<py::object>(PyMethod_GET_FUNCTION(value.ptr()));
      return;
    }
    PyErr_Clear();  // an object without weak references: held as it is
  }
  fn_ = py::reinterpret_borrow<py::object>(value);
}

py::object PythonCallback::bound_object() const {
  PyObject* self = nullptr;
  const int found = PyWeakref_GetRef(self_.ptr(), &self);
  if (found < 0) throw py::error_already_set();
  if (found == 0) {
    PyErr_SetString(PyExc_ReferenceError, "weakly-referenced object no longer exists");
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(self);
}

namespace {

// The items of a tuple of `size` (a list is taken too), else TypeError.
py::tuple items_of(py::handle value, size_t size, const char* what) {
  if ((py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) &&
      py::len(value) == size)
    return py::tuple(py::reinterpret_borrow<py::object>(value));
  throw py::type_error(std::string("expected ") + what + ", got " +
                       std::string(py::repr(value)));
}

}  // namespace

TF_Output FromPython<TF_Output>::convert(py::handle value) {
  py::tuple t = items_of(value, 2, "a (c_op, index) tuple");
  return TF_Output{operation_pointer(t[0]), t[1].cast<int>()};
}

SecondOrStepTimer FromPython<SecondOrStepTimer>::convert(py::handle value) {
  py::tuple t = items_of(value, 3, "an (every_secs, every_steps, never) tuple");
  return SecondOrStepTimer(from_python<std::optional<double>>(t[0]),
                           from_python<std::optional<double>>(t[1]), t[2].cast<bool>());
}

// Whether the logger prints INFO records now, read as Logger.isEnabledFor
// reads it (`disabled`, then its per-level cache), without running Python
// code unless the cache lacks the level.
InfoEnabledCheck FromPython<InfoEnabledCheck>::convert(py::handle value) {
  py::object logger = py::reinterpret_borrow<py::object>(value);
  return {[logger]() {
    py::gil_scoped_acquire gil;
    constexpr int kInfo = 20;
    if (py::bool_(logger.attr("disabled"))) return false;
    py::object cache = py::getattr(logger, "_cache", py::none());
    if (PyDict_Check(cache.ptr())) {
      PyObject* known = PyDict_GetItem(cache.ptr(), py::int_(kInfo).ptr());  // borrowed
      if (known != nullptr) return PyObject_IsTrue(known) == 1;
    }
    return logger.attr("isEnabledFor")(kInfo).cast<bool>();
  }};
}

// `feeds() -> (FeedPlan, converted values)`: the user's feed_fn, resolved.
RunRequestFill FromPython<RunRequestFill>::convert(py::handle value) {
  return {holding_gil([feeds = PythonCallback(value)](RunRequest& request) {
    py::tuple t = feeds();
    request = request_from_python(py::none(), t[0], t[1], py::none());
  })};
}

}  // namespace fastmts
