"""Resources: a closed monitored session leaves nothing behind.

The native hooks hold Python callbacks; any reference cycle through a native
object is invisible to Python's garbage collector, so a session caught in one
would leak with its graph and hooks. These tests create and close sessions
with every kind of hook and check that they are all collected and that no
thread outlives them.
"""
import gc
import threading
import weakref

import pytest
import tensorflow as tf

v1 = tf.compat.v1


class _UserHook(v1.train.SessionRunHook):

  def __init__(self, loss):
    self._loss = loss

  def before_run(self, run_context):
    return v1.train.SessionRunArgs({'loss': self._loss})


def _train_once(fastmts, workdir):
  """One session with every natively run stock hook and a Python hook;
  returns weak references to the session, its hook dispatch and hooks."""
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    x = v1.placeholder(tf.float32, [])
    loss = tf.cast(gs, tf.float32) * 0.5 + x
    train = v1.assign_add(gs, 1)
    v1.summary.scalar('loss', loss)
    v1.train.add_queue_runner(v1.train.QueueRunner(
        v1.FIFOQueue(4, [tf.float32]), [v1.FIFOQueue(4, [tf.float32]).enqueue(1.0)]))
    hooks = [v1.train.StopAtStepHook(last_step=4), v1.train.NanTensorHook(loss),
             v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=2),
             v1.train.FeedFnHook(lambda: {x: 1.0}), v1.train.FinalOpsHook(loss, {x: 0.0}),
             v1.train.ProfilerHook(save_steps=2, output_dir=workdir), _UserHook(loss)]
    with fastmts.MonitoredTrainingSession(checkpoint_dir=workdir, hooks=hooks,
                                          save_summaries_steps=2) as sess:
      while not sess.should_stop():
        sess.run(train)
      sess.run_steps(train)  # already stopped: runs nothing
    return [weakref.ref(sess), weakref.ref(sess._coordinated_creator.hooked)] + [  # pylint: disable=protected-access
        weakref.ref(h) for h in hooks]


def test_closed_sessions_are_collected(tmp_path):
  fastmts = pytest.importorskip('fastmts')
  threads_before = threading.active_count()
  refs = []
  for i in range(5):
    refs += _train_once(fastmts, str(tmp_path / str(i)))
  gc.collect()
  alive = [r() for r in refs if r() is not None]
  assert not alive, 'still referenced after close: %r' % (alive,)
  assert fastmts._native.live_native_threads() == 0  # pylint: disable=protected-access
  # TF's cached summary writers each keep one writer thread (as in stock TF).
  assert threading.active_count() <= threads_before + 5
