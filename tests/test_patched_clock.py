"""Seconds-based hooks under a patched ``time.time``, as TF's own tests patch it.

TF's hook tests replace the clock with ``mock.patch.object(time, 'time')`` and
set ``return_value`` between runs; TF's SecondOrStepTimer then reads the fake
clock. fastmts's native timers must follow the same patch unasked (no switch),
in ``run`` and in ``run_steps``'s loop (which runs without the GIL), and go
back to the OS clock once the patch is undone. Each scenario runs against
stock TF and fastmts and compares what a user observes after every run:
timeline files, checkpoints, summaries, step rates.
"""

import os
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import basic_session_run_hooks

from compat_utils import ckpt_files
from hook_test_utils import events, flush_cached_writer, read_first_graph

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(120)

START = 1_000_000.0  # far from the OS clock, as TF's MOCK_START_TIME is


def _timeline_count(workdir):
  return len([n for n in os.listdir(workdir) if n.startswith('timeline-')])


def _summary_steps(workdir, tag):
  flush_cached_writer(workdir)
  return [r[2] for r in events(workdir)[1] if r[0] == 'summary' and r[1] == tag]


def _clocked_runs(impl, new_hook, observe, schedule, session=None):
  """Under mock.patch.object(time, 'time'): builds the graph and the hook
  (new_hook(workdir-free graph parts) -> hook), creates a
  SingularMonitoredSession (or session(hook)), then for each clock value in
  `schedule` sets it and runs the train op once, recording observe() after
  each run. Returns the records."""
  with mock.patch.object(time, 'time') as fake_time:
    fake_time.return_value = START
    with tf.Graph().as_default():
      _, loss, train = read_first_graph()
      hook = new_hook(loss)
      make = session or (lambda h: impl.SingularMonitoredSession(hooks=[h]))
      seen = []
      with make(hook) as sess:
        for now in schedule:
          fake_time.return_value = START + now
          sess.run(train)
          seen.append(observe())
  return seen


# The clock of TF's ProfilerHookTest.test_save_secs_saves_periodically.
_PROFILER_SCHEDULE = [0, 2.5, 2.6, 3.4, 4.5]


def test_profiler_hook_save_secs_under_mocked_time(check):
  """TF's own test: with save_secs=2, timelines at 0, 2.5 and 4.5 s only
  (the native timer compared the OS clock with TF's fake timestamps and
  wrote one every step)."""

  def scenario(impl, workdir):
    return _clocked_runs(
        impl, lambda loss: v1.train.ProfilerHook(save_secs=2, output_dir=workdir),
        lambda: _timeline_count(workdir), _PROFILER_SCHEDULE)

  check(scenario, expected=[0, 1, 1, 1, 2])


def test_checkpoint_saver_hook_save_secs_under_mocked_time(check):

  def scenario(impl, workdir):
    records = _clocked_runs(
        impl, lambda loss: v1.train.CheckpointSaverHook(workdir, save_secs=2),
        lambda: sorted(n for n in ckpt_files(workdir) if n.endswith('.index')),
        _PROFILER_SCHEDULE)
    return records, sorted(ckpt_files(workdir))

  records, _ = check(scenario)
  # Saved after creation (step 0), then once 2 s have passed (step 2 at
  # 2.5 s, step 5 at 4.5 s); the final save at the end is step 5 again.
  assert records[-1] == ['model.ckpt-0.index', 'model.ckpt-2.index', 'model.ckpt-5.index']
  assert records[0] == ['model.ckpt-0.index']


def test_summary_saver_hook_save_secs_under_mocked_time(check):

  def scenario(impl, workdir):
    def new_hook(loss):
      return v1.train.SummarySaverHook(
          save_secs=2, output_dir=workdir, summary_op=v1.summary.scalar('loss_sum', loss))
    return _clocked_runs(impl, new_hook, lambda: _summary_steps(workdir, 'loss_sum'),
                         _PROFILER_SCHEDULE)

  check(scenario, expected=[[1], [1, 2], [1, 2], [1, 2], [1, 2, 5]])


def test_step_counter_hook_every_n_secs_under_mocked_time(check):
  """Rates are exact under a fake clock: 1 step in 2.5 s, then 3 in 2 s."""

  def scenario(impl, workdir):
    def rates():
      flush_cached_writer(workdir)
      return [(r[2], r[3]) for r in events(workdir)[1] if r[0] == 'summary']
    return _clocked_runs(
        impl, lambda loss: v1.train.StepCounterHook(
            every_n_steps=None, every_n_secs=2, output_dir=workdir),
        rates, _PROFILER_SCHEDULE)

  records = check(scenario)
  assert records[-1] == [(2, float(np.float32(1 / 2.5))), (5, 1.5)]


def test_patched_hooks_module_time_global(check):
  """Patching basic_session_run_hooks' `time` global (not the time module)
  moves TF's timers too; the native ones follow the same lookup."""

  def scenario(impl, workdir):
    with mock.patch.object(basic_session_run_hooks, 'time') as fake_module:
      fake_module.time.return_value = START
      with tf.Graph().as_default():
        _, _, train = read_first_graph()
        hook = v1.train.ProfilerHook(save_secs=2, output_dir=workdir)
        seen = []
        with impl.SingularMonitoredSession(hooks=[hook]) as sess:
          for now in _PROFILER_SCHEDULE:
            fake_module.time.return_value = START + now
            sess.run(train)
            seen.append(_timeline_count(workdir))
    return seen

  check(scenario, expected=[0, 1, 1, 1, 2])


def test_monitored_training_session_under_mocked_time(check):
  """MonitoredTrainingSession's own secs-based hooks (checkpoints and
  summaries every 2 s) under the mocked clock."""

  def scenario(impl, workdir):
    def session(hook):
      del hook
      return impl.MonitoredTrainingSession(
          checkpoint_dir=workdir, save_checkpoint_secs=2, save_summaries_steps=None,
          save_summaries_secs=2, log_step_count_steps=None)

    def observe():
      return (sorted(n for n in ckpt_files(workdir) if n.endswith('.index')),
              _summary_steps(workdir, 'loss_sum'))

    def new_hook(loss):
      v1.summary.scalar('loss_sum', loss)
      return None

    return _clocked_runs(impl, new_hook, observe, _PROFILER_SCHEDULE, session=session)

  records = check(scenario)
  assert records[-1] == (['model.ckpt-0.index', 'model.ckpt-2.index', 'model.ckpt-5.index'],
                         [1, 2, 5])


def test_run_steps_follows_mocked_time(fastmts, tmp_path):
  """run_steps' native loop runs without the GIL; it follows the patch the
  loop's entry saw. With the clock standing still, a save_secs=2 profiler
  writes none, as a `run` loop under TF does; moving the clock 2.5 s
  between calls makes the next call's first step write one."""
  workdir = str(tmp_path)
  with mock.patch.object(time, 'time') as fake_time:
    fake_time.return_value = START
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      hook = v1.train.ProfilerHook(save_secs=2, output_dir=workdir)
      with fastmts.SingularMonitoredSession(hooks=[hook]) as sess:
        sess.run_steps(train, max_steps=5)
        first = _timeline_count(workdir)
        fake_time.return_value = START + 2.5
        sess.run_steps(train, max_steps=5)
        second = _timeline_count(workdir)
  assert (first, second) == (0, 1)


def test_os_clock_again_after_the_patch(check):
  """Once the patch is undone, the timers read the OS clock again: a
  session created afterwards with save_secs=600 writes no timeline in four
  steps (TF's first step never writes one)."""

  def scenario(impl, workdir):
    with mock.patch.object(time, 'time', return_value=START):
      pass
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      hook = v1.train.ProfilerHook(save_secs=600, output_dir=workdir)
      with impl.SingularMonitoredSession(hooks=[hook]) as sess:
        for _ in range(4):
          sess.run(train)
    return _timeline_count(workdir)

  check(scenario, expected=0)
