#include "core/tensor_convert.h"

#include <cstring>
#include <stdexcept>


namespace fastmts {

TensorPtr tensor_from_buffer(TF_DataType dtype, const std::vector<int64_t>& dims,
                             const void* data, size_t nbytes) {
  TensorPtr t(tf::AllocateTensor(dtype, dims.data(), static_cast<int>(dims.size()), nbytes));
  if (!t) throw std::runtime_error("TF_AllocateTensor failed");
  if (nbytes) std::memcpy(tf::TensorData(t.get()), data, nbytes);
  return t;
}

SharedTensor take_exclusive(TF_Tensor* fetched) {
  TensorPtr owned(fetched);
  if (tf::TensorType(fetched) == TF_STRING) {
    // String elements are always copied out into Python bytes.
    return SharedTensor(owned.release(), TensorDeleter());
  }
  if (TF_Tensor* moved = tf::TensorMaybeMove(fetched)) {
    owned.release();  // TF_TensorMaybeMove took ownership of `fetched`
    return SharedTensor(moved, TensorDeleter());
  }
  std::vector<int64_t> dims = tensor_dims(fetched);
  TensorPtr copy = tensor_from_buffer(tf::TensorType(fetched), dims, tf::TensorData(fetched),
                                      tf::TensorByteSize(fetched));
  return SharedTensor(copy.release(), TensorDeleter());
}

std::vector<int64_t> tensor_dims(const TF_Tensor* t) {
  std::vector<int64_t> dims(static_cast<size_t>(tf::NumDims(t)));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = tf::Dim(t, static_cast<int>(i));
  return dims;
}

int64_t element_count(const TF_Tensor* t) { return tf::TensorElementCount(t); }

}  // namespace fastmts
