// Binding glue: the hooks the core dispatches. Each native hook is
// registered from what its class declares (hook_methods.h): its constructor
// takes its Config's fields as keywords, TF's own Python hook code among
// them as callbacks, which run with the GIL taken (python_gil.h:
// holding_gil) only on the steps where the hook acts; PythonHook runs any
// other SessionRunHook's methods.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds Hook, PythonHook and every class of NativeHookClasses
// (core/native_hooks.h): one per TF hook class it runs natively, and
// EndOnlyHook (FinalOpsHook's, and any hook whose only work is its end).
// Needs CheckpointWriter and SummaryWriter registered first (a
// CheckpointSaverHook may poll a writer; methods take a SummaryWriter).
void register_hooks(pybind11::module_& m);

}  // namespace fastmts
