// The `fastmts._native` extension module: binds the C API to the TensorFlow
// the process imported, then adds each area's bindings. Each area's glue is
// in its own *_binding.cc; the core it binds (cpp/ files without pybind11)
// knows nothing of Python.
#include <pybind11/pybind11.h>

#include "binding/agreed_stop_binding.h"
#include "binding/atomic_file_binding.h"
#include "binding/benchmark_binding.h"
#include "binding/checkpoint_writer_binding.h"
#include "binding/coordinator_binding.h"
#include "binding/event_file_binding.h"
#include "binding/hook_binding.h"
#include "binding/python_time.h"
#include "binding/session_binding.h"
#include "binding/status_binding.h"
#include "binding/tensor_binding.h"
#include "binding/text_format_binding.h"
#include "tf_access/tf_python_handles.h"

PYBIND11_MODULE(_native, m) {
  using namespace fastmts;
  m.doc() = "fastmts native core";
  bind_imported_tensorflow();
  follow_python_time();
  register_status_errors(m);
  register_tensors(m);
  register_atomic_file(m);  // before the text format: it prints into one
  register_text_format(m);
  register_event_file(m);
  register_checkpoint_writer(m);  // before the hooks: CheckpointSaverHook takes a writer
  register_coordinator(m);  // before the session: its loop takes a Coordinator
  register_hooks(m);
  register_agreed_stop(m);  // before the session: it takes one
  register_session(m);
  register_benchmarking(m);
}
