// Glue only: the file's errors (std::system_error) become OSError with
// their errno; opening, writes and the commit give the GIL up.
#include "binding/atomic_file_binding.h"

#include <string>
#include <string_view>
#include <system_error>

#include "core/file_formats/atomic_file.h"

namespace py = pybind11;

namespace fastmts {

void register_atomic_file(py::module_& m) {
  // A file's error anywhere in the extension (here, and a text printed into
  // a file: text_format_binding.cc), std::system_error, is Python's
  // OSError(errno, what), which callers turn into TF's error of that errno.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const std::system_error& e) {
      PyErr_SetObject(PyExc_OSError, py::make_tuple(e.code().value(), e.what()).ptr());
    }
  });
  py::class_<AtomicFile>(m, "AtomicFile")
      .def(py::init<const std::string&>(), py::arg("path"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "write",
          [](AtomicFile& file, const py::bytes& data) {
            std::string_view bytes = data;  // immutable, held by the caller
            py::gil_scoped_release release;
            file.write(bytes);
          },
          py::arg("data"))
      .def("commit", &AtomicFile::commit, py::call_guard<py::gil_scoped_release>())
      .def("abort", &AtomicFile::abort)
      .def_property_readonly("path", &AtomicFile::path);
}

}  // namespace fastmts
