"""TF's stock hooks that fastmts runs natively, compared with stock TF.

fastmts runs an instance of exactly ``StopAtStepHook``, ``NanTensorHook`` (on a
static float scalar loss) or ``LoggingTensorHook`` (trigger decisions; the line
itself comes from TF's ``_log_tensors``) in C++.  Every scenario here builds its
own graph and returns what a user can observe: run results, exceptions,
``should_stop()``, the lines logged to TF's logger ('tensorflow') and files
written; ``check`` (conftest.py) runs it on TF and fastmts and compares.
"""

import logging
import time

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import Raised, ckpt_files, outcome
from hook_test_utils import (CREATED, DIVERGED_ERROR, DIVERGED_WARNING,
                             NAN_LOSS, STEPS_10, nan_at, step_graph, tf_log)

v1 = tf.compat.v1

STOPPED = Raised(RuntimeError, 'Run called even after should_stop requested.')


def run_until_stop(sess, fetches, max_runs):
  """Runs until should_stop(), recording (outcome, should_stop) per run; then
  one more run (which must be refused once stopped)."""
  record = []
  for _ in range(max_runs):
    if sess.should_stop():
      break
    record.append((outcome(sess.run, fetches), sess.should_stop()))
  record.append(('after stop', outcome(sess.run, fetches)))
  return record


# ---------------------------------------------------------------------------
# NanTensorHook
# ---------------------------------------------------------------------------


def _nan_variable_graph(k):
  """The loss is a variable assigned (via tf.cond) NaN at step k."""
  gs = v1.train.get_or_create_global_step()
  step = tf.identity(gs.read_value(), name='step')
  loss_var = tf.Variable(0.0, name='loss_var')
  with tf.control_dependencies([step]):
    new = tf.cond(tf.equal(step, k), lambda: tf.constant(np.nan),
                  lambda: 1.0 / (1.0 + tf.cast(step, tf.float32)))
    assign = loss_var.assign(new)
  with tf.control_dependencies([assign]):
    loss = tf.identity(loss_var.read_value(), name='loss')
  with tf.control_dependencies([loss]):
    train = v1.assign_add(gs, 1, name='train')
  return step, loss, train


def _nan_graph(kind, nan_step):
  """A step graph whose loss turns NaN at `nan_step`, by tf.where or by a
  variable assigned NaN."""
  if kind == 'where':
    return step_graph(nan_at(nan_step))
  return _nan_variable_graph(nan_step)


@pytest.mark.parametrize('graph', ['where', 'variable'])
def test_nan_tensor_hook_fail(check, graph):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = _nan_graph(graph, 3)
      hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=True)
      runs = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(6):
          runs.append((outcome(sess.run, [train, step]), sess.should_stop()))
    return runs, lines

  ok = lambda s: ([np.int64(s + 1), np.int64(s)], False)
  check(scenario, expected=(
      [ok(0), ok(1), ok(2), (NAN_LOSS, False), ok(4), ok(5)],
      CREATED + [DIVERGED_ERROR]))


def test_nan_tensor_hook_fail_skips_later_hooks(check):
  """A raising NanTensorHook ends the step: later hooks' after_run are not
  called (the LoggingTensorHook after it does not count that iteration)."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = step_graph(nan_at(3))
      hooks = [v1.train.LoggingTensorHook({'step': step}, every_n_iter=2),
               v1.train.NanTensorHook(loss),
               v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=2)]
      runs = []
      with impl.MonitoredSession(hooks=hooks) as sess:
        for _ in range(7):
          runs.append(outcome(sess.run, train))
    return runs, lines

  check(scenario, expected=(
      [np.int64(1), np.int64(2), np.int64(3), NAN_LOSS, np.int64(5),
       np.int64(6), np.int64(7)],
      CREATED + [
          ('INFO', 'step = 0'), ('INFO', 'loss = 1.0'),
          ('INFO', 'step = 2 (x.xxx sec)'),
          ('INFO', 'loss = 0.33333334 (x.xxx sec)'),
          DIVERGED_ERROR,
          ('INFO', 'step = 4 (x.xxx sec)'),
          # The second logging hook missed step 3's after_run: its 4th
          # iteration is step 5.
          ('INFO', 'loss = 0.16666667 (x.xxx sec)'),
          ('INFO', 'step = 6 (x.xxx sec)'),
      ]))


@pytest.mark.parametrize('graph', ['where', 'variable'])
def test_nan_tensor_hook_stop(check, graph):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = _nan_graph(graph, 3)
      hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=False)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        runs = run_until_stop(sess, [train, step], 8)
    return runs, lines

  ok = lambda s, stop=False: ([np.int64(s + 1), np.int64(s)], stop)
  check(scenario, expected=(
      [ok(0), ok(1), ok(2), ok(3, stop=True), ('after stop', STOPPED)],
      CREATED + [DIVERGED_WARNING]))


# (dtype, static shape of the placeholder, value shape): the float scalars run
# natively, the others through Python.
_NAN_CASES = {
    'float64_scalar': (tf.float64, (), ()),
    'float16_scalar': (tf.float16, (), ()),
    'bfloat16_scalar': (tf.bfloat16, (), ()),
    'float32_shape_1': (tf.float32, (1,), (1,)),
    'float32_unknown_shape': (tf.float32, None, ()),
    'float32_shape_2': (tf.float32, (2,), (2,)),
    'int32_scalar': (tf.int32, (), ()),
}


@pytest.mark.parametrize('case', sorted(_NAN_CASES))
def test_nan_tensor_hook_loss_kinds(check, case):
  dtype, static_shape, shape = _NAN_CASES[case]

  def scenario(impl, workdir):
    del workdir
    out = []
    with tf.Graph().as_default(), tf_log() as lines:
      p = v1.placeholder(dtype, static_shape, name='p')
      loss = tf.identity(p, name='loss')
      nan = np.nan if dtype.is_floating else 0
      for fail in (True, False):
        hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=fail)
        with impl.MonitoredSession(hooks=[hook]) as sess:
          for value in (1.0, nan, 2.0):
            feed = np.full(shape, value, dtype.as_numpy_dtype)
            out.append((fail, outcome(sess.run, loss, feed_dict={p: feed}),
                        sess.should_stop()))
            if sess.should_stop():
              break
    return out, lines

  np_type = dtype.as_numpy_dtype
  if case == 'float32_shape_2':
    # TF's `if np.isnan(results)` on a 2-element array.
    ambiguous = Raised(ValueError, 'The truth value of an array with more '
                       'than one element is ambiguous. Use a.any() or a.all()')
    expected = ([(True, ambiguous, False)] * 3 + [(False, ambiguous, False)] * 3,
                CREATED * 2)
  elif case == 'int32_scalar':
    expected = ([(fail, np.int32(v), False) for fail in (True, False)
                 for v in (1, 0, 2)], CREATED * 2)
  else:
    val = lambda v: np.full(shape, v, np_type) if shape else np_type(v)
    expected = ([(True, val(1.0), False), (True, NAN_LOSS, False),
                 (True, val(2.0), False),
                 (False, val(1.0), False), (False, val(np.nan), True)],
                CREATED + [DIVERGED_ERROR] + CREATED + [DIVERGED_WARNING])
  check(scenario, expected=expected)


@pytest.mark.parametrize('loss_kind', ['tensor_name', 'resource_variable',
                                       'ref_variable'])
def test_nan_tensor_hook_loss_given_as_name_or_variable(check, loss_kind):
  """TF's hook just fetches `loss_tensor`, so a tensor name or a Variable work
  as well as a Tensor."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      p = v1.placeholder(tf.float32, (), name='p')
      var = v1.Variable(1.0, name='v',
                        use_resource=loss_kind != 'ref_variable')
      assign = v1.assign(var, p)
      read = tf.identity(var.read_value(), name='loss_read')
      c = tf.constant(0, name='c')
      loss = read.name if loss_kind == 'tensor_name' else var
      hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=True)
      out = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for value in (2.0, np.nan, 3.0):
          # Set the loss outside the hooks, then run a step.
          feed = {p: value}
          sess.run_step_fn(lambda step_context: step_context.session.run(  # pylint: disable=cell-var-from-loop
              assign, feed_dict=feed))
          out.append(outcome(sess.run, c))
    return out, lines

  check(scenario, expected=([np.int32(0), NAN_LOSS, np.int32(0)],
                            CREATED + [DIVERGED_ERROR]))


# ---------------------------------------------------------------------------
# LoggingTensorHook
# ---------------------------------------------------------------------------


def _run_logging(impl, make_hooks, steps=10):
  """Runs `steps` train steps with the hooks make_hooks(step, loss) and
  returns (train results, TF log lines)."""
  with tf.Graph().as_default(), tf_log() as lines:
    step, loss, train = step_graph()
    hooks = make_hooks(step, loss)
    with impl.MonitoredSession(hooks=hooks) as sess:
      results = [sess.run(train) for _ in range(steps)]
  return results, lines


def test_logging_tensor_hook_every_n_iter(check):

  def scenario(impl, workdir):
    del workdir
    return _run_logging(impl, lambda step, loss: [
        v1.train.LoggingTensorHook({'step': step, 'loss': loss},
                                   every_n_iter=3)])

  check(scenario, expected=(STEPS_10, CREATED + [
      ('INFO', 'loss = 0.0, step = 0'),
      ('INFO', 'loss = 1.5, step = 3 (x.xxx sec)'),
      ('INFO', 'loss = 3.0, step = 6 (x.xxx sec)'),
      ('INFO', 'loss = 4.5, step = 9 (x.xxx sec)')]))


def test_logging_tensor_hook_list_of_tensors_keeps_tag_order(check):

  def scenario(impl, workdir):
    del workdir
    # A list: the tags are the items themselves, logged in list order.
    return _run_logging(impl, lambda step, loss: [
        v1.train.LoggingTensorHook([loss, 'step:0'], every_n_iter=4)])

  loss_tag = 'Tensor("loss:0", shape=(), dtype=float32)'
  check(scenario, expected=(STEPS_10, CREATED + [
      ('INFO', '%s = 0.0, step:0 = 0' % loss_tag),
      ('INFO', '%s = 2.0, step:0 = 4 (x.xxx sec)' % loss_tag),
      ('INFO', '%s = 4.0, step:0 = 8 (x.xxx sec)' % loss_tag)]))


def test_logging_tensor_hook_formatter(check):

  def scenario(impl, workdir):
    del workdir
    seen = []

    def formatter(values):
      seen.append(list(values.items()))
      return 'step %d: loss %.2f' % (values['step'], values['loss'])

    results, lines = _run_logging(impl, lambda step, loss: [
        v1.train.LoggingTensorHook({'step': step, 'loss': loss},
                                   every_n_iter=4, formatter=formatter)])
    return results, lines, seen

  check(scenario, expected=(
      STEPS_10,
      CREATED + [('INFO', 'step 0: loss 0.00'), ('INFO', 'step 4: loss 2.00'),
                 ('INFO', 'step 8: loss 4.00')],
      [[('step', np.int64(s)), ('loss', np.float32(s / 2))]
       for s in (0, 4, 8)]))


@pytest.mark.parametrize('every_n_iter', [None, 4])
def test_logging_tensor_hook_at_end(check, every_n_iter):

  def scenario(impl, workdir):
    del workdir
    return _run_logging(impl, lambda step, loss: [
        v1.train.LoggingTensorHook({'loss': loss, 'step': 'step:0'},
                                   every_n_iter=every_n_iter, at_end=True)])

  # At end the tensors are run once more, without the train op: the step is
  # then 10.
  if every_n_iter is None:
    logged = [('INFO', 'loss = 5.0, step = 10')]
  else:
    logged = [('INFO', 'loss = 0.0, step = 0'),
              ('INFO', 'loss = 2.0, step = 4 (x.xxx sec)'),
              ('INFO', 'loss = 4.0, step = 8 (x.xxx sec)'),
              ('INFO', 'loss = 5.0, step = 10 (x.xxx sec)')]
  check(scenario, expected=(STEPS_10, CREATED + logged))


def test_logging_tensor_hook_every_n_secs_large(check):

  def scenario(impl, workdir):
    del workdir
    return _run_logging(impl, lambda step, loss: [
        v1.train.LoggingTensorHook({'step': step, 'loss': loss},
                                   every_n_secs=3600)])

  check(scenario, expected=(STEPS_10,
                            CREATED + [('INFO', 'loss = 0.0, step = 0')]))


def test_logging_tensor_hook_every_n_secs_small(check):
  """every_n_secs=0: the time condition holds at every new step."""

  def scenario(impl, workdir):
    del workdir
    return _run_logging(impl, lambda step, loss: [
        v1.train.LoggingTensorHook({'step': step}, every_n_secs=0)], steps=4)

  check(scenario, expected=(
      STEPS_10[:4],
      CREATED + [('INFO', 'step = 0')] +
      [('INFO', 'step = %d (x.xxx sec)' % s) for s in (1, 2, 3)]))


def test_logging_tensor_hook_reused_in_two_sessions(check):
  """begin() resets the timer and the iteration count for each session."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, _, train = step_graph()
      hook = v1.train.LoggingTensorHook({'step': step}, every_n_iter=3)
      results = []
      for steps in (4, 5):
        with impl.MonitoredSession(hooks=[hook]) as sess:
          results.append([sess.run(train) for _ in range(steps)])
    return results, lines

  check(scenario, expected=(
      [STEPS_10[:4], STEPS_10[:5]],
      CREATED + [('INFO', 'step = 0'), ('INFO', 'step = 3 (x.xxx sec)')] +
      CREATED + [('INFO', 'step = 0'), ('INFO', 'step = 3 (x.xxx sec)')]))


@pytest.mark.parametrize('formatter', [None, 'formatter'])
def test_logging_tensor_hook_while_info_is_not_logged(check, monkeypatch, formatter):
  """Steps that fire while TF's logger drops INFO still move the hook's
  timer (fastmts does it natively, without formatting the line): once INFO
  is logged again, the elapsed time is since the last firing step, and the
  hook object's timer and count are TF's. A formatter is called on every
  firing step, logged or not, as TF calls it."""

  def scenario(impl, workdir):
    del workdir
    logger = logging.getLogger('tensorflow')
    clock = [1000.0]
    monkeypatch.setattr(time, 'time', lambda: clock[0])
    formatted = []

    def format_values(values):
      formatted.append(int(values['step']))
      return 'step is %d' % values['step']

    with tf.Graph().as_default(), tf_log(exact=True) as lines:
      step, _, train = step_graph()
      hook = v1.train.LoggingTensorHook(
          {'step': step}, every_n_iter=2, at_end=True,
          formatter=format_values if formatter else None)
      results = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for i in range(10):
          logger.setLevel(logging.WARNING if i < 5 else logging.INFO)
          results.append(sess.run(train))
          clock[0] += 1.5
      timer = hook._timer  # pylint: disable=protected-access
      state = (hook._iter_count, timer._last_triggered_step,  # pylint: disable=protected-access
               timer._last_triggered_time)  # pylint: disable=protected-access
    return results, lines, state, formatted

  if formatter:
    logged = [('INFO', 'step is %d' % s) for s in (6, 8, 10)]
  else:
    logged = [('INFO', 'step = 6 (3.000 sec)'), ('INFO', 'step = 8 (3.000 sec)'),
              ('INFO', 'step = 10 (3.000 sec)')]
  check(scenario, expected=(
      STEPS_10, CREATED + logged, (10, 10, 1015.0),
      [0, 2, 4, 6, 8, 10] if formatter else []))


# ---------------------------------------------------------------------------
# LoggingTensorHook: overriding _log_tensors
# ---------------------------------------------------------------------------


def test_logging_tensor_hook_subclass_overriding_log_tensors(check):
  """A subclass runs through the Python dispatch: its override is called."""

  def scenario(impl, workdir):
    del workdir
    calls = []

    class MyLoggingHook(v1.train.LoggingTensorHook):

      def _log_tensors(self, tensor_values):
        calls.append((self._iter_count, dict(tensor_values)))
        v1.logging.info('custom: step %s', tensor_values['step'])
        super()._log_tensors(tensor_values)

    results, lines = _run_logging(impl, lambda step, loss: [
        MyLoggingHook({'step': step, 'loss': loss}, every_n_iter=4,
                      at_end=True)])
    return results, lines, calls

  check(scenario, expected=(
      STEPS_10,
      CREATED + [
          ('INFO', 'custom: step 0'), ('INFO', 'loss = 0.0, step = 0'),
          ('INFO', 'custom: step 4'),
          ('INFO', 'loss = 2.0, step = 4 (x.xxx sec)'),
          ('INFO', 'custom: step 8'),
          ('INFO', 'loss = 4.0, step = 8 (x.xxx sec)'),
          ('INFO', 'custom: step 10'),
          ('INFO', 'loss = 5.0, step = 10 (x.xxx sec)')],
      [(0, {'step': np.int64(0), 'loss': np.float32(0.0)}),
       (4, {'step': np.int64(4), 'loss': np.float32(2.0)}),
       (8, {'step': np.int64(8), 'loss': np.float32(4.0)}),
       (10, {'step': np.int64(10), 'loss': np.float32(5.0)})]))


def test_logging_tensor_hook_instance_attribute_log_tensors(check):
  """`_log_tensors` replaced on an instance of the exact class is called.

  In TF the trigger state is the hook's `_timer`, which TF's own
  `_log_tensors` updates; a replacement that does not call it leaves the timer
  untouched, so TF triggers (and calls it) at every step.
  """

  def scenario(impl, workdir):
    del workdir
    calls = []

    def make(step, loss):
      hook = v1.train.LoggingTensorHook({'step': step, 'loss': loss},
                                        every_n_iter=5)
      hook._log_tensors = lambda values: calls.append(  # pylint: disable=protected-access
          sorted(values.items()))
      return [hook]

    results, lines = _run_logging(impl, make)
    return results, lines, calls

  check(scenario, expected=(
      STEPS_10, CREATED,
      [[('loss', np.float32(s / 2)), ('step', np.int64(s))]
       for s in range(10)]))


# ---------------------------------------------------------------------------
# LoggingTensorHook: timer edge cases (arguments TF accepts as given)
# ---------------------------------------------------------------------------


def test_logging_tensor_hook_formatter_raising_once(check):
  """TF's _log_tensors updates the timer *before* calling the formatter; when
  the formatter raises, the step still counts as triggered (and
  _iter_count is not advanced), so the next run does not log again."""

  def scenario(impl, workdir):
    del workdir
    calls = []

    def formatter(values):
      calls.append(int(values['step']))
      if len(calls) == 1:
        raise ValueError('formatter failed')
      return 'step %d' % values['step']

    with tf.Graph().as_default(), tf_log() as lines:
      step, _, train = step_graph()
      hook = v1.train.LoggingTensorHook({'step': step}, every_n_iter=2,
                                        formatter=formatter)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        results = [outcome(sess.run, train) for _ in range(7)]
    return results, lines, calls

  check(scenario, expected=(
      [Raised(ValueError, 'formatter failed')] +
      [np.int64(s) for s in range(2, 8)],
      CREATED + [('INFO', 'step 3'), ('INFO', 'step 5')],
      [0, 3, 5]))


@pytest.mark.parametrize('kwargs,logged_steps', [
    # A negative every_n_secs: `time.time() >= last + every_secs` always holds.
    (dict(every_n_secs=-1), list(range(7))),
    # A non-integral every_n_iter: `step >= last + 2.5`.
    (dict(every_n_iter=2.5), [0, 3, 6]),
], ids=['every_n_secs_negative', 'every_n_iter_float'])
def test_logging_tensor_hook_timer_arguments(check, kwargs, logged_steps):

  def scenario(impl, workdir):
    del workdir
    logged = []
    results, _ = _run_logging(impl, lambda step, loss: [
        v1.train.LoggingTensorHook(
            {'step': step}, formatter=lambda v: logged.append(int(v['step'])),
            **kwargs)], steps=7)
    return results, logged

  check(scenario, expected=(STEPS_10[:7], logged_steps))


# ---------------------------------------------------------------------------
# StopAtStepHook
# ---------------------------------------------------------------------------


def _train_until_stop(sess, train, max_runs=20):
  steps = []
  while not sess.should_stop() and len(steps) < max_runs:
    steps.append(sess.run(train))
  return steps


def test_stop_at_step_num_steps_reused_fresh_sessions(check):
  """The second session starts again from step 0 (variables re-initialized)
  but keeps the hook's _last_step (5) from the first."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      _, _, train = step_graph()
      hook = v1.train.StopAtStepHook(num_steps=5)
      out = []
      for _ in range(2):
        with impl.MonitoredSession(hooks=[hook]) as sess:
          out.append((_train_until_stop(sess, train), int(hook._last_step)))  # pylint: disable=protected-access
    return out

  check(scenario, expected=[(STEPS_10[:5], 5), (STEPS_10[:5], 5)])


def test_stop_at_step_keeps_last_step_when_a_later_hook_fails_creation(check):
  """TF's StopAtStepHook sets _last_step in its own after_create_session;
  a later hook's after_create_session raising does not undo it, and the
  object used again stops at that step."""

  class FailsOnce(v1.train.SessionRunHook):

    def __init__(self):
      self.failed = False

    def after_create_session(self, session, coord):
      if not self.failed:
        self.failed = True
        raise ValueError('after_create_session failed')

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      _, _, train = step_graph()
      hook = v1.train.StopAtStepHook(num_steps=3)
      hooks = [hook, FailsOnce()]
      failed = outcome(impl.MonitoredSession, hooks=hooks)
      last_step = hook._last_step  # pylint: disable=protected-access
      with impl.MonitoredSession(hooks=hooks) as sess:
        steps = _train_until_stop(sess, train)
    return failed, None if last_step is None else int(last_step), steps

  check(scenario, expected=(Raised(ValueError, 'after_create_session failed'), 3,
                            STEPS_10[:3]))


def test_stop_at_step_num_steps_reused_after_restore(check):
  """The second session restores global step 5 from the checkpoint; the
  hook's _last_step stays 5 (not 5 + 5), so it stops after one step."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = step_graph()
      hook = v1.train.StopAtStepHook(num_steps=5)
      out = []
      for _ in range(2):
        with impl.MonitoredTrainingSession(
            checkpoint_dir=workdir, hooks=[hook], save_checkpoint_steps=2,
            save_summaries_steps=None, save_summaries_secs=None,
            log_step_count_steps=None) as sess:
          out.append((_train_until_stop(sess, train), int(hook._last_step)))  # pylint: disable=protected-access
    return out, ckpt_files(workdir)

  check(scenario, expected=(
      [(STEPS_10[:5], 5), ([np.int64(6)], 5)],
      ['checkpoint', 'graph.pbtxt'] + sorted(
          'model.ckpt-%d.%s' % (s, ext) for s in (0, 2, 4, 5, 6)
          for ext in ('data-00000-of-00001', 'index', 'meta'))))


def test_stop_at_step_last_step_after_restore(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = step_graph()
      out = []
      for hook in (v1.train.StopAtStepHook(last_step=3),
                   v1.train.StopAtStepHook(last_step=7),
                   v1.train.StopAtStepHook(last_step=5),  # already passed
                   v1.train.StopAtStepHook(num_steps=2)):
        with impl.MonitoredTrainingSession(
            checkpoint_dir=workdir, hooks=[hook], save_checkpoint_steps=2,
            save_summaries_steps=None, save_summaries_secs=None,
            log_step_count_steps=None) as sess:
          out.append((_train_until_stop(sess, train), int(hook._last_step)))  # pylint: disable=protected-access
    return out, ckpt_files(workdir)

  check(scenario, expected=(
      [([np.int64(s) for s in (1, 2, 3)], 3),
       ([np.int64(s) for s in (4, 5, 6, 7)], 7),
       ([np.int64(8)], 5),
       ([np.int64(9), np.int64(10)], 10)],
      ['checkpoint', 'graph.pbtxt'] + sorted(
          'model.ckpt-%d.%s' % (s, ext) for s in (3, 5, 7, 8, 10)
          for ext in ('data-00000-of-00001', 'index', 'meta'))))


def test_checkpoint_saver_listener_raising_keeps_the_save_schedule(check):
  """TF moves the saver's timer before a listener raises; the native gate must
  follow TF's timer, so later saves fall on the same steps."""

  class RaisingOnce(v1.train.CheckpointSaverListener):

    def __init__(self):
      self.saves = []

    def after_save(self, session, global_step_value):
      self.saves.append(int(global_step_value))
      if global_step_value == 4 and self.saves.count(4) == 1:
        raise ValueError('listener failed at 4')

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      step = v1.train.get_or_create_global_step()
      train = v1.assign_add(step, 1)
      listener = RaisingOnce()
      hook = v1.train.CheckpointSaverHook(str(workdir), save_steps=2, listeners=[listener])
      errors = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(9):
          try:
            sess.run(train)
          except ValueError as e:
            errors.append(str(e))
      return listener.saves, errors

  check(scenario, expected=([0, 2, 4, 6, 8, 9], ['listener failed at 4']))
