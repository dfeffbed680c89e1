// Binding glue: the hooks the core dispatches. Each native hook's
// constructor takes TF's own Python hook code as callbacks, which run with
// the GIL taken (python_gil.h: holding_gil) only on the steps where the hook
// acts; PythonHook runs any other SessionRunHook's methods.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds Hook, PythonHook and the native hooks (StopAtStepHook,
// NanTensorHook, LoggingTensorHook, GlobalStepGatedHook, StepScheduledHook,
// EndOnlyHook, FeedFnHook, GlobalStepWaiterHook). Needs CheckpointWriter
// registered first (a GlobalStepGatedHook may poll one).
void register_hooks(pybind11::module_& m);

}  // namespace fastmts
