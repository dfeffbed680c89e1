// Glue only: bytes in and out, the GIL given up while a call may wait for
// the writer thread, and the Python side of the file's creation.
#include "binding/event_file_binding.h"

#include <pybind11/stl.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "binding/python_compat.h"
#include "core/file_formats/event_file.h"
#include "core/file_formats/event_writer.h"
#include "core/file_formats/summary_writer.h"

namespace py = pybind11;

namespace fastmts {
namespace {

std::string_view view_of(const py::bytes& b) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw py::error_already_set();
  return std::string_view(data, static_cast<size_t>(size));
}

// A native EventWriter whose files TF's EventsWriter makes through
// `create_file() -> str` (None: no file could be made, and TF's line said
// so), and whose failures `report_failure(message)` (None: not reported)
// logs as TF's writer thread does; both are called on the writer thread
// with the GIL taken. A Python failure in create_file
// becomes the writer's own, its message kept, so no Python object outlives
// the GIL held.
std::shared_ptr<EventWriter> make_event_writer(std::string filename, size_t max_queue,
                                               double flush_secs, double next_flush_time,
                                               py::function create_file, bool raise_failures,
                                               py::object report_failure) {
  // Owned by the deleter below.
  PyObject* create_callback = create_file.release().ptr();
  PyObject* report_callback = report_failure.is_none() ? nullptr : report_failure.release().ptr();
  EventWriter::CreateFile create = [create_callback]() -> std::optional<std::string> {
    py::gil_scoped_acquire gil;
    if (Py_IsFinalizing()) throw EventWriterError("the interpreter is shutting down");
    try {
      py::object made = py::reinterpret_borrow<py::function>(create_callback)();
      if (made.is_none()) return std::nullopt;
      return made.cast<std::string>();
    } catch (py::error_already_set& e) {
      throw EventWriterError(e.what());
    }
  };
  EventFileFailures failures;
  failures.raised = raise_failures;
  if (report_callback != nullptr)
    failures.report = [report_callback](const std::string& message) {
      py::gil_scoped_acquire gil;
      if (Py_IsFinalizing()) return;
      try {
        py::reinterpret_borrow<py::function>(report_callback)(message);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("fastmts: reporting an event file failure");
      }
    };
  EventWriter* made;
  try {
    made = new EventWriter(std::move(filename), max_queue, flush_secs, next_flush_time,
                           std::move(create), std::move(failures));
  } catch (...) {  // the file could not be opened: nothing owns the callbacks
    Py_DECREF(create_callback);
    Py_XDECREF(report_callback);
    throw;
  }
  return std::shared_ptr<EventWriter>(
      made, [create_callback, report_callback](EventWriter* writer) {
        // Closing joins the thread, which may wait for the GIL to make a file.
        if (PyGILState_Check()) {
          py::gil_scoped_release released;
          delete writer;
        } else {
          delete writer;
        }
        py::gil_scoped_acquire gil;
        Py_DECREF(create_callback);
        Py_XDECREF(report_callback);
      });
}

// The Event field `what` names, or ValueError.
EventWhat event_what(int what) {
  switch (static_cast<EventWhat>(what)) {
    case EventWhat::kFileVersion:
    case EventWhat::kGraphDef:
    case EventWhat::kSummary:
    case EventWhat::kSessionLog:
    case EventWhat::kTaggedRunMetadata:
    case EventWhat::kMetaGraphDef:
      return static_cast<EventWhat>(what);
  }
  throw py::value_error("not a field of Event's `what`: " + std::to_string(what));
}

// EventWriterError as the exception TF (2.2 on) raises for that failure.
void raise_as_tf(const EventWriterError& e) {
  PyObject* type = PyExc_RuntimeError;
  switch (e.kind()) {
    case EventWriterError::Kind::kValue: type = PyExc_ValueError; break;
    case EventWriterError::Kind::kIndex: type = PyExc_IndexError; break;
    case EventWriterError::Kind::kNotImplemented: type = PyExc_NotImplementedError; break;
    case EventWriterError::Kind::kRuntime: break;
  }
  PyErr_SetString(type, e.what());
}

// A record reserved in a SummaryWriter's queue, filled or dropped later
// (from any thread).
struct PendingEvent {
  std::shared_ptr<SummaryWriter> writer;
  SummaryWriter::Reserved reserved;
};

void register_pending_event(py::module_& m) {
  py::class_<PendingEvent>(m, "PendingEvent")
      .def(
          "fill",
          [](PendingEvent& p, const py::bytes& payload) {
            std::string_view bytes = view_of(payload);
            py::gil_scoped_release released;
            p.writer->fill_serialized(p.reserved, bytes);
          },
          py::arg("payload"))
      .def("drop", [](PendingEvent& p) { p.writer->drop_serialized(p.reserved); });
}

void register_seen_summary_tags(py::module_& m) {
  py::class_<SeenSummaryTags, std::shared_ptr<SeenSummaryTags>>(m, "SeenSummaryTags")
      .def(py::init<>())
      .def("__contains__", &SeenSummaryTags::contains, py::arg("tag"))
      .def("add", &SeenSummaryTags::add, py::arg("tag"))
      .def("all", &SeenSummaryTags::all)
      .def(
          "strip_repeated_metadata",
          [](SeenSummaryTags& tags, const py::bytes& summary) -> py::object {
            auto out = tags.strip_repeated_metadata({view_of(summary)});
            if (!out) return py::none();
            return py::bytes(out->at(0));
          },
          py::arg("summary"));
}

}  // namespace

void register_event_file(py::module_& m) {
  register_pending_event(m);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const EventWriterError& e) {
      raise_as_tf(e);
    }
  });
  py::class_<EventWriter, std::shared_ptr<EventWriter>>(m, "EventWriter")
      .def(py::init(&make_event_writer), py::arg("filename"), py::arg("max_queue"),
           py::arg("flush_secs"), py::arg("next_flush_time"), py::arg("create_file"),
           py::arg("raise_failures") = true, py::arg("report_failure") = py::none())
      .def(
          "add",
          [](EventWriter& w, const py::bytes& event) {
            std::string bytes(view_of(event));
            py::gil_scoped_release released;
            return w.add(std::move(bytes), /*wait_for_room=*/true);
          },
          py::arg("event"))
      .def("flush", &EventWriter::flush, py::call_guard<py::gil_scoped_release>())
      .def("close", &EventWriter::close, py::call_guard<py::gil_scoped_release>())
      .def("reopen", &EventWriter::reopen, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("closed", &EventWriter::closed)
      .def_property_readonly("filename", &EventWriter::filename);

  register_seen_summary_tags(m);

  py::class_<SummaryWriter, std::shared_ptr<SummaryWriter>>(m, "SummaryWriter")
      .def(py::init<std::shared_ptr<EventWriter>, std::shared_ptr<SeenSummaryTags>>(),
           py::arg("events"), py::arg("tags"))
      .def(
          "add_serialized",
          [](SummaryWriter& w, int what, const py::bytes& payload, int64_t step) {
            const EventWhat field = event_what(what);
            // The bytes object is immutable and held by the caller.
            std::string_view bytes = view_of(payload);
            py::gil_scoped_release released;
            return w.add_serialized(field, bytes, step);
          },
          py::arg("what"), py::arg("payload"), py::arg("step") = 0)
      .def(
          "reserve_serialized",
          [](std::shared_ptr<SummaryWriter> w, int what, int64_t step) -> py::object {
            auto reserved = w->reserve_serialized(event_what(what), step);
            if (!reserved) return py::none();
            return py::cast(PendingEvent{std::move(w), std::move(*reserved)});
          },
          py::arg("what"), py::arg("step") = 0,
          "add_serialized's place in the queue and wall time, taken now: a PendingEvent "
          "whose fill(payload) or drop() must follow; None once closed.")
      .def_property_readonly("events", &SummaryWriter::events)
      .def_property_readonly("tags", &SummaryWriter::tags);

  m.def("masked_crc32c", [](const py::bytes& data) { return masked_crc32c(view_of(data)); },
        py::arg("data"));
  m.def("tfrecord", [](const py::bytes& data) { return py::bytes(tfrecord(view_of(data))); },
        py::arg("data"));
  m.def(
      "event_bytes",
      [](double wall_time, int64_t step, int what, const py::bytes& payload) {
        return py::bytes(event_bytes(wall_time, step, event_what(what), view_of(payload)));
      },
      py::arg("wall_time"), py::arg("step"), py::arg("what"), py::arg("payload"));
  m.def(
      "simple_value_summary",
      [](const std::string& tag, float value) {
        return py::bytes(simple_value_summary(tag, value));
      },
      py::arg("tag"), py::arg("value"));
}

}  // namespace fastmts
