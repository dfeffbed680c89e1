#include "binding/python_conversion.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>
#include <unordered_map>

#include "binding/numpy_feed.h"
#include "core/tf_status.h"
#include "core/tf_strings.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// TF dtype enum -> numpy dtype.
std::unordered_map<int, py::object>& numpy_dtypes() {
  static auto* table = new std::unordered_map<int, py::object>();  // outlives the interpreter
  return *table;
}

py::object strings_to_python(const TF_Tensor* t) {
  std::vector<std::string_view> items = string_elements(t);
  if (tf::NumDims(t) == 0) return py::bytes(items.at(0).data(), items.at(0).size());
  py::list flat(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    flat[i] = py::bytes(items[i].data(), items[i].size());
  py::module_ np = py::module_::import("numpy");
  return np.attr("array")(flat, py::arg("dtype") = "O").attr("reshape")(py::cast(tensor_dims(t)));
}

TensorPtr string_feed(const py::array& arr) {
  std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
  py::list flat = arr.attr("ravel")().attr("tolist")();
  std::vector<std::string> storage;
  storage.reserve(flat.size());
  for (py::handle item : flat) {
    if (PyBytes_Check(item.ptr())) {
      storage.emplace_back(item.cast<std::string>());
    } else if (PyUnicode_Check(item.ptr())) {
      storage.emplace_back(py::str(item).cast<std::string>());  // UTF-8, as TF encodes
    } else {
      // TF's own conversion fails here with an INTERNAL status, not a TypeError.
      throw TFError(TF_INTERNAL, std::string("Unsupported object type ") + Py_TYPE(item.ptr())->tp_name);
    }
  }
  std::vector<std::string_view> views(storage.begin(), storage.end());
  return tensor_from_strings(dims, views);
}

std::vector<TensorPtr> feeds_from_python(const FeedPlan& plan, py::handle values) {
  py::sequence seq = py::reinterpret_borrow<py::sequence>(values);
  if (seq.size() != plan.keys.size())
    throw py::value_error("feed values do not match the feed plan");
  std::vector<TensorPtr> out;
  out.reserve(plan.keys.size());
  for (size_t i = 0; i < plan.keys.size(); ++i) {
    if (plan.dtypes[i] == TF_STRING) {
      out.push_back(string_feed(py::array::ensure(seq[i])));
      continue;
    }
    py::array arr = py::array::ensure(seq[i], py::array::c_style);
    if (!arr) throw py::error_already_set();
    const size_t item = tf::DataTypeSize(plan.dtypes[i]);
    if (item && static_cast<size_t>(arr.itemsize()) != item)
      throw py::type_error("feed value has the wrong item size for its tensor");
    out.push_back(tensor_sharing_array(plan.dtypes[i], arr));
  }
  return out;
}

}  // namespace

void register_numpy_dtype(int tf_enum, py::object np_dtype) {
  numpy_dtypes()[tf_enum] = std::move(np_dtype);
}

py::object to_python(const SharedTensor& t) {
  TF_DataType dt = tf::TensorType(t.get());
  if (dt == TF_STRING) return strings_to_python(t.get());
  auto it = numpy_dtypes().find(static_cast<int>(dt));
  if (it == numpy_dtypes().end())
    throw py::type_error("cannot fetch a tensor of TF dtype " + std::to_string(dt));
  std::vector<int64_t> dims = tensor_dims(t.get());
  auto* keep = new SharedTensor(t);
  py::capsule base(keep, [](void* p) { delete static_cast<SharedTensor*>(p); });
  py::array arr(py::dtype::from_args(it->second), std::vector<py::ssize_t>(dims.begin(), dims.end()),
                tf::TensorData(t.get()), base);
  if (dims.empty()) return arr[py::tuple()];
  return std::move(arr);
}

py::list outputs_to_python(const std::vector<SharedTensor>& outputs) {
  py::list out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) out[i] = to_python(outputs[i]);
  return out;
}

RunRequest request_from_python(py::handle plan, py::handle feed_plan, py::handle feed_values,
                               py::handle run_options) {
  RunRequest r;
  if (!plan.is_none()) r.plan = plan.cast<std::shared_ptr<RunPlan>>();
  if (!feed_plan.is_none()) {
    r.feed_plan = feed_plan.cast<std::shared_ptr<FeedPlan>>();
    r.feed_values = feeds_from_python(*r.feed_plan, feed_values);
  }
  if (!run_options.is_none()) r.run_options = run_options.cast<std::string>();
  return r;
}

py::object optional_step(std::optional<int64_t> step) {
  return step ? py::object(py::int_(*step)) : py::object(py::none());
}

}  // namespace fastmts
