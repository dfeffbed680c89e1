"""Session creation: MonitoredTrainingSession checkpointing and stop hooks,
Scaffold, session creators, SingularMonitoredSession, recovery, and
chief/worker coordination through an in-process gRPC server.

Each scenario takes ``impl`` (tf.compat.v1.train or fastmts) and a scratch
directory and returns observable results; ``check`` runs it against TF and the
implementation under test and compares (see conftest.py).
"""

import abc
import itertools
import os

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import (TF_IMPL, Raised, SessionInterface, ckpt_files, norm,
                          outcome, raised, recording_hook_class, save_graph_def_kwargs,
                          without_stack_trace)

v1 = tf.compat.v1


def _train_graph():
  gs = v1.train.get_or_create_global_step()
  w = v1.get_variable('w', initializer=1.0)
  train = tf.group(v1.assign_add(gs, 1), v1.assign_add(w, 0.5), name='train')
  return gs, w, train


def _stop_hook_module(which, impl):
  return impl if which == 'impl' else TF_IMPL


def _ckpt_names(prefix, steps):
  return sorted('%s-%d.%s' % (prefix, s, ext) for s in steps
                for ext in ('data-00000-of-00001', 'index', 'meta'))


# ---------------------------------------------------------------------------
# MonitoredTrainingSession: checkpoints, resume, StopAtStepHook
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('stop_hook_from', ['impl', 'tf'])
def test_mts_checkpoint_and_resume(check, stop_hook_from):

  def scenario(impl, workdir):
    hooks_mod = _stop_hook_module(stop_hook_from, impl)
    phases = []
    for stop_hook in (hooks_mod.StopAtStepHook(last_step=5),
                      hooks_mod.StopAtStepHook(num_steps=3)):
      with tf.Graph().as_default():
        gs, w, train = _train_graph()
        with impl.MonitoredTrainingSession(
            checkpoint_dir=workdir, save_checkpoint_steps=2,
            hooks=[stop_hook]) as sess:
          start = sess.run([gs, w])
          runs = 0
          while not sess.should_stop():
            sess.run(train)
            runs += 1
      latest = v1.train.latest_checkpoint(workdir)
      phases.append((start, runs, os.path.basename(latest),
                     v1.train.load_variable(workdir, 'global_step'),
                     v1.train.load_variable(workdir, 'w')))
    return phases, ckpt_files(workdir)

  check(scenario, expected=(
      [([np.int64(0), np.float32(1.0)], 5, 'model.ckpt-5', np.int64(5),
        np.float32(3.5)),
       # Resumed from model.ckpt-5; num_steps counts from the restored step.
       ([np.int64(5), np.float32(3.5)], 3, 'model.ckpt-8', np.int64(8),
        np.float32(5.0))],
      # Saver keeps the 5 most recent checkpoints: 0 was deleted.
      ['checkpoint', 'graph.pbtxt'] + _ckpt_names('model.ckpt',
                                                  [2, 4, 5, 7, 8])))


@pytest.mark.parametrize('stop_hook_from', ['impl', 'tf'])
@pytest.mark.parametrize('increment,kwargs,expected_steps', [
    (1, {'last_step': 4}, [1, 2, 3, 4]),
    (2, {'last_step': 5}, [2, 4, 6]),
    (1, {'num_steps': 3}, [1, 2, 3]),
    (3, {'num_steps': 4}, [3, 6]),
])
def test_stop_at_step_hook(check, stop_hook_from, increment, kwargs,
                           expected_steps):

  def scenario(impl, workdir):
    del workdir
    hooks_mod = _stop_hook_module(stop_hook_from, impl)
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      train = v1.assign_add(gs, increment)
      with impl.MonitoredTrainingSession(
          hooks=[hooks_mod.StopAtStepHook(**kwargs)]) as sess:
        steps = []
        while not sess.should_stop():
          steps.append(sess.run(train))
        return steps

  check(scenario, expected=[np.int64(s) for s in expected_steps])


def test_stop_at_step_hook_errors(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      tf.constant(1)
      return [raised(impl.StopAtStepHook),
              raised(impl.StopAtStepHook, num_steps=1, last_step=2),
              raised(impl.MonitoredSession,
                     hooks=[impl.StopAtStepHook(num_steps=1)])]

  check(scenario, expected=[
      Raised(ValueError, 'One of num_steps or last_step must be specified.'),
      Raised(ValueError, 'Only one of num_steps or last_step can be '
             'specified.'),
      Raised(RuntimeError, 'Global step should be created to use '
             'StopAtStepHook.')])


@pytest.mark.parametrize('kwargs_given,expected_files', [
    # Defaults: save_checkpoint_secs=600 -> a checkpoint at creation and end.
    ({}, ['checkpoint', 'graph.pbtxt'] + _ckpt_names('model.ckpt', [0, 3])),
    # No CheckpointSaverHook, so not even graph.pbtxt.
    ({'save_checkpoint_steps': None, 'save_checkpoint_secs': None}, []),
    ({'save_checkpoint_steps': 1, 'save_graph_def': False},
     ['checkpoint'] + sorted(n for n in _ckpt_names('model.ckpt', [0, 1, 2, 3])
                             if not n.endswith('.meta'))),
], ids=['defaults', 'no-checkpoints', 'no-graph-def'])
def test_mts_checkpoint_options(check, kwargs_given, expected_files):
  kwargs = {k: v for k, v in kwargs_given.items() if k != 'save_graph_def'}
  kwargs.update(save_graph_def_kwargs(kwargs_given.get('save_graph_def', True)))

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = _train_graph()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir,
                                         **kwargs) as sess:
        for _ in range(3):
          sess.run(train)
    return ckpt_files(workdir)

  check(scenario, expected=expected_files)


def test_mts_chief_only_hooks(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    hook = recording_hook_class(impl)
    results = []
    for is_chief in (True, False):
      # No variables, so a non-chief on the local target is ready at once.
      with tf.Graph().as_default():
        x = tf.constant(3, name='x')
        with impl.MonitoredTrainingSession(
            is_chief=is_chief, hooks=[hook('user', log)],
            chief_only_hooks=[hook('chief', log)]) as sess:
          results.append(sess.run(x))
      log.append(('-', 'closed'))
    return results, [e[:2] for e in log]

  session = lambda names: (
      [(n, 'begin') for n in names] +
      [(n, 'after_create_session') for n in names] +
      [(n, 'before_run') for n in names] + [(n, 'after_run') for n in names] +
      [(n, 'end') for n in names] + [('-', 'closed')])
  check(scenario, expected=(
      [np.int32(3), np.int32(3)],
      # chief-only hooks come first; ignored when is_chief=False.
      session(['chief', 'user']) + session(['user'])))


# ---------------------------------------------------------------------------
# Scaffold
# ---------------------------------------------------------------------------


def _scaffold_graph():
  gs = v1.train.get_or_create_global_step()
  pinit = v1.placeholder(tf.float32, shape=(), name='pinit')
  v = v1.get_variable('v', initializer=0.0)
  w = v1.get_variable('w', initializer=0.0)
  lv = v1.get_variable('lv', initializer=0.0,
                       collections=[v1.GraphKeys.LOCAL_VARIABLES])
  init_op = tf.group(v1.assign(v, pinit), v1.assign(w, 1.0),
                     v1.variables_initializer([gs]), name='my_init')
  local_init_op = tf.group(v1.assign(lv, 9.0), name='my_local_init')
  set_w = v1.assign(w, 2.0)
  # Advance the global step too, or the saver hook skips the final save.
  inc = tf.group(v1.assign_add(v, 1.0), v1.assign_add(gs, 1))
  return pinit, v, w, lv, init_op, local_init_op, set_w, inc


@pytest.mark.parametrize('scaffold_from', ['impl', 'tf'])
def test_scaffold_init_fn_feed_dict_and_local_init(check, scaffold_from):

  def scenario(impl, workdir):
    scaffold_cls = (impl.Scaffold if scaffold_from == 'impl' else
                    v1.train.Scaffold)
    phases = []
    for _ in range(2):  # the second pass restores from the checkpoint
      calls = []
      with tf.Graph().as_default():
        pinit, v, w, lv, init_op, local_init_op, set_w, inc = (
            _scaffold_graph())

        def init_fn(scaffold, session):
          calls.append((scaffold is sc, isinstance(session, SessionInterface),
                        session.run([v, w])))
          session.run(set_w)

        sc = scaffold_cls(init_op=init_op, init_feed_dict={pinit: 3.5},
                          init_fn=init_fn, local_init_op=local_init_op)
        # Default checkpointing saves at creation and at close.
        with impl.MonitoredTrainingSession(checkpoint_dir=workdir,
                                           scaffold=sc) as sess:
          values = sess.run([v, w, lv])
          sess.run(inc)
        phases.append((values, calls, sc.init_op is init_op,
                       sc.local_init_op is local_init_op,
                       sc.init_feed_dict == {pinit: 3.5}))
    return phases

  check(scenario, expected=[
      ([np.float32(3.5), np.float32(2.0), np.float32(9.0)],
       [(True, True, [np.float32(3.5), np.float32(1.0)])], True, True, True),
      # Restored: init_op and init_fn are skipped, local_init_op still runs.
      ([np.float32(4.5), np.float32(2.0), np.float32(9.0)], [], True, True,
       True)])


@pytest.mark.parametrize('scaffold_from', ['impl', 'tf'])
def test_scaffold_defaults(check, scaffold_from):

  def scenario(impl, workdir):
    del workdir
    scaffold_cls = (impl.Scaffold if scaffold_from == 'impl' else
                    v1.train.Scaffold)
    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=1)
      sc = scaffold_cls()
      before = (sc.init_op, sc.ready_op, sc.local_init_op, sc.saver,
                sc.init_fn, sc.init_feed_dict, sc.summary_op)
      with impl.MonitoredSession(
          session_creator=impl.ChiefSessionCreator(scaffold=sc)) as sess:
        value = sess.run(v)
      keys = [v1.GraphKeys.INIT_OP, v1.GraphKeys.READY_OP,
              v1.GraphKeys.READY_FOR_LOCAL_INIT_OP,
              v1.GraphKeys.LOCAL_INIT_OP, v1.GraphKeys.SUMMARY_OP]
      return (before, value, norm([sc.init_op, sc.ready_op,
                                   sc.ready_for_local_init_op,
                                   sc.local_init_op, sc.summary_op]),
              isinstance(sc.saver, v1.train.Saver),
              v1.get_collection(v1.GraphKeys.SAVERS) == [sc.saver],
              [norm(v1.get_collection(k)) for k in keys])

  ops = [('Operation', 'group_deps'), ('Tensor', 'concat:0'),
         ('Tensor', 'concat_1:0'), ('Operation', 'group_deps_1')]
  check(scenario, expected=(
      (None,) * 7, np.int32(1), ops + [None], True, True,
      [[ops[0]], [ops[1]], [ops[2]], [ops[3]], []]))


def test_scaffold_errors(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      tf.constant(1)
      for name in ('i1', 'i2'):
        v1.add_to_collection(v1.GraphKeys.INIT_OP, tf.no_op(name=name))
      return (raised(impl.Scaffold, copy_from_scaffold=object()),
              raised(impl.MonitoredSession))

  check(scenario, expected=(
      Raised(TypeError, 'copy_from_scaffold is not a Scaffold instance.'),
      # TF passes logging-style args to RuntimeError, so str() is a tuple.
      Raised(RuntimeError, str((
          'More than one item in the collection "%s". Please indicate which '
          'one to use by passing it to the tf.Scaffold constructor as:  '
          'tf.Scaffold(%s=item to use)', 'init_op', 'init_op')))))


def test_scaffold_copy_from_scaffold(check):

  def scenario(impl, workdir):
    del workdir
    calls = []
    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=1.0)
      init_fn = lambda scaffold, session: calls.append(scaffold)
      base = impl.Scaffold(init_fn=init_fn,
                           local_init_op=tf.group(v1.assign(v, 5.0)))
      copy = impl.Scaffold(copy_from_scaffold=base)
      with impl.MonitoredSession(
          session_creator=impl.ChiefSessionCreator(scaffold=copy)) as sess:
        value = sess.run(v)
    # init_fn is re-bound: it receives the copy, not the original.
    return value, [c is copy for c in calls], copy.local_init_op is (
        base.local_init_op)

  check(scenario, expected=(np.float32(5.0), [True], True))


def test_an_op_the_scaffold_makes_names_the_users_line_in_its_error(check):
  """A restore whose checkpoint lacks a variable fails in the Scaffold's
  Saver, an op TF's code made. TF's message names where that op was
  "defined at" (1.15 to 2.4 inline, later in the stack trace it appends): the
  user's line, skipping TF's own frames, and fastmts's frames too, so the
  message is stock's whichever implementation the user called."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _train_graph()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir):  # saves step 0
        pass
    with tf.Graph().as_default():
      _train_graph()
      v1.get_variable('not_in_the_checkpoint', initializer=2.0)
      failure = without_stack_trace(raised(impl.MonitoredTrainingSession,
                                           checkpoint_dir=workdir, save_checkpoint_steps=None))
    return failure._replace(message=failure.message.replace(workdir, 'DIR'))

  failure = check(scenario)
  assert issubclass(failure.type, tf.errors.NotFoundError), failure
  assert 'not_in_the_checkpoint' in failure.message, failure


# ---------------------------------------------------------------------------
# Session creators, MonitoredSession, SingularMonitoredSession
# ---------------------------------------------------------------------------


def _save_two_checkpoints(workdir):
  """Writes model-2 (v=2) and model-4 (v=4) with a plain Saver."""
  with tf.Graph().as_default():
    v = v1.get_variable('v', initializer=0)
    assign = v1.placeholder(tf.int32, shape=())
    op = v1.assign(v, assign)
    saver = v1.train.Saver()
    with v1.Session() as sess:
      paths = []
      for step in (2, 4):
        sess.run(op, feed_dict={assign: step})
        paths.append(saver.save(sess, os.path.join(workdir, 'model'),
                                global_step=step))
  return paths


@pytest.mark.parametrize('which', ['MonitoredSession',
                                   'SingularMonitoredSession'])
def test_restore_from_checkpoint_filename(check, which):

  def scenario(impl, workdir):
    older, _ = _save_two_checkpoints(workdir)
    results = []
    for kwargs in ({'checkpoint_filename_with_path': older},
                   {'checkpoint_dir': workdir}):
      with tf.Graph().as_default():
        v = v1.get_variable('v', initializer=0)
        if which == 'MonitoredSession':
          sess = impl.MonitoredSession(
              session_creator=impl.ChiefSessionCreator(**kwargs))
        else:
          sess = impl.SingularMonitoredSession(**kwargs)
        with sess:
          results.append(sess.run(v))
    return results

  check(scenario, expected=[np.int32(2), np.int32(4)])


def test_checkpoint_creator_errors(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      v1.get_variable('v', initializer=0)
      both = raised(impl.MonitoredSession,
                    session_creator=impl.ChiefSessionCreator(
                        checkpoint_dir=workdir,
                        checkpoint_filename_with_path=os.path.join(
                            workdir, 'model-1')))
    with tf.Graph().as_default():
      v1.get_variable('v', initializer=0)
      missing = raised(impl.SingularMonitoredSession,
                       checkpoint_filename_with_path=os.path.join(
                           workdir, 'missing'))
    return both, Raised(missing.type,
                        missing.message.replace(workdir, '<dir>'))

  check(scenario, expected=(
      Raised(ValueError, 'Can not provide both checkpoint_dir and '
             'checkpoint_filename_with_path.'),
      Raised(ValueError, "The passed save_path is not a valid checkpoint: "
             "<dir>/missing")))


def test_singular_monitored_session_raw_session(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default() as g:
      v = v1.get_variable('v', initializer=1)
      inc = v1.assign_add(v, 1)
      sess = impl.SingularMonitoredSession(
          hooks=[recording_hook_class(impl)('h', log)])
      raw = sess.raw_session()
      del log[:]
      hooked = sess.run(inc)
      unhooked = raw.run(inc)
      result = (isinstance(raw, v1.Session), raw.graph is g,
                raw is sess.raw_session(), hooked, unhooked,
                [e[1] for e in log])
      sess.close()
      closed = raw._closed  # pylint: disable=protected-access
      return result, sess.raw_session(), closed

  check(scenario, expected=(
      (True, True, True, np.int32(2), np.int32(3),
       ['before_run', 'after_run']),
      None, True))


def test_default_session_creator(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=[1, 2])
      lv = v1.get_variable('lv', initializer=7,
                           collections=[v1.GraphKeys.LOCAL_VARIABLES])
      with impl.MonitoredSession(session_creator=None) as sess:
        return sess.run([v, lv])

  check(scenario, expected=[np.array([1, 2], np.int32), np.int32(7)])


@pytest.mark.parametrize('creator_from', ['impl', 'tf'])
def test_custom_session_creator(check, creator_from):

  def scenario(impl, workdir):
    del workdir
    base = impl.SessionCreator if creator_from == 'impl' else (
        v1.train.SessionCreator)
    made = []
    log = []

    class Creator(base):

      def create_session(self):
        sess = v1.Session(graph=v1.get_default_graph())
        sess.run(v1.global_variables_initializer())
        sess.run(v1.assign(v, 11))
        made.append(sess)
        return sess

    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=1)
      seen = []

      class Hook(impl.SessionRunHook):

        def after_create_session(self, session, coord):
          seen.append(session is made[-1])

      with impl.MonitoredSession(session_creator=Creator(),
                                 hooks=[Hook(), recording_hook_class(impl)(
                                     'h', log)]) as sess:
        value = sess.run(v)
        # Only Scaffold.finalize() finalizes; a custom creator does not.
        finalized = v1.get_default_graph().finalized
    return (value, seen, made[0]._closed,  # pylint: disable=protected-access
            [e[1] for e in log], finalized)

  check(scenario, expected=(
      np.int32(11), [True], True,
      ['begin', 'after_create_session', 'before_run', 'after_run', 'end'],
      False))


def _abstract_class_error():
  """What Python says instantiating an abstract SessionCreator: its own
  wording, which changed in 3.12 ("... without an implementation for
  abstract method 'create_session'")."""

  class SessionCreator(abc.ABC):  # pylint: disable=redefined-outer-name

    @abc.abstractmethod
    def create_session(self):
      pass

  return raised(SessionCreator)


def test_session_creator_is_abstract(check):

  def scenario(impl, workdir):
    del workdir
    return raised(impl.SessionCreator)

  expected = _abstract_class_error()
  assert expected.type is TypeError and 'SessionCreator' in expected.message
  check(scenario, expected=expected)


@pytest.mark.parametrize('error', ['AbortedError', 'UnavailableError'])
def test_monitored_session_recovers_from_preemption(check, error):

  def scenario(impl, workdir):
    del workdir
    results = []
    for cls in (impl.MonitoredSession, impl.SingularMonitoredSession):
      log = []
      with tf.Graph().as_default():
        v = v1.get_variable('v', initializer=1)
        inc = v1.assign_add(v, 1)
        exc = getattr(tf.errors, error)(None, None, 'preempted')
        hook = recording_hook_class(impl)('h', log)
        with cls(hooks=[hook]) as sess:
          first = sess.run(inc)
          hook.raise_in['before_run'] = exc
          second = outcome(sess.run, inc)
          third = sess.run(inc)
      results.append((first, second, third, [e[1] for e in log]))
    return results

  exc_type = getattr(tf.errors, error)
  check(scenario, expected=[
      # MonitoredSession: closes, re-creates (re-initializing v) and retries.
      (np.int32(2), np.int32(2), np.int32(3),
       ['begin', 'after_create_session', 'before_run', 'after_run',
        'before_run', 'after_create_session', 'before_run', 'after_run',
        'before_run', 'after_run', 'end']),
      # SingularMonitoredSession: the error propagates.
      (np.int32(2), Raised(exc_type, 'preempted'), np.int32(3),
       ['begin', 'after_create_session', 'before_run', 'after_run',
        'before_run', 'before_run', 'after_run', 'end'])])


# ---------------------------------------------------------------------------
# Chief / worker through an in-process gRPC server
# ---------------------------------------------------------------------------

_unique = itertools.count()


def _shared_vars(prefix):
  with v1.variable_scope(prefix):
    v = v1.get_variable('v', initializer=42.0)
    step = v1.get_variable('step', initializer=0)
  return v, v1.assign_add(v, 1.0), v1.assign_add(step, 1)


def test_worker_sees_chief_initialized_variables(check, local_server):
  target = local_server.target

  def scenario(impl, workdir):
    del workdir
    prefix = 'job%d' % next(_unique)  # variables outlive sessions on a server
    log = []
    hook = recording_hook_class(impl)
    chief_graph, worker_graph = tf.Graph(), tf.Graph()
    with chief_graph.as_default():
      v, inc, _ = _shared_vars(prefix)
      chief = impl.MonitoredTrainingSession(master=target, is_chief=True)
      chief_first = chief.run(inc)
    with worker_graph.as_default():
      wv, winc, _ = _shared_vars(prefix)
      worker = impl.MonitoredTrainingSession(
          master=target, is_chief=False, max_wait_secs=5,
          hooks=[hook('user', log)], chief_only_hooks=[hook('chief', log)])
      worker_seen = worker.run(wv)
      worker.run(winc)
      worker.close()
    with chief_graph.as_default():
      chief_seen = chief.run(v)
      chief.close()
    return chief_first, worker_seen, chief_seen, sorted(set(e[0] for e in log))

  check(scenario, expected=(np.float32(43.0), np.float32(43.0),
                            np.float32(44.0), ['user']))


@pytest.mark.parametrize('how', ['mts', 'worker-creator'])
def test_worker_without_chief_times_out(check, local_server, how):
  target = local_server.target

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default() as g:
      _shared_vars('job%d' % next(_unique))
      hooks = [recording_hook_class(impl)('h', log)]
      if how == 'mts':
        err = raised(impl.MonitoredTrainingSession, master=target,
                     is_chief=False, max_wait_secs=1, hooks=hooks)
      else:
        err = raised(impl.MonitoredSession,
                     session_creator=impl.WorkerSessionCreator(
                         master=target, max_wait_secs=0), hooks=hooks)
      return err, g.finalized, [e[1] for e in log]

  check(scenario, expected=(
      Raised(tf.errors.DeadlineExceededError, 'Session was not ready after '
             'waiting %d secs.' % (1 if how == 'mts' else 0)),
      True, ['begin']))


def test_worker_on_local_target_with_uninitialized_variables(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      v1.get_variable('v', initializer=1)
      return raised(impl.MonitoredTrainingSession, is_chief=False,
                    max_wait_secs=1)

  check(scenario, expected=Raised(tf.errors.DeadlineExceededError,
                                  'Session was not ready after waiting 1 '
                                  'secs.'))
