"""Fed numpy arrays reach TF as TF's own Session.run hands them over: an array aligned for
TF's kernels is shared, not copied (binding/numpy_feed.h), and any other is copied by TF.
Sharing must never show: a variable assigned from a feed, a queue holding a fed batch and
the array's reference count behave as with stock TF, whichever the array's alignment."""
import gc
import sys

import numpy as np
import pytest
import tensorflow as tf

v1 = tf.compat.v1


def _array(shape, offset, scale=1.0):
  """float32 values (arange * scale) at a buffer address `offset` bytes past a 64-byte
  boundary: at 0 TF shares the buffer, at any other offset TF_NewTensor copies it."""
  n = int(np.prod(shape)) * 4
  raw = np.empty(n + 128, dtype=np.uint8)
  start = (-raw.ctypes.data) % 64 + offset
  arr = raw[start:start + n].view(np.float32).reshape(shape)
  arr[...] = np.arange(arr.size, dtype=np.float32).reshape(shape) * scale
  assert arr.ctypes.data % 64 == offset
  return arr


@pytest.mark.parametrize('offset, shared', [(0, True), (16, False)])
def test_an_aligned_feed_reaches_the_ops_unshared_only_when_unaligned(check, offset, shared):
  """An op sees the caller's own buffer where TF shares it: a py_func's input array is the
  fed tensor's buffer, so its address tells whether the feed was copied on the way."""
  def scenario(train, _):
    with tf.Graph().as_default():
      x = v1.placeholder(tf.float32, [1024])
      address = v1.py_func(lambda a: np.int64(a.ctypes.data), [x], tf.int64)
      with train.MonitoredSession() as sess:
        fed = _array([1024], offset)
        return bool(sess.run(address, {x: fed}) == fed.ctypes.data)

  check(scenario, expected=shared)


@pytest.mark.parametrize('offset', [0, 16])
def test_a_variable_assigned_from_a_feed_keeps_the_fed_values(check, offset):
  def scenario(train, _):
    with tf.Graph().as_default():
      x = v1.placeholder(tf.float32, [4, 8])
      var = v1.get_variable('v', [4, 8], initializer=v1.zeros_initializer(),
                            use_resource=False)
      assign = v1.assign(var, x)
      fed = _array([4, 8], offset)
      with train.MonitoredSession() as sess:
        sess.run(assign, {x: fed})
        fed[...] = -1.0  # the caller reuses its buffer for the next batch
        return sess.run(var).tolist()

  check(scenario, expected=np.arange(32, dtype=np.float32).reshape(4, 8).tolist())


@pytest.mark.parametrize('offset', [0, 16])
def test_a_queued_feed_outlives_the_callers_array(check, offset):
  """TF keeps a fed batch in a queue after the step; the caller's array is gone by the
  time it is dequeued (the queue's tensor holds the array, or TF's copy of it)."""
  def scenario(train, _):
    with tf.Graph().as_default():
      x = v1.placeholder(tf.float32, [3, 5])
      queue = v1.FIFOQueue(4, [tf.float32], shapes=[[3, 5]])
      enqueue, dequeue = queue.enqueue([x]), queue.dequeue()
      with train.MonitoredSession() as sess:
        for scale in (1.0, 2.0):
          sess.run(enqueue, {x: _array([3, 5], offset, scale)})
        gc.collect()
        return [sess.run(dequeue).tolist(), sess.run(dequeue).tolist()]

  base = np.arange(15, dtype=np.float32).reshape(3, 5)
  check(scenario, expected=[base.tolist(), (base * 2).tolist()])


@pytest.mark.parametrize('offset', [0, 16])
def test_feeding_keeps_the_arrays_reference_count(fastmts, offset):
  with tf.Graph().as_default():
    x = v1.placeholder(tf.float32, [16, 16])
    total = tf.reduce_sum(x)
    fed = _array([16, 16], offset)
    with fastmts.MonitoredSession() as sess:
      sess.run(total, {x: fed})
      before = sys.getrefcount(fed)
      for _ in range(200):
        sess.run(total, {x: fed})
      sess.run_steps(total, max_steps=50, feed_dict={x: fed})
      # A reference TF let go of without the GIL is dropped at the next feed: at
      # most the last step's may still be pending.
      assert sys.getrefcount(fed) - before in (0, 1)
      assert sess.run(total, {x: fed}) == pytest.approx(float(np.sum(fed)))
      assert sys.getrefcount(fed) - before in (0, 1)
