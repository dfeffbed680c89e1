"""The TensorFlow fastmts runs on: whichever release (1.15, 2.0 to 2.21) and
distribution (`tensorflow`, `tensorflow-cpu`, ...) is installed.

Everything that differs between those releases on the Python side is decided
here, once, from what the running TF has (not from its version number where
the thing itself can be looked at), with the releases named: the modules
that moved, TF's own behaviour that changed (what its CheckpointSaverHook
logs, how its write_graph serializes), the arguments older releases lack,
and what the protobuf runtime each release runs with offers. Each fact is a
constant or function named for what differs; the code that depends on one
names the fact, never a release (tests/test_tensorflow_releases.py checks
that no TF version is compared, nor a release probed, outside this module).
Where a behaviour differs between releases, fastmts follows the TF it runs
on. docs/design.md ("When TF changes") says how a new release is added.

Imported first by `fastmts/__init__.py`: a missing or unsupported TF fails
here, at `import fastmts`, with one line saying what to install, never later
inside a session. Importing the native extension binds its C API calls to
this TF (cpp/core/tf_c_api.h). That the raw C handles fastmts reads from TF's
Python objects are the right ones is proven later, once, on the user's own
graph (check_handles).

Importing fastmts creates nothing in TF and changes none of its process-wide
state: no graph, no op, no use of TF's uid counter (which names cond and
while functions, so a use here would renumber the user's graphs and change
their graph.pbtxt and .meta bytes), no logging or deprecation-warning state
(tests/test_import_state.py). A session's creation extends one list of
TF's: the files TF's error messages skip as its own
(count_as_tf_code_in_errors).
"""
import importlib
import inspect
import operator
import os
import re
import sys
import warnings

from fastmts import _tf_distributions
from fastmts._internal import c_handles as _c_handles

# The supported releases: 1.15, and every 2.x from 2.0 to 2.21.
SUPPORTED = ((1, 15), (2, 0), (2, 21))
_RANGE = '1.15 or 2.0 to 2.21'
_INSTALL_HINT = ("pip install 'tensorflow-cpu>=2.12,<2.22' (or 'tensorflow'; or "
                 "pip install 'fastmts[cpu]'); below 2.18 TensorFlow needs 'numpy<2', "
                 "1.15 'protobuf<=3.20'")

# Two TF distributions laid into one folder (fastmts/_tf_distributions.py): said
# whether TF imports or not, with the command that repairs it.
_TWO_TFS = _tf_distributions.trap_message(_tf_distributions.installed())

try:
  # TF as the user loaded it, or loaded now (its shared libraries before the
  # extension's). An import statement would read the loaded module's
  # __spec__, which TF 1.15's deprecation wrapper of `tensorflow` caches.
  tf = sys.modules.get('tensorflow') or importlib.import_module('tensorflow')
except Exception as e:  # pylint: disable=broad-except
  # Not only ImportError: TF 2.11 and older fail with TypeError under numpy 2.
  raise ImportError('fastmts needs TensorFlow %s, and `import tensorflow` failed (%s: %s): %s'
                    % (_RANGE, type(e).__name__, e, _TWO_TFS or _INSTALL_HINT)) from e
if _TWO_TFS:
  warnings.warn(_TWO_TFS + ' (TensorFlow imports for now)', RuntimeWarning)


def check_release(version):
  """Raises ImportError unless `version` (tf.__version__, e.g. '2.16.2' or
  '2.21.0-rc1') is a supported release; returns its (major, minor)."""
  match = re.match(r'(\d+)\.(\d+)', version)
  if not match:
    raise ImportError('fastmts cannot read the TensorFlow version %r: %s'
                      % (version, _INSTALL_HINT))
  found = int(match.group(1)), int(match.group(2))
  if found != SUPPORTED[0] and not SUPPORTED[1] <= found <= SUPPORTED[2]:
    raise ImportError('fastmts supports TensorFlow %s; this is TensorFlow %s: %s'
                      % (_RANGE, version, _INSTALL_HINT))
  return found


# tf.__version__, read where TF 1.15's wrapper of `tensorflow` caches nothing.
from tensorflow.python.framework import versions as _tf_versions  # pylint: disable=g-import-not-at-top,wrong-import-position
VERSION = _tf_versions.__version__
RELEASE = check_release(VERSION)

# pylint: disable=g-import-not-at-top,wrong-import-position
try:
  from fastmts import _native
except ImportError as e:
  # pybind11 reports an error while the module initializes as "initialization
  # failed", with fastmts's own message as its cause: say that one.
  cause = e.__cause__ or e.__context__ or e
  raise ImportError('fastmts cannot run on TensorFlow %s: %s' % (VERSION, cause)) from e
from tensorflow.python.client import session as _tf_session_lib
from tensorflow.core.framework import tensor_pb2 as _tensor_pb2
from tensorflow.core.framework import types_pb2 as _types_pb2
from tensorflow.python.framework import graph_io as _tf_graph_io
from tensorflow.python.summary.writer import event_file_writer as _tf_event_file_writer
from tensorflow.python.summary.writer import writer as _tf_writer
from tensorflow.python.training import basic_session_run_hooks as _tf_hooks
from tensorflow.python.training import monitored_session as _tf_monitored_session
from tensorflow.python.training import saver as _tf_saver

# Names TF moved between the supported releases; fastmts uses TF's own where
# the installed release has them, as TF's Session.run does in that release.
try:  # where Tensor lives in recent releases (2.16 to 2.21 checked)
  from tensorflow.python.framework.tensor import Tensor
except ImportError:  # older releases (1.15 to 2.12 at least) keep it in ops
  from tensorflow.python.framework.ops import Tensor
try:  # the name in recent releases (2.16 to 2.21 checked)
  from tensorflow.python.framework.error_interpolation import interpolate_graph
except ImportError:  # older releases (1.15 to 2.12 at least) name it interpolate
  from tensorflow.python.framework.error_interpolation import interpolate as interpolate_graph
try:  # TF 2.18 and later convert feeds with numpy_compat (numpy 2 rules)
  from tensorflow.python.util.numpy_compat import np_asarray
except ImportError:  # TF 1.15 to 2.17: plain numpy.asarray
  import numpy as _np

  def np_asarray(values, dtype=None):
    return _np.asarray(values, dtype=dtype)
try:  # TF 2.10 and later
  from tensorflow.python.checkpoint import checkpoint_management
except ImportError:  # TF 1.15 to 2.9
  from tensorflow.python.training import checkpoint_management

# tensor_ref(t): the hashable reference of a Tensor (Tensor.ref from TF 2.2,
# Tensor.experimental_ref in 1.15 to 2.1).
tensor_ref = operator.methodcaller('ref' if hasattr(Tensor, 'ref') else 'experimental_ref')

# TF 1.15's and 2.0's CheckpointSaverHook and MonitoredTrainingSession have no
# save_graph_def (they always write the graph); 2.1 and later do.
SAVER_HOOK_TAKES_SAVE_GRAPH_DEF = (
    'save_graph_def' in inspect.signature(_tf_hooks.CheckpointSaverHook.__init__).parameters)

# TF 1.15's and 2.0's Scaffold (and its SessionManager) have no
# local_init_feed_dict; 2.1 and later do.
SCAFFOLD_TAKES_LOCAL_INIT_FEED_DICT = (
    'local_init_feed_dict' in inspect.signature(_tf_monitored_session.Scaffold.__init__).parameters)

# TF's EventFileWriter keeps its max_queue as _max_queue (2.1 and later); in
# 1.15 and 2.0 only its queue's maxsize holds it.
EVENT_FILE_WRITER_KEEPS_MAX_QUEUE = (
    '_max_queue' in _tf_event_file_writer.EventFileWriter.__init__.__code__.co_names)

# Whether TF's FileWriter (its base SummaryToEventTransformer) writes
# add_graph(graph)'s records by methods of its own, _write_plugin_assets and
# _add_graph_def, that fastmts's graph records lean on (1.15 to 2.21 do).
FILE_WRITER_ADDS_GRAPH_IN_PARTS = all(
    hasattr(_tf_writer.SummaryToEventTransformer, name)
    for name in ('add_graph', '_write_plugin_assets', '_add_graph_def'))

# Whether TF's CheckpointSaverHook logs "Calling checkpoint listeners
# before/after saving checkpoint N..." around its save (2.4 and later, not
# 1.15 to 2.1), as its code says.
SAVER_HOOK_LOGS_LISTENER_CALLS = (
    'Calling checkpoint listeners before saving checkpoint %d...'
    # A fact read from the code of TF's private method.
    in _tf_hooks.CheckpointSaverHook._save.__code__.co_consts)  # pylint: disable=protected-access


def _feed_key():
  """The key of a fed tensor in the feeds mapping Session.run gives TF's
  _FetchHandler (fastmts hands it the same): the Tensor itself in TF 1.15 and
  2.0, Tensor.experimental_ref() in 2.1, Tensor.ref() from 2.2."""
  # A fact read from the code of TF's private method.
  names = _tf_session_lib.BaseSession._run.__code__.co_names  # pylint: disable=protected-access
  for name in ('ref', 'experimental_ref'):
    if name in names:
      return operator.methodcaller(name)
  return lambda tensor: tensor


feed_key = _feed_key()

# Session.run's feed errors: TF 1.15 to 2.4 format them with % (the tensor
# name by repr, the unfed tensor by str, "feed with key"); f-strings by 2.8
# (names as they are, "argument `feed_dict` with key"). Read from the
# installed Session.run, as what fastmts raises must be what it raises.
FEED_ERRORS_USE_PERCENT_FORMAT = (
    # A fact read from the code of TF's private method.
    'Tensor %s may not be fed.' in _tf_session_lib.BaseSession._run.__code__.co_consts)  # pylint: disable=protected-access


def _starts_queue_runners_only_when_any():
  """Whether TF's _CoordinatedSessionCreator.create_session calls
  start_queue_runners (and so prints its deprecation warning, once per
  process) only when the graph has queue runners, or at every session
  creation as older releases do. Read from the installed code."""
  from tensorflow.python.training import monitored_session  # pylint: disable=g-import-not-at-top
  # A fact read from the code of TF's private class's method.
  code = monitored_session._MonitoredSession._CoordinatedSessionCreator.create_session.__code__  # pylint: disable=protected-access
  return 'QUEUE_RUNNERS' in code.co_names


STARTS_QUEUE_RUNNERS_ONLY_WHEN_ANY = _starts_queue_runners_only_when_any()


def _coordinator_reraise():
  """reraise(exc_info) as TF's Coordinator re-raises a recorded exception:
  six.reraise(*exc_info) in TF 1.15 to 2.10 (the recorded traceback restored;
  a (None, None, None) record raises TypeError calling None), `raise
  exc_info[1]` from 2.11."""
  from tensorflow.python.training import coordinator  # pylint: disable=g-import-not-at-top
  if 'six' in coordinator.Coordinator.join.__code__.co_names:
    import six  # pylint: disable=g-import-not-at-top  (a dependency of those releases)
    return lambda exc_info: six.reraise(*exc_info)

  def reraise(exc_info):
    raise exc_info[1]
  return reraise


coordinator_reraise = _coordinator_reraise()


def _saver_save_logs_files():
  """Whether TF's Saver.save ends by logging, at INFO, the name of every file
  under the checkpoint's prefix and their running size (saver.py's
  _get_checkpoint_size, after the .meta is written, so the .meta is among
  them): TF 2.9 only; 2.8 and earlier have no such step, and from 2.10 on it
  logs nothing."""
  size = getattr(_tf_saver, '_get_checkpoint_size', None)
  return size is not None and 'logging' in size.__code__.co_names


SAVER_SAVE_LOGS_CHECKPOINT_FILES = _saver_save_logs_files()


def _writes_deterministically():
  """Whether TF's graph_io.write_graph (and so Saver's .meta) serializes
  deterministically: from 2.4 on, not in 1.15 and 2.1."""
  try:
    return 'deterministic=True' in inspect.getsource(_tf_graph_io.write_graph)
  except (OSError, TypeError):  # no source: the releases that have it are the newer
    return RELEASE >= (2, 4)


WRITE_GRAPH_IS_DETERMINISTIC = _writes_deterministically()

# TF 1.15 to 2.4's write_graph creates the directory only if file_exists()
# says it is missing (a logdir that is no str fails there, with TypeError).
WRITE_GRAPH_CHECKS_FILE_EXISTS = 'file_exists' in _tf_graph_io.write_graph.__code__.co_names


def _passes_keyword(function, keyword):
  """Whether `function`'s own code passes `keyword=` to a call (the names of
  a call's keywords are a tuple among its code's constants)."""
  return any(isinstance(const, tuple) and keyword in const
             for const in function.__code__.co_consts)


# The float_format TF's write_graph prints graph.pbtxt with: '' (float fields
# as str() of their double value) in 1.15 to 2.20, none (text_format's
# default) from 2.21.
WRITE_GRAPH_FLOAT_FORMAT = '' if _passes_keyword(_tf_graph_io.write_graph, 'float_format') else None

# What the descriptors of the protobuf runtime the installed TF runs with
# tell (the releases of TF 2.12's time and older lack these properties; what
# they say then follows from the .proto file's syntax): read from one field
# and one enum of TF's own messages.
_A_FIELD = _tensor_pb2.TensorProto.DESCRIPTOR.fields[0]
FIELD_DESCRIPTORS_KNOW_IS_REPEATED = hasattr(_A_FIELD, 'is_repeated')
FIELD_DESCRIPTORS_KNOW_HAS_PRESENCE = hasattr(_A_FIELD, 'has_presence')
ENUM_DESCRIPTORS_KNOW_IS_CLOSED = hasattr(_types_pb2.DataType.DESCRIPTOR, 'is_closed')


def count_as_tf_code_in_errors():
  """Makes TF's error messages skip fastmts's frames as they skip TF's own,
  so an op TF's code makes when fastmts calls it (a Scaffold's Saver) is
  "defined at" the user's line, as it is when the user calls TF. Called as a
  monitored session is created (importing fastmts changes nothing of TF's).
  TF keeps those files as path prefixes (_FRAMEWORK_PATH_PREFIXES, 2.4 to
  2.21 at least) or as substrings (_BAD_FILE_SUBSTRINGS, 1.15 to 2.3); a
  path is both. Returns whether this release keeps such a list."""
  from tensorflow.python.framework import error_interpolation  # pylint: disable=g-import-not-at-top
  entry = os.path.join(os.path.dirname(os.path.abspath(__file__)), '')
  for name in ('_FRAMEWORK_PATH_PREFIXES', '_BAD_FILE_SUBSTRINGS'):
    skipped = getattr(error_interpolation, name, None)
    if isinstance(skipped, list):
      if entry not in skipped:
        skipped.append(entry)
      return True
  return False


def serialize_as_write_graph(message):
  """`message`'s bytes as TF's write_graph (the .meta of a save) writes them."""
  return message.SerializeToString(deterministic=WRITE_GRAPH_IS_DETERMINISTIC)


_handles_proven = False  # set by check_handles() once it has proven them


def check_handles(graph):
  """Proves, once per process, that the C handles fastmts reads from TF's
  Python objects are the right ones, before the native core first runs a
  session of `graph`: raises RuntimeError if not.

  TF releases before 2.21 give no public way to the C object behind a Python
  wrapper, so the native side reads it from pybind11's instance layout (2.2
  to 2.20) or SWIG's object (1.15 to 2.1; cpp/tf_access/tf_python_handles.cc). The
  pointers it reads are used only by
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
    name = _native.operation_name(_c_handles.c_op_of(op))
  except TypeError as e:
    raise RuntimeError('fastmts cannot reach the C objects of TensorFlow %s: %s'
                       % (VERSION, e)) from e
  if name != op.name:
    raise RuntimeError('fastmts cannot reach the C objects of TensorFlow %s (read %r for %r)'
                       % (VERSION, name, op.name))
  _handles_proven = True
