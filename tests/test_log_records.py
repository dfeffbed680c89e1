"""Log records as TF's: level, message, and the source file, line and function.

Log formatters that print file:line (absl's prefix, a user's format with
%(filename)s:%(lineno)d) show where a record was logged. Where fastmts does
what a line of TF's does (CheckpointSaverHook's save lines, NanTensorHook's,
the deprecation warning TF's MonitoredSession prints when it starts the
queue runners, once per process), the record names TF's line
(fastmts/_internal/tf_call_sites.py). Each side runs in a process of its own, since
TF prints a deprecation warning once per process.
"""

import json
import subprocess
import sys

import pytest

from compat_utils import child_env

# Bounds on a hang, not on slowness, sized for a loaded 2-core machine: beside two
# CPU-bound processes a child here took up to 26 s, the test (two children, one after the
# other) 45 s. The test's bound is above both children's, so that a child's fires first.
_CHILD_HANG_BOUND_SECS = 240
pytestmark = pytest.mark.timeout(2 * _CHILD_HANG_BOUND_SECS + 60)

# A queue-fed graph whose loss is NaN, trained with MonitoredTrainingSession,
# its default CheckpointSaverHook and one more whose listener stops training
# after a save, and a NanTensorHook that only warns. Prints every record of
# TF's logger as [level, file name, line, function, message], the log
# directory written LOGDIR.
_SCENARIO = r"""
import json, logging, os, sys
import tensorflow as tf
v1 = tf.compat.v1
v1.disable_eager_execution()
impl, logdir = sys.argv[1], sys.argv[2]
if impl == 'fastmts':
  import fastmts as train
else:
  train = v1.train
records = []

class Keep(logging.Handler):
  def emit(self, r):
    records.append([r.levelname, os.path.basename(r.pathname), r.lineno, r.funcName,
                    r.getMessage().replace(logdir, 'LOGDIR')])

tf.get_logger().addHandler(Keep())
tf.get_logger().setLevel(logging.INFO)

class StopAfterSave(v1.train.CheckpointSaverListener):
  def after_save(self, session, global_step_value):
    return global_step_value >= 1
  def __repr__(self):
    return 'StopAfterSave'

for run in range(2):  # the deprecation warning only once
  with tf.Graph().as_default():
    step = v1.train.get_or_create_global_step()
    queue = tf.queue.FIFOQueue(4, [tf.float32], shapes=[[]])
    v1.train.add_queue_runner(v1.train.QueueRunner(queue, [queue.enqueue(1.0)]))
    loss = tf.sqrt(-queue.dequeue())  # NaN (TF 1.15's grappler folds x / 0.0 * 0.0 to 0.0)
    train_op = v1.assign_add(step, 1)
    saver = train.CheckpointSaverHook(logdir, save_steps=1, listeners=[StopAfterSave()])
    with train.MonitoredTrainingSession(
        checkpoint_dir=logdir, save_summaries_steps=None, log_step_count_steps=None,
        chief_only_hooks=[saver], hooks=[train.NanTensorHook(loss, fail_on_nan_loss=False)]
        ) as sess:
      while not sess.should_stop():
        sess.run(train_op)
print(json.dumps(records))
"""


def _records(impl, logdir):
  done = subprocess.run([sys.executable, '-c', _SCENARIO, impl, str(logdir)],
                        capture_output=True, text=True, timeout=_CHILD_HANG_BOUND_SECS, check=False,
                        env=child_env())
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


def test_records_name_tfs_lines(tmp_path, fastmts):
  del fastmts
  want = _records('tf', tmp_path / 'tf')
  got = _records('fastmts', tmp_path / 'fastmts')
  assert got == want
  # Not vacuous: the lines fastmts logs itself are among them.
  messages = [r[4] for r in want]
  assert sum('start_queue_runners (from' in m for m in messages) == 1
  assert any(m.startswith('Saving checkpoints for 1 into LOGDIR') for m in messages)
  assert 'Model diverged with loss = NaN.' in messages
  assert any(m.startswith('A CheckpointSaverListener requested') for m in messages)
