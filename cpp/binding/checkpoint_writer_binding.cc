// Glue only. The writer thread outlives the Python call that started it, so
// what it holds of Python (the session's owner, the finishing callable) is
// released there with the GIL taken; the training thread gives the GIL up
// while it waits for that thread, which may need it to finish.
#include "binding/checkpoint_writer_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint_writer.h"
#include "tf_access/tf_python_handles.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// A Python object held from C++ on any thread.
std::shared_ptr<py::object> held_with_gil(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

using Output = std::pair<py::object, int>;  // (Operation._c_op, output index)

std::shared_ptr<SavePlan> make_save_plan(const std::vector<Output>& saved,
                                         const std::vector<bool>& copy_at_snapshot,
                                         const Output& filename, py::handle save_op) {
  if (saved.size() != copy_at_snapshot.size())
    throw py::value_error("saved and copy_at_snapshot differ in length");
  auto plan = std::make_shared<SavePlan>();
  for (size_t i = 0; i < saved.size(); ++i) {
    plan->saved.push_back({operation_pointer(saved[i].first), saved[i].second});
    plan->copy_at_snapshot.push_back(copy_at_snapshot[i] ? 1 : 0);
  }
  plan->filename = {operation_pointer(filename.first), filename.second};
  plan->save = operation_pointer(save_op);
  return plan;
}

void write(CheckpointWriter& writer, py::handle tf_session,
           const std::shared_ptr<SavePlan>& plan, const std::string& prefix, py::function finish) {
  SessionRunner runner(session_pointer(tf_session));
  std::shared_ptr<void> keep_alive = held_with_gil(py::reinterpret_borrow<py::object>(tf_session));
  std::shared_ptr<py::object> fn = held_with_gil(std::move(finish));
  py::gil_scoped_release nogil;
  writer.write(runner, plan, prefix, std::move(keep_alive), [fn]() {
    py::gil_scoped_acquire gil;
    (*fn)();
  });
}

}  // namespace

void register_checkpoint_writer(py::module_& m) {
  py::class_<SavePlan, std::shared_ptr<SavePlan>>(m, "SavePlan")
      .def(py::init(&make_save_plan), py::arg("saved"), py::arg("copy_at_snapshot"),
           py::arg("filename"), py::arg("save_op"))
      .def_property_readonly("num_saved", [](const SavePlan& p) { return p.saved.size(); });

  py::class_<CheckpointWriter, std::shared_ptr<CheckpointWriter>>(m, "CheckpointWriter")
      .def(py::init([]() {
             // Destroyed with the GIL given up: it waits for its writer thread.
             return std::shared_ptr<CheckpointWriter>(new CheckpointWriter(), [](CheckpointWriter* w) {
               if (PyGILState_Check()) {
                 py::gil_scoped_release nogil;
                 delete w;
               } else {
                 delete w;
               }
             });
           }))
      .def("write", &write, py::arg("tf_session"), py::arg("plan"), py::arg("prefix"),
           py::arg("finish"))
      .def("wait", &CheckpointWriter::wait, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("in_flight", &CheckpointWriter::in_flight)
      .def_property_readonly("has_outcome", &CheckpointWriter::has_outcome)
      .def("take_outcome", &CheckpointWriter::take_outcome);
}

}  // namespace fastmts
