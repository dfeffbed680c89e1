"""Asynchronous checkpoints (fastmts's async_checkpoint=True), side by side
with stock TF's synchronous ones.

Each side-by-side scenario runs on TF with TF's own synchronous saves and on
fastmts with asynchronous ones, and compares what a user can observe once the
session is closed: the checkpoint files (names), the `checkpoint` state file,
every checkpoint's contents as stock TF reads them, stock `Saver.restore` into
a fresh graph, and the checkpoint log lines. .meta bytes are compared with an
export of the same graph in the same process (as test_meta_graph_once does).
"""
import os
import re
import subprocess
import sys
import threading
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import (TF_IMPL, child_env, raised, same_meta_graph, save_graph_def_kwargs,
                          without_random_file_names, without_stack_trace)
from hook_test_utils import tf_log

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(180)


def _async_kwargs(impl):
  return {} if impl is TF_IMPL else {'async_checkpoint': True}


# ---------------------------------------------------------------------------
# Graphs whose saved values depend only on the step
# ---------------------------------------------------------------------------


def _counting(w_updates):
  """A global step incremented after `w_updates` (ops) ran."""
  gs = v1.train.get_or_create_global_step()
  with tf.control_dependencies(w_updates):
    return v1.assign_add(gs, 1)


def _graph_plain():
  w = v1.get_variable('w', [16, 16], initializer=v1.zeros_initializer())
  return _counting([v1.assign_add(w, tf.ones_like(w))])


def _graph_summaries():
  w = v1.get_variable('w', [8], initializer=v1.zeros_initializer())
  v1.summary.scalar('w0', w[0])
  v1.summary.histogram('w', w)
  return _counting([v1.assign_add(w, tf.ones_like(w))])


def _graph_collections():
  w = v1.get_variable('w', [8], initializer=v1.ones_initializer())
  v1.add_to_collection('custom', w)
  v1.add_to_collection('custom_strings', tf.constant('x', name='tag'))
  return _counting([v1.assign_add(w, 2 * tf.ones_like(w))])


def _graph_ref_variables():
  w = v1.get_variable('w', [8, 8], initializer=v1.zeros_initializer(), use_resource=False)
  b = v1.get_variable('b', [8], initializer=v1.ones_initializer(), use_resource=False)
  return _counting([v1.assign_add(w, tf.ones_like(w)), v1.assign_sub(b, tf.ones_like(b))])


def _graph_partitioned():
  p = v1.get_variable('p', [8, 4], initializer=v1.ones_initializer(),
                      partitioner=v1.fixed_size_partitioner(2))
  return _counting([v1.assign_add(part, tf.ones_like(part)) for part in p])


def _graph_optimizers():
  x = v1.get_variable('x', [4], initializer=v1.constant_initializer([1.0, -2.0, 3.0, 0.5]))
  y = v1.get_variable('y', [6, 2], initializer=v1.ones_initializer())
  loss = tf.reduce_sum(x * x) + tf.reduce_sum(tf.gather(y, [0, 2, 2]) ** 2)
  gs = v1.train.get_or_create_global_step()
  adam = v1.train.AdamOptimizer(0.1).minimize(loss, var_list=[x])
  sgd = v1.train.GradientDescentOptimizer(0.05).minimize(loss, var_list=[y])  # sparse update
  with tf.control_dependencies([adam, sgd]):
    return v1.assign_add(gs, 1)


def _graph_queue():
  q = tf.queue.FIFOQueue(4, [tf.float32], shapes=[[]])
  v1.train.add_queue_runner(v1.train.QueueRunner(q, [q.enqueue(tf.constant(1.0))]))
  w = v1.get_variable('w', [], initializer=v1.zeros_initializer())
  return _counting([v1.assign_add(w, q.dequeue())])


def _graph_two_devices():
  with tf.device('/cpu:0'):
    a = v1.get_variable('a', [8], initializer=v1.zeros_initializer())
  with tf.device('/cpu:1'):
    b = v1.get_variable('b', [8], initializer=v1.ones_initializer())
  return _counting([v1.assign_add(a, tf.ones_like(a)), v1.assign_add(b, tf.ones_like(b))])


_GRAPHS = {
    'plain': _graph_plain, 'summaries': _graph_summaries, 'collections': _graph_collections,
    'ref_variables': _graph_ref_variables, 'partitioned': _graph_partitioned,
    'optimizers': _graph_optimizers, 'queue_runner': _graph_queue,
    'two_devices': _graph_two_devices,
}


# ---------------------------------------------------------------------------
# What a user observes of a checkpoint directory
# ---------------------------------------------------------------------------


def _checkpoint_files(workdir):
  return sorted(n for n in os.listdir(workdir) if n.startswith('model.ckpt') or
                n in ('checkpoint', 'graph.pbtxt'))


def _state(workdir):
  with open(os.path.join(workdir, 'checkpoint')) as f:
    return f.read().replace(workdir, 'DIR')


def _contents(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name).tolist()
          for name, _ in sorted(tf.train.list_variables(prefix))}


def _restored_by_stock_saver(build, prefix, config=None):
  """Stock TF's Saver.restore of `prefix` into a fresh graph: every
  variable's value (the graph built as by the run)."""
  with tf.Graph().as_default():
    build()
    saver = v1.train.Saver()
    with v1.Session(config=config) as sess:
      saver.restore(sess, prefix)
      return {v.op.name: sess.run(v).tolist() for v in v1.global_variables()}


def _observed(build, workdir, config=None):
  latest = tf.train.latest_checkpoint(workdir)
  state = tf.train.get_checkpoint_state(workdir)
  return {
      'files': _checkpoint_files(workdir),
      'state': _state(workdir),
      'latest': os.path.basename(latest),
      'contents': {os.path.basename(p): _contents(p)
                   for p in state.all_model_checkpoint_paths},
      'restored': _restored_by_stock_saver(build, latest, config),
  }


def _steps(observed):
  return sorted(int(name.rsplit('-', 1)[1]) for name in observed['contents'])


def _metas_are_exports(graph, workdir):
  saver = graph.get_collection(v1.GraphKeys.SAVERS)[0]
  with graph.as_default():
    expected = saver.export_meta_graph()
  metas = [n for n in os.listdir(workdir) if n.endswith('.meta')]
  same = []
  for name in metas:
    with open(os.path.join(workdir, name), 'rb') as f:
      same.append(same_meta_graph(f.read(), expected))
  return bool(metas) and all(same)


_CKPT_LINE = re.compile(r'checkpoint|Saving checkpoints|CheckpointSaver')


def _checkpoint_log(lines):
  """The checkpoint log lines, in a stable order: asynchronous saves log
  'after saving' when their write ended, later than TF's."""
  return sorted(m for _, m in lines if _CKPT_LINE.search(m))


# ---------------------------------------------------------------------------
# The same files and contents as stock TF's synchronous saves
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('graph_name', sorted(_GRAPHS))
def test_same_checkpoints_as_synchronous_saves(check, graph_name):
  build = _GRAPHS[graph_name]
  config = v1.ConfigProto(device_count={'CPU': 2}) if graph_name == 'two_devices' else None

  def scenario(impl, workdir):
    with tf.Graph().as_default() as graph:
      train = build()
      with tf_log(workdir) as lines:
        with impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=3,
                                           save_summaries_steps=2, log_step_count_steps=None,
                                           config=config, **_async_kwargs(impl)) as sess:
          for _ in range(10):
            sess.run(train)
      metas_ok = _metas_are_exports(graph, workdir)
    return dict(_observed(build, workdir, config), metas_are_exports=metas_ok,
                log=_checkpoint_log(lines))

  result = check(scenario)
  assert result['latest'] == 'model.ckpt-10'
  assert _steps(result) == [0, 3, 6, 9, 10]
  assert result['metas_are_exports']
  if graph_name == 'two_devices':  # one shard per device
    assert 'model.ckpt-10.data-00001-of-00003' in result['files']


def test_save_graph_def_false_and_max_to_keep(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph_plain()
      scaffold = impl.Scaffold(saver=v1.train.Saver(max_to_keep=2, sharded=True))
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, scaffold=scaffold,
                                         save_checkpoint_steps=2, save_summaries_steps=None,
                                         **save_graph_def_kwargs(False), **_async_kwargs(impl)) as sess:
        for _ in range(9):
          sess.run(train)
    return _observed(_graph_plain, workdir)

  result = check(scenario)
  assert _steps(result) == [8, 9]
  assert not any(n.endswith('.meta') or n == 'graph.pbtxt' for n in result['files'])


class _SaverSubclass(v1.train.Saver):
  """A user's Saver: it may override save, so it saves synchronously."""


@pytest.mark.parametrize('saver', ['subclass', 'v1_format'])
def test_savers_it_cannot_snapshot_save_synchronously(check, saver):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph_plain()
      if saver == 'subclass':
        made = _SaverSubclass(sharded=True)
      else:
        made = v1.train.Saver(write_version=v1.train.SaverDef.V1)
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, scaffold=impl.Scaffold(saver=made),
                                         save_checkpoint_steps=2, save_summaries_steps=None,
                                         log_step_count_steps=None, **_async_kwargs(impl)) as sess:
        for _ in range(5):
          sess.run(train)
          # Synchronous: each checkpoint is complete when its step returns.
          step = int(sess.run(v1.train.get_global_step()))
          assert tf.train.latest_checkpoint(workdir).endswith('-%d' % (step - step % 2))
    return _observed(_graph_plain, workdir)

  result = check(scenario)
  assert _steps(result) == [0, 2, 4, 5]


def test_save_checkpoint_secs_under_a_patched_clock(check):
  """save_checkpoint_secs: TF's timer on a clock the test moves 0.4 s a step."""

  def scenario(impl, workdir):
    now = [1000.0]
    with tf.Graph().as_default():
      train = _graph_plain()
      with mock.patch.object(time, 'time', lambda: now[0]):
        with impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_secs=1,
                                           save_summaries_steps=None, log_step_count_steps=None,
                                           **_async_kwargs(impl)) as sess:
          for _ in range(10):
            now[0] += 0.4
            sess.run(train)
    return _observed(_graph_plain, workdir)

  result = check(scenario)
  assert _steps(result) == [0, 3, 6, 9, 10]


def test_on_a_grpc_session(fastmts, local_server, tmp_path):
  """master= a gRPC server (the distributed runtime's session): the same
  checkpoints as TF's synchronous saves there. Variables live in the
  server's containers and outlive sessions, so each run names its own."""
  observed = {}
  for name, impl, kwargs in (('tf', TF_IMPL, {}), ('fastmts', fastmts, {'async_checkpoint': True})):
    workdir = str(tmp_path / name)
    with tf.Graph().as_default():
      with v1.variable_scope('grpc_' + name):
        train = _graph_plain()
      with impl.MonitoredTrainingSession(master=local_server.target, checkpoint_dir=workdir,
                                         save_checkpoint_steps=2, save_summaries_steps=None,
                                         log_step_count_steps=None, **kwargs) as sess:
        for _ in range(5):
          sess.run(train)
    state = tf.train.get_checkpoint_state(workdir)
    observed[name] = (_checkpoint_files(workdir), _state(workdir), [
        {key.split('/', 1)[-1]: value for key, value in _contents(p).items()}
        for p in state.all_model_checkpoint_paths])
  assert observed['fastmts'] == observed['tf']
  assert len(observed['tf'][2]) == 4  # steps 0, 2, 4, 5


def test_stock_monitored_session_runs_fastmts_async_hook(fastmts, tmp_path):
  """fastmts.CheckpointSaverHook(async_checkpoint=True) in TF's own
  MonitoredSession (its Python hook dispatch): the same checkpoints as
  TF's hook in TF's session."""
  observed = {}
  for name, hook_class, kwargs in (
      ('tf', v1.train.CheckpointSaverHook, {}),
      ('fastmts', fastmts.CheckpointSaverHook, {'async_checkpoint': True})):
    workdir = str(tmp_path / name)
    with tf.Graph().as_default():
      train = _graph_plain()
      hook = hook_class(workdir, save_steps=4, **kwargs)
      with v1.train.MonitoredSession(
          session_creator=v1.train.ChiefSessionCreator(checkpoint_dir=workdir),
          hooks=[hook]) as sess:
        for _ in range(9):
          sess.run(train)
    observed[name] = _observed(_graph_plain, workdir)
  assert observed['fastmts'] == observed['tf']
  assert _steps(observed['tf']) == [0, 4, 8, 9]


# ---------------------------------------------------------------------------
# The snapshot is the values of the save's step, however training goes on
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('use_resource', [True, False], ids=['resource', 'ref'])
def test_snapshot_is_the_save_steps_values_while_steps_run(fastmts, tmp_path, use_resource):
  """A 32 MB variable set to the step at every step, saved every 3 steps:
  each checkpoint holds exactly its step's values, though later steps
  overwrote the variable while the write was in flight (checked: at least
  one step started while a write was in flight)."""
  n = 8 * 2 ** 20
  for attempt in range(4):
    workdir = str(tmp_path / str(attempt))
    overlapped = 0
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      big = v1.get_variable('big', [n], initializer=v1.zeros_initializer(),
                            use_resource=use_resource)
      new = v1.assign_add(gs, 1)
      with tf.control_dependencies([new]):
        fill = v1.assign(big, tf.fill([n], tf.cast(new, tf.float32)))
      train = tf.group(new, fill)
      hook = fastmts.CheckpointSaverHook(workdir, save_steps=3, async_checkpoint=True)
      saver_of = fastmts._internal.checkpoint_saver.saver_of  # pylint: disable=protected-access
      with fastmts.MonitoredSession(
          session_creator=fastmts.ChiefSessionCreator(checkpoint_dir=workdir),
          hooks=[hook]) as sess:
        for _ in range(12):
          sess.run(train)
          overlapped += saver_of(hook).writer.in_flight
    state = tf.train.get_checkpoint_state(workdir)
    steps = []
    for prefix in state.all_model_checkpoint_paths:
      step = int(prefix.rsplit('-', 1)[1])
      values = tf.train.load_checkpoint(prefix).get_tensor('big')
      assert float(values.min()) == float(values.max()) == float(step), prefix
      steps.append(step)
    assert steps == [0, 3, 6, 9, 12]
    if overlapped:
      return
  pytest.fail('no step ever ran while a write was in flight')


# ---------------------------------------------------------------------------
# Listeners
# ---------------------------------------------------------------------------


class _Listener(v1.train.CheckpointSaverListener):
  """Records each call with whether that step's checkpoint was complete
  and named by the state file at that moment."""

  def __init__(self, workdir, log, stop_after_save_at=None):
    self.workdir, self.log, self.stop_at = workdir, log, stop_after_save_at

  def _complete(self, step):
    latest = tf.train.latest_checkpoint(self.workdir)
    return latest is not None and latest.endswith('-%d' % step)

  def begin(self):
    self.log.append(('begin',))

  def before_save(self, session, global_step_value):
    self.log.append(('before_save', int(global_step_value), self._complete(global_step_value)))

  def after_save(self, session, global_step_value):
    self.log.append(('after_save', int(global_step_value), self._complete(global_step_value)))
    return self.stop_at is not None and global_step_value >= self.stop_at

  def end(self, session, global_step_value):
    self.log.append(('end', int(global_step_value), self._complete(global_step_value)))


def _run_with_listener(impl, workdir, steps, then_raise=None):
  """`steps` steps of a MonitoredSession with a CheckpointSaverHook (every 3
  steps) and a _Listener; `then_raise` raised in the `with` block after
  them. Returns the listener's log."""
  log = []
  with tf.Graph().as_default():
    train = _graph_plain()
    hook = impl.CheckpointSaverHook(workdir, save_steps=3, listeners=[_Listener(workdir, log)],
                                    **_async_kwargs(impl))
    try:
      with impl.MonitoredSession(
          session_creator=impl.ChiefSessionCreator(checkpoint_dir=workdir),
          hooks=[hook]) as sess:
        for _ in range(steps):
          sess.run(train)
        if then_raise is not None:
          raise then_raise
    except KeyError:
      pass
  return log


def test_listeners_see_complete_files_at_after_save(check):

  def scenario(impl, workdir):
    return _run_with_listener(impl, workdir, 7), _observed(_graph_plain, workdir)

  log, _ = check(scenario)
  assert log == [('begin',), ('before_save', 0, False), ('after_save', 0, True),
                 ('before_save', 3, False), ('after_save', 3, True),
                 ('before_save', 6, False), ('after_save', 6, True),
                 ('before_save', 7, False), ('after_save', 7, True), ('end', 7, True)]


def test_close_by_an_exception_still_delivers_after_save(check):
  """A `with` block ending by an exception skips end() (no final save), but
  a write in flight is waited for and its listeners get after_save."""

  def scenario(impl, workdir):
    log = _run_with_listener(impl, workdir, 3, then_raise=KeyError('user code failed'))
    return log, _observed(_graph_plain, workdir)

  log, result = check(scenario)
  assert log[-2:] == [('before_save', 3, False), ('after_save', 3, True)]
  assert result['latest'] == 'model.ckpt-3'


def test_listener_stop_request_stops_training(fastmts, tmp_path):
  """after_save returning True stops training: in TF after the save's step;
  asynchronously after the step at which after_save runs (the first step
  after the write ended), so a few steps later at most."""
  log = []
  workdir = str(tmp_path)
  with tf.Graph().as_default():
    train = _graph_plain()
    hook = fastmts.CheckpointSaverHook(
        workdir, save_steps=2, listeners=[_Listener(workdir, log, stop_after_save_at=4)],
        async_checkpoint=True)
    with fastmts.MonitoredSession(
        session_creator=fastmts.ChiefSessionCreator(checkpoint_dir=workdir),
        hooks=[hook]) as sess:
      steps = 0
      while not sess.should_stop() and steps < 200:
        sess.run(train)
        steps += 1
  assert 4 < steps < 200
  assert ('after_save', 4, True) in log
  assert log[-1][0] == 'end'


# ---------------------------------------------------------------------------
# Errors: a write that fails is raised, never lost
# ---------------------------------------------------------------------------


def _immutable(path, on):
  """Makes a directory read-only even for root (chattr +i), or writable again."""
  if os.geteuid() != 0:
    os.chmod(path, 0o500 if on else 0o700)
    return True
  return subprocess.run(['chattr', '+i' if on else '-i', path],
                        capture_output=True).returncode == 0


def _wait_for_latest(workdir, step, timeout=30):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    latest = tf.train.latest_checkpoint(workdir)
    if latest is not None and latest.endswith('-%d' % step):
      return
    time.sleep(0.005)
  raise AssertionError('no checkpoint of step %d within %s s' % (step, timeout))


def test_write_error_is_raised_at_a_later_run(fastmts, tmp_path):
  """The checkpoint directory made read-only after the first saves: TF's
  synchronous save raises from the run of the saving step; the asynchronous
  write's error is raised by a later run (the first after it failed, or the
  next save's), with TF's exception type and message."""

  def scenario(impl, workdir):
    outcome = None
    with tf.Graph().as_default():
      train = _graph_plain()
      sess = impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=2,
                                           save_summaries_steps=None, log_step_count_steps=None,
                                           **_async_kwargs(impl))
      try:
        for _ in range(3):
          sess.run(train)
        _wait_for_latest(workdir, 2)  # an asynchronous write of step 2 may still run
        if not _immutable(workdir, True):
          pytest.skip('cannot make a directory read-only here')
        try:
          for step in range(4, 20):
            sess.run(train)
        except Exception as e:  # pylint: disable=broad-except
          outcome = (type(e), without_random_file_names(
              without_stack_trace_message(e).replace(workdir, 'DIR')), step)
      finally:
        _immutable(workdir, False)
        sess._close_internal(RuntimeError)  # pylint: disable=protected-access
    return outcome, _state(workdir)

  os.makedirs(tmp_path / 'tf')
  os.makedirs(tmp_path / 'fastmts')
  (tf_type, tf_message, tf_step), tf_state = scenario(TF_IMPL, str(tmp_path / 'tf'))
  (our_type, our_message, our_step), our_state = scenario(fastmts, str(tmp_path / 'fastmts'))
  assert issubclass(tf_type, tf.errors.OpError) and tf_step == 4, (tf_type, tf_message)
  assert (our_type, our_message, our_state) == (tf_type, tf_message, tf_state)
  assert 4 < our_step <= 6
  assert 'model.ckpt-2"' in tf_state and 'model.ckpt-4' not in tf_state


def without_stack_trace_message(error):
  record = without_stack_trace(raised(_raise, error))
  return record.message


def _raise(error):
  raise error


def test_snapshot_error_is_raised_as_tfs_save_error(check):
  """The Saver saves a variable nothing initializes: TF's first save (at
  session creation) fails reading it; the snapshot's run fails the same
  way, with the same exception type and message."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph_plain()
      orphan = v1.get_variable('orphan', [2], collections=[])  # in no collection: never initialized
      saver = v1.train.Saver(var_list=[orphan, v1.train.get_global_step()], sharded=True)
      error = without_stack_trace(raised(
          impl.MonitoredTrainingSession, checkpoint_dir=workdir,
          scaffold=impl.Scaffold(saver=saver), save_checkpoint_steps=2,
          save_summaries_steps=None, log_step_count_steps=None, **_async_kwargs(impl)))
      del train
    return error.type, error.message.replace(workdir, 'DIR')

  error_type, message = check(scenario)
  assert error_type is tf.errors.FailedPreconditionError and 'orphan' in message, message


def test_close_by_an_exception_logs_a_failed_write(fastmts, tmp_path):
  """A write fails while the `with` block ends by the user's exception: the
  close waits for it and logs its error (the user's exception is the one
  raised), and the session closes."""
  workdir = str(tmp_path)
  with tf.Graph().as_default():
    train = _graph_plain()
    hook = fastmts.CheckpointSaverHook(workdir, save_steps=3, async_checkpoint=True)
    with tf_log(workdir, with_exc_info=True) as lines:
      try:
        with fastmts.MonitoredSession(
            session_creator=fastmts.ChiefSessionCreator(checkpoint_dir=workdir),
            hooks=[hook]) as sess:
          sess.run(train)
          _wait_for_latest(workdir, 0)
          if not _immutable(workdir, True):
            pytest.skip('cannot make a directory read-only here')
          for _ in range(2):
            sess.run(train)  # the second one saves step 3: its write fails
          raise KeyError('user code failed')
      except KeyError:
        pass
      finally:
        _immutable(workdir, False)
    assert sess._is_closed()  # pylint: disable=protected-access
  assert ('ERROR', 'An asynchronous checkpoint write failed while its session was being closed.',
          True) in lines
  assert tf.train.latest_checkpoint(workdir).endswith('-0')


def test_failed_final_write_is_raised_by_close(check):
  """The directory replaced by a file before close: the final save fails;
  TF raises from close (ValueError: the parent directory is not a
  directory), and so does fastmts once its write failed."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph_plain()
      sess = impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=100,
                                           save_summaries_steps=None, log_step_count_steps=None,
                                           **_async_kwargs(impl))
      sess.run(train)
      # The asynchronous write of step 0 may still run; its .meta and
      # `checkpoint` files, written after the rename, would make the
      # directory anew.
      _wait_for_latest(workdir, 0)
      os.rename(workdir, workdir + '.moved')
      with open(workdir, 'w') as f:
        f.write('not a directory')
      error = without_stack_trace(raised(sess.close))
      closed = sess._is_closed()  # pylint: disable=protected-access
    return (error.type, error.message.replace(workdir, 'DIR')), closed

  (error_type, message), closed = check(scenario)
  assert error_type is ValueError and "doesn't exist, can't save" in message
  assert closed


# ---------------------------------------------------------------------------
# Close, recovery, threads
# ---------------------------------------------------------------------------


def test_close_waits_for_the_write_and_leaves_no_thread(fastmts, tmp_path):
  workdir = str(tmp_path)
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    big = v1.get_variable('big', [4 * 2 ** 20], initializer=v1.ones_initializer())
    train = tf.group(v1.assign_add(big, tf.ones_like(big)), v1.assign_add(gs, 1))
    with fastmts.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=1,
                                          save_summaries_steps=None, log_step_count_steps=None,
                                          async_checkpoint=True) as sess:
      for _ in range(3):
        sess.run(train)
    assert fastmts._native.live_native_threads() == 0  # pylint: disable=protected-access
  assert os.path.basename(tf.train.latest_checkpoint(workdir)) == 'model.ckpt-3'


class _PreemptOnce(v1.train.SessionRunHook):
  """Raises AbortedError from the after_run of the `at_run`-th run, once:
  as a preempted parameter server makes the chief's run fail. (Counted in
  runs: a read of the global step in the same run races its increment.)"""

  def __init__(self, at_run):
    self.at_run, self.runs, self.sessions = at_run, 0, 0

  def after_create_session(self, session, coord):
    self.sessions += 1

  def after_run(self, run_context, run_values):
    self.runs += 1
    if self.runs == self.at_run:
      raise tf.errors.AbortedError(None, None, 'preempted')


def test_recovery_after_preemption_while_a_write_is_in_flight(check):
  """A save at step 4, the next run preempted (the write is likely still in
  flight): the session is re-created and restores the checkpoint of step 4,
  as after TF's synchronous save, and the run is retried."""

  def scenario(impl, workdir):
    seen = []
    preempt = _PreemptOnce(5)
    with tf.Graph().as_default():
      train = _graph_plain()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=4,
                                         save_summaries_steps=None, log_step_count_steps=None,
                                         hooks=[preempt], **_async_kwargs(impl)) as sess:
        for _ in range(8):
          seen.append(int(sess.run(train)))
    return seen, preempt.sessions, _observed(_graph_plain, workdir)

  seen, sessions, result = check(scenario)
  assert seen == [1, 2, 3, 4, 5, 6, 7, 8] and sessions == 2
  assert result['contents']['model.ckpt-4']['w'][0][0] == 4.0
