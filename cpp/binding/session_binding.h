// Binding glue: the hooked session (one step, the multi-step loop) and the
// session's `run` entry, called by Python without pybind11's dispatcher.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds HookedSession, FastRun and fast_run_entry. Needs the status errors,
// the coordinator and the hooks registered first.
void register_session(pybind11::module_& m);

}  // namespace fastmts
