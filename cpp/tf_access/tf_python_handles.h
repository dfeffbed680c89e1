// Binding glue: the raw TF C API handles behind TensorFlow's Python objects,
// and the binding of cpp/core/tf_c_api.h to the TensorFlow the process imported.
#pragma once

#include <pybind11/pybind11.h>

#include "core/tf_c_api.h"

namespace fastmts {

// Binds the C API to the library behind TF's Python session module (imported
// by then); raises ImportError when that TF does not provide it.
void bind_imported_tensorflow();

// `tf_session` is a tf.compat.v1.Session (its `_session` member is TF's
// wrapper of the TF_Session); `c_op` is an Operation's `_c_op`.
TF_Session* session_pointer(pybind11::handle tf_session);
TF_Operation* operation_pointer(pybind11::handle c_op);

}  // namespace fastmts
