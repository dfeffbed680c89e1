#include "binding/tensor_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "binding/python_conversion.h"
#include "core/run_plan.h"
#include "tf_access/tf_python_handles.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// `fetches`: (Operation._c_op, output index) pairs; `targets`: _c_op's.
std::shared_ptr<RunPlan> make_plan(const std::vector<std::pair<py::object, int>>& fetches,
                                   const std::vector<py::object>& targets) {
  auto plan = std::make_shared<RunPlan>();
  for (const auto& [c_op, index] : fetches) plan->fetches.push_back({operation_pointer(c_op), index});
  for (const auto& c_op : targets) plan->targets.push_back(operation_pointer(c_op));
  return plan;
}

std::shared_ptr<FeedPlan> make_feed_plan(const std::vector<std::pair<py::object, int>>& keys,
                                         const std::vector<int>& dtypes,
                                         const std::vector<std::string>& labels) {
  if (keys.size() != dtypes.size() || keys.size() != labels.size())
    throw py::value_error("feed plan: keys, dtypes and labels differ in length");
  auto plan = std::make_shared<FeedPlan>();
  for (size_t i = 0; i < keys.size(); ++i) {
    plan->keys.push_back({operation_pointer(keys[i].first), keys[i].second});
    plan->dtypes.push_back(static_cast<TF_DataType>(dtypes[i]));
  }
  plan->labels = labels;
  return plan;
}

}  // namespace

void register_tensors(py::module_& m) {
  m.def("register_numpy_dtype", &register_numpy_dtype, py::arg("tf_enum"), py::arg("np_dtype"));
  m.def("operation_name", [](py::handle c_op) {
    return std::string(tf::OperationName(operation_pointer(c_op)));
  }, py::arg("c_op"), "The name TF's C API gives the operation behind an Operation's _c_op.");

  py::class_<RunPlan, std::shared_ptr<RunPlan>>(m, "RunPlan")
      .def(py::init(&make_plan), py::arg("fetches"), py::arg("targets"))
      .def_property_readonly("num_fetches", [](const RunPlan& p) { return p.fetches.size(); })
      .def_property_readonly("num_targets", [](const RunPlan& p) { return p.targets.size(); });

  py::class_<FeedPlan, std::shared_ptr<FeedPlan>>(m, "FeedPlan")
      .def(py::init(&make_feed_plan), py::arg("keys"), py::arg("dtypes"), py::arg("labels"));
}

}  // namespace fastmts
