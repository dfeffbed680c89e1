"""TF_Status errors from the native core -> the tf.errors class TF would raise.

Mirrors what TF's own BaseSession._do_call does with a failed run: find the
op the message names, interpolate graph locations into the message, and raise
the error class of the status code with (node_def, op, message).
"""
import errno
import os

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
  # TF's Session keeps whether it is closed in _closed.
  if session is not None and session._closed:  # pylint: disable=protected-access
    return RuntimeError('Attempted to use a closed Session.')
  code, message = status_error.args
  message = compat.as_text(message)
  exc_type = errors_impl.exception_type_from_error_code(code)
  node_def = None
  op = None
  if graph is None:  # e.g. from a native thread, reported without its graph
    return exc_type(None, None, message)
  # TF's own pattern for the op an error message names.
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


def _errno_codes():
  """errno -> the status code TF's file systems give it (ErrnoToCode in
  TF's platform/errors.cc): what TF raises when its own write of a file
  meets that errno. An errno not listed is UNKNOWN, as in TF."""
  codes = {
      errors_impl.INVALID_ARGUMENT: 'EINVAL ENAMETOOLONG E2BIG EDESTADDRREQ EDOM EFAULT EILSEQ '
                                    'ENOPROTOOPT ENOSTR ENOTSOCK ENOTTY EPROTOTYPE ESPIPE',
      errors_impl.DEADLINE_EXCEEDED: 'ETIMEDOUT ETIME',
      errors_impl.NOT_FOUND: 'ENODEV ENOENT ENXIO ESRCH',
      errors_impl.ALREADY_EXISTS: 'EEXIST EADDRNOTAVAIL EALREADY',
      errors_impl.PERMISSION_DENIED: 'EPERM EACCES EROFS',
      errors_impl.FAILED_PRECONDITION: 'ENOTEMPTY EISDIR ENOTDIR EADDRINUSE EBADF EBUSY ECHILD '
                                       'EISCONN ENOTBLK ENOTCONN EPIPE ESHUTDOWN ETXTBSY',
      errors_impl.RESOURCE_EXHAUSTED: 'ENOSPC EMFILE EMLINK ENFILE ENOBUFS ENODATA ENOMEM ENOSR '
                                      'EUSERS EDQUOT',
      errors_impl.OUT_OF_RANGE: 'EFBIG EOVERFLOW ERANGE',
      errors_impl.UNIMPLEMENTED: 'ENOSYS ENOTSUP EAFNOSUPPORT EPFNOSUPPORT EPROTONOSUPPORT '
                                 'ESOCKTNOSUPPORT EXDEV',
      errors_impl.UNAVAILABLE: 'EAGAIN ECONNREFUSED ECONNABORTED ECONNRESET EINTR EHOSTDOWN '
                               'EHOSTUNREACH ENETDOWN ENETRESET ENETUNREACH ENOLCK ENOLINK ENONET',
      errors_impl.ABORTED: 'EDEADLK ESTALE',
      errors_impl.CANCELLED: 'ECANCELED',
  }
  return {getattr(errno, name): code for code, names in codes.items()
          for name in names.split() if hasattr(errno, name)}


_ERRNO_CODES = _errno_codes()


def from_os_error(os_error, path):
  """The tf.errors.OpError TF raises where its write of `path` meets the
  errno of `os_error`: the class of the errno's code, TF's message
  ('<path>; <strerror>'). An OSError without an errno is returned as it is."""
  if not os_error.errno:
    return os_error
  code = _ERRNO_CODES.get(os_error.errno, errors_impl.UNKNOWN)
  return errors_impl.exception_type_from_error_code(code)(
      None, None, '%s; %s' % (path, os.strerror(os_error.errno)))
