// Python bindings of the asynchronous checkpoint writer (cpp/core/checkpoint_writer.h).
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds SavePlan and CheckpointWriter to the extension module.
void register_checkpoint_writer(pybind11::module_& m);

}  // namespace fastmts
