// Binding glue: tensors, run plans and the raw pointers behind TF's Python
// objects.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds register_numpy_dtype, operation_name, RunPlan and FeedPlan.
void register_tensors(pybind11::module_& m);

}  // namespace fastmts
