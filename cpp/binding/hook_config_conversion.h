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
//                            by from_python<R>
//   anything else            pybind11's cast (numbers, bool, str, the
//                            registered classes: RunPlan, CheckpointWriter,
//                            SummaryWriter)
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
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

template <typename T>
struct FromPython {
  static T convert(pybind11::handle value) { return value.cast<T>(); }
};

template <>
struct FromPython<TF_Output> {
  static TF_Output convert(pybind11::handle value);
};

template <>
struct FromPython<SecondOrStepTimer> {
  static SecondOrStepTimer convert(pybind11::handle value);
};

template <>
struct FromPython<InfoEnabledCheck> {
  static InfoEnabledCheck convert(pybind11::handle logger);
};

template <>
struct FromPython<RunRequestFill> {
  static RunRequestFill convert(pybind11::handle feeds);
};

template <typename T>
struct FromPython<std::optional<T>> {
  static std::optional<T> convert(pybind11::handle value) {
    if (value.is_none()) return std::nullopt;
    return FromPython<T>::convert(value);
  }
};

template <typename R, typename... Args>
struct FromPython<std::function<R(Args...)>> {
  static std::function<R(Args...)> convert(pybind11::handle value) {
    require_callable(value);
    return holding_gil([fn = pybind11::reinterpret_borrow<pybind11::object>(value)](
                           Args... args) -> R {
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

}  // namespace fastmts
