"""Several Python threads stepping one MonitoredTrainingSession at once.

Some code (RL learners, feeder threads) calls `run()` on one session from
several threads. TF_SessionRun is thread-safe; the hooks are not, so each
step's hook rounds hold a per-session lock (cpp/core/hook_dispatch_lock.h)
while the TF runs themselves overlap. Stock TF has no such lock: with its
default hooks its threads fail (`TypeError: 'NoneType' object is not
subscriptable` in StepCounterHook), so these tests check fastmts alone, by
counts that must be exact: every step run once, seen once by every hook,
counted once by the session.
"""

import os
import threading
import time

import pytest
import tensorflow as tf

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(300)
# A bound on a hang, not on slowness (a test here took under 3 s beside two CPU-bound
# processes on a 2-core machine): the stepping threads are all joined within it, below
# the test's bound, so that a hung thread is reported as one.
_JOIN_HANG_BOUND_SECS = 240

THREADS = 8
STEPS_PER_THREAD = 250


class _CountingHook(v1.train.SessionRunHook):
  """A Python hook among the native ones: counts its calls, and checks that
  each step's after_run gets the global step its own request fetched."""

  def __init__(self):
    self.before = self.after = 0
    self.errors = []

  def begin(self):
    self._step = v1.train.get_global_step()

  def before_run(self, run_context):
    self.before += 1
    return v1.train.SessionRunArgs(self._step)

  def after_run(self, run_context, run_values):
    self.after += 1
    if not 0 <= int(run_values.results) <= THREADS * STEPS_PER_THREAD:
      self.errors.append(run_values.results)


def _graph():
  # A resource variable on every release (TF 2's default; TF 1.15 makes the
  # global step a ref variable, whose increment in minimize() is TF's
  # AssignAdd without use_locking: racing TF runs lose an increment in about
  # one run in ten, 1999 of 2000, while a locked counter in the same train op
  # counts 2000).
  step = v1.get_variable(
      'global_step', [], tf.int64, initializer=v1.zeros_initializer(), trainable=False,
      use_resource=True,
      collections=[v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.GLOBAL_STEP])
  x = v1.get_variable('x', [], initializer=v1.zeros_initializer())
  loss = tf.square(x - 3.0)
  v1.summary.scalar('loss', loss)
  train = v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
  return step, train


def _step_from_threads(sess, train, run_steps_threads):
  """Runs STEPS_PER_THREAD steps on each of THREADS threads, the first
  `run_steps_threads` of them in one run_steps call (the native loop, which
  dispatches the native hooks without the GIL), the others by run(); their
  errors."""
  errors, start = [], threading.Barrier(THREADS)

  def steps(use_run_steps):
    try:
      start.wait(timeout=60)
      if use_run_steps:
        sess.run_steps(train, max_steps=STEPS_PER_THREAD)
      else:
        for _ in range(STEPS_PER_THREAD):
          sess.run(train)
    except BaseException as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=steps, args=(i < run_steps_threads,), daemon=True)
             for i in range(THREADS)]
  for t in threads:
    t.start()
  deadline = time.monotonic() + _JOIN_HANG_BOUND_SECS
  for t in threads:
    t.join(timeout=max(0.0, deadline - time.monotonic()))
  assert not any(t.is_alive() for t in threads), 'a stepping thread hung'
  return errors


@pytest.mark.parametrize('python_hook', [True, False], ids=['python_hook', 'native_only'])
@pytest.mark.parametrize('run_steps_threads', [0, 2, THREADS], ids=['run', 'mixed', 'run_steps'])
def test_eight_threads_with_the_default_hooks_count_every_step(tmp_path, fastmts,
                                                               run_steps_threads, python_hook):
  """8 threads x 250 steps (by run(), run_steps() or both) with the default hooks (checkpoints every 100
  steps, summaries every 10, the step counter), a StopAtStepHook that does
  not stop, with or without a Python hook (without one, run_steps runs
  the native hooks without the GIL): no error, and every count is exact: the
  global step and the last checkpoint's step are 2,000; the session's own
  step count and the Python hook's calls 2,001 (one more step reads the
  global step)."""
  total = THREADS * STEPS_PER_THREAD
  counting = _CountingHook()
  fastmts.report_hook_costs(True)
  try:
    with tf.Graph().as_default():
      step, train = _graph()
      with fastmts.MonitoredTrainingSession(
          checkpoint_dir=str(tmp_path), save_checkpoint_steps=100, save_summaries_steps=10,
          hooks=[fastmts.StopAtStepHook(last_step=10 * total)] + [counting] * python_hook) as sess:
        errors = _step_from_threads(sess, train, run_steps_threads)
        assert errors == []
        assert sess.run(step) == total  # a step too, which trains nothing
        assert sess.hook_cost_report().steps == total + 1
      if python_hook:
        assert counting.before == counting.after == total + 1
        assert counting.errors == []
      assert v1.train.load_variable(str(tmp_path), 'global_step') == total
  finally:
    fastmts.report_hook_costs(False)
  events = [name for name in os.listdir(tmp_path) if name.startswith('events.')]
  assert len(events) == 1
