// Host buffers <-> TF_Tensor. Knows nothing of Python: the binding hands in
// raw buffers (from numpy) and reads raw buffers back.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tf_c_api.h"

namespace fastmts {

struct TensorDeleter {
  void operator()(TF_Tensor* t) const { tf::DeleteTensor(t); }
};
using TensorPtr = std::unique_ptr<TF_Tensor, TensorDeleter>;
// Fetched tensors may go to the caller and to several hooks at once (TF
// dedupes fetches), so results are shared.
using SharedTensor = std::shared_ptr<TF_Tensor>;

// A tensor holding a copy of `data` (the core's own feeds; Python's numpy
// feeds share their buffer instead: binding/numpy_feed.h).
TensorPtr tensor_from_buffer(TF_DataType dtype, const std::vector<int64_t>& dims,
                             const void* data, size_t nbytes);

// Makes a fetched tensor safe to expose as an array: TF may return a tensor
// that aliases live state (a variable's buffer); like TF's Python client we
// take it over only when its buffer is ours alone, and copy otherwise.
SharedTensor take_exclusive(TF_Tensor* fetched);

std::vector<int64_t> tensor_dims(const TF_Tensor* t);
int64_t element_count(const TF_Tensor* t);

}  // namespace fastmts
