// Binding glue: the core's C++ exceptions as Python exceptions.
#pragma once

#include <pybind11/pybind11.h>

namespace fastmts {

// Adds StatusError (args: (TF error code, message); python/fastmts/_internal/errors.py
// turns it into TF's tf.errors class) and translates the core's exceptions:
// TFError to StatusError; FeedConflictError to RuntimeError and StoppedError
// to RunAfterStopError (a RuntimeError subclass the session layers recognise
// by type and raise to users as TF's RuntimeError), with TF's messages.
// Other C++ exceptions get pybind11's standard translation.
void register_status_errors(pybind11::module_& m);

// fastmts._native.StatusError, once registered (it lives as long as the
// process).
pybind11::handle status_error_type();

// fastmts._native.RunAfterStopError, once registered (as long as the process).
pybind11::handle run_after_stop_error_type();

// Inside a catch block: sets the Python error for the exception in flight
// exactly as pybind11 would (the translators above included). For entry
// points called by Python directly, outside pybind11's dispatcher.
void set_python_error_from_current();

}  // namespace fastmts
