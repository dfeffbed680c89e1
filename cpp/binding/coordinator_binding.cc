#include "binding/coordinator_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/coordinator.h"
#include "core/native_threads.h"
#include "core/queue_runner.h"
#include "tf_access/tf_python_handles.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// The threads of one QueueRunner, started at once. The TF session object is
// kept alive by the Python wrapper until they are joined.
std::unique_ptr<QueueRunnerThreads> start_queue_runner_threads(
    py::handle tf_session, std::vector<std::string> thread_names,
    const std::vector<py::object>& enqueue_ops,
    py::object close_op, py::object cancel_op, std::vector<int> closed_codes,
    std::shared_ptr<Coordinator> coordinator) {
  QueueRunnerSpec spec;
  if (thread_names.size() < enqueue_ops.size() + (cancel_op.is_none() ? 0 : 1))
    throw py::value_error("QueueRunnerThreads: a name for each thread is needed");
  spec.thread_names = std::move(thread_names);
  for (const auto& op : enqueue_ops) spec.enqueue_ops.push_back(operation_pointer(op));
  if (!close_op.is_none()) spec.close_op = operation_pointer(close_op);
  if (!cancel_op.is_none()) spec.cancel_op = operation_pointer(cancel_op);
  spec.queue_closed_codes = std::move(closed_codes);
  return std::make_unique<QueueRunnerThreads>(session_pointer(tf_session), std::move(spec),
                                              std::move(coordinator));
}

}  // namespace

void register_coordinator(py::module_& m) {
  py::class_<Coordinator, std::shared_ptr<Coordinator>>(m, "Coordinator")
      .def(py::init<>())
      .def("request_stop", &Coordinator::request_stop)
      .def("clear_stop", &Coordinator::clear_stop)
      .def("should_stop", &Coordinator::should_stop)
      .def("wait_for_stop",
           [](const Coordinator& c, std::optional<double> timeout_secs) {
             return timeout_secs ? c.wait_for_stop(*timeout_secs) : c.wait_for_stop();
           },
           py::arg("timeout_secs") = py::none(), py::call_guard<py::gil_scoped_release>(),
           "Waits for stop; None: without a timeout, else as Python's Event.wait.")
      .def("report_error", &Coordinator::report_error, py::arg("code"), py::arg("message"))
      .def("claim_error", &Coordinator::claim_error)
      .def("native_error",
           [](const Coordinator& c) -> py::object {
             auto e = c.native_error();
             if (!e) return py::none();
             return py::make_tuple(e->code, py::str(e->message));
           })
      .def("set_clean_stop_codes", &Coordinator::set_clean_stop_codes, py::arg("codes"));

  py::class_<QueueRunnerThreads>(m, "QueueRunnerThreads")
      .def(py::init(&start_queue_runner_threads), py::arg("tf_session"), py::arg("thread_names"),
           py::arg("enqueue_ops"), py::arg("close_op"), py::arg("cancel_op"),
           py::arg("queue_closed_codes"), py::arg("coordinator"))
      .def("__len__", &QueueRunnerThreads::size)
      .def("name", &QueueRunnerThreads::name, py::arg("index"))
      .def("alive", &QueueRunnerThreads::alive, py::arg("index"))
      .def("join", &QueueRunnerThreads::join, py::call_guard<py::gil_scoped_release>());
  m.def("live_native_threads", &live_native_threads,
        "Native threads (queue runners, checkpoint writes) that have not ended.");
}

}  // namespace fastmts
