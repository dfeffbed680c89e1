// Binding glue: one Python value -> one member of a native hook's Config (or
// an argument of one of its methods), chosen by the member's C++ type, and
// the values a hook's callbacks hand to Python, likewise. Conversions run
// once, when the hook is made; a callback costs what a hand-written one
// would: one holding_gil lambda in a std::function.
//
//   TF_Output                (c_op, index)
//   SecondOrStepTimer        (every_secs, every_steps, never)
//   std::optional<T>         None or a T
//   InfoEnabledCheck         a logging.Logger (its INFO level read natively)
//   RunRequestFill           a callable returning (FeedPlan, values)
//   std::function<R(Args)>   a callable, called with the GIL (holding_gil),
//                            each argument converted by to_python, its result
//                            by from_python<R>; a bound method holds its
//                            object weakly (PythonCallback)
//   anything else            pybind11's cast (numbers, bool, str, the
//                            registered classes: RunPlan, CheckpointWriter,
//                            SummaryWriter)
// Each also says how the stubs annotate it (python_annotation<T>()).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <typeinfo>
#include <type_traits>
#include <utility>
#include <vector>

#include "binding/python_gil.h"
#include "core/hook_config.h"
#include "core/native_hooks.h"
#include "core/tensor_convert.h"
#include "core/timers.h"

namespace fastmts {

// Callback arguments, by type. A string is a serialized protobuf (a step's
// RunMetadata): bytes, or None when empty; a pointer to values: None or
// their list.
pybind11::object to_python(int64_t value);
pybind11::object to_python(double value);
pybind11::object to_python(bool value);
pybind11::object to_python(std::optional<int64_t> step);
pybind11::object to_python(const std::vector<SharedTensor>& values);
pybind11::object to_python(const std::vector<SharedTensor>* values);
pybind11::object to_python(const std::string& serialized);
pybind11::object to_python(const std::vector<StepCounterHook::StepRate>& rates);

// Raises TypeError unless `value` is callable.
void require_callable(pybind11::handle value);

// A Python callable as a native hook keeps it. A bound method holds its
// object weakly: a native runner (python/fastmts/_internal/native_runner.py)
// owns its native hook and hands it its own methods, and a cycle through a
// native object is one Python's garbage collector cannot see. Called once
// that object is gone, it raises ReferenceError, as a weak proxy does. Any
// other callable (a function, a lambda, a builtin) is held as it is. A call
// costs what a call of the bound method would.
class PythonCallback {
 public:
  explicit PythonCallback(pybind11::handle value);
  template <typename... A>
  pybind11::object operator()(A&&... args) const {
    if (!self_) return fn_(std::forward<A>(args)...);
    return fn_(bound_object(), std::forward<A>(args)...);
  }

 private:
  pybind11::object bound_object() const;

  pybind11::object fn_;    // the callable, or a bound method's function
  pybind11::object self_;  // a weak reference to a bound method's object, or null
};

// The Python type name of a registered class (as pybind11 prints it).
std::string registered_type_name(const std::type_info& type);

template <typename T>
struct FromPython {
  static constexpr bool kByPybind11 = true;  // a method may take it as pybind11 does
  static T convert(pybind11::handle value) { return value.cast<T>(); }
  static std::string annotation() {
    if constexpr (std::is_same_v<T, bool>) return "bool";
    else if constexpr (std::is_integral_v<T>) return "int";
    else if constexpr (std::is_floating_point_v<T>) return "float";
    else if constexpr (std::is_same_v<T, std::string>) return "str";
    else return "object";
  }
};

template <typename X>
struct FromPython<std::shared_ptr<X>> {
  static constexpr bool kByPybind11 = true;
  static std::shared_ptr<X> convert(pybind11::handle value) {
    return value.cast<std::shared_ptr<X>>();
  }
  static std::string annotation() { return registered_type_name(typeid(std::remove_const_t<X>)); }
};

template <>
struct FromPython<TF_Output> {
  static TF_Output convert(pybind11::handle value);
  static std::string annotation() { return "tuple[object, int]"; }
};

template <>
struct FromPython<SecondOrStepTimer> {
  static SecondOrStepTimer convert(pybind11::handle value);
  static std::string annotation() { return "tuple[float | None, float | None, bool]"; }
};

template <>
struct FromPython<InfoEnabledCheck> {
  static InfoEnabledCheck convert(pybind11::handle logger);
  static std::string annotation() { return "object"; }  // a logging.Logger
};

template <>
struct FromPython<RunRequestFill> {
  static RunRequestFill convert(pybind11::handle feeds);
  static std::string annotation() { return "collections.abc.Callable"; }
};

template <typename T>
struct FromPython<std::optional<T>> {
  static std::optional<T> convert(pybind11::handle value) {
    if (value.is_none()) return std::nullopt;
    return FromPython<T>::convert(value);
  }
  static std::string annotation() { return FromPython<T>::annotation() + " | None"; }
};

template <typename R, typename... Args>
struct FromPython<std::function<R(Args...)>> {
  static std::string annotation() { return "collections.abc.Callable"; }
  static std::function<R(Args...)> convert(pybind11::handle value) {
    return holding_gil([fn = PythonCallback(value)](Args... args) -> R {
      if constexpr (std::is_void_v<R>) {
        fn(to_python(args)...);
      } else {
        return FromPython<R>::convert(fn(to_python(args)...));
      }
    });
  }
};

template <typename T>
T from_python(pybind11::handle value) {
  return FromPython<T>::convert(value);
}

template <typename T>
std::string python_annotation() {
  return FromPython<T>::annotation();
}

// Whether pybind11 converts T as from_python<T> does (then a method's
// parameter is T itself, and its signature names T's Python type).
template <typename T, typename = void>
struct ByPybind11 : std::false_type {};
template <typename T>
struct ByPybind11<T, std::void_t<decltype(FromPython<T>::kByPybind11)>> : std::true_type {};

}  // namespace fastmts
