// Glue only: the file's errors (std::system_error) become OSError with
// their errno; writes and the commit give the GIL up.
#include "binding/atomic_file_binding.h"

#include <string>
#include <string_view>
#include <system_error>

#include "core/file_formats/atomic_file.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// Runs f without the GIL; its std::system_error raised as OSError(errno, what).
template <typename F>
void as_os_error(F&& f) {
  int err = 0;
  std::string what;
  {
    py::gil_scoped_release release;
    try {
      f();
    } catch (const std::system_error& e) {
      err = e.code().value();
      what = e.what();
    }
  }
  if (what.empty()) return;
  PyErr_SetObject(PyExc_OSError, py::make_tuple(err, what).ptr());
  throw py::error_already_set();
}

}  // namespace

void register_atomic_file(py::module_& m) {
  py::class_<AtomicFile>(m, "AtomicFile")
      .def(py::init([](const std::string& path) {
             AtomicFile* file = nullptr;
             as_os_error([&] { file = new AtomicFile(path); });
             return file;  // NOLINT: pybind11 owns it
           }),
           py::arg("path"))
      .def(
          "write",
          [](AtomicFile& file, const py::bytes& data) {
            std::string_view bytes = data;  // immutable, held by the caller
            as_os_error([&] { file.write(bytes); });
          },
          py::arg("data"))
      .def("commit",
           [](AtomicFile& file) { as_os_error([&] { file.commit(); }); })
      .def("abort", &AtomicFile::abort)
      .def_property_readonly("path", &AtomicFile::path);
}

}  // namespace fastmts
