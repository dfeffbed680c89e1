#include "binding/hook_binding.h"

#include <memory>

#include "binding/hook_methods.h"
#include "binding/python_hook.h"
#include "core/hooked_session.h"
#include "core/native_hooks.h"

namespace py = pybind11;

namespace fastmts {

void register_hooks(py::module_& m) {
  py::class_<Hook, HookPtr>(m, "Hook");
  py::class_<PythonHook, Hook, std::shared_ptr<PythonHook>>(m, "PythonHook")
      .def(py::init<py::object, py::object>(), py::arg("hook"), py::arg("runner"));
  register_native_hooks(m, NativeHookClasses{});
}

}  // namespace fastmts
