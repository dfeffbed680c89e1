#include "binding/numpy_feed.h"

#include <mutex>
#include <stdexcept>
#include <vector>

namespace py = pybind11;

namespace fastmts {
namespace {

// Arrays whose tensors were released by a thread without the GIL (TF's
// executor, or a step that released it around TF_SessionRun): their
// references are dropped at the next feed, or the next release_fed_arrays().
std::mutex released_mutex;
std::vector<PyObject*>* released_arrays() {
  static auto* arrays = new std::vector<PyObject*>();  // outlives the interpreter
  return arrays;
}

// TF's deallocator of a shared buffer: any thread, any time, the GIL held or
// not. Taking the GIL here could deadlock (a thread holding it may be waiting
// for this one inside TF), so without it the reference waits in the list.
void release_array(void* /*data*/, size_t /*len*/, void* array) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_DECREF(static_cast<PyObject*>(array));
    return;
  }
  std::lock_guard<std::mutex> lock(released_mutex);
  released_arrays()->push_back(static_cast<PyObject*>(array));
}

}  // namespace

void release_fed_arrays() {
  std::vector<PyObject*> arrays;
  {
    std::lock_guard<std::mutex> lock(released_mutex);
    if (released_arrays()->empty()) return;
    arrays.swap(*released_arrays());
  }
  for (PyObject* array : arrays) Py_DECREF(array);
}

TensorPtr tensor_sharing_array(TF_DataType dtype, const py::array& array) {
  release_fed_arrays();
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  PyObject* owner = array.ptr();
  Py_INCREF(owner);  // given to the tensor; release_array drops it
  TF_Tensor* tensor = tf::NewTensor(dtype, dims.data(), static_cast<int>(dims.size()),
                                    const_cast<void*>(array.data()), array.nbytes(),
                                    &release_array, owner);
  if (!tensor) {
    // TF_NewTensor calls no deallocator when it fails.
    Py_DECREF(owner);
    throw std::runtime_error("TF_NewTensor failed");
  }
  return TensorPtr(tensor);
}

}  // namespace fastmts
