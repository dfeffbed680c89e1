// Binding glue: the speed floor the benchmarks divide by.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds floor_loop.
void register_benchmarking(pybind11::module_& m);

}  // namespace fastmts
