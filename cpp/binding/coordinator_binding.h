// Binding glue: the Coordinator's native state and the queue runners'
// native threads.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds Coordinator, QueueRunnerThreads and live_native_threads.
void register_coordinator(pybind11::module_& m);

}  // namespace fastmts
