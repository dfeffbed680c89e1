"""Preemption (fastmts.PreemptionHook, MonitoredTrainingSession(preemption=...)),
in this process: real sessions, real signals sent to this process.

The signal is sent from inside a step: a py_func after the training update
kills this process with SIGTERM at global step K, in the middle of the
TF_SessionRun. The step must finish, no step may follow it, and the
checkpoint at the stop must be of step K exactly, whatever drives the steps
(`run`, the native `run_steps` loop without the GIL, Python hooks).

Every test runs under a handler of its own for SIGTERM (`user_handler`),
standing for the user's: pytest never meets the signal's default action,
and the tests check that fastmts calls it and puts it back.
Processes and clusters: test_preemption_processes.py.
"""
import os
import signal
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

import compat_utils
import preemption_utils

fastmts = pytest.importorskip('fastmts')

K = 7  # the step during which the signal arrives


@pytest.fixture
def user_handler():
  """The user's own SIGTERM handler: records each call and whether the
  session had closed by then."""
  calls = []
  state = {'closed': None}

  def handler(signum, frame):
    del frame
    calls.append((signum, state['closed']() if state['closed'] else None))

  handler.calls = calls
  handler.state = state
  previous = signal.signal(signal.SIGTERM, handler)
  try:
    yield handler
  finally:
    signal.signal(signal.SIGTERM, previous)


def _kill_at(step_tensor, at_step, signum=signal.SIGTERM):
  """An op that, run after the update, sends `signum` to this process when
  the step that just ran is `at_step` (from a TF thread, inside the run)."""

  def maybe_kill(step):
    if int(step) == at_step:
      os.kill(os.getpid(), signum)
    return step

  return tf.compat.v1.py_func(maybe_kill, [step_tensor], tf.int64, stateful=True)


def _model(at_step=K, queue=False):
  """w += 1 and the global step += 1 per step (so w == step in any
  consistent checkpoint); the train op signals at `at_step`."""
  gs = tf.compat.v1.train.get_or_create_global_step()
  w = tf.compat.v1.get_variable('w', [4], initializer=tf.compat.v1.zeros_initializer())
  increment = tf.ones([4])
  if queue:
    q = tf.queue.FIFOQueue(8, [tf.float32], shapes=[[4]])
    enqueue = q.enqueue([tf.ones([4])])
    tf.compat.v1.train.add_queue_runner(tf.compat.v1.train.QueueRunner(q, [enqueue] * 2))
    increment = q.dequeue()
  with tf.control_dependencies([w.assign_add(increment)]):
    step = gs.assign_add(1)
  return _kill_at(step, at_step)


class _PythonHook(tf.compat.v1.train.SessionRunHook):
  """A user's hook: the steps run through the Python hook dispatch."""

  def __init__(self):
    self.after_runs = 0

  def after_run(self, run_context, run_values):
    self.after_runs += 1


def _train(sess, train_op, drive):
  steps = 0
  if drive == 'run_steps':
    sess.run_steps(train_op)
    return None
  while not sess.should_stop():
    sess.run(train_op)
    steps += 1
  return steps


@pytest.mark.timeout(60)
@pytest.mark.parametrize('drive', ['run', 'run_steps'])
@pytest.mark.parametrize('python_hook', [False, True], ids=['native_hooks', 'python_hook'])
def test_stops_after_the_signalled_step_and_checkpoints_it(tmp_path, user_handler, drive,
                                                           python_hook):
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model()
    hooks = [_PythonHook()] if python_hook else []
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=hooks,
                                          preemption=True) as sess:
      assert signal.getsignal(signal.SIGTERM) is not user_handler  # fastmts watches
      steps = _train(sess, train_op, drive)
      assert sess.should_stop()
      steps_run = sess._hooked.steps_run  # pylint: disable=protected-access
  assert steps_run == K  # the step in flight finished; none followed
  assert steps in (None, K)
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)
  p = sess.preemption
  assert (p.signal, p.signals_received, p.step, p.exit_code) == (signal.SIGTERM, 1, K, 143)
  assert p.checkpoint_path == os.path.join(ckpt, 'model.ckpt-%d' % K)
  assert 0 <= p.seconds_to_checkpoint <= p.seconds_to_close
  assert user_handler.calls == [(signal.SIGTERM, None)]  # the user's handler ran at once
  assert signal.getsignal(signal.SIGTERM) is user_handler  # and is back
  if python_hook:
    assert hooks[0].after_runs == K


@pytest.mark.timeout(60)
def test_tf_monitored_session_with_the_hook_stops_and_saves_as_fastmts(tmp_path, user_handler):
  """The hook alone works with TF's own MonitoredSession too (through its
  coordinator and end()): both give the same checkpoint files and values."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train_op = _model()
      hook = fastmts.PreemptionHook(workdir)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        steps = _train(sess, train_op, 'run')
      return (steps, preemption_utils.latest_checkpoint(workdir), sorted(os.listdir(workdir)),
              hook.preemption.step, signal.getsignal(signal.SIGTERM) is user_handler)

  tf_result = scenario(tf.compat.v1.train, str(tmp_path / 'tf'))
  fastmts_result = scenario(fastmts, str(tmp_path / 'fastmts'))
  assert tf_result == fastmts_result
  assert tf_result[:2] == (K, preemption_utils.consistent(K))


@pytest.mark.timeout(60)
def test_a_hook_a_fastmts_session_let_go_serves_tf_monitored_session_next(tmp_path,
                                                                         user_handler):
  """A fastmts session adopts the hook's policy until its close: the same
  hook then serves TF's own MonitoredSession, stopping it through its
  coordinator, saving in end() and putting the handlers back."""
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model()
    hook = fastmts.PreemptionHook(ckpt)
    with fastmts.MonitoredSession(hooks=[hook]) as sess:
      sess.run(train_op)
    assert hook.preemption is None and sess.preemption is None
    assert signal.getsignal(signal.SIGTERM) is user_handler
    with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as tf_sess:
      steps = _train(tf_sess, train_op, 'run')  # initialized again: the signal at step K
  assert steps == K
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)
  assert (hook.preemption.step, hook.preemption.signals_received) == (K, 1)
  assert user_handler.calls == [(signal.SIGTERM, None)]
  assert signal.getsignal(signal.SIGTERM) is user_handler


@pytest.mark.timeout(60)
@pytest.mark.parametrize('impl', ['tf', 'fastmts'])
def test_without_opting_in_the_signal_disposition_is_untouched(tmp_path, impl):
  """Off by default, as TF: the session installs no handler (a SIGTERM would
  end the process as it does under TF, which test_preemption_processes.py
  shows)."""
  module = tf.compat.v1.train if impl == 'tf' else fastmts
  before = signal.getsignal(signal.SIGTERM)
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()
    with module.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
      assert signal.getsignal(signal.SIGTERM) is before
      if impl == 'fastmts':
        assert sess.preemption is None


class _Listener(tf.compat.v1.train.CheckpointSaverListener):
  """Calls `action(step)` before each save and records the saves."""

  def __init__(self, action=None):
    self.action = action
    self.saves = []

  def before_save(self, session, global_step_value):
    self.saves.append(int(global_step_value))
    if self.action:
      self.action(int(global_step_value))


@pytest.mark.timeout(60)
def test_a_second_signal_during_the_save_is_counted_and_reaches_the_user_after_close(
    tmp_path, user_handler):
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model()
    listener = _Listener(
        lambda step: os.kill(os.getpid(), signal.SIGTERM) if step == K else None)
    saver_hook = tf.compat.v1.train.CheckpointSaverHook(ckpt, save_steps=1000,
                                                        listeners=[listener])
    sess = fastmts.MonitoredSession(
        session_creator=fastmts.ChiefSessionCreator(checkpoint_dir=ckpt),
        hooks=[saver_hook, fastmts.PreemptionHook(ckpt)])
    user_handler.state['closed'] = sess._is_closed  # pylint: disable=protected-access
    with sess:
      steps = _train(sess, train_op, 'run')
  assert steps == K
  assert listener.saves == [0, K]  # at creation, then the preemption's save at close
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)
  assert sess.preemption.signals_received == 2
  # The first signal reached the user's handler at once, the second (which
  # came during the save) once the session had closed.
  assert user_handler.calls == [(signal.SIGTERM, False), (signal.SIGTERM, True)]


@pytest.mark.timeout(60)
def test_signal_during_a_periodic_save(tmp_path, user_handler):
  """The save in flight completes and is the preemption's checkpoint: the
  step is not saved twice."""
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model(at_step=-1)
    listener = _Listener(
        lambda step: os.kill(os.getpid(), signal.SIGTERM) if step == 4 else None)
    hooks = [tf.compat.v1.train.CheckpointSaverHook(ckpt, save_steps=2, listeners=[listener]),
             fastmts.PreemptionHook(ckpt)]
    with fastmts.MonitoredSession(
        session_creator=fastmts.ChiefSessionCreator(checkpoint_dir=ckpt), hooks=hooks) as sess:
      steps = _train(sess, train_op, 'run')
  assert steps == 4
  assert listener.saves == [0, 2, 4]
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(4)
  assert sess.preemption.step == 4


@pytest.mark.timeout(90)
@pytest.mark.parametrize('drive', ['run', 'run_steps'])
def test_signal_while_an_asynchronous_save_is_in_flight(tmp_path, user_handler, drive):
  """Saves every step are written by the native writer: at the signal one is
  in flight; the stop waits for it and every checkpoint listed is whole."""
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model()
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, save_checkpoint_steps=1,
                                          save_summaries_steps=None, async_checkpoint=True,
                                          preemption=True) as sess:
      _train(sess, train_op, drive)
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)
  state = tf.train.get_checkpoint_state(ckpt)
  for path in state.all_model_checkpoint_paths:
    step = int(path.rsplit('-', 1)[1])
    reader = tf.compat.v1.train.NewCheckpointReader(path)
    assert reader.get_tensor('w').tolist() == [float(step)] * 4


@pytest.mark.timeout(60)
@pytest.mark.parametrize('drive', ['run', 'run_steps'])
def test_signal_with_queue_runners_running(tmp_path, user_handler, drive):
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model(queue=True)
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, preemption=True) as sess:
      threads = sess.queue_runner_threads
      assert threads
      _train(sess, train_op, drive)
  assert not any(t.is_alive() for t in threads)
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)


@pytest.mark.timeout(60)
def test_signal_while_the_session_is_created(tmp_path, user_handler):
  """The creation completes (it is bounded), then no step runs: the
  checkpoint is of the step the session started at."""
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model()
    scaffold = tf.compat.v1.train.Scaffold(
        init_fn=lambda scaffold, session: os.kill(os.getpid(), signal.SIGTERM))
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, scaffold=scaffold,
                                          preemption=True) as sess:
      steps = _train(sess, train_op, 'run')
  assert steps == 0
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(0)
  assert sess.preemption.step == 0


class _SignalAtEnd(tf.compat.v1.train.SessionRunHook):

  def end(self, session):
    os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.timeout(60)
def test_signal_during_close_after_a_normal_stop(tmp_path, user_handler):
  """Training had stopped (StopAtStepHook); the signal comes in the hooks'
  end(): the close finishes, and the last step's checkpoint is reported."""
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model(at_step=-1)
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=5), _SignalAtEnd()]
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=hooks,
                                          preemption=True) as sess:
      steps = _train(sess, train_op, 'run')
  assert steps == 5
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(5)
  assert (sess.preemption.step, sess.preemption.signals_received) == (5, 1)
  assert 0 <= sess.preemption.seconds_to_checkpoint <= sess.preemption.seconds_to_close
  assert signal.getsignal(signal.SIGTERM) is user_handler


@pytest.mark.timeout(60)
def test_run_after_the_stop_raises_preempted_and_the_step_is_still_saved(tmp_path, user_handler):
  """A loop that ignores should_stop() does not train on: the next run
  raises Preempted (TF's RuntimeError for a run after stop), the `with`
  block still saves the last step, and Preempted propagates."""
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model()
    with pytest.raises(fastmts.Preempted) as raised:
      with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, preemption=True) as sess:
        for _ in range(100):
          sess.run(train_op)
  assert isinstance(raised.value, RuntimeError)
  assert str(raised.value) == ('Run called even after should_stop requested: training '
                               'stopped on SIGTERM.')
  assert raised.value.preemption is sess.preemption
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)


@pytest.mark.timeout(60)
def test_a_user_handler_that_exits_still_gets_the_checkpoint(tmp_path):
  ckpt = str(tmp_path)

  def exit_now(signum, frame):
    raise SystemExit(3)

  previous = signal.signal(signal.SIGTERM, exit_now)
  try:
    with tf.Graph().as_default():
      train_op = _model()
      with pytest.raises(SystemExit):
        with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, preemption=True) as sess:
          _train(sess, train_op, 'run_steps')
    assert signal.getsignal(signal.SIGTERM) is exit_now
  finally:
    signal.signal(signal.SIGTERM, previous)
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)


@pytest.mark.timeout(60)
def test_resume_restores_the_preemption_checkpoint(tmp_path, user_handler):
  ckpt = str(tmp_path)
  with tf.Graph().as_default():
    train_op = _model()
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, preemption=True) as sess:
      _train(sess, train_op, 'run_steps')
  with tf.Graph().as_default():
    train_op = _model(at_step=-1)
    gs = tf.compat.v1.train.get_global_step()
    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=K + 3)]
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=hooks,
                                          preemption=True) as sess:
      first = int(sess.run(gs))
      steps = _train(sess, train_op, 'run')
    assert sess.preemption is None
  assert (first, steps) == (K, 3)
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K + 3)


@pytest.mark.timeout(60)
def test_other_signals_and_the_grace_period_cap_the_close(tmp_path):
  """A policy's own signal (SIGUSR1 here); the coordinator's join at close
  waits no longer than the grace period left (TF's would wait 120 s for a
  thread that ignores the stop)."""
  ckpt = str(tmp_path)
  stuck = threading.Event()
  policy = fastmts.PreemptionPolicy(signals=[signal.SIGUSR1], grace_period_secs=1.0)
  with tf.Graph().as_default():
    gs = tf.compat.v1.train.get_or_create_global_step()
    w = tf.compat.v1.get_variable('w', [4], initializer=tf.compat.v1.zeros_initializer())
    with tf.control_dependencies([w.assign_add(tf.ones([4]))]):
      train_op = _kill_at(gs.assign_add(1), K, signal.SIGUSR1)
    with fastmts.MonitoredTrainingSession(checkpoint_dir=ckpt, preemption=policy) as sess:
      straggler = threading.Thread(target=stuck.wait, args=(30,), daemon=True)
      sess.coordinator.register_thread(straggler)
      straggler.start()
      _train(sess, train_op, 'run')
      t0 = time.monotonic()
    closed_in = time.monotonic() - t0
  stuck.set()
  assert preemption_utils.latest_checkpoint(ckpt) == preemption_utils.consistent(K)
  assert sess.preemption.signal == signal.SIGUSR1
  assert closed_in < 5.0  # bounded by the 1 s grace period, not 120 s
  assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(signals=()), ValueError, 'signals must name at least one signal'),
    (dict(signals=['SIGTERM']), TypeError, "signals must be signal numbers, got 'SIGTERM'"),
    (dict(signals=[signal.SIGKILL]), ValueError, 'SIGKILL cannot be watched for preemption'),
    (dict(grace_period_secs=0), ValueError, 'grace_period_secs must be > 0, got 0'),
    (dict(grace_period_secs='30'), TypeError, "grace_period_secs must be a number, got '30'"),
])
def test_policy_rejects_bad_input(kwargs, error, message):
  with pytest.raises(error) as raised:
    fastmts.PreemptionPolicy(**kwargs)
  assert str(raised.value) == message


def test_policy_defaults_and_the_session_argument():
  policy = fastmts.PreemptionPolicy()
  assert (policy.signals, policy.grace_period_secs) == ((signal.SIGTERM,), 25.0)
  assert repr(policy) == 'PreemptionPolicy(signals=(signal.SIGTERM), grace_period_secs=25.0)'
  with tf.Graph().as_default():
    with pytest.raises(TypeError) as raised:
      fastmts.MonitoredTrainingSession(preemption='yes')
  assert str(raised.value) == ("preemption must be a bool, None or a fastmts.PreemptionPolicy, "
                               "got 'yes'")


@pytest.mark.timeout(60)
def test_outside_the_main_thread_the_hook_refuses_and_leaves_handlers_alone(tmp_path):
  before = signal.getsignal(signal.SIGTERM)
  raised = []

  def create():
    with tf.Graph().as_default():
      tf.compat.v1.train.get_or_create_global_step()
      raised.append(compat_utils.outcome(
          fastmts.MonitoredTrainingSession, checkpoint_dir=str(tmp_path), preemption=True))

  t = threading.Thread(target=create)
  t.start()
  t.join(30)
  assert raised == [compat_utils.Raised(
      ValueError, 'fastmts.PreemptionHook watches signals, which Python lets only the main '
      'thread do: create the monitored session in the main thread')]
  assert signal.getsignal(signal.SIGTERM) is before


def test_values_after_preemption_are_numbers(tmp_path, user_handler):
  """The record is plain data a job script can log or exit with."""
  with tf.Graph().as_default():
    train_op = _model()
    with fastmts.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                          preemption=True) as sess:
      _train(sess, train_op, 'run')
  p = sess.preemption
  assert isinstance(p.received_at, float) and abs(time.time() - p.received_at) < 60
  assert np.isfinite([p.seconds_to_checkpoint, p.seconds_to_close]).all()
  assert repr(p).startswith('Preemption(signal=SIGTERM, signals_received=1, step=7, ')


@pytest.mark.timeout(60)
def test_a_session_closed_outside_the_main_thread_passes_signals_on(tmp_path):
  """Python restores handlers only in the main thread: closed elsewhere, the
  session leaves its handler in place, which then does what the previous
  one did (here the user's), and never again stops a session."""
  calls = []
  previous = signal.signal(signal.SIGUSR1, lambda signum, frame: calls.append(signum))
  try:
    policy = fastmts.PreemptionPolicy(signals=[signal.SIGUSR1])
    with tf.Graph().as_default():
      tf.compat.v1.train.get_or_create_global_step()
      sess = fastmts.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), preemption=policy)
      closer = threading.Thread(target=sess.close)
      closer.start()
      closer.join(30)
    os.kill(os.getpid(), signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not calls and time.monotonic() < deadline:
      time.sleep(0.01)
    assert calls == [signal.SIGUSR1]
    assert sess.preemption is None
  finally:
    signal.signal(signal.SIGUSR1, previous)
