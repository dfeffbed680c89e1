// Glue only: the schema table arrives as built by
// python/fastmts/file_formats/text_format_schema.py, and a failure to print becomes a
// ValueError, on which the Python caller prints with text_format instead.
#include "binding/text_format_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/file_formats/atomic_file.h"
#include "core/file_formats/text_format.h"

namespace py = pybind11;

namespace fastmts {
namespace {

using text_format::EnumSpec;
using text_format::FieldSpec;
using text_format::FieldType;
using text_format::MessageSpec;
using text_format::Schema;

// (number, name, type, repeated, has_presence, is_map, message_index, enum_index, oneof_index)
using FieldRow = std::tuple<uint32_t, std::string, int, bool, bool, bool, int, int, int>;
// (full_name, unsupported_reason, fields, extension_ranges)
using MessageRow = std::tuple<std::string, std::string, std::vector<FieldRow>,
                              std::vector<std::pair<uint32_t, uint32_t>>>;
// (closed, [(number, name), ...])
using EnumRow = std::tuple<bool, std::vector<std::pair<int32_t, std::string>>>;

std::shared_ptr<Schema> make_schema(const std::vector<MessageRow>& message_rows,
                                    const std::vector<EnumRow>& enum_rows) {
  std::vector<MessageSpec> messages;
  messages.reserve(message_rows.size());
  for (const auto& [full_name, reason, fields, ranges] : message_rows) {
    MessageSpec m;
    m.full_name = full_name;
    m.unsupported = reason;
    m.extension_ranges = ranges;
    for (const auto& [number, name, type, repeated, presence, is_map, msg, enm, oneof] : fields) {
      FieldSpec f;
      f.number = number;
      f.name = name;
      if (type < 1 || type > 18) throw py::value_error("text format schema: bad field type");
      f.type = static_cast<FieldType>(type);
      f.repeated = repeated;
      f.has_presence = presence;
      f.is_map = is_map;
      f.message_type = msg;
      f.enum_type = enm;
      f.oneof = oneof;
      m.fields.push_back(std::move(f));
    }
    messages.push_back(std::move(m));
  }
  std::vector<EnumSpec> enums;
  enums.reserve(enum_rows.size());
  for (const auto& [closed, values] : enum_rows) enums.push_back(EnumSpec{closed, values});
  return std::make_shared<Schema>(std::move(messages), std::move(enums));
}

py::str print_text(const Schema& schema, const py::bytes& data, bool as_utf8,
                   bool floats_as_doubles) {
  char* buffer = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(data.ptr(), &buffer, &size) != 0) throw py::error_already_set();
  text_format::Result result;
  {
    // `data` and `schema` are held by the caller's arguments meanwhile.
    py::gil_scoped_release release;
    result = text_format::print(schema, std::string_view(buffer, static_cast<size_t>(size)), as_utf8,
                                floats_as_doubles);
  }
  if (result.status != text_format::Status::kOk) {
    const char* kind = result.status == text_format::Status::kUnsupported ? "unsupported" : "malformed";
    throw py::value_error(std::string("fastmts text format: ") + kind + ": " + result.error);
  }
  return py::str(result.text.data(), result.text.size());
}

// print_text into `file`, in pieces (nothing held whole); the file stays
// uncommitted, for the caller to commit or abort.
void print_text_to(const Schema& schema, const py::bytes& data, bool as_utf8,
                   bool floats_as_doubles, AtomicFile& file) {
  char* buffer = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(data.ptr(), &buffer, &size) != 0) throw py::error_already_set();
  text_format::Result result;
  {
    py::gil_scoped_release release;
    result = text_format::print_to(schema, std::string_view(buffer, static_cast<size_t>(size)),
                                   as_utf8, floats_as_doubles, file);
  }
  if (result.status != text_format::Status::kOk) {
    const char* kind = result.status == text_format::Status::kUnsupported ? "unsupported" : "malformed";
    throw py::value_error(std::string("fastmts text format: ") + kind + ": " + result.error);
  }
}

}  // namespace

void register_text_format(py::module_& m) {
  py::class_<Schema, std::shared_ptr<Schema>>(m, "TextFormatSchema")
      .def(py::init(&make_schema), py::arg("messages"), py::arg("enums"));
  m.def("text_format", &print_text, py::arg("schema"), py::arg("serialized"), py::arg("as_utf8"),
        py::arg("floats_as_doubles") = false,
        "The text format of the serialized message of the schema's first type, as "
        "google.protobuf.text_format.MessageToString(message, as_utf8=as_utf8) prints it "
        "(with float_format='' when floats_as_doubles). "
        "ValueError when the message holds what the native printer does not reproduce, "
        "or is malformed.");
  m.def("text_format_to_file", &print_text_to, py::arg("schema"), py::arg("serialized"),
        py::arg("as_utf8"), py::arg("floats_as_doubles"), py::arg("file"),
        "text_format(...) written to the AtomicFile `file` in 4 MB pieces, without the GIL; "
        "ValueError as text_format (what was written is then to be aborted), OSError when "
        "the file cannot be written.");
}

}  // namespace fastmts
