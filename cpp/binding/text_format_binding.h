// Python bindings of the native text-format printer (cpp/core/file_formats/text_format.h).
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds TextFormatSchema and text_format() to the extension module.
void register_text_format(pybind11::module_& m);

}  // namespace fastmts
