// Binding glue shared by the binding files: TF tensors to Python values and
// back, and run requests from the plans and values Python resolved.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/run_plan.h"
#include "core/tensor_convert.h"

namespace fastmts {

// Makes `np_dtype` the numpy dtype of fetched tensors of TF dtype `tf_enum`
// (filled from tf.dtypes at import, bfloat16 and quantized types included).
void register_numpy_dtype(int tf_enum, pybind11::object np_dtype);

// A fetched tensor as TF's Session.run returns it: a numpy array that keeps
// the tensor alive (no copy), a numpy scalar for 0-d, bytes or an object
// array of bytes for strings.
pybind11::object to_python(const SharedTensor& t);
pybind11::list outputs_to_python(const std::vector<SharedTensor>& outputs);

// A RunRequest from Python: `plan` a RunPlan or None, `feed_plan` a FeedPlan
// or None with `feed_values` (already converted to each key's numpy dtype),
// `run_options` serialized RunOptions bytes or None.
RunRequest request_from_python(pybind11::handle plan, pybind11::handle feed_plan,
                               pybind11::handle feed_values, pybind11::handle run_options);

// An optional step number as Python sees it: int or None.
pybind11::object optional_step(std::optional<int64_t> step);

}  // namespace fastmts
