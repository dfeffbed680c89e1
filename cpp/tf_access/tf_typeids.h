// The std::type_info that TF's pybind11 bindings registered for the C API
// types it wraps. pybind11's cross-module conduit hands out the raw pointer
// behind a TF Python object only to a caller presenting the same type_info.
#pragma once

#include <typeinfo>

namespace fastmts {
const std::type_info& tf_session_typeid();
const std::type_info& tf_operation_typeid();
}  // namespace fastmts
