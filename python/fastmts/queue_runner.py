"""The graph's QueueRunners, started as TF's start_queue_runners starts them.

A QueueRunner that runs TF's own loop on TF ops (TF's class, or a subclass
that keeps its loop) runs in native threads that never take the GIL:
_native.QueueRunnerThreads runs one thread per enqueue op plus one that runs
the cancel op when the coordinator stops, with TF's QueueRunner semantics
(close op when the queue closes, other errors to the coordinator). Each is
registered with the coordinator as a thread-like object, so
Coordinator.join() waits for it within its grace period. Any other runner
(a subclass with its own `_run`, `_close_on_stop` or `create_threads`, such
as the feeding runner of `numpy_input_fn`, or enqueue "ops" that are not an
Operation or a Tensor) is started by its own `create_threads`, as TF does.
"""
import atexit
import time

from tensorflow.python.framework import ops
from tensorflow.python.training import monitored_session as _tf_monitored_session
from tensorflow.python.training import queue_runner_impl as _tf_queue_runner

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import c_handles
from fastmts._internal import timeouts
from fastmts.coordinator import error_codes_of
from fastmts._internal.tf_call_sites import TFSite


_TF_LOOP = ('_run', '_close_on_stop', 'create_threads')

# Where TF's MonitoredSession calls start_queue_runners, whose deprecation
# warning names its caller's file and line.
_TF_START_SITE = TFSite(
    # TF's private class's method: the source line the warning names.
    _tf_monitored_session._MonitoredSession._CoordinatedSessionCreator.create_session,  # pylint: disable=protected-access
    'start_queue_runners(', callee='start_queue_runners(')


class MonitoredSession:  # pylint: disable=too-few-public-methods
  """What TF's start_queue_runners is given to only warn: its decorator
  prints the deprecation warning, then it returns at once, starting nothing
  and logging nothing more, for a session of this class name (TF's own
  backward compatibility for monitored sessions, since TF 1.3)."""


def start_tf_queue_runners(sess, coord, with_threads=True):
  """TF's start_queue_runners(sess=sess, coord=coord), called from the line
  of TF's MonitoredSession that calls it, so its deprecation warning (once
  per process, by TF's decorator) is TF's to the letter. Without
  `with_threads` it only warns: the native threads run the queue runners."""
  if (_tensorflow.STARTS_QUEUE_RUNNERS_ONLY_WHEN_ANY and
      not ops.get_collection(ops.GraphKeys.QUEUE_RUNNERS)):
    return  # TF would not have called it
  _TF_START_SITE.call(_tf_queue_runner.start_queue_runners,
                      sess=sess if with_threads else MonitoredSession(), coord=coord)


def keeps_tf_loop(runner):
  """Whether `runner`'s threads would run TF's QueueRunner loop: its class
  is TF's or a subclass that overrides none of the loop's methods."""
  cls = type(runner)
  base = _tf_queue_runner.QueueRunner
  return isinstance(runner, base) and all(
      getattr(cls, name, None) is getattr(base, name) for name in _TF_LOOP)


def runs_only_tf_ops(thread):
  """True for a queue-runner thread that only runs TF ops: a native one, or
  a Python thread running TF's own QueueRunner loop."""
  if isinstance(thread, NativeThread):
    return True
  target = getattr(thread, '_target', None)
  return keeps_tf_loop(getattr(target, '__self__', None))


def runs_cancel_op(thread):
  """True for a queue runner's thread that runs its cancel op once the
  coordinator stops (TF's `_close_on_stop`), native or Python."""
  if isinstance(thread, NativeThread):
    return thread.runs_cancel_op
  target = getattr(thread, '_target', None)
  return (keeps_tf_loop(getattr(target, '__self__', None)) and
          # TF's QueueRunner thread target, compared to tell a cancel-op thread.
          getattr(target, '__func__', None) is _tf_queue_runner.QueueRunner._close_on_stop)  # pylint: disable=protected-access


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

  def __init__(self, group, index, runs_cancel_op):
    self._group = group
    self._index = index
    self.name = group.name(index)
    self.runs_cancel_op = runs_cancel_op  # TF's _close_on_stop thread

  def is_alive(self):
    """Whether the native thread is still running."""
    return self._group.alive(self._index)

  def join(self, timeout=None):
    """Waits for the thread to end, at most `timeout` seconds (None: no
    bound), as threading.Thread.join (negative: no wait; the values
    Python's join refuses raise its errors)."""
    if timeout is None:
      poll_until(lambda: not self.is_alive(), None)
      return
    timeout = max(timeout, 0)
    if self.is_alive():
      timeouts.check_lock_timeout(timeout)
    poll_until(lambda: not self.is_alive(), time.monotonic() + timeout)

  def __repr__(self):
    return '<NativeThread %s %s>' % (self.name, 'alive' if self.is_alive() else 'stopped')


def _c_op(fetchable):
  """The TF_Operation handle a native thread runs for `fetchable`, as TF's
  QueueRunner runs it with Session.run: an Operation, or the op of a Tensor
  (running it as a target runs exactly that op; the value is discarded
  either way). None for anything else."""
  if isinstance(fetchable, ops.Operation):
    return c_handles.c_op_of(fetchable)
  if isinstance(fetchable, _tensorflow.Tensor):
    return c_handles.c_op_of(fetchable.op)
  return None


def _native_spec(runner):
  """The handles of `runner`'s enqueue, close and cancel ops (the private
  attributes TF's own loop reads), or None when a native thread cannot run
  the runner exactly as TF would."""
  # pylint: disable=protected-access
  # (TF's QueueRunner keeps its ops in private attributes, which its own loop reads.)
  if not keeps_tf_loop(runner):
    return None
  enqueue_ops = [_c_op(op) for op in runner._enqueue_ops]
  close_op, cancel_op = runner._close_op, runner._cancel_op
  handles = [_c_op(op) if op is not None else None for op in (close_op, cancel_op)]
  if (None in enqueue_ops or any(h is None and op is not None
                                 for h, op in zip(handles, (close_op, cancel_op)))):
    return None
  names = (['QueueRunnerThread-%s-%s' % (runner.name, op.name) for op in runner._enqueue_ops] +
           ['QueueRunnerThread-%s-close_on_stop' % runner.name])
  return enqueue_ops, handles[0], handles[1], names


# Groups whose threads may still run. Holding them (and through them their
# tf.Session) here keeps the session out of any garbage cycle, so it is never
# deleted under a running native thread, even by a caller who never closes.
_running = set()

# How long the threads of a session never closed get at exit to end by
# themselves after the stop before closing the session releases them.
_EXIT_PATIENCE_SECS = 1.0


class QueueRunners:
  """Starts the queue runners of `tf_sess`'s graph under `coord`: natively
  where TF's own loop would run on TF ops, by the runner's own
  create_threads otherwise."""

  def __init__(self, tf_sess, coord, collection=ops.GraphKeys.QUEUE_RUNNERS):
    self._tf_sess = tf_sess  # native threads use its TF_Session until joined
    self.coord = coord  # the Coordinator they run under
    self._groups = []
    self.threads = []
    _running.add(self)
    for qr in tf_sess.graph.get_collection(collection):
      spec = _native_spec(qr)
      if spec is None:
        with tf_sess.graph.as_default():  # as TF's start_queue_runners
          self.threads.extend(qr.create_threads(tf_sess, coord=coord, daemon=True, start=True))
        continue
      enqueue_ops, close_op, cancel_op, names = spec
      group = _native.QueueRunnerThreads(
          tf_sess, names, enqueue_ops, close_op, cancel_op,
          error_codes_of(qr.queue_closed_exception_types), coord.native)
      self._groups.append(group)
      for i in range(len(group)):
        thread = NativeThread(group, i, runs_cancel_op=i >= len(enqueue_ops))
        coord.register_thread(thread)
        self.threads.append(thread)

  def wait(self, timeout):
    """Waits up to `timeout` seconds for every thread to end; True if they did."""
    return poll_until(lambda: not any(t.is_alive() for t in self.threads),
                       time.monotonic() + timeout)

  def join(self):
    """Blocks until every native thread ended (the session must have been
    closed or the queues cancelled, so that none stays blocked in TF).
    Python threads are the coordinator's to join, as in TF."""
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


@atexit.register
def _shut_down_at_exit():
  """The native threads of a session never closed end before the
  interpreter does, while TF is whole: stopped (the cancel ops close their
  queues), and released by closing the session if still blocked in TF.
  TF's own runner threads are daemons the interpreter abandons; a native
  one left running would run its cancel op on a session TF already tore
  down."""
  for runners in list(_running):
    runners.shut_down(runners.coord, _EXIT_PATIENCE_SECS)
