"""Session-like objects that are not plain Sessions, and isinstance against TF.

A session creator may return a wrapper (TF's debugger sessions, a user's
class, a Session subclass with its own `run`); stock MonitoredSession runs
every step through the object's `run`, so fastmts must too (it runs such a
session in Python, python_hooked_session). The other way round, TF's
debugger wraps a monitored session after checking `isinstance` against TF's
classes, and fastmts's sessions and Coordinator must pass those checks.
Each scenario runs against stock TF and fastmts and compares.
"""

import contextlib
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python import debug as tf_debug
from tensorflow.python.client import session as session_lib
from tensorflow.python.training import coordinator as tf_coordinator
from tensorflow.python.training import monitored_session as tf_monitored_session

from compat_utils import Raised, ckpt_files, outcome, recording_hook_class, run_steps_or_tf_loop
from hook_test_utils import read_first_graph

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(180)

_STAMP = re.compile(r'_\d{10,}')
_RUN_DIR = re.compile(r'run_\d+_(\d+)$')
_SESSION_RUN = re.compile(r'sessionrun\d+')
_GRAPH_HASH = re.compile(r'graph_hash\d+')


def dumps(root):
  """What DumpingDebugWrapperSession wrote under `root`: one sorted list of
  file paths per run directory, in run order, with the timestamps, run
  counters and graph hashes in the names (which differ between runs and
  processes) dropped."""
  if not os.path.isdir(root):
    return []
  runs = sorted((int(_RUN_DIR.match(d).group(1)), d) for d in os.listdir(root)
                if _RUN_DIR.match(d))
  out = []
  for _, run_dir in runs:
    files = []
    for dirpath, _, names in os.walk(os.path.join(root, run_dir)):
      for name in names:
        rel = os.path.relpath(os.path.join(dirpath, name), os.path.join(root, run_dir))
        files.append(_GRAPH_HASH.sub('graph_hash', _SESSION_RUN.sub('sessionrun', _STAMP.sub('', rel))))
    out.append(sorted(files))
  return out


def _train_graph():
  """(value, train): value = half the step before the run's increment; the
  increment waits for it and for the global-step read the stock hooks
  fetch, so their reads never race it (see read_first_graph)."""
  _, loss, train = read_first_graph()
  return loss, train


class _RecordingWrapper(session_lib.SessionInterface):
  """A user's session wrapper: delegates to the raw session and records
  what it was asked to run; raises `fail_at` (run number -> exception)
  once, for recovery."""

  def __init__(self, sess, log, fail_at=None):
    self._sess = sess
    self._log = log
    self._fail_at = dict(fail_at or {})
    self._runs = 0

  @property
  def graph(self):
    return self._sess.graph

  @property
  def sess_str(self):
    return self._sess.sess_str

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    self._runs += 1
    self._log.append(('wrapper.run', self._runs, sorted(
        k if isinstance(k, str) else type(k).__name__ for k in fetches)
                      if isinstance(fetches, dict) else type(fetches).__name__,
                      options is not None, run_metadata is not None))
    error = self._fail_at.pop(self._runs, None)
    if error is not None:
      raise error
    return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                          run_metadata=run_metadata)

  def make_callable(self, fetches, feed_list=None, accept_options=False):
    """As TF's debugger wrappers: a callable running `fetches` through run
    (TF's queue-runner threads run their enqueue ops so)."""
    del feed_list, accept_options
    return lambda: self.run(fetches)

  def close(self):
    self._log.append(('wrapper.close',))
    self._sess.close()


class _Creator(v1.train.SessionCreator):
  """Wraps what ChiefSessionCreator makes; counts creations."""

  def __init__(self, wrap, log):
    self._wrap = wrap
    self._log = log

  def create_session(self):
    self._log.append(('create_session',))
    return self._wrap(v1.train.ChiefSessionCreator().create_session())


def test_creator_returning_a_debug_dumping_session(check):
  """Hooks, stop and checkpoints through TF's DumpingDebugWrapperSession:
  every run the monitored session makes goes through the wrapper (dumped),
  as with stock TF."""

  def scenario(impl, workdir):
    log = []
    dump_root = os.path.join(workdir, 'dumps')
    with tf.Graph().as_default():
      value, train = _train_graph()
      hooks = [recording_hook_class(impl)('rec', log, request=impl.SessionRunArgs(value)),
               v1.train.StopAtStepHook(last_step=3),
               v1.train.CheckpointSaverHook(workdir, save_steps=2)]
      creator = _Creator(lambda s: tf_debug.DumpingDebugWrapperSession(s, dump_root), log)
      results = []
      with impl.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        while not sess.should_stop():
          results.append(sess.run([train, value]))
        stopped = sess.should_stop()
    return results, stopped, log, dumps(dump_root), ckpt_files(workdir)

  results, stopped, _, dumped, _ = check(scenario)
  assert [r[0] for r in results] == [1, 2, 3] and stopped
  assert len(dumped) >= 4  # the StopAtStepHook read and three steps at least


def test_creator_returning_a_user_wrapper_with_run_steps(check):
  """A user's SessionInterface wrapper: hooks around its run, run_steps
  (the `run` loop under TF), stop at the last step."""

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      value, train = _train_graph()
      hooks = [recording_hook_class(impl)('rec', log, request=impl.SessionRunArgs({'v': value})),
               v1.train.StopAtStepHook(num_steps=4)]
      creator = _Creator(lambda s: _RecordingWrapper(s, log), log)
      with impl.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        last = run_steps_or_tf_loop(impl, sess, train, max_steps=10)
        after = outcome(sess.run, train)
        stopped = sess.should_stop()
    return last, after, stopped, log

  last, after, stopped, _ = check(scenario)
  assert last == 4 and stopped
  assert after == Raised(RuntimeError, 'Run called even after should_stop requested.')


def test_wrapped_session_recovers_from_preemption(check):
  """The wrapper raises AbortedError at its third run: the session is
  re-created through the creator and training goes on, as in TF."""

  def scenario(impl, workdir):
    log = []
    with tf.Graph().as_default():
      value, train = _train_graph()
      hooks = [recording_hook_class(impl)('rec', log),
               v1.train.CheckpointSaverHook(workdir, save_steps=1)]
      made = []

      def wrap(sess):
        fail = {3: tf.errors.AbortedError(None, None, 'preempted')} if not made else {}
        made.append(1)
        return _RecordingWrapper(sess, log, fail_at=fail)

      creator = _Creator(wrap, log)
      results = []
      with impl.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        for _ in range(5):
          results.append(sess.run(train))
    return results, log, ckpt_files(workdir)

  results, log, _ = check(scenario)
  assert log.count(('create_session',)) == 2
  assert results[-1] == max(results)


def test_session_subclass_with_its_own_run(check):
  """A tf.compat.v1.Session subclass overriding run: its run is called for
  every step, so fastmts runs it as a wrapped session."""

  def scenario(impl, workdir):
    del workdir
    log = []

    class LoggingSession(v1.Session):

      def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        log.append(('LoggingSession.run', isinstance(fetches, dict)))
        return super().run(fetches, feed_dict=feed_dict, options=options,
                           run_metadata=run_metadata)

    class Creator(v1.train.SessionCreator):

      def create_session(self):
        sess = LoggingSession()
        sess.run(v1.global_variables_initializer())
        return sess

    class StopAfterTwo(impl.SessionRunHook):

      def __init__(self):
        self.runs = 0

      def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs == 2:
          run_context.request_stop()

    with tf.Graph().as_default():
      value, train = _train_graph()
      with impl.MonitoredSession(session_creator=Creator(), hooks=[StopAfterTwo()]) as sess:
        results = []
        while not sess.should_stop():
          results.append(sess.run([train, value]))
    return results, log

  # The initializer's run, then the two steps (the hooks' merged fetches).
  check(scenario, expected=(
      [[np.int64(1), np.float32(0.0)], [np.int64(2), np.float32(0.5)]],
      [('LoggingSession.run', False), ('LoggingSession.run', True),
       ('LoggingSession.run', True)]))


def test_wrapped_session_runs_queue_runners(check):
  """A queue-fed graph behind a wrapper: TF's queue-runner threads fill the
  queue through the wrapped session, under the monitored session's
  Coordinator, and stop at close."""

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      v1.train.get_or_create_global_step()
      queue = v1.FIFOQueue(10, tf.int32, shapes=[])
      # A resource variable, as TF 2 makes by default: TF 1.15's ref variable
      # is read by the enqueue after later increments, so its values race.
      counter = v1.Variable(0, name='counter', use_resource=True)
      enqueue = queue.enqueue(v1.assign_add(counter, 1))
      v1.train.add_queue_runner(v1.train.QueueRunner(queue, [enqueue]))
      dequeue = queue.dequeue()
      creator = _Creator(lambda s: _RecordingWrapper(s, []), log)
      with impl.MonitoredSession(session_creator=creator) as sess:
        values = [int(sess.run(dequeue)) for _ in range(3)]
    return values, log

  check(scenario, expected=([1, 2, 3], [('create_session',)]))


# ---------------------------------------------------------------------------
# isinstance against TF's classes, and TF's debugger around a fastmts session
# ---------------------------------------------------------------------------


def test_sessions_and_coordinator_are_instances_of_tfs_classes(fastmts):
  with tf.Graph().as_default():
    v1.train.get_or_create_global_step()
    with fastmts.MonitoredSession() as sess:
      assert isinstance(sess, tf_monitored_session.MonitoredSession)
      assert isinstance(sess, tf_monitored_session._MonitoredSession)  # pylint: disable=protected-access
      assert isinstance(sess.coordinator, tf_coordinator.Coordinator)
      assert isinstance(sess.coordinator, v1.train.Coordinator)
    with fastmts.SingularMonitoredSession() as sess:
      assert isinstance(sess, tf_monitored_session.SingularMonitoredSession)
      assert not isinstance(sess, tf_monitored_session.MonitoredSession)  # as in TF
    with fastmts.MonitoredTrainingSession() as sess:
      assert isinstance(sess, tf_monitored_session.MonitoredSession)
  assert isinstance(fastmts.Coordinator(), tf_coordinator.Coordinator)


@pytest.mark.parametrize('fastmts_class, tf_classes', [
    ('MonitoredSession', ('MonitoredSession', '_MonitoredSession')),
    ('SingularMonitoredSession', ('SingularMonitoredSession', '_MonitoredSession')),
])
def test_no_tf_session_code_runs_on_a_fastmts_session(fastmts, fastmts_class, tf_classes):
  """fastmts's classes subclass TF's only for isinstance: every attribute
  TF's classes define resolves to fastmts's own definition."""
  cls = getattr(fastmts, fastmts_class)
  own = [c for c in cls.__mro__ if c.__module__.startswith('fastmts')]
  for tf_class in tf_classes:
    for name in vars(getattr(tf_monitored_session, tf_class)):
      if name in ('__dict__', '__weakref__', '__module__', '__doc__', '_tf_api_names',
                  '_tf_api_names_v1'):
        continue
      assert any(name in vars(c) for c in own), f'{fastmts_class}.{name} is TF\'s'


def test_no_tf_coordinator_code_runs_on_fastmts_coordinator(fastmts):
  own = [c for c in fastmts.Coordinator.__mro__ if c.__module__.startswith('fastmts')]
  for name in vars(tf_coordinator.Coordinator):
    if name in ('__dict__', '__weakref__', '__module__', '__doc__', '_tf_api_names',
                '_tf_api_names_v1'):
      continue
    assert any(name in vars(c) for c in own), f'Coordinator.{name} is TF\'s'


@contextlib.contextmanager
def _patched(impl):
  """fastmts.patch() for the block when impl is fastmts (tf.compat.v1.train
  is then fastmts's, as a user of patch() has it); nothing for stock TF."""
  if impl is v1.train:
    yield
    return
  impl.patch()
  try:
    yield
  finally:
    impl.unpatch()


def test_dumping_debug_wrapper_around_a_patched_session(check):
  """TF's DumpingDebugWrapperSession around a MonitoredSession built from
  tf.compat.v1.train under patch(): accepted, runs the hooks, dumps each
  run as with stock TF."""

  def scenario(impl, workdir):
    dump_root = os.path.join(workdir, 'dumps')
    with _patched(impl), tf.Graph().as_default():
      value, train = _train_graph()
      mon = v1.train.MonitoredSession(hooks=[v1.train.StopAtStepHook(last_step=3)])
      assert (type(mon).__module__.startswith('fastmts')) == (impl is not v1.train)
      sess = tf_debug.DumpingDebugWrapperSession(mon, dump_root)
      results = []
      while not sess.should_stop():
        results.append(sess.run([train, value]))
      sess.close()
    return results, dumps(dump_root)

  results, dumped = check(scenario)
  assert [r[0] for r in results] == [1, 2, 3]
  assert len(dumped) == 3


def test_local_cli_debug_wrapper_accepts_a_patched_session(check):
  """LocalCLIDebugWrapperSession checks the session's type when built (its
  CLI only opens at a run): around a patched session it builds, and it
  reaches the monitored session's graph and stop."""

  def scenario(impl, workdir):
    with _patched(impl), tf.Graph().as_default():
      _train_graph()
      with v1.train.MonitoredSession() as mon:
        wrapped = outcome(tf_debug.LocalCLIDebugWrapperSession, mon,
                          dump_root=os.path.join(workdir, 'cli'), ui_type='readline')
        return (type(wrapped).__name__, wrapped.graph is tf.compat.v1.get_default_graph(),
                wrapped.should_stop())

  check(scenario, expected=('LocalCLIDebugWrapperSession', True, False))
