"""StopAtStepHook run natively, compared with stock TF: num_steps and
last_step across fresh and restored sessions, and the last step kept when
a later hook's after_create_session fails."""

import numpy as np
import tensorflow as tf

from compat_utils import Raised, ckpt_files, outcome
from hook_test_utils import STEPS_10, step_graph

v1 = tf.compat.v1


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


def _train_checkpointed_until_stop(impl, workdir, hook, train):
  """A MonitoredTrainingSession saving every 2 steps to `workdir` with `hook`
  alone, trained until it stops: (the steps' results, the hook's _last_step)."""
  with impl.MonitoredTrainingSession(
      checkpoint_dir=workdir, hooks=[hook], save_checkpoint_steps=2,
      save_summaries_steps=None, save_summaries_secs=None,
      log_step_count_steps=None) as sess:
    return _train_until_stop(sess, train), int(hook._last_step)  # pylint: disable=protected-access


def test_stop_at_step_num_steps_reused_after_restore(check):
  """The second session restores global step 5 from the checkpoint; the
  hook's _last_step stays 5 (not 5 + 5), so it stops after one step."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = step_graph()
      hook = v1.train.StopAtStepHook(num_steps=5)
      out = []
      for _ in range(2):
        out.append(_train_checkpointed_until_stop(impl, workdir, hook, train))
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
        out.append(_train_checkpointed_until_stop(impl, workdir, hook, train))
    return out, ckpt_files(workdir)

  check(scenario, expected=(
      [([np.int64(s) for s in (1, 2, 3)], 3),
       ([np.int64(s) for s in (4, 5, 6, 7)], 7),
       ([np.int64(8)], 5),
       ([np.int64(9), np.int64(10)], 10)],
      ['checkpoint', 'graph.pbtxt'] + sorted(
          'model.ckpt-%d.%s' % (s, ext) for s in (3, 5, 7, 8, 10)
          for ext in ('data-00000-of-00001', 'index', 'meta'))))
