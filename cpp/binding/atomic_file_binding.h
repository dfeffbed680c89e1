// Python binding of the file written whole or not at all
// (cpp/core/file_formats/atomic_file.h).
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds AtomicFile to the extension module.
void register_atomic_file(pybind11::module_& m);

}  // namespace fastmts
