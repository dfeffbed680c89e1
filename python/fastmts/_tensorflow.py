"""The TensorFlow fastmts runs on: whichever release (2.12 to 2.21) and
distribution (`tensorflow`, `tensorflow-cpu`, ...) is installed.

Imported first by `fastmts/__init__.py`: a missing or unsupported TF fails
here, at `import fastmts`, with one line saying what to install, never later
inside a session. Importing the native extension binds its C API calls to
this TF (cpp/tf_c_api.h); a probe then checks that the raw C handles fastmts
reads from TF's Python objects are the right ones.
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


def _check_handles():
  """TF releases before 2.21 give no public way to the C object behind a
  Python wrapper, so the native side reads it from pybind11's instance layout
  (cpp/tf_python_handles.cc). Prove once that this reads the right object."""
  graph = tf.Graph()
  with graph.as_default():
    op = tf.constant(0, name='fastmts_handle_probe').op
  try:
    name = _native.operation_name(op._c_op)  # pylint: disable=protected-access
  except TypeError as e:
    raise ImportError('fastmts cannot reach the C objects of TensorFlow %s: %s'
                      % (tf.__version__, e)) from e
  if name != op.name:
    raise ImportError('fastmts cannot reach the C objects of TensorFlow %s (read %r for %r)'
                      % (tf.__version__, name, op.name))


_check_handles()
