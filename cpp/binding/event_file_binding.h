// Python bindings of the event-file encoding (cpp/core/file_formats/event_file.h).
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds tfrecord(), masked_crc32c(), event_bytes() and simple_value_summary().
void register_event_file(pybind11::module_& m);

}  // namespace fastmts
