#include "tensor_convert.h"

#include <cstring>
#include <stdexcept>

#include "tensorflow/c/tf_tstring.h"

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
  TensorPtr t(TF_AllocateTensor(dtype, dims.data(), static_cast<int>(dims.size()), nbytes));
  if (!t) throw std::runtime_error("TF_AllocateTensor failed");
  if (nbytes) std::memcpy(TF_TensorData(t.get()), data, nbytes);
  return t;
}

TensorPtr tensor_from_strings(const std::vector<int64_t>& dims,
                              const std::vector<std::string_view>& items) {
  const int64_t n = product(dims);
  if (n != static_cast<int64_t>(items.size()))
    throw std::invalid_argument("string feed: element count does not match its shape");
  TensorPtr t(TF_AllocateTensor(TF_STRING, dims.data(), static_cast<int>(dims.size()),
                                sizeof(TF_TString) * static_cast<size_t>(n)));
  if (!t) throw std::runtime_error("TF_AllocateTensor failed");
  auto* out = static_cast<TF_TString*>(TF_TensorData(t.get()));
  for (int64_t i = 0; i < n; ++i) {
    TF_StringInit(&out[i]);
    TF_StringCopy(&out[i], items[i].data(), items[i].size());
  }
  return t;
}

SharedTensor take_exclusive(TF_Tensor* fetched) {
  TensorPtr owned(fetched);
  if (TF_TensorType(fetched) == TF_STRING) {
    // String elements are always copied out into Python bytes.
    return SharedTensor(owned.release(), TensorDeleter());
  }
  if (TF_Tensor* moved = TF_TensorMaybeMove(fetched)) {
    owned.release();  // TF_TensorMaybeMove took ownership of `fetched`
    return SharedTensor(moved, TensorDeleter());
  }
  std::vector<int64_t> dims = tensor_dims(fetched);
  TensorPtr copy = tensor_from_buffer(TF_TensorType(fetched), dims, TF_TensorData(fetched),
                                      TF_TensorByteSize(fetched));
  return SharedTensor(copy.release(), TensorDeleter());
}

std::vector<int64_t> tensor_dims(const TF_Tensor* t) {
  std::vector<int64_t> dims(static_cast<size_t>(TF_NumDims(t)));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = TF_Dim(t, static_cast<int>(i));
  return dims;
}

int64_t element_count(const TF_Tensor* t) { return TF_TensorElementCount(t); }

std::vector<std::string_view> string_elements(const TF_Tensor* t) {
  const int64_t n = TF_TensorElementCount(t);
  const auto* items = static_cast<const TF_TString*>(TF_TensorData(t));
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out.emplace_back(TF_StringGetDataPointer(&items[i]), TF_StringGetSize(&items[i]));
  return out;
}

}  // namespace fastmts
