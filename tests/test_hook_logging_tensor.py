"""LoggingTensorHook run natively, compared with stock TF: trigger decisions
are native, the line itself comes from TF's _log_tensors; iterations and
seconds, formatters, at_end, reuse, a logger that does not print INFO, and
subclasses or instance attributes that replace _log_tensors."""

import logging
import time

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import Raised, outcome
from hook_test_utils import CREATED, STEPS_10, read_first_graph, step_graph, tf_log, tick_runs

v1 = tf.compat.v1


def _run_logging(impl, make_hooks, steps=10):
  """Runs `steps` train steps with the hooks make_hooks(step, loss) and
  returns (train results, TF log lines)."""
  with tf.Graph().as_default(), tf_log() as lines:
    step, loss, train = step_graph()
    hooks = make_hooks(step, loss)
    with impl.MonitoredSession(hooks=hooks) as sess:
      results = [sess.run(train) for _ in range(steps)]
  return results, lines


def test_logging_tensor_hook_every_n_secs_controlled_time(check, monkeypatch):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log(exact=True) as lines:
      step, _, train = read_first_graph()
      hook = v1.train.LoggingTensorHook({'step': step}, every_n_secs=5)
      results = tick_runs(impl, monkeypatch, train, hooks=[hook])
    return results, lines

  check(scenario, expected=(
      STEPS_10,
      CREATED + [('INFO', 'step = 0'), ('INFO', 'step = 4 (6.000 sec)'),
                 ('INFO', 'step = 8 (6.000 sec)')]))


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
