"""The Coordinator's and the session layers' arguments at their edges, as TF.

TF's Coordinator waits on a threading.Event, its queue-runner threads are
threading.Threads, and its SessionManager counts down with time.time():
so a negative or zero timeout does not wait, NaN does not wait either (or
fails where Python's lock refuses it), and a timeout too large for Python's
clock raises Python's error. fastmts waits natively; each scenario here
runs on stock TF and on fastmts and compares return values, errors and
whether a call returned at once. TF's LooperThread, which passes negative
timeouts whenever it runs behind, runs its target and joins. Clean-stop
exception types are kept as given, as TF keeps them.
"""

import math
import threading
import time

import pytest
import tensorflow as tf

from compat_utils import Raised, outcome

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(60)

# "At once": well under a second even on a loaded machine; the waits that
# must end by a timeout are given far longer ones.
_AT_ONCE_SECS = 0.5

_EDGES = [-1, -0.5, 0, -math.inf, math.nan, True, 0.05, math.inf, 1e20, 2**70, '1', [1]]


def _ids(values):
  return [repr(v) for v in values]


def _timed(fn, *args, at_once=_AT_ONCE_SECS):
  """(outcome of fn(*args), whether it returned at once: within `at_once`)."""
  start = time.monotonic()
  result = outcome(fn, *args)
  return result, time.monotonic() - start < at_once


@pytest.mark.parametrize('timeout', _EDGES, ids=_ids(_EDGES))
def test_wait_for_stop_before_stop(check, timeout):
  def scenario(impl, _):
    coord = impl.Coordinator()
    return _timed(coord.wait_for_stop, timeout)

  check(scenario)


@pytest.mark.parametrize('timeout', _EDGES + [None], ids=_ids(_EDGES + [None]))
def test_wait_for_stop_after_stop(check, timeout):
  """A stopped coordinator answers True at once, whatever the timeout."""
  def scenario(impl, _):
    coord = impl.Coordinator()
    coord.request_stop()
    return _timed(coord.wait_for_stop, timeout)

  check(scenario, expected=(True, True))


def test_wait_for_stop_wakes_on_stop(check):
  def scenario(impl, _):
    coord = impl.Coordinator()
    threading.Timer(0.05, coord.request_stop).start()
    return coord.wait_for_stop(30.0), coord.should_stop()

  check(scenario, expected=(True, True))


@pytest.mark.parametrize('interval', [0, 0.001], ids=['zero', '1ms'])
def test_looper_thread_runs_and_joins(check, interval):
  """LooperThread waits `next_timer_time - time.time()`, negative whenever
  it runs behind (always with a zero interval)."""
  def scenario(impl, _):
    coord = impl.Coordinator()
    calls = []

    def target():
      calls.append(1)
      if len(calls) == 5:
        coord.request_stop()

    looper = v1.train.LooperThread.loop(coord, interval, target=target)
    coord.join([looper], stop_grace_period_secs=10)
    return len(calls), looper.is_alive(), coord.joined

  check(scenario, expected=(5, False, True))


@pytest.mark.parametrize('grace', [-1, 0, math.nan, 0.05], ids=_ids([-1, 0, math.nan, 0.05]))
def test_join_grace_period_edges(check, grace):
  """A straggler after stop: join waits out the grace period (none for a
  negative or NaN one) and names it."""
  def scenario(impl, _):
    coord = impl.Coordinator()
    release = threading.Event()
    straggler = threading.Thread(target=release.wait, args=(30,), name='straggler')
    straggler.start()
    try:
      coord.request_stop()
      return _timed(coord.join, [straggler], grace)
    finally:
      release.set()
      straggler.join()

  check(scenario, expected=(
      Raised(RuntimeError, 'Coordinator stopped with threads still running: straggler'), True))


_JOIN_EDGES = [-1, 0, 0.05, math.nan, math.inf, 1e20]


@pytest.mark.parametrize('timeout', _JOIN_EDGES, ids=_ids(_JOIN_EDGES))
def test_join_a_queue_runner_thread(check, timeout):
  """A queue runner's thread (a threading.Thread in TF, a native thread in
  fastmts) joined with a timeout while it runs: Thread.join's rules."""
  def scenario(impl, _):
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(1, tf.int32, shapes=[[]])
      v1.train.add_queue_runner(v1.train.QueueRunner(q, [q.enqueue(1)]))
      dequeue = q.dequeue()
      with impl.MonitoredSession() as sess:
        sess.run(dequeue)
        waiting = [t for t in sess._coordinated_creator.coord._registered_threads  # pylint: disable=protected-access
                   if t.name.endswith('close_on_stop')]
        assert len(waiting) == 1
        result, at_once = _timed(waiting[0].join, timeout)
        # Not compared after an error: Python 3.7 to 3.12's Thread.join
        # marks a thread stopped when its wait raises, though it runs on.
        alive = waiting[0].is_alive() if not isinstance(result, Raised) else None
        return result, at_once, alive

  check(scenario)


@pytest.mark.parametrize('max_wait_secs', [-1, 0, math.nan], ids=_ids([-1, 0, math.nan]))
def test_worker_max_wait_secs_edges(check, max_wait_secs):
  """A worker whose model never gets ready: TF's count-down ends the wait
  at once for a negative, zero or NaN max_wait_secs (with its error)."""
  def scenario(impl, _):
    with tf.Graph().as_default():
      v1.get_variable('never_initialized', [])
      creator = impl.WorkerSessionCreator(max_wait_secs=max_wait_secs)
      # At once, but after making a session and running the readiness check
      # (seconds on a loaded machine; a wait would go on for good).
      return _timed(creator.create_session, at_once=10)

  check(scenario)


@pytest.mark.parametrize('types', [[1], 'ab', (ValueError,)], ids=['not-a-class', 'a-string', 'plain'])
def test_clean_stop_exception_types_are_checked_when_used(check, types):
  """TF keeps whatever it is given and fails only when it filters an error."""
  def scenario(impl, _):
    coord = impl.Coordinator(clean_stop_exception_types=types)
    return outcome(coord.request_stop, ValueError('x')), coord.should_stop()

  check(scenario)
