// Glue only: bytes in, bytes out.
#include "event_file_binding.h"

#include <string>
#include <string_view>

#include "event_file.h"

namespace py = pybind11;

namespace fastmts {
namespace {

std::string_view view_of(const py::bytes& b) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw py::error_already_set();
  return std::string_view(data, static_cast<size_t>(size));
}

}  // namespace

void register_event_file(py::module_& m) {
  m.def("masked_crc32c", [](const py::bytes& data) { return masked_crc32c(view_of(data)); },
        py::arg("data"));
  m.def("tfrecord", [](const py::bytes& data) { return py::bytes(tfrecord(view_of(data))); },
        py::arg("data"));
  m.def(
      "event_bytes",
      [](double wall_time, int64_t step, int what, const py::bytes& payload) {
        switch (static_cast<EventWhat>(what)) {
          case EventWhat::kFileVersion:
          case EventWhat::kGraphDef:
          case EventWhat::kSummary:
          case EventWhat::kSessionLog:
          case EventWhat::kTaggedRunMetadata:
          case EventWhat::kMetaGraphDef:
            break;
          default:
            throw py::value_error("event_bytes: not a field of Event's `what`: " +
                                  std::to_string(what));
        }
        return py::bytes(event_bytes(wall_time, step, static_cast<EventWhat>(what),
                                     view_of(payload)));
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
