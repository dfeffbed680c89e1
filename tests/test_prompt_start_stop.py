"""Prompt shutdown and start-up (fastmts improves on TF here, by design).

* close(): a native queue-runner thread blocked inside a TF op that its
  cancel op does not release (as a sync-replicas chief's take_grad) is
  released by closing the session, instead of waiting out the grace period;
  the final checkpoint is written first.
* A worker that starts before the chief polls with a short, growing interval
  and starts within about a second of the chief being ready (TF: up to
  recovery_wait_secs, 30 s).
"""
import itertools
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import TF_IMPL

v1 = tf.compat.v1
_unique = itertools.count()


def _graph_with_stuck_queue_runner():
  """A counter to train, and a QueueRunner whose second enqueue blocks
  forever: it fills a capacity-1 queue nobody reads, while its cancel op
  closes another queue."""
  gs = v1.train.get_or_create_global_step()
  train = v1.assign_add(gs, 1)
  full = v1.FIFOQueue(capacity=1, dtypes=[tf.float32])
  other = v1.FIFOQueue(capacity=1, dtypes=[tf.float32])
  v1.train.add_queue_runner(v1.train.QueueRunner(other, [full.enqueue(1.0)]))
  return train


def _train_and_close(impl, workdir, grace):
  with tf.Graph().as_default():
    train = _graph_with_stuck_queue_runner()
    sess = impl.MonitoredTrainingSession(
        checkpoint_dir=workdir, stop_grace_period_secs=grace, save_summaries_steps=None,
        log_step_count_steps=None, hooks=[v1.train.StopAtStepHook(last_step=3)])
    try:
      while not sess.should_stop():
        sess.run(train)
    finally:
      start = time.monotonic()
      sess.close()
      closed_in = time.monotonic() - start
    return closed_in, tf.train.latest_checkpoint(workdir)


# Stock TF's queue-runner thread dies with an error once its session closes.
@pytest.mark.filterwarnings('ignore::pytest.PytestUnhandledThreadExceptionWarning')
def test_close_releases_thread_blocked_in_an_op(impl, tmp_path):
  grace = 3.0
  closed_in, checkpoint = _train_and_close(impl, str(tmp_path), grace)
  # Nothing lost: the final checkpoint is written before any cancellation.
  assert checkpoint is not None and checkpoint.endswith('model.ckpt-3')
  if impl is TF_IMPL:
    assert closed_in >= grace  # TF waits out the grace period
  else:
    assert closed_in < 2.0
    import fastmts  # pylint: disable=g-import-not-at-top
    assert fastmts._native.live_native_threads() == 0  # pylint: disable=protected-access


def _shared_counter(prefix):
  v = v1.get_variable(prefix + '/v', initializer=42.0, use_resource=True)
  return v, v1.assign_add(v, 1.0)


def test_worker_starts_promptly_after_the_chief(local_server):
  fastmts = pytest.importorskip('fastmts')
  target = local_server.target
  prefix = 'prompt%d' % next(_unique)  # variables outlive sessions on a server
  result = {}

  def worker():
    try:
      with tf.Graph().as_default():
        v, _ = _shared_counter(prefix)
        sess = fastmts.MonitoredTrainingSession(master=target, is_chief=False, max_wait_secs=20)
        result['ready_at'] = time.monotonic()
        result['value'] = sess.run(v)
        sess.close()
    except Exception as e:  # pylint: disable=broad-except
      result['error'] = e

  thread = threading.Thread(target=worker)
  thread.start()
  chief = None
  try:
    time.sleep(1.0)  # the worker polls an uninitialized model meanwhile
    with tf.Graph().as_default() as chief_graph:
      _shared_counter(prefix)
      chief = fastmts.MonitoredTrainingSession(master=target, is_chief=True)
      chief_ready_at = time.monotonic()
    thread.join(20)
    assert 'error' not in result, result.get('error')
    assert result['value'] == np.float32(42.0)
    assert result['ready_at'] - chief_ready_at < 2.0  # TF: up to 30 s
  finally:
    thread.join(25)
    if chief is not None:
      with chief_graph.as_default():
        chief.close()
