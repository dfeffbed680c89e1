"""Calls made from a line of TF's own source.

Where fastmts does what a line of TF's Python does (a stock hook's log line,
the deprecation warning of start_queue_runners), whatever reads the caller's
frame must read TF's line: a logging record's pathname, lineno and funcName
(log formatters that print file:line, absl's prefix), and the "From
FILE:LINE" of TF's deprecation warnings. `TFSite(tf_function, marker).call(
fn, *args)` calls `fn` from a frame whose code lies at that line of TF's file,
in a function of TF's name. The call spans as many lines as TF's does, so
each Python reports the line it reports for TF's (3.8 on the first line of a
call over several, 3.7 the last).

Where the line cannot be found (no source; a release whose function no
longer holds the marker), the call is made directly: the same message, with
fastmts's location.
"""
import inspect
import threading

# How far above the marker's line its call may start (a message on the
# lines after `logging.info(`).
_MAX_LINES_ABOVE = 3


class TFSite:
  """The call of `callee` in `tf_function` that holds the first line with
  `marker` (the call starts on that line or at most a few lines above)."""

  def __init__(self, tf_function, marker, callee='logging.'):
    self._tf_function = tf_function
    self._marker = marker
    self._callee = callee
    self._caller = None
    self._resolved = False
    self._lock = threading.Lock()

  def call(self, fn, *args, **kwargs):
    """fn(*args, **kwargs), called from TF's line."""
    if not self._resolved:
      with self._lock:
        if not self._resolved:
          self._caller = _caller_at(self._tf_function, self._marker, self._callee)
          self._resolved = True
    if self._caller is None:
      return fn(*args, **kwargs)
    return self._caller(fn, args, kwargs)


def _caller_at(tf_function, marker, callee):
  """A function named as `tf_function` whose call of its argument lies on
  the line(s) of the call of `callee` in tf_function's source holding
  `marker`, or None."""
  try:
    lines, first = inspect.getsourcelines(tf_function)
    filename = inspect.getsourcefile(tf_function)
  except (OSError, TypeError):
    return None
  for offset, text in enumerate(lines):
    if marker in text:
      break
  else:
    return None
  starts = [o for o in range(offset, max(offset - _MAX_LINES_ABOVE, 0) - 1, -1)
            if callee in lines[o]]
  if not starts:
    return None
  offset = starts[0]
  line = first + offset
  span = _call_span(lines[offset:])
  if line < 2 or filename is None:
    return None
  name = getattr(tf_function, '__name__', '<module>')
  source = ('\n' * (line - 2) + 'def %s(fn, args, kwargs):\n' % name +
            '  return fn(*args,' + '\n' * (span - 1) + ' **kwargs)\n')
  namespace = {}
  exec(compile(source, filename, 'exec'), namespace)  # pylint: disable=exec-used
  return namespace[name]


def _call_span(lines):
  """How many of `lines` the call starting on the first one spans (its
  parentheses balanced; TF's log calls hold none in their strings that
  are not)."""
  depth = 0
  for count, text in enumerate(lines, 1):
    depth += text.count('(') - text.count(')')
    if depth <= 0:
      return count
  return 1
