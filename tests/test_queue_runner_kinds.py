"""Every kind of QueueRunner a graph can hold runs as TF runs it.

fastmts runs TF's own QueueRunner loop natively; everything else must run
as TF's start_queue_runners runs it, through the runner's own code:
subclasses with their own `_run` (numpy_input_fn's feeding runner feeds
placeholders from Python every enqueue) or `create_threads`, enqueue "ops"
that are Tensors (TF's own tests pass `var.count_up_to(n)`), and names TF's
loop cannot take. Each scenario runs on stock TF and on fastmts and
compares the values dequeued, the stop, the threads registered with the
coordinator (names included) and the errors.
"""

import threading

import pytest
import tensorflow as tf

from compat_utils import Raised

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(60)


class _PythonFedRunner(v1.train.QueueRunner):
  """Enqueues 0..limit-1 fed from Python, then closes the queue: a runner
  whose enqueue needs a feed, as numpy_input_fn's."""

  def __init__(self, queue, placeholder, limit):
    super().__init__(queue, [queue.enqueue(placeholder)])
    self._placeholder = placeholder
    self._limit = limit

  def _run(self, sess, enqueue_op, coord=None):
    try:
      for value in range(self._limit):
        if coord.should_stop():
          return
        sess.run(enqueue_op, feed_dict={self._placeholder: value})
      sess.run(self._close_op)
    except tf.errors.CancelledError:
      pass


class _RecordingRunner(v1.train.QueueRunner):
  """TF's loop, started by an overridden create_threads that records it."""

  started = []

  def create_threads(self, sess, coord=None, daemon=False, start=False):
    threads = super().create_threads(sess, coord=coord, daemon=daemon, start=start)
    self.started.append(sorted(t.name for t in threads))
    return threads


class _Registered(v1.train.SessionRunHook):
  """Records the names of the threads registered with the coordinator."""

  def __init__(self):
    self.names = None

  def after_create_session(self, session, coord):
    self.names = sorted(t.name for t in coord._registered_threads)  # pylint: disable=protected-access


def _drain(impl, fetch, hooks=(), max_steps=100):
  """Dequeues until the session stops; the values, or the error."""
  got = []
  try:
    with impl.MonitoredSession(hooks=list(hooks)) as sess:
      while not sess.should_stop() and len(got) < max_steps:
        got.append(sess.run(fetch).tolist())
  except Exception as e:  # pylint: disable=broad-except
    return got, Raised(type(e), str(e).split('\n')[0])
  return got, None


def test_runner_that_feeds_from_python(check):
  def scenario(impl, _):
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(4, tf.int64, shapes=[[]])
      v1.train.add_queue_runner(_PythonFedRunner(q, v1.placeholder(tf.int64, []), limit=7))
      registered = _Registered()
      got = _drain(impl, q.dequeue(), [registered])
      return got, registered.names

  check(scenario, expected=(([0, 1, 2, 3, 4, 5, 6], None), [
      'QueueRunnerThread-fifo_queue-close_on_stop', 'QueueRunnerThread-fifo_queue-fifo_queue_enqueue']))


def test_runner_with_its_own_create_threads(check):
  def scenario(impl, _):
    _RecordingRunner.started = []
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(4, tf.int32, shapes=[[]])
      v1.train.add_queue_runner(_RecordingRunner(q, [q.enqueue(7)]))
      return _drain(impl, q.dequeue(), max_steps=3), _RecordingRunner.started

  check(scenario, expected=(([7, 7, 7], None), [[
      'QueueRunnerThread-fifo_queue-close_on_stop', 'QueueRunnerThread-fifo_queue-fifo_queue_enqueue']]))


def test_a_tensor_as_enqueue_op(check):
  """As in TF's own tests, a Tensor (here one that enqueues `count_up_to`
  on its way) is the enqueue op, until count_up_to raises OutOfRange,
  which closes the queue; the dequeues then end the session."""
  def scenario(impl, _):
    with tf.Graph().as_default():
      var = v1.Variable(0, use_resource=False)
      q = tf.queue.FIFOQueue(10, tf.int32, shapes=[[]])
      count = var.count_up_to(3)
      with tf.control_dependencies([q.enqueue(count)]):
        enqueued = tf.identity(count, name='enqueued')
      v1.train.add_queue_runner(v1.train.QueueRunner(q, [enqueued]))
      registered = _Registered()
      got, error = _drain(impl, q.dequeue(), [registered])
      return got, error, registered.names

  check(scenario, expected=([0, 1, 2], None, [
      'QueueRunnerThread-fifo_queue-close_on_stop', 'QueueRunnerThread-fifo_queue-enqueued:0']))


def test_native_threads_for_tensors_and_ops(fastmts):
  """A Tensor enqueue op still runs natively (no Python thread)."""
  with tf.Graph().as_default():
    var = v1.Variable(0, use_resource=False)
    q = tf.queue.FIFOQueue(10, tf.int32, shapes=[[]])
    count = var.count_up_to(1000)
    v1.train.add_queue_runner(v1.train.QueueRunner(q, [q.enqueue(count), count]))
    dequeue = q.dequeue()
    before = threading.active_count()
    with fastmts.MonitoredSession() as sess:
      sess.run(dequeue)
      assert threading.active_count() == before
      assert len(sess.queue_runner_threads) == 3
    assert fastmts._native.live_native_threads() == 0  # pylint: disable=protected-access


def test_python_fed_runner_threads_are_python_threads(fastmts):
  with tf.Graph().as_default():
    q = tf.queue.FIFOQueue(4, tf.int64, shapes=[[]])
    v1.train.add_queue_runner(_PythonFedRunner(q, v1.placeholder(tf.int64, []), limit=1000))
    dequeue = q.dequeue()
    with fastmts.MonitoredSession() as sess:
      sess.run(dequeue)
      threads = sess.queue_runner_threads
      assert all(isinstance(t, threading.Thread) for t in threads) and len(threads) == 2
    assert not any(t.is_alive() for t in threads)


def test_an_enqueue_op_that_needs_a_feed(check):
  """TF's own loop on an enqueue that needs a feed: the error reaches the
  coordinator and the session's caller, with TF's type and message."""
  def scenario(impl, _):
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(4, tf.int64, shapes=[[]])
      v1.train.add_queue_runner(v1.train.QueueRunner(
          q, [q.enqueue(v1.placeholder(tf.int64, [], name='needs_a_feed'))]))
      got, error = _drain(impl, q.dequeue())
      return got, error.type, 'needs_a_feed' in error.message

  check(scenario, expected=([], tf.errors.InvalidArgumentError, True))


def test_an_enqueue_op_given_by_name(check):
  """A name is no enqueue op for TF's create_threads: the same error."""
  def scenario(impl, _):
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(4, tf.int32, shapes=[[]])
      q.enqueue(1, name='by_name')
      v1.train.add_queue_runner(v1.train.QueueRunner(q, ['by_name']))
      return _drain(impl, q.dequeue())

  check(scenario, expected=([], Raised(AttributeError, "'str' object has no attribute 'name'")))
