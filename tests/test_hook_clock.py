"""Seconds-based triggers of the hooks MonitoredTrainingSession makes,
natively, under a controlled clock: fastmts's native timers follow
time.time as TF's Python timers do."""

import numpy as np
import tensorflow as tf

from compat_utils import ckpt_files
from hook_test_utils import (CREATED, GRAPHS, STEPS_10, ckpt_log, ckpt_names, events,
                             flush_cached_writer, in_dir, read_first_graph, save_lines, start,
                             summary, tf_log, tick_runs)

v1 = tf.compat.v1


def test_monitored_training_session_secs_controlled_time(check, monkeypatch):
  """MonitoredTrainingSession's own hooks on seconds: summaries and
  checkpoints every 5 s, global_step/sec every 3 steps (exact rates)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default(), tf_log(exact=True) as lines:
      _, loss, train = read_first_graph()
      v1.summary.scalar('loss_sum', loss)
      results = tick_runs(
          impl, monkeypatch, train,
          new_session=lambda: impl.MonitoredTrainingSession(
              checkpoint_dir=workdir, save_summaries_steps=None,
              save_summaries_secs=5, save_checkpoint_secs=5,
              log_step_count_steps=3))
    flush_cached_writer(workdir)
    return (results, events(workdir), in_dir(workdir, lines),
            ckpt_files(workdir))

  rate = float(np.float32(3 / 4.5))
  check(scenario, expected=(
      STEPS_10,
      (1, GRAPHS + GRAPHS + [
          ckpt_log(0), start(1), summary('loss_sum', 1, 0.0),
          summary('global_step/sec', 4, rate), ckpt_log(4),
          summary('loss_sum', 5, 2.0), summary('global_step/sec', 7, rate),
          ckpt_log(8), summary('loss_sum', 9, 4.0),
          summary('global_step/sec', 10, rate), ckpt_log(10)]),
      [('INFO', 'Create CheckpointSaverHook.')] + CREATED +
      save_lines([0]) + [('INFO', 'global_step/sec: 0.666667')] +
      save_lines([4]) + [('INFO', 'global_step/sec: 0.666667')] +
      save_lines([8]) + [('INFO', 'global_step/sec: 0.666667')] +
      save_lines([10]),
      ['checkpoint', 'graph.pbtxt'] + ckpt_names(0, 4, 8, 10)))
