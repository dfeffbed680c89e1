"""The graph's QueueRunners, run in native threads that never take the GIL.

For each `tf.compat.v1.train.QueueRunner` in the QUEUE_RUNNERS collection,
_native.QueueRunnerThreads runs one thread per enqueue op plus one that runs
the cancel op when the coordinator stops, with TF's QueueRunner semantics
(close op when the queue closes, other errors to the coordinator). Each
thread is registered with the coordinator as a thread-like object, so
Coordinator.join() waits for them within its grace period.
"""
import time

from tensorflow.python.framework import ops
from tensorflow.python.training import queue_runner_impl as _tf_queue_runner

from fastmts import _native
from fastmts.coordinator import error_codes_of


def runs_only_tf_ops(thread):
  """True for a queue-runner thread: a native one, or a Python thread
  running one of TF's QueueRunner loops (it only runs TF ops)."""
  if isinstance(thread, NativeThread):
    return True
  target = getattr(thread, '_target', None)
  return isinstance(getattr(target, '__self__', None), _tf_queue_runner.QueueRunner)


def poll_until(done, deadline):
  """Sleeps in growing steps until done() or the monotonic deadline (None:
  none); returns done()."""
  wait = 0.001
  while not done():
    if deadline is not None and time.monotonic() >= deadline:
      return False
    time.sleep(wait)
    wait = min(2 * wait, 0.05)
  return True


class NativeThread:
  """One native queue-runner thread, with the threading.Thread API that
  Coordinator.join and users inspect (name, is_alive, join)."""
  daemon = True

  def __init__(self, group, index):
    self._group = group
    self._index = index
    self.name = group.name(index)

  def is_alive(self):
    """Whether the native thread is still running."""
    return self._group.alive(self._index)

  def join(self, timeout=None):
    """Waits for the thread to end, at most `timeout` seconds (None: no
    bound), as threading.Thread.join."""
    poll_until(lambda: not self.is_alive(),
                None if timeout is None else time.monotonic() + timeout)

  def __repr__(self):
    return '<NativeThread %s %s>' % (self.name, 'alive' if self.is_alive() else 'stopped')


def _op(op):
  return None if op is None else op._c_op  # pylint: disable=protected-access


# Groups whose threads may still run. Holding them (and through them their
# tf.Session) here keeps the session out of any garbage cycle, so it is never
# deleted under a running native thread, even by a caller who never closes.
_running = set()


class NativeQueueRunners:
  """Starts the queue runners of `tf_sess`'s graph under `coord`."""

  def __init__(self, tf_sess, coord, collection=ops.GraphKeys.QUEUE_RUNNERS):
    self._tf_sess = tf_sess  # native threads use its TF_Session until joined
    self._groups = []
    self.threads = []
    _running.add(self)
    for qr in tf_sess.graph.get_collection(collection):
      group = _native.QueueRunnerThreads(
          tf_sess, qr.name, [_op(op) for op in qr.enqueue_ops], _op(qr.close_op),
          _op(qr.cancel_op), error_codes_of(qr.queue_closed_exception_types), coord.native)
      self._groups.append(group)
      for i in range(len(group)):
        thread = NativeThread(group, i)
        coord.register_thread(thread)
        self.threads.append(thread)

  def wait(self, timeout):
    """Waits up to `timeout` seconds for every thread to end; True if they did."""
    return poll_until(lambda: not any(t.is_alive() for t in self.threads),
                       time.monotonic() + timeout)

  def join(self):
    """Blocks until every thread ended (the session must have been closed or
    the queues cancelled, so that none stays blocked in TF)."""
    for group in self._groups:
      group.join()
    self._tf_sess = None
    _running.discard(self)

  def shut_down(self, coord, patience_secs):
    """Stops and joins the threads after a failed session creation: they
    get `patience_secs` to end after the stop (and its cancel ops); one
    still blocked in TF then is released by closing the session."""
    coord.request_stop()
    if not self.wait(patience_secs):
      try:
        self._tf_sess.close()
      except Exception:  # pylint: disable=broad-except
        pass  # closing is only a means to release the threads
    self.join()
