#include "tensor_convert.h"

#include <cstring>
#include <stdexcept>


namespace fastmts {

namespace {
int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
}  // namespace

TensorPtr tensor_from_buffer(TF_DataType dtype, const std::vector<int64_t>& dims,
                             const void* data, size_t nbytes) {
  TensorPtr t(tf::AllocateTensor(dtype, dims.data(), static_cast<int>(dims.size()), nbytes));
  if (!t) throw std::runtime_error("TF_AllocateTensor failed");
  if (nbytes) std::memcpy(tf::TensorData(t.get()), data, nbytes);
  return t;
}

TensorPtr tensor_from_strings(const std::vector<int64_t>& dims,
                              const std::vector<std::string_view>& items) {
  const int64_t n = product(dims);
  if (n != static_cast<int64_t>(items.size()))
    throw std::invalid_argument("string feed: element count does not match its shape");
  TensorPtr t(tf::AllocateTensor(TF_STRING, dims.data(), static_cast<int>(dims.size()),
                                sizeof(TF_TString) * static_cast<size_t>(n)));
  if (!t) throw std::runtime_error("TF_AllocateTensor failed");
  auto* out = static_cast<TF_TString*>(tf::TensorData(t.get()));
  for (int64_t i = 0; i < n; ++i) {
    tf::StringInit(&out[i]);
    tf::StringCopy(&out[i], items[i].data(), items[i].size());
  }
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

std::vector<std::string_view> string_elements(const TF_Tensor* t) {
  const int64_t n = tf::TensorElementCount(t);
  const auto* items = static_cast<const TF_TString*>(tf::TensorData(t));
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out.emplace_back(tf::StringGetDataPointer(&items[i]), tf::StringGetSize(&items[i]));
  return out;
}

}  // namespace fastmts
