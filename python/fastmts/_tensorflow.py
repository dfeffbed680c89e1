"""The TensorFlow fastmts runs on: whichever release (2.12 to 2.21) and
distribution (`tensorflow`, `tensorflow-cpu`, ...) is installed.

Imported first by `fastmts/__init__.py`: a missing or unsupported TF fails
here, at `import fastmts`, with one line saying what to install, never later
inside a session. Importing the native extension binds its C API calls to
this TF (cpp/tf_c_api.h). That the raw C handles fastmts reads from TF's
Python objects are the right ones is proven later, once, on the user's own
graph (check_handles).

Importing fastmts creates nothing in TF and changes none of its process-wide
state: no graph, no op, no use of TF's uid counter (which names cond and
while functions, so a use here would renumber the user's graphs and change
their graph.pbtxt and .meta bytes), no logging or deprecation-warning state
(tests/test_import_state.py).
"""
import re

SUPPORTED = ((2, 12), (2, 21))  # oldest and newest release, both included
_RANGE = '%d.%d to %d.%d' % (SUPPORTED[0] + SUPPORTED[1])
_INSTALL_HINT = ("pip install 'tensorflow-cpu>=2.12,<2.22' (or 'tensorflow'; "
                 "or pip install 'fastmts[cpu]')")

try:
  import tensorflow as tf  # loads TF's shared libraries before the extension
except ImportError as e:
  raise ImportError('fastmts needs TensorFlow %s, and `import tensorflow` failed (%s): %s'
                    % (_RANGE, e, _INSTALL_HINT)) from e


def check_release(version):
  """Raises ImportError unless `version` (tf.__version__, e.g. '2.16.2' or
  '2.21.0-rc1') is a supported release; returns its (major, minor)."""
  match = re.match(r'(\d+)\.(\d+)', version)
  if not match:
    raise ImportError('fastmts cannot read the TensorFlow version %r: %s'
                      % (version, _INSTALL_HINT))
  found = int(match.group(1)), int(match.group(2))
  if not SUPPORTED[0] <= found <= SUPPORTED[1]:
    raise ImportError('fastmts supports TensorFlow %s; this is TensorFlow %s: %s'
                      % (_RANGE, version, _INSTALL_HINT))
  return found


RELEASE = check_release(tf.__version__)

# pylint: disable=g-import-not-at-top,wrong-import-position
from fastmts import _native

# Names TF moved between the supported releases; fastmts uses TF's own where
# the installed release has them, as TF's Session.run does in that release.
try:  # where Tensor lives in recent releases (2.16 to 2.21 checked)
  from tensorflow.python.framework.tensor import Tensor
except ImportError:  # TF 2.12 keeps it in ops
  from tensorflow.python.framework.ops import Tensor
try:  # the name in TF 2.16 to 2.21
  from tensorflow.python.framework.error_interpolation import interpolate_graph
except ImportError:  # TF 2.12 names it interpolate
  from tensorflow.python.framework.error_interpolation import interpolate as interpolate_graph
try:  # TF 2.18 and later convert feeds with numpy_compat (numpy 2 rules)
  from tensorflow.python.util.numpy_compat import np_asarray
except ImportError:  # TF 2.12 to 2.17: plain numpy.asarray
  import numpy as _np

  def np_asarray(values, dtype=None):
    return _np.asarray(values, dtype=dtype)


_handles_proven = False  # set by check_handles() once it has proven them


def check_handles(graph):
  """Proves, once per process, that the C handles fastmts reads from TF's
  Python objects are the right ones, before the native core first runs a
  session of `graph`: raises RuntimeError if not.

  TF releases before 2.21 give no public way to the C object behind a Python
  wrapper, so the native side reads it from pybind11's instance layout
  (cpp/tf_python_handles.cc). The pointers it reads are used only by
  TF_SessionRun, on a session every one of which goes through
  python_hooked_session.runs_natively() (or benchmarking.native_floor_loop)
  first; both call this. The proof reads one of the user's own operations
  and creates nothing: an import-time probe graph and op would use up TF's
  process-wide uid counter. After the first success it costs one
  global lookup. An empty graph has nothing to prove it on and leaves it to
  the next call (a monitored session's never is: its Scaffold adds ops
  before the session is made)."""
  if _handles_proven:
    return
  operations = graph.get_operations()
  if operations:
    _prove_handles(operations[0])


def _prove_handles(op):
  global _handles_proven  # pylint: disable=global-statement
  try:
    name = _native.operation_name(op._c_op)  # pylint: disable=protected-access
  except TypeError as e:
    raise RuntimeError('fastmts cannot reach the C objects of TensorFlow %s: %s'
                       % (tf.__version__, e)) from e
  if name != op.name:
    raise RuntimeError('fastmts cannot reach the C objects of TensorFlow %s (read %r for %r)'
                       % (tf.__version__, name, op.name))
  _handles_proven = True
