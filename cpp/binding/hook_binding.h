// Binding glue: the hooks the core dispatches. Each native hook's
// constructor takes TF's own Python hook code as callbacks, which run with
// the GIL taken (python_gil.h: holding_gil) only on the steps where the hook
// acts; PythonHook runs any other SessionRunHook's methods.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds Hook, PythonHook and the native hooks, one per TF hook class
// (StopAtStepHook, NanTensorHook, LoggingTensorHook, CheckpointSaverHook,
// StepCounterHook, SummarySaverHook, ProfilerHook, FeedFnHook,
// GlobalStepWaiterHook) and EndOnlyHook (FinalOpsHook's, and any hook whose
// only work is its end). Constructors take keyword arguments only. Needs
// CheckpointWriter registered first (a CheckpointSaverHook may poll one).
void register_hooks(pybind11::module_& m);

}  // namespace fastmts
