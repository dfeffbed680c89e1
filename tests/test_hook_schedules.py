"""Random hook schedules, side by side with stock TF.

Hypothesis draws a set of TF's stock hooks on step-based schedules
(optionally under MonitoredTrainingSession's defaults), one of two graphs,
and a way to drive the session: chunks of ``sess.run`` calls and of
``run_steps`` (the native loop; for TF, the loop it stands for), continued
past the stop. fastmts must leave the same trace as TF: every chunk's result
or exception, the stop decision after each chunk, the event records (tags
and steps; step rates are timing), the checkpoint files, the log lines
(timings masked), and TF's hook objects in the same schedule state.

The two graphs differ in when the hooks' fetched global step is read:
before the run's increment, or after it. In the second, reading the step
runs the increment again (the read waits for it), so the final global step
counts every fresh read of the step the hooks made, and a fresh read made
or skipped by mistake shows.

The examples are drawn from a fixed seed (``derandomize``), so a CI run is
repeatable; set HYPOTHESIS_EXAMPLES to explore more of them locally.
"""

import os
import re
import tempfile

import hypothesis
from hypothesis import strategies as st
import pytest
import tensorflow as tf
from tensorflow.python.training import training_util

import compat_utils
from compat_utils import TF_IMPL, assert_same, ckpt_files, outcome
from hook_test_utils import tf_log
from test_native_more_hooks import events, in_dir, read_first_graph

v1 = tf.compat.v1

_EXAMPLES = int(os.environ.get('HYPOTHESIS_EXAMPLES', '30'))
_STEP_RATE = re.compile(r'(global_step/sec: )[0-9.e+-]+')
_DEPRECATION = re.compile(r'From .*: .* is deprecated and will be removed')

_every = st.integers(1, 9)
_SETUPS = st.fixed_dictionaries({
    'graph': st.sampled_from(['read_first', 'read_after_increment']),
    'stop': st.none() | st.tuples(st.sampled_from(['last_step', 'num_steps']),
                                  st.integers(1, 30)),
    'counter': st.none() | _every,
    'summaries': st.none() | _every,
    'saver': st.none() | _every,
    'logging': st.none() | _every,
    'nan': st.booleans(),
    # A Python hook (run through Python dispatch in fastmts) that asks for
    # the loss each step and requests stop after this many of its after_runs.
    'python_hook': st.none() | st.integers(1, 20),
    'final_ops': st.booleans(),
    # MonitoredTrainingSession's own hooks (checkpoint_dir set), or a plain
    # MonitoredSession with only the hooks above.
    'training_session': st.none() | st.fixed_dictionaries({
        'save_summaries_steps': st.none() | _every,
        'save_checkpoint_steps': st.none() | _every,
        'log_step_count_steps': st.none() | _every,
    }),
    'chunks': st.lists(st.tuples(st.sampled_from(['run', 'run_steps']),
                                 st.integers(1, 12)), min_size=1, max_size=4),
})


def _graph(kind):
  """(loss, train, summary_op) for one of the two graphs."""
  if kind == 'read_first':
    _, loss, train = read_first_graph()
  else:
    # The read tensor the hooks fetch (and read afresh) waits for the
    # increment, so every read of it, fresh ones included, increments.
    gs = v1.train.get_or_create_global_step()
    train = v1.assign_add(gs, 1, name='train')
    with tf.control_dependencies([train]):
      read = training_util._get_or_create_global_step_read()  # pylint: disable=protected-access
    loss = tf.identity(tf.cast(read, tf.float32) * 0.5, name='loss')
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


def _hooks(setup, workdir, loss, summary_op, scaffold):
  hooks = []
  if setup['stop']:
    kind, value = setup['stop']
    hooks.append(v1.train.StopAtStepHook(**{kind: value}))
  if setup['counter']:
    hooks.append(v1.train.StepCounterHook(every_n_steps=setup['counter'],
                                          output_dir=workdir))
  if setup['summaries']:
    hooks.append(v1.train.SummarySaverHook(save_steps=setup['summaries'],
                                           output_dir=workdir, summary_op=summary_op))
  # Two savers in one directory would fight over the `checkpoint` file.
  if setup['saver'] and setup['training_session'] is None:
    hooks.append(v1.train.CheckpointSaverHook(workdir, save_steps=setup['saver'],
                                              scaffold=scaffold))
  if setup['logging']:
    hooks.append(v1.train.LoggingTensorHook({'loss': loss},
                                            every_n_iter=setup['logging']))
  if setup['nan']:
    hooks.append(v1.train.NanTensorHook(loss))
  if setup['python_hook']:
    hooks.append(_StopAfter(loss, setup['python_hook']))
  if setup['final_ops']:
    hooks.append(v1.train.FinalOpsHook({'loss': loss}))
  return hooks


def _schedule_state(hooks):
  """What the hook objects hold at the end: TF's of their schedules, the
  Python hook what it fetched, FinalOpsHook its final values."""
  def step(value):
    return None if value is None else int(value)

  state = []
  for hook in hooks:
    timer = getattr(hook, '_timer', None)
    last = None if timer is None else step(timer.last_triggered_step())
    state.append((type(hook).__name__, last, step(getattr(hook, '_last_global_step', None)),
                  step(getattr(hook, '_next_step', None)),
                  step(getattr(hook, '_last_step', None)),
                  getattr(hook, 'seen', None), getattr(hook, 'final_ops_values', None)))
  return state


def _scenario(impl, workdir, setup):
  with tf.Graph().as_default(), tf_log() as lines:
    loss, train, summary_op = _graph(setup['graph'])
    scaffold = impl.Scaffold()
    hooks = _hooks(setup, workdir, loss, summary_op, scaffold)
    options = setup['training_session']
    if options is None:
      session = impl.MonitoredSession(
          session_creator=impl.ChiefSessionCreator(scaffold=scaffold), hooks=hooks)
    else:
      session = impl.MonitoredTrainingSession(checkpoint_dir=workdir, scaffold=scaffold,
                                              hooks=hooks, **options)
    trace = []
    try:
      with session as sess:
        for kind, n in setup['chunks']:
          if kind == 'run':
            got = [outcome(sess.run, train) for _ in range(n)]
          else:
            got = outcome(compat_utils.run_steps, impl, sess, train, max_steps=n)
          trace.append((kind, got, sess.should_stop()))
    finally:
      v1.summary.FileWriterCache.get(workdir).flush()
    state = _schedule_state(hooks)
  v1.summary.FileWriterCache.clear()  # closes the writers (and their threads)
  # TF's deprecation warnings come once per process, to whichever run is first.
  logged = [(level, _STEP_RATE.sub(r'\1<t>', msg)) for level, msg in in_dir(workdir, lines)
            if not _DEPRECATION.match(msg)]
  last_checkpoint = v1.train.latest_checkpoint(workdir)
  return (trace, state, events(workdir, rates=False), ckpt_files(workdir),
          None if last_checkpoint is None else os.path.basename(last_checkpoint), logged)


@pytest.mark.timeout(600)
@hypothesis.settings(max_examples=_EXAMPLES, deadline=None, derandomize=True,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow,
                                            hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(setup=_SETUPS)
def test_random_hook_schedules_match_tf(fastmts, setup):
  with tempfile.TemporaryDirectory() as tf_dir, tempfile.TemporaryDirectory() as fast_dir:
    want = _scenario(TF_IMPL, tf_dir, setup)
    got = _scenario(fastmts, fast_dir, setup)
  assert_same(got, want, 'fastmts vs TF for %r' % (setup,))
