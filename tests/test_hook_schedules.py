"""Random hook schedules, side by side with stock TF.

Hypothesis draws a set of TF's stock hooks (optionally under
MonitoredTrainingSession's defaults, plus a Python hook and FinalOpsHook),
one of two graphs (the loss NaN on a drawn step, or never), and a way to
drive the session: chunks of ``sess.run`` calls and of ``run_steps`` (the
native loop; for TF, the loop it stands for), continued past the stop and
past errors (NanTensorHook's, a dataset's end); the ``with`` block may raise
at the end (no hook's end() then), and the same hook objects may drive a
second session. fastmts must leave the same trace as TF: every chunk's
result or exception, the stop decision after each chunk, the event records,
the checkpoint files, the log lines, and the hook objects' state after
each session.

Schedules are either step-based, in real time (step rates, being timing,
are masked), or seconds-based on a fake clock that each step moves by a
known amount (a py_function in the train op), where rates, log lines and
timers are all exact.

The two graphs differ in when the hooks' fetched global step is read:
before the run's increment, or after it. In the second, reading the step
runs the increment again (the read waits for it), so the final global step
counts every fresh read of the step the hooks made, and a fresh read made
or skipped by mistake shows.

The examples are drawn from a fixed seed (``derandomize``), so a CI run is
repeatable; set HYPOTHESIS_EXAMPLES to explore more of them locally."""

import contextlib
import itertools
import os
import re
import tempfile

import hypothesis
import numpy as np
from hypothesis import strategies as st
import pytest
import tensorflow as tf
from tensorflow.python.platform import tf_logging
from tensorflow.python.training import training_util

import compat_utils
from compat_utils import (TF_IMPL, assert_same, ckpt_files, outcome, resource_variables,
                          without_stack_trace)
from hook_test_utils import (STEP_RATE, controlled_time, events, global_step_read_after, in_dir,
                             schedule_state, tf_log)

v1 = tf.compat.v1

_EXAMPLES = int(os.environ.get('HYPOTHESIS_EXAMPLES', '30'))
# A bound on the whole test (all its examples; each takes well under 1 s).
_TIMEOUT = 600 + 2 * _EXAMPLES
_DEPRECATION = re.compile(r'From .*: .* is deprecated and will be removed')

_every = st.integers(1, 9)


def _setups(every, tick):
  """Setups whose schedules are drawn from `every`; `tick` draws the
  seconds each step takes on the fake clock (None: real time, and then
  only step-based schedules)."""
  return st.fixed_dictionaries({
      'graph': st.sampled_from(['read_first', 'read_after_increment']),
      'tick': tick,
      'stop': st.none() | st.tuples(st.sampled_from(['last_step', 'num_steps']),
                                    st.integers(1, 30)),
      'counter': st.none() | every,
      'summaries': st.none() | every,
      'saver': st.none() | every,
      'logging': st.none() | every,
      # The loss is NaN on this step (as fetched); NanTensorHook with this
      # fail_on_nan_loss.
      'nan_at': st.none() | st.integers(1, 15),
      'nan_hook': st.none() | st.booleans(),
      # A Python hook (run through Python dispatch in fastmts) that asks for
      # the loss each step and requests stop after this many after_runs.
      'python_hook': st.none() | st.integers(1, 20),
      # A Python hook whose after_run raises AbortedError once, on this call:
      # the session is closed and created again (restoring the latest
      # checkpoint under MonitoredTrainingSession) and the step retried.
      'abort_at': st.none() | st.integers(1, 12),
      # The train op reads a dataset of this many elements (then
      # OutOfRangeError, which the chunks go on past).
      'data_steps': st.none() | st.integers(0, 25),
      'final_ops': st.booleans(),
      # MonitoredTrainingSession's own hooks (checkpoint_dir set), or a
      # plain MonitoredSession with only the hooks above.
      'training_session': st.none() | st.fixed_dictionaries({
          'summaries': st.none() | every,
          'checkpoints': st.none() | every,
          'log_step_count_steps': st.none() | _every,
      }),
      'chunks': st.lists(st.tuples(st.sampled_from(['run', 'run_steps']),
                                   st.integers(1, 12)), min_size=1, max_size=4),
      # The `with` block raises after the chunks (close without end()).
      'with_raises': st.booleans(),
      # The same hook objects then drive a second session (same graph, same
      # chunks): what the first left on them carries on.
      'again': st.booleans(),
  })


_STEP_SETUPS = _setups(_every, st.none())
# Seconds-based schedules, on a clock that each step moves by `tick` seconds.
_SECS_SETUPS = _setups(st.sampled_from([0.5, 1.0, 2.5, 4.0]),
                       st.sampled_from([0.25, 1.0, 1.5]))


def _graph(kind, nan_at, data_steps, clock=None, tick=None):
  """(loss, train, summary_op) for one of the two graphs, the loss being
  half the fetched step, or NaN where that is `nan_at`. With `data_steps`,
  each increment first takes an element of a dataset of that many, so the
  run after them fails with OutOfRangeError and increments nothing. With a
  `clock`, runs of `train` also move it, by 1, 2, 3, 1, 2, ... times
  `tick` seconds (so step rates differ from one record to the next)."""
  if clock is not None:
    loss, train, summary_op = _graph(kind, nan_at, data_steps)
    runs = itertools.count()
    moved = tf.py_function(lambda: clock.advance(tick * (1 + next(runs) % 3)) or 0.0, [],
                           tf.float32)
    with tf.control_dependencies([moved]):
      return loss, tf.identity(train), summary_op

  def loss_of(step):
    value = tf.cast(step, tf.float32) * 0.5
    if nan_at is not None:
      value = tf.where(tf.equal(step, nan_at), tf.constant(np.nan, tf.float32), value)
    return tf.identity(value, name='loss')

  with resource_variables():  # (the hooks' read races the increment on 1.15's ref variables)
    gs = v1.train.get_or_create_global_step()
  data = []
  if data_steps is not None:
    data.append(v1.data.make_one_shot_iterator(tf.data.Dataset.range(data_steps)).get_next())
  if kind == 'read_first':
    # As hook_test_utils.read_first_graph: the increment waits for
    # the read tensor the hooks fetch and for the loss, so both are the
    # step before this run's increment.
    step = tf.identity(training_util._get_or_create_global_step_read(), name='step')  # pylint: disable=protected-access
    loss = loss_of(step)
    with tf.control_dependencies([step, loss] + data):
      train = v1.assign_add(gs, 1, name='train')
  else:
    # The read tensor the hooks fetch (and read afresh) waits for the
    # increment, so every read of it, fresh ones included, increments.
    with tf.control_dependencies(data):
      train = v1.assign_add(gs, 1, name='train')
    loss = loss_of(global_step_read_after(train))
  return loss, train, v1.summary.scalar('loss_sum', loss)


class _StopAfter(tf.compat.v1.train.SessionRunHook):
  """Records the loss it fetches; requests stop after `n` after_runs."""

  def __init__(self, loss, n):
    self.loss, self.n, self.seen = loss, n, []

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self.loss)

  def after_run(self, run_context, run_values):
    self.seen.append(float(run_values.results))
    if len(self.seen) >= self.n:
      run_context.request_stop()


class _AbortOnce(tf.compat.v1.train.SessionRunHook):
  """Raises AbortedError from its `n`-th after_run, once."""

  def __init__(self, n):
    self.n, self.calls = n, 0

  def after_run(self, run_context, run_values):
    self.calls += 1
    if self.calls == self.n:
      raise tf.errors.AbortedError(None, None, 'injected preemption')


def _hooks(setup, workdir, loss, summary_op, scaffold):
  secs = setup['tick'] is not None
  hooks = []
  if setup['stop']:
    kind, value = setup['stop']
    hooks.append(v1.train.StopAtStepHook(**{kind: value}))
  if setup['counter']:
    every = setup['counter']
    hooks.append(v1.train.StepCounterHook(
        output_dir=workdir, every_n_steps=None if secs else every,
        every_n_secs=every if secs else None))
  if setup['summaries']:
    hooks.append(v1.train.SummarySaverHook(
        output_dir=workdir, summary_op=summary_op,
        **{'save_secs' if secs else 'save_steps': setup['summaries']}))
  # Two savers in one directory would fight over the `checkpoint` file.
  if setup['saver'] and setup['training_session'] is None:
    hooks.append(v1.train.CheckpointSaverHook(
        workdir, scaffold=scaffold, **{'save_secs' if secs else 'save_steps': setup['saver']}))
  if setup['logging']:
    hooks.append(v1.train.LoggingTensorHook(
        {'loss': loss}, **{'every_n_secs' if secs else 'every_n_iter': setup['logging']}))
  if setup['nan_hook'] is not None:
    hooks.append(v1.train.NanTensorHook(loss, fail_on_nan_loss=setup['nan_hook']))
  if setup['python_hook']:
    hooks.append(_StopAfter(loss, setup['python_hook']))
  if setup['final_ops']:
    hooks.append(v1.train.FinalOpsHook({'loss': loss}))
  if setup['abort_at']:
    hooks.append(_AbortOnce(setup['abort_at']))
  return hooks


def _training_session_options(setup):
  options = setup['training_session']
  unit = 'secs' if setup['tick'] is not None else 'steps'
  return {'save_summaries_' + unit: options['summaries'],
          'save_checkpoint_' + unit: options['checkpoints'],
          'log_step_count_steps': options['log_step_count_steps']}


def _schedule_state(hooks):
  """What the hook objects hold at the end: TF's of their schedules, the
  Python hook what it fetched, FinalOpsHook its final values."""
  return [schedule_state(hook) + (getattr(hook, 'seen', None),
                                  getattr(hook, 'final_ops_values', None))
          for hook in hooks]


def _scenario(impl, workdir, setup, monkeypatch=None):
  # StepCounterHook's stuck-step warning is TF's log_first_n, counted per
  # process: each run starts from a fresh count.
  tf_logging._log_counter_per_token.clear()  # pylint: disable=protected-access
  clocked = setup['tick'] is not None
  with contextlib.ExitStack() as stack:
    clock = stack.enter_context(controlled_time(impl, monkeypatch)) if clocked else None
    stack.enter_context(tf.Graph().as_default())
    lines = stack.enter_context(tf_log(exact=clocked))
    loss, train, summary_op = _graph(setup['graph'], setup['nan_at'], setup['data_steps'],
                                     clock, setup['tick'])
    scaffold = impl.Scaffold()
    hooks = _hooks(setup, workdir, loss, summary_op, scaffold)
    trace = []

    def drive():
      if setup['training_session'] is None:
        session = impl.MonitoredSession(
            session_creator=impl.ChiefSessionCreator(scaffold=scaffold), hooks=hooks)
      else:
        session = impl.MonitoredTrainingSession(checkpoint_dir=workdir, scaffold=scaffold,
                                                hooks=hooks, **_training_session_options(setup))
      with session as sess:
        for kind, n in setup['chunks']:
          if kind == 'run':
            got = [without_stack_trace(outcome(sess.run, train)) for _ in range(n)]
          else:
            got = without_stack_trace(
                outcome(compat_utils.run_steps_or_tf_loop, impl, sess, train, max_steps=n))
          trace.append((kind, got, sess.should_stop()))
        if setup['with_raises']:
          raise ValueError('the with block failed')

    try:
      for _ in range(2 if setup['again'] else 1):
        # Creating and closing the session may raise too (a hook reading
        # the step in after_create_session or end(), past the dataset's end).
        trace.append(('ended', without_stack_trace(outcome(drive)), _schedule_state(hooks)))
    finally:
      v1.summary.FileWriterCache.get(workdir).flush()
  v1.summary.FileWriterCache.clear()  # closes the writers (and their threads)
  # Step rates are timing unless on the fake clock; TF's deprecation
  # warnings come once per process, to whichever run is first.
  logged = [(level, msg if clocked else STEP_RATE.sub(r'\1<t>', msg))
            for level, msg in in_dir(workdir, lines) if not _DEPRECATION.match(msg)]
  last_checkpoint = v1.train.latest_checkpoint(workdir)
  return (trace, events(workdir, rates=clocked), ckpt_files(workdir),
          None if last_checkpoint is None else os.path.basename(last_checkpoint), logged)


_SETTINGS = hypothesis.settings(
    max_examples=_EXAMPLES, deadline=None, derandomize=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow,
                           hypothesis.HealthCheck.function_scoped_fixture])


def _compare(fastmts, setup, monkeypatch=None):
  with tempfile.TemporaryDirectory() as tf_dir, tempfile.TemporaryDirectory() as fast_dir:
    want = _scenario(TF_IMPL, tf_dir, setup, monkeypatch)
    got = _scenario(fastmts, fast_dir, setup, monkeypatch)
  assert_same(got, want, 'fastmts vs TF for %r' % (setup,))


@pytest.mark.timeout(_TIMEOUT)
@_SETTINGS
@hypothesis.given(setup=_STEP_SETUPS)
def test_random_step_schedules_match_tf(fastmts, setup):
  _compare(fastmts, setup)


@pytest.mark.timeout(_TIMEOUT)
@_SETTINGS
@hypothesis.given(setup=_SECS_SETUPS)
def test_random_secs_schedules_match_tf(fastmts, monkeypatch, setup):
  """Seconds-based schedules on a fake clock that every step moves (a
  py_function in the train op): rates, log lines and timers are exact."""
  _compare(fastmts, setup, monkeypatch)
