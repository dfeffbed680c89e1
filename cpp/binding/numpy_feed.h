// A fed numpy array handed to TF without a copy, as TF's own Session.run
// hands it: the tensor shares the array's buffer and holds a reference to the
// array until TF lets the tensor go.
#pragma once

#include <pybind11/numpy.h>

#include "core/tensor_convert.h"

namespace fastmts {

// A tensor over `array`'s buffer (C-contiguous, of `dtype`'s item size). TF
// copies a buffer that is not aligned for its kernels itself (TF_NewTensor),
// so an unaligned array costs one copy, as a copy always did, and an aligned
// one none. TF never forwards such a buffer into an op's output (it does not
// own it), so a variable assigned from a feed gets its own copy.
TensorPtr tensor_sharing_array(TF_DataType dtype, const pybind11::array& array);

// Drops the references of the arrays whose tensors TF released where the GIL
// was not held. Call with the GIL held; feeds call it themselves.
void release_fed_arrays();

}  // namespace fastmts
