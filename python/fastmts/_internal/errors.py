"""TF_Status errors from the native core -> the tf.errors class TF would raise.

Mirrors what TF's own BaseSession._do_call does with a failed run: find the
op the message names, interpolate graph locations into the message, and raise
the error class of the status code with (node_def, op, message).
"""
from tensorflow.python.client import session as _tf_session
from tensorflow.python.framework import errors_impl
from tensorflow.python.util import compat

from fastmts import _native
from fastmts import _tensorflow

StatusError = _native.StatusError

# A run of a hooked session after a hook requested stop, raised by either
# hook dispatcher (the native core's StoppedError, translated): a
# RuntimeError the session layers recognise by type. Users see TF's own
# RuntimeError with the same message (as_tf_error).
RunAfterStopError = _native.RunAfterStopError
RUN_AFTER_STOP_MESSAGE = 'Run called even after should_stop requested.'


def as_tf_error(run_after_stop):
  """TF's error for a RunAfterStopError: a RuntimeError, its message."""
  return RuntimeError(str(run_after_stop))


def from_status(status_error, graph, session=None):
  """Returns the tf.errors.OpError for a native StatusError(code, message)
  of a run of `session` (a tf.compat.v1.Session) in `graph`. A run of a
  session closed under the caller (e.g. `sess._sess._sess._sess._sess.close()`)
  is TF's RuntimeError, which TF's Session.run raises before running."""
  if session is not None and session._closed:  # pylint: disable=protected-access
    return RuntimeError('Attempted to use a closed Session.')
  code, message = status_error.args
  message = compat.as_text(message)
  exc_type = errors_impl.exception_type_from_error_code(code)
  node_def = None
  op = None
  if graph is None:  # e.g. from a native thread, reported without its graph
    return exc_type(None, None, message)
  m = _tf_session.BaseSession._NODEDEF_NAME_RE.search(message)  # pylint: disable=protected-access
  if m is not None:
    try:
      op = graph.get_operation_by_name(m.group(3))
      node_def = op.node_def
    except KeyError:
      pass
  message = _tensorflow.interpolate_graph(message, graph)
  if 'only supports NHWC tensor format' in message:
    message += ('\nA possible workaround: Try disabling Grappler optimizer'
                '\nby modifying the config for creating the session eg.'
                '\nsession_config.graph_options.rewrite_options.'
                'disable_meta_optimizer = True')
  return exc_type(node_def, op, message)
