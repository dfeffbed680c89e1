"""Helpers shared by the fastmts <-> TensorFlow compatibility tests.

Every scenario in the test modules is a plain function ``scenario(impl, workdir)``
where ``impl`` is either ``tf.compat.v1.train`` (the reference) or the
``fastmts`` module, and ``workdir`` is a fresh directory private to that run.
A scenario builds its own graph, drives the session, and returns plain
observable results (numpy values, booleans, exception records, hook logs).
The ``check`` fixture (conftest.py) runs a scenario for TF and for the
implementation under test and compares the results with :func:`assert_same`.
"""

import collections
import inspect
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.client import session as _tf_session_lib

TF_IMPL = tf.compat.v1.train

# The interface TF's own code (e.g. Saver.save, used by CheckpointSaverHook)
# requires of the `session` objects handed to hooks.
SessionInterface = _tf_session_lib.SessionInterface

Raised = collections.namedtuple('Raised', ['type', 'message'])
Raised.__doc__ = 'Record of an exception: its exact class and str(message).'


_TF_STACK_TRACE = re.compile(
    r'Detected at node .*?\n(?=Node: )|\n\nOriginal stack trace for .*\Z', re.DOTALL)


_RANDOM_FILE_SUFFIX = re.compile(r'(\.tmp|_temp_)[0-9a-f]{32}')


def without_random_file_names(message):
  """`message` with the random uuid of a temporary file name masked: TF 1.15's
  atomic writes (graph.pbtxt.tmp<uuid>) and checkpoint saves
  (model.ckpt-N_temp_<uuid>) name one in their errors."""
  return _RANDOM_FILE_SUFFIX.sub(r'\1<uuid>', message)


def without_stack_trace(result):
  """A Raised record of a TF error minus the Python stack traces TF appends
  to its message (they show the call path, which differs between the TF and
  the fastmts run); anything else unchanged."""
  if isinstance(result, Raised) and issubclass(result.type, tf.errors.OpError):
    return Raised(result.type, _TF_STACK_TRACE.sub('', result.message))
  return result


def outcome(fn, *args, **kwargs):
  """Returns fn's return value, or a Raised record if it raised an Exception."""
  try:
    return fn(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    return Raised(type(e), str(e))


def raised(fn, *args, **kwargs):
  """Like outcome() but the call must raise: returns the Raised record."""
  try:
    value = fn(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    return Raised(type(e), str(e))
  return ('DID NOT RAISE', value)


def norm(obj):
  """Replaces graph elements by (kind, name) so logs from two graphs compare."""
  if isinstance(obj, tf.Variable):
    return ('Variable', obj.name)
  if isinstance(obj, tf.SparseTensor):
    return ('SparseTensor', obj.indices.name, obj.values.name,
            obj.dense_shape.name)
  if isinstance(obj, tf.Tensor):
    return ('Tensor', obj.name)
  if isinstance(obj, tf.Operation):
    return ('Operation', obj.name)
  if isinstance(obj, dict):
    return {norm(k): norm(v) for k, v in obj.items()}
  if isinstance(obj, tuple) and hasattr(obj, '_fields'):
    return type(obj)(*[norm(v) for v in obj])
  if isinstance(obj, (list, tuple)):
    return type(obj)(norm(v) for v in obj)
  return obj


def _both_nan(a, b):
  try:
    return bool(np.isnan(a)) and bool(np.isnan(b))
  except (TypeError, ValueError):
    return False


def assert_same(got, want, path='result'):
  """Deep equality that also requires identical Python/numpy types.

  np.int32(3), np.array(3, np.int32) and 3 are all different here, as are
  list/tuple, and a namedtuple and a plain tuple.  NaNs compare equal.
  """
  assert type(got) is type(want), (
      f'{path}: type {type(got).__module__}.{type(got).__qualname__} != '
      f'{type(want).__module__}.{type(want).__qualname__} '
      f'(got {got!r}, want {want!r})')
  if isinstance(want, np.ndarray):
    assert got.dtype == want.dtype, f'{path}: dtype {got.dtype} != {want.dtype}'
    assert got.shape == want.shape, f'{path}: shape {got.shape} != {want.shape}'
    if want.dtype == object:
      for i, (g, w) in enumerate(zip(got.ravel().tolist(),
                                     want.ravel().tolist())):
        assert_same(g, w, f'{path}.flat[{i}]')
    else:
      np.testing.assert_array_equal(got, want, err_msg=path)
  elif isinstance(want, np.generic):
    assert got.dtype == want.dtype, f'{path}: dtype {got.dtype} != {want.dtype}'
    assert got == want or _both_nan(got, want), f'{path}: {got!r} != {want!r}'
  elif isinstance(want, dict):
    assert list(got.keys()) == list(want.keys()), (
        f'{path}: keys {list(got.keys())} != {list(want.keys())}')
    for k in want:
      assert_same(got[k], want[k], f'{path}[{k!r}]')
  elif isinstance(want, (list, tuple)):
    assert len(got) == len(want), (
        f'{path}: length {len(got)} != {len(want)} (got {got!r}, '
        f'want {want!r})')
    for i, (g, w) in enumerate(zip(got, want)):
      assert_same(g, w, f'{path}[{i}]')
  elif isinstance(want, float):
    assert got == want or _both_nan(got, want), f'{path}: {got!r} != {want!r}'
  else:
    assert got == want, f'{path}: {got!r} != {want!r}'


def _estimator_deprecated(cls):
  """Whether `cls` is exported by tensorflow_estimator (estimator_export) with
  its own constructor wrapped in TF's deprecation decorator, as that export
  does from TF 2.12 to 2.15 (deprecation.deprecated wraps a class's __new__,
  or its __init__ when the class has object's __new__)."""
  from tensorflow.python.util import tf_decorator  # pylint: disable=g-import-not-at-top
  return '_estimator_api_names' in vars(cls) and any(
      d.decorator_name == 'deprecated'
      for name in ('__new__', '__init__') if name in vars(cls)
      for d in tf_decorator.unwrap(vars(cls)[name])[0])


def estimator_deprecations_out_of_the_way():
  """Marks as already printed the deprecation warning ('Use tf.keras
  instead.') that tensorflow_estimator's import (TF 2.12 to 2.15) puts on the
  constructors of the classes of tf.compat.v1.train it exports (the hooks,
  NanLossDuringTrainingError, the SessionRunArgs family), as after their
  first use.

  That warning comes once per process, at the first use after the import. In
  a process that imported it (the suite, once test_estimator is collected),
  the first use is in whichever test and side make one first: the warning
  would be in the compared log lines of that side only. TF's own deprecation
  warnings (QueueRunner's, start_queue_runners', ...) are left as they are,
  and so is everything else logged."""
  from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top
  for value in vars(tf.compat.v1.train).values():
    if isinstance(value, type) and _estimator_deprecated(value):
      deprecation._PRINTED_WARNING[value] = True  # pylint: disable=protected-access


def deprecation_counts_as_printed(function):
  """Marks TF's once-per-process deprecation warning of ``function`` (a
  function TF decorated with ``deprecation.deprecated``) as already printed.

  For a scenario run on both sides in one process, where the warning would
  be in the log lines of whichever side (or earlier test) calls it first."""
  from tensorflow.python.util import deprecation, tf_decorator  # pylint: disable=g-import-not-at-top
  deprecation._PRINTED_WARNING[tf_decorator.unwrap(function)[1]] = True  # pylint: disable=protected-access


# Under .ci/sanitize: the extension built with ASan+UBSan, many times slower,
# and memory figures that are the sanitizers' as much as fastmts's.
SANITIZED = bool(os.environ.get('FASTMTS_SANITIZED'))


# The TF release running (major, minor).
TF_RELEASE = tuple(int(part) for part in tf.__version__.split('.')[:2])

# The expected literals the tests give are TF's results on 2.12 to 2.21, the
# releases the suite was written against. TF 1.15 to 2.11 differ in many
# (1.15 logs the global step after its increment; older error messages, log
# lines and event records), and there fastmts follows the TF it runs on: the
# side-by-side comparison with that TF is the check, and of the literal only
# the kind of outcome (assert_same_kind) is.
LITERALS_HOLD = TF_RELEASE >= (2, 12)


def assert_same_kind(got, want, path='result'):
  """`got` is the kind of outcome the literal `want` is: an exception of the
  same class where `want` is one (a scenario that cannot run on a release
  fails here, not as a vacuous match of two identical errors), and values
  where `want` has values, the same containers, recursively over the items
  both have."""
  if isinstance(want, Raised) or isinstance(got, Raised):
    assert isinstance(got, Raised) and isinstance(want, Raised) and got.type is want.type, (
        f'{path}: {got!r} is not the kind of outcome {want!r} is')
  elif isinstance(want, dict):
    assert isinstance(got, dict), f'{path}: {got!r} is not a dict like {want!r}'
    for k in want.keys() & got.keys():
      assert_same_kind(got[k], want[k], f'{path}[{k!r}]')
  elif isinstance(want, (list, tuple)):
    assert type(got) is type(want), f'{path}: {got!r} is not a {type(want).__name__}'
    for i, (g, w) in enumerate(zip(got, want)):
      assert_same_kind(g, w, f'{path}[{i}]')


def _write_graph_is_deterministic():
  from tensorflow.python.framework import graph_io  # pylint: disable=g-import-not-at-top
  return 'deterministic=True' in inspect.getsource(graph_io.write_graph)


# tf.io.write_graph(as_text=False) and Saver's .meta: deterministic bytes from
# TF 2.4; TF 1.15 to 2.3 write map fields in no set order.
WRITE_GRAPH_IS_DETERMINISTIC = _write_graph_is_deterministic()


def with_contexts_reserialized(meta_graph_def):
  """A copy of `meta_graph_def` whose control-flow contexts (the cond_context
  and while_context collections, each a serialized message) are serialized
  deterministically: TF 1.15 to 2.3 serialize them with their maps in no set
  order, so no two exports of one graph have the same bytes there."""
  from tensorflow.core.protobuf import control_flow_pb2  # pylint: disable=g-import-not-at-top
  copy = type(meta_graph_def).FromString(meta_graph_def.SerializeToString())
  for key, message_class in (('cond_context', control_flow_pb2.CondContextDef),
                             ('while_context', control_flow_pb2.WhileContextDef)):
    if key in copy.collection_def:
      values = copy.collection_def[key].bytes_list.value
      values[:] = [message_class.FromString(v).SerializeToString(deterministic=True)
                   for v in values]
  return copy


def same_meta_graph(data, meta_graph_def):
  """Whether `data`, a .meta file's bytes, is `meta_graph_def` as TF writes
  it: byte for byte from TF 2.4, whose write_graph serializes
  deterministically; before it (TF 1.15 to 2.3 write map fields in no set
  order, nested serialized contexts included) as the same message."""
  if WRITE_GRAPH_IS_DETERMINISTIC:
    return data == meta_graph_def.SerializeToString(deterministic=True)
  return (with_contexts_reserialized(type(meta_graph_def).FromString(data)) ==
          with_contexts_reserialized(meta_graph_def))


def resource_variables():
  """A context in which get_variable makes resource variables, as TF 2 does by
  default: TF 1.15's ref variables are read without a copy, so a read races
  an update in the same run, and two runs' unlocked updates race."""
  return tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), use_resource=True)


def save_graph_def_kwargs(save_graph_def):
  """MonitoredTrainingSession's `save_graph_def` as keyword arguments: none
  for its default, True. TF 1.15 and 2.0 have no such argument (they always
  save the graph), so a test of False is skipped there."""
  if save_graph_def:
    return {}
  if 'save_graph_def' not in inspect.signature(TF_IMPL.MonitoredTrainingSession).parameters:
    pytest.skip('TF %s has no save_graph_def (from 2.1)' % tf.__version__)
  return {'save_graph_def': False}


# An argument a helper leaves out of the call it makes (the callee's default
# applies).
NOT_PASSED = object()


def run_steps_or_tf_loop(impl, sess, fetches, max_steps=NOT_PASSED, feed_dict=NOT_PASSED,
                         positional=False):
  """TF: the Python loop that run_steps stands for; fastmts: ``sess.run_steps``.

  Arguments left NOT_PASSED are not passed to run_steps (its defaults apply);
  `positional` passes max_steps and feed_dict positionally.
  """
  if impl is TF_IMPL:
    max_steps = None if max_steps is NOT_PASSED else max_steps
    feed_dict = None if feed_dict is NOT_PASSED else feed_dict
    result = None
    n = 0
    while not sess.should_stop() and (max_steps is None or n < max_steps):
      result = sess.run(fetches, feed_dict=feed_dict)
      n += 1
    return result
  if positional:
    return sess.run_steps(fetches, None if max_steps is NOT_PASSED else max_steps,
                          None if feed_dict is NOT_PASSED else feed_dict)
  kwargs = {}
  if max_steps is not NOT_PASSED:
    kwargs['max_steps'] = max_steps
  if feed_dict is not NOT_PASSED:
    kwargs['feed_dict'] = feed_dict
  return sess.run_steps(fetches, **kwargs)


def global_step_of(sess):
  """The global step, read on the raw session (no hooks run; allowed after
  should_stop())."""
  gs = tf.compat.v1.train.get_global_step()
  return sess.run_step_fn(lambda step_context: step_context.session.run(gs))


# The monitored session classes monitored_session_of_kind makes.
SESSION_KINDS = ['monitored', 'singular', 'training']


def monitored_session_of_kind(impl, kind, hooks, workdir, **kwargs):
  """impl's MonitoredSession, SingularMonitoredSession or
  MonitoredTrainingSession (`kind`, one of SESSION_KINDS) with `hooks`.

  MonitoredTrainingSession's default StepCounterHook and SummarySaverHook
  run too (every 2 steps, checkpoints in `workdir` as well).
  """
  if kind == 'monitored':
    return impl.MonitoredSession(hooks=hooks, **kwargs)
  if kind == 'singular':
    return impl.SingularMonitoredSession(hooks=hooks, **kwargs)
  assert kind == 'training'
  return impl.MonitoredTrainingSession(
      checkpoint_dir=workdir, hooks=hooks, save_checkpoint_steps=2,
      save_summaries_steps=2, log_step_count_steps=2, **kwargs)


def ckpt_files(directory):
  """Sorted checkpoint-related file names (event files carry host/time)."""
  import os  # pylint: disable=g-import-not-at-top
  return sorted(f for f in os.listdir(directory)
                if f.startswith('model.ckpt') or f in ('checkpoint',
                                                       'graph.pbtxt'))


def recording_hook_class(impl):
  """A SessionRunHook subclass of `impl.SessionRunHook` that logs its calls.

  Args of the returned class:
    name: label used in the log entries.
    log: list the entries are appended to (shared between hooks to observe
      the interleaving).
    request: value returned by before_run, or a callable(run_context)
      returning it.
    on_after_run: optional callable(run_context, run_values) run after logging.
    raise_in: optional dict {method_name: exception instance} raised (once)
      from that method after logging.
  """

  class RecordingHook(impl.SessionRunHook):

    def __init__(self, name, log, request=None, on_after_run=None,
                 raise_in=None):
      self.name = name
      self.log = log
      self.request = request
      self.on_after_run = on_after_run
      self.raise_in = dict(raise_in or {})

    def _maybe_raise(self, method):
      exc = self.raise_in.pop(method, None)
      if exc is not None:
        raise exc

    def begin(self):
      self.log.append((self.name, 'begin'))
      self._maybe_raise('begin')

    def after_create_session(self, session, coord):
      self.log.append((self.name, 'after_create_session',
                       isinstance(session, SessionInterface),
                       session.graph is tf.compat.v1.get_default_graph(),
                       coord.should_stop()))
      self._maybe_raise('after_create_session')

    def before_run(self, run_context):
      args = run_context.original_args
      self.log.append((self.name, 'before_run',
                       isinstance(run_context, impl.SessionRunContext),
                       isinstance(args, impl.SessionRunArgs),
                       norm(args.fetches), norm(args.feed_dict),
                       isinstance(run_context.session, SessionInterface),
                       run_context.stop_requested))
      self._maybe_raise('before_run')
      if callable(self.request):
        return self.request(run_context)
      return self.request

    def after_run(self, run_context, run_values):
      self.log.append((self.name, 'after_run',
                       isinstance(run_values, impl.SessionRunValues),
                       norm(run_values.results),
                       run_context.stop_requested))
      self._maybe_raise('after_run')
      if self.on_after_run is not None:
        self.on_after_run(run_context, run_values)

    def end(self, session):
      self.log.append((self.name, 'end', session is None or
                       isinstance(session, SessionInterface)))
      self._maybe_raise('end')

  return RecordingHook


def child_env():
  """os.environ for a child Python process that must import the same fastmts
  as this one: wherever it was imported from here (the checkout's python/
  directory in development, site-packages once installed) comes first."""
  env = dict(os.environ)
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'
  try:
    import fastmts  # pylint: disable=g-import-not-at-top
  except ImportError:
    return env
  where = os.path.dirname(os.path.dirname(os.path.abspath(fastmts.__file__)))
  env['PYTHONPATH'] = os.pathsep.join(p for p in (where, env.get('PYTHONPATH')) if p)
  return env
