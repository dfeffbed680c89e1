"""StepCounterHook run natively, compared with stock TF: the global_step/sec
records and log lines, the step rates handed to TF's code in batches inside
run_steps (and within their delay), a failing writer, a stuck global step
and several counters in one loop."""

import re
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.platform import tf_logging

import compat_utils
from compat_utils import Raised, outcome
from hook_test_utils import (CREATED, GRAPHS, STEPS_10, events, flush_cached_writer, in_dir,
                             read_first_graph, run_n_times, summary, tf_log, tick_runs)

v1 = tf.compat.v1


class _RecordingWriter:
  """A summary_writer that records (monotonic time, step, tag) per call and
  raises `fail` from its call number `fail_at` on."""

  def __init__(self, fail_at=None, fail=None):
    self.calls = []
    self.fail_at, self.fail = fail_at, fail

  def add_summary(self, summary, global_step):
    if self.fail_at is not None and len(self.calls) + 1 >= self.fail_at:
      raise self.fail
    self.calls.append((time.monotonic(), int(global_step), summary.value[0].tag))


def _slow_step_graph(seconds):
  """A step that takes at least `seconds` (a py_function sleeps)."""
  gs = v1.train.get_or_create_global_step()
  pause = tf.py_function(lambda: time.sleep(seconds) or 0.0, [], tf.float32)
  with tf.control_dependencies([pause]):
    return v1.assign_add(gs, 1)


def test_step_counter_hook_output_dir(check):
  """global_step/sec every 3 steps into output_dir (rates are timing)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default(), tf_log() as lines:
      _, _, train = read_first_graph()
      hook = v1.train.StepCounterHook(every_n_steps=3, output_dir=workdir)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        results = run_n_times(sess, train, 10)
    flush_cached_writer(workdir)
    return (results, events(workdir, rates=False),
            [(level, msg.split(':')[0]) for level, msg in lines])

  check(scenario, expected=(
      STEPS_10,
      (1, GRAPHS + [summary('global_step/sec', s, None) for s in (4, 7, 10)]),
      CREATED + [('INFO', 'global_step/sec')] * 3))


def test_step_counter_in_native_loop(check):
  """Inside run_n_times StepCounterHook's global_step/sec records are handed to
  TF's _log_and_record in batches; the event file holds them at the same
  places among the other writers' events as TF's, the log lines are TF's,
  and TF's hook object ends in TF's state."""

  def scenario(impl, workdir):
    with tf.Graph().as_default(), tf_log() as lines:
      _, loss, train = read_first_graph()
      v1.summary.scalar('loss_sum', loss)
      counter = v1.train.StepCounterHook(every_n_steps=4, output_dir=workdir)
      logger = v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=5)
      with impl.MonitoredTrainingSession(
          checkpoint_dir=workdir, save_summaries_steps=3, log_step_count_steps=None,
          hooks=[counter, logger]) as sess:
        last = compat_utils.run_steps_or_tf_loop(impl, sess, train, max_steps=14)
      state = (counter._timer.last_triggered_step(),  # pylint: disable=protected-access
               counter._last_global_step)  # pylint: disable=protected-access
    flush_cached_writer(workdir)
    timing = re.compile(r'(global_step/sec: |\()[0-9.e+-]+( sec\))?')
    return (last, state, events(workdir, rates=False),
            [(level, timing.sub(r'\1<t>', msg)) for level, msg in in_dir(workdir, lines)])

  result = check(scenario)
  assert ('INFO', 'global_step/sec: <t>') in result[3], result[3]
  rates = [e for e in result[2][1] if e[1] == 'global_step/sec']
  assert [e[2] for e in rates] == [5, 9, 13], result


@pytest.mark.timeout(60)
def test_step_counter_records_reach_python_within_their_delay(fastmts):
  """A record waits at most StepCounterHook::kMaxRecordDelay (0.1 s)
  for the next step boundary before going to the writer: over a 0.6 s loop
  of ~2 ms steps the writer hears of the records while the loop runs, every
  one of them, in order."""
  with tf.Graph().as_default():
    train = _slow_step_graph(0.002)
    writer = _RecordingWriter()
    hook = v1.train.StepCounterHook(every_n_steps=1, summary_writer=writer)
    with fastmts.MonitoredSession(hooks=[hook]) as sess:
      sess.run(train)
      started = time.monotonic()
      sess.run_steps(train, max_steps=300)
      ended = time.monotonic()
  during = [t for t, _, _ in writer.calls if t < ended]
  assert ended - started > 0.5
  assert during and during[0] - started < 0.3, (started, during[:3], ended)
  # Every step after the first fired (every_n_steps=1), the first of the
  # loop included: the run before it started the timer.
  assert [s for _, s, _ in writer.calls] == list(range(2, 302))
  assert {tag for _, _, tag in writer.calls} == {'global_step/sec'}


@pytest.mark.timeout(60)
def test_step_counter_writer_error_ends_the_loop(check):
  """A writer that fails ends run_n_times with its own exception, as it ends
  TF's loop; fastmts hands records over in batches, so it may stop later
  than TF (by up to 0.1 s of steps), never earlier, and writes nothing after
  the failure."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      train = v1.assign_add(gs, 1)
      writer = _RecordingWriter(fail_at=3, fail=ValueError('disk full'))
      hook = v1.train.StepCounterHook(every_n_steps=2, summary_writer=writer)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        error = outcome(compat_utils.run_steps_or_tf_loop, impl, sess, train, max_steps=1000)
        # Read without the hooks: the writer still fails, and a hook run
        # after fastmts's extra steps may well reach it again.
        step = int(sess._tf_sess().run(gs))  # pylint: disable=protected-access
    # TF's timer stopped at the failing record, in both.
    timer_step = hook._timer.last_triggered_step()  # pylint: disable=protected-access
    return error, [s for _, s, _ in writer.calls], timer_step, step

  steps = {}

  def both(impl, workdir):
    error, written, timer_step, step = scenario(impl, workdir)
    steps[impl is v1.train] = step
    return error, written, timer_step

  check(both, expected=(Raised(ValueError, 'disk full'), [3, 5], np.int64(7)))
  assert 7 <= steps[True] <= steps.get(False, steps[True]), steps


def test_step_counter_warns_about_a_stuck_step(check):
  """Runs that do not move the global step make StepCounterHook warn, at
  most 5 times (TF's log_first_n, counted per process: reset before each
  scenario), while its rates keep their schedule."""
  from tensorflow.python.platform import tf_logging  # pylint: disable=g-import-not-at-top

  def scenario(impl, workdir):
    tf_logging._log_counter_per_token.clear()  # pylint: disable=protected-access
    with tf.Graph().as_default(), tf_log() as lines:
      step, _, train = read_first_graph()
      counter = v1.train.StepCounterHook(every_n_steps=2, output_dir=workdir)
      plan = [train, step, step, train] + [step] * 8 + [train] * 4
      with impl.MonitoredSession(hooks=[counter]) as sess:
        results = [sess.run(fetch) for fetch in plan]
      last = counter._last_global_step  # pylint: disable=protected-access
    flush_cached_writer(workdir)
    warnings = [msg for level, msg in lines if level == 'WARNING']
    return results, events(workdir, rates=False), warnings, int(last)

  results, (_, records), warnings, last = check(scenario)
  assert [int(r) for r in results] == [1, 1, 1, 2] + [2] * 8 + [3, 4, 5, 6]
  assert len(warnings) == 5 and all('has not been increased' in w for w in warnings)
  assert [r[2] for r in records if r[0] == 'summary'] == [3, 5], records
  assert last == 5


def test_step_counter_hook_every_n_secs_controlled_time(check, monkeypatch):
  """With a fake clock the rates are exact: 4 steps in 6 s."""

  def scenario(impl, workdir):
    with tf.Graph().as_default(), tf_log(exact=True) as lines:
      _, _, train = read_first_graph()
      hook = v1.train.StepCounterHook(every_n_steps=None, every_n_secs=5,
                                      output_dir=workdir)
      results = tick_runs(impl, monkeypatch, train, hooks=[hook])
    flush_cached_writer(workdir)
    return results, events(workdir), lines

  rate = float(np.float32(4 / 6))
  check(scenario, expected=(
      STEPS_10,
      (1, GRAPHS + [summary('global_step/sec', 5, rate),
                    summary('global_step/sec', 9, rate)]),
      CREATED + [('INFO', 'global_step/sec: 0.666667')] * 2))


def test_two_step_counters_in_native_loop_keep_tf_event_order(check):
  """Two StepCounterHooks on one writer (a user's, and MonitoredTrainingSession's
  own): inside run_n_times their batched records still reach the writer in
  TF's order, step by step, hook by hook."""

  def scenario(impl, workdir):
    with tf.Graph().as_default(), tf_log() as lines:
      _, _, train = read_first_graph()
      counter = v1.train.StepCounterHook(every_n_steps=1, output_dir=workdir)
      with impl.MonitoredTrainingSession(
          checkpoint_dir=workdir, save_summaries_steps=None, log_step_count_steps=2,
          hooks=[counter]) as sess:
        last = compat_utils.run_steps_or_tf_loop(impl, sess, train, max_steps=7)
    flush_cached_writer(workdir)
    rates = [r[2] for r in events(workdir, rates=False)[1] if r[1:2] == ('global_step/sec',)]
    logged = [(level, msg.split(':')[0]) for level, msg in in_dir(workdir, lines)]
    return last, rates, logged

  _, rates, logged = check(scenario)
  assert rates == [2, 3, 3, 4, 5, 5, 6, 7, 7], rates
  assert logged.count(('INFO', 'global_step/sec')) == len(rates), logged
