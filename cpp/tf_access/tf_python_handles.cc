#include "tf_access/tf_python_handles.h"

#include <cstring>
#include <string>

#include "tf_access/tf_typeids.h"

namespace py = pybind11;

namespace fastmts {

namespace {

// ---- TF 2.21 and later: pybind11's cross-module conduit ---------------------

// Platform ABI ids TF's own bindings may have been built with; ours first.
const char* const kAbiIds[] = {
#ifdef PYBIND11_PLATFORM_ABI_ID
    PYBIND11_PLATFORM_ABI_ID,
#endif
    "_clang_libstdcpp_cxxabi1002", "_gcc_libstdcpp_cxxabi1018", "_gcc_libstdcpp_cxxabi1019",
    "_clang_libstdcpp_cxxabi1018", "_gcc_libstdcpp_cxxabi1016"};

void* pointer_from_conduit(py::handle obj, const py::object& conduit, const std::type_info& type) {
  py::capsule type_capsule(static_cast<void*>(const_cast<std::type_info*>(&type)),
                           typeid(std::type_info).name());
  for (const char* abi : kAbiIds) {
    py::object cap = conduit(py::bytes(abi), type_capsule, py::bytes("raw_pointer_ephemeral"));
    if (cap.is_none()) continue;
    void* p = PyCapsule_GetPointer(cap.ptr(), type.name());
    if (!p) throw py::error_already_set();
    return p;
  }
  throw py::type_error("cannot read the TensorFlow C object behind " +
                       py::repr(obj).cast<std::string>() +
                       ": it holds none, or its pybind11 ABI is not one fastmts knows");
}

// ---- TF 2.2 to 2.20: pybind11's instance layout -----------------------------

// Their _pywrap_tf_session predates the conduit (pybind11 2.4 to 2.11). Its
// TF_Session and TF_Operation wrappers hold the C pointer the way every
// pybind11 release since 2.2 lays out a simple instance: right after the
// object header, with a flags byte after the holder and weakref slots. Read
// it only from an object of exactly TF's wrapper class for that C type, whose
// size and flags say "simple layout"; check_handles in fastmts/_tensorflow.py
// proves once per process, on an operation of the first session's graph, that
// the pointer read this way names it.
struct Pybind11SimpleInstance {
  PyObject_HEAD
  void* value_and_holder[3];  // the value pointer, then a holder of <= 2 words
  PyObject* weakrefs;
  unsigned char flags;        // bit 1: simple_layout
};
constexpr unsigned char kSimpleLayout = 1u << 1;

// TF's wrapper classes (_pywrap_tf_session.TF_Session / TF_Operation), set
// when binding; leaked, as the module that owns them is never unloaded.
PyObject* session_wrapper_type = nullptr;
PyObject* operation_wrapper_type = nullptr;

void* pointer_from_layout(py::handle obj, PyObject* wrapper_type) {
  PyTypeObject* type = Py_TYPE(obj.ptr());
  const auto* inst = reinterpret_cast<const Pybind11SimpleInstance*>(obj.ptr());
  if (reinterpret_cast<PyObject*>(type) != wrapper_type)
    throw py::type_error("cannot read the TensorFlow C object behind " +
                         py::repr(obj).cast<std::string>() + ": it is not a " +
                         py::str(wrapper_type).cast<std::string>());
  if (type->tp_basicsize != static_cast<Py_ssize_t>(sizeof(Pybind11SimpleInstance)) ||
      !(inst->flags & kSimpleLayout) || !inst->value_and_holder[0])
    throw py::type_error("cannot read the TensorFlow C object behind " +
                         py::repr(obj).cast<std::string>() +
                         ": this TensorFlow's Python bindings are laid out as fastmts does not know");
  return inst->value_and_holder[0];
}

// ---- TF 1.15 to 2.1: SWIG -------------------------------------------------

// Their Python session binding is SWIG's: Session._session and
// Operation._c_op are SwigPyObjects, laid out by every SWIG 3 and 4 as
// below, whose type record names the C type ("_p_TF_Session").
struct SwigTypeInfo {
  const char* name;
};
struct SwigPyObject {
  PyObject_HEAD
  void* ptr;
  SwigTypeInfo* ty;
};

bool swig_bindings = false;  // set when binding: this TF's bindings are SWIG's

void* pointer_from_swig(py::handle obj, const char* swig_type_name) {
  const auto* swig = reinterpret_cast<const SwigPyObject*>(obj.ptr());
  if (std::strcmp(Py_TYPE(obj.ptr())->tp_name, "SwigPyObject") != 0 || !swig->ty ||
      !swig->ty->name || std::strcmp(swig->ty->name, swig_type_name) != 0 || !swig->ptr)
    throw py::type_error("cannot read the TensorFlow C object behind " +
                         py::repr(obj).cast<std::string>() + ": it is not a SWIG " +
                         swig_type_name);
  return swig->ptr;
}

void* raw_pointer(py::handle obj, const std::type_info& type, PyObject* wrapper_type,
                  const char* swig_type_name) {
  if (swig_bindings) return pointer_from_swig(obj, swig_type_name);
  py::object conduit = py::getattr(obj, "_pybind11_conduit_v1_", py::none());
  if (!conduit.is_none()) return pointer_from_conduit(obj, conduit, type);
  return pointer_from_layout(obj, wrapper_type);
}

// The module of TF's Python session binding. From 2.2 TF's
// `tensorflow.python.client.pywrap_tf_session` re-exports a pybind11 module
// (`tensorflow.python._pywrap_tf_session` up to 2.4, under `client` from
// 2.5); 1.15 to 2.1 have none, and their SWIG module
// `pywrap_tensorflow_internal` binds the session.
py::module_ session_binding_module() {
  py::module_ sys = py::module_::import("sys");
  try {
    py::module_ shim = py::module_::import("tensorflow.python.client.pywrap_tf_session");
    py::object module_name = shim.attr("TF_Session").attr("__module__");
    return sys.attr("modules")[module_name];
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError)) throw;
  }
  swig_bindings = true;
  return py::module_::import("tensorflow.python.pywrap_tensorflow_internal")
      .attr("_pywrap_tensorflow_internal");
}

}  // namespace

void bind_imported_tensorflow() {
  py::module_ session_module = session_binding_module();
  if (!swig_bindings) {
    session_wrapper_type = py::object(session_module.attr("TF_Session")).release().ptr();
    operation_wrapper_type = py::object(session_module.attr("TF_Operation")).release().ptr();
  }
  std::string error = bind_tf_c_api(session_module.attr("__file__").cast<std::string>());
  if (!error.empty()) {
    PyErr_SetString(PyExc_ImportError,
                    ("fastmts cannot use this TensorFlow's C API: " + error).c_str());
    throw py::error_already_set();
  }
}

TF_Session* session_pointer(py::handle tf_session) {
  return static_cast<TF_Session*>(raw_pointer(tf_session.attr("_session"), tf_session_typeid(),
                                             session_wrapper_type, "_p_TF_Session"));
}

TF_Operation* operation_pointer(py::handle c_op) {
  return static_cast<TF_Operation*>(
      raw_pointer(c_op, tf_operation_typeid(), operation_wrapper_type, "_p_TF_Operation"));
}

}  // namespace fastmts
