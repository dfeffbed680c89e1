"""Coordinator and queue runners, compared with stock TF.

* ``Coordinator``: ``request_stop`` / ``should_stop`` / ``stop_on_exception`` /
  ``wait_for_stop`` / ``join`` (grace period, stragglers, re-raising) /
  ``clear_stop`` / ``raise_requested_exception`` / ``register_thread`` /
  ``joined``, driven from Python threads side by side with
  ``tf.compat.v1.train.Coordinator`` (return values, exceptions, TF log lines).
* Queue runners in monitored sessions (native threads in fastmts): TF1 input
  pipelines (``string_input_producer``, ``input_producer``,
  ``range_input_producer``, ``batch``, ``shuffle_batch``, ``FIFOQueue`` /
  ``RandomShuffleQueue`` fed through ``QueueRunner``) deliver the same
  examples in the same number of steps and end cleanly; an enqueue error
  surfaces with TF's type; stopping with enqueues blocked on a full queue
  closes promptly; close honours the stop grace period; no thread outlives a
  session; a hook's coordinator stops training.
* fastmts only: ``sess.coordinator``, ``sess.queue_runner_threads``,
  ``fastmts._native.live_native_threads()``, and Python threads running freely
  beside the native queue-runner threads.
"""

import re
import sys
import threading
import time

import pytest
import tensorflow as tf

from compat_utils import TF_IMPL, Raised, ckpt_files, outcome
import hook_test_utils

v1 = tf.compat.v1
errors = tf.errors

# Close of a session whose queue runners are blocked must take less than this.
_PROMPT_CLOSE_SECS = 10.0


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def coord_lines(lines):
  """The log entries about the coordinator, messages cut to their first line
  (TF error messages go on with node details)."""
  return [(e[0], e[1].split('\n', 1)[0]) + tuple(e[2:]) for e in lines
          if 'Coordinator' in e[1]]


# Queue resource names carry a process-wide counter: '_3_input_producer'.
_QUEUE_ID = re.compile(r"'_\d+_")


def tf_log(with_exc_info=False):
  """hook_test_utils.tf_log: yields the list of (level, message[, has
  exc_info]) logged meanwhile to TF's logger (at INFO and above), queue ids
  in messages as '_N_."""
  return hook_test_utils.tf_log(
      exact=True, with_exc_info=with_exc_info,
      rewrite=lambda message: _QUEUE_ID.sub("'_N_", message))


def head(message):
  """The informative line of a TF error message: the queue's complaint when
  there is one (session errors start with 'Graph execution error:' and the
  op's creation stack), else the first line."""
  lines = [l.strip() for l in str(message).splitlines() if l.strip()]
  for line in lines:
    if re.search(r"Queue '_\d+_", line):
      return _QUEUE_ID.sub("'_N_", line)
  return lines[0] if lines else ''


def err(e):
  """Raised record of an exception: its exact class and head(message)."""
  return Raised(type(e), head(e))


def err_outcome(fn, *args, **kwargs):
  try:
    return fn(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    return err(e)


def plain(value):
  """numpy results as plain Python values (lists, ints, bytes)."""
  if hasattr(value, 'tolist'):
    return value.tolist()
  return value


def start_thread(target, name=None, threads=None):
  t = threading.Thread(target=target, name=name, daemon=True)
  t.start()
  if threads is not None:
    threads.append(t)
  return t


def join_all(threads, timeout=10.0):
  for t in threads:
    t.join(timeout)
  assert not any(t.is_alive() for t in threads), 'test threads left running'


def report(coord, ex):
  """Raises `ex` and reports it to `coord` from the except clause, as TF's
  Coordinator requires."""
  try:
    raise ex
  except Exception as e:  # pylint: disable=broad-except
    coord.request_stop(e)


def oor(message='done'):
  return errors.OutOfRangeError(None, None, message)


def step_counter():
  """(global_step, train): `train` increments the global step."""
  gs = v1.train.get_or_create_global_step()
  return gs, v1.assign_add(gs, 1, name='train')


def counted(x):
  """(x, train): `train` returns the incremented global step after x."""
  gs = v1.train.get_or_create_global_step()
  with tf.control_dependencies(tf.nest.flatten(x)):
    train = v1.assign_add(gs, 1, name='train')
  return x, train


def drain(impl, fetch, workdir=None, hooks=None, limit=500):
  """Runs `fetch` ([example, train]) until the session stops inside
  `with impl.MonitoredTrainingSession(...)`.  Returns dict(examples, steps,
  ended_by (the OutOfRangeError a run raised, which `with` swallows),
  after_with)."""
  examples = []
  steps = None
  ended_by = None
  with impl.MonitoredTrainingSession(checkpoint_dir=workdir,
                                     hooks=hooks) as sess:
    while not sess.should_stop():
      assert len(examples) < limit, 'input pipeline did not end'
      try:
        example, steps = sess.run(fetch)
      except errors.OutOfRangeError as e:
        ended_by = err(e)
        raise
      examples.append(plain(example))
  return dict(examples=examples, steps=plain(steps), ended_by=ended_by,
              after_with=True)


def ended(queue_name, requested):
  return Raised(
      errors.OutOfRangeError,
      f"{queue_name} is closed and has insufficient elements "
      f"(requested {requested}, current size 0)")


# ---------------------------------------------------------------------------
# Coordinator, side by side with tf.compat.v1.train.Coordinator
# ---------------------------------------------------------------------------


def test_coordinator_request_stop_and_wait(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    out = {}
    out['initial'] = (coord.should_stop(), coord.joined,
                      coord.wait_for_stop(0.05))
    threads = []
    try:
      # Another thread requests stop after a while; wait_for_stop wakes up.
      start_thread(lambda: (time.sleep(0.2), coord.request_stop()),
                   'stopper', threads)
      t0 = time.monotonic()
      woke = coord.wait_for_stop(10.0)
      out['woke'] = (woke, time.monotonic() - t0 < 5.0)
      out['stopped'] = (coord.should_stop(), coord.wait_for_stop(),
                        coord.wait_for_stop(0.0))
      out['second_request'] = coord.request_stop()
      out['raise_requested'] = outcome(coord.raise_requested_exception)
      with tf_log() as lines:
        out['join'] = outcome(coord.join)
      out['joined'] = coord.joined
      out['log'] = lines
    finally:
      join_all(threads)
    return out

  check(scenario, expected=dict(
      initial=(False, False, False), woke=(True, True),
      stopped=(True, True, True), second_request=None, raise_requested=None,
      join=None, joined=True, log=[]))


def test_coordinator_first_exception_wins(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    first = ValueError('first')
    threads = []
    caught = {}

    def report(ex):
      try:
        raise ex
      except Exception as e:  # pylint: disable=broad-except
        coord.request_stop(e)

    try:
      with tf_log(with_exc_info=True) as lines:
        # One after the other, so which one is first is deterministic.
        for name, ex in [('t1', first), ('t2', RuntimeError('second')),
                         ('t3', TypeError('third'))]:
          start_thread(lambda ex=ex: report(ex), name, threads).join(10)
        try:
          coord.raise_requested_exception()
        except Exception as e:  # pylint: disable=broad-except
          caught['raise_requested'] = (Raised(type(e), str(e)), e is first)
        try:
          coord.join(threads, stop_grace_period_secs=0.5)
          caught['join'] = 'returned'
        except Exception as e:  # pylint: disable=broad-except
          caught['join'] = (Raised(type(e), str(e)), e is first)
    finally:
      join_all(threads)
    return dict(caught=caught, should_stop=coord.should_stop(),
                joined=coord.joined, log=lines)

  check(scenario, expected=dict(
      caught=dict(raise_requested=(Raised(ValueError, 'first'), True),
                  join=(Raised(ValueError, 'first'), True)),
      should_stop=True, joined=True,
      log=[('INFO', "Error reported to Coordinator: <class 'ValueError'>, "
            'first', False)]))


def test_coordinator_exc_info_tuple(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    threads = []
    box = {}

    def body():
      try:
        raise KeyError('missing')
      except KeyError:
        box['exc'] = sys.exc_info()[1]
        coord.request_stop(sys.exc_info())
      # A later report, even as a tuple, does not replace the first.
      try:
        raise ValueError('later')
      except ValueError:
        coord.request_stop(sys.exc_info())

    try:
      with tf_log(with_exc_info=True) as lines:
        start_thread(body, 'reporter', threads).join(10)
        out = dict(should_stop=coord.should_stop())
        try:
          coord.join(threads)
          out['join'] = 'returned'
        except Exception as e:  # pylint: disable=broad-except
          out['join'] = (Raised(type(e), str(e)), e is box['exc'])
    finally:
      join_all(threads)
    out['log'] = lines
    return out

  check(scenario, expected=dict(
      should_stop=True, join=(Raised(KeyError, "'missing'"), True),
      log=[('INFO', "Error reported to Coordinator: 'missing'", True)]))


def test_coordinator_out_of_range_is_a_clean_stop(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    threads = []

    def body():
      try:
        raise oor('end of input')
      except errors.OutOfRangeError as e:
        coord.request_stop(e)
      # After a clean stop later exceptions are ignored too (already stopped).
      try:
        raise ValueError('after')
      except ValueError as e:
        coord.request_stop(e)

    try:
      with tf_log() as lines:
        start_thread(body, 'input', threads)
        out = dict(woke=coord.wait_for_stop(10.0))
        out['raise_requested'] = outcome(coord.raise_requested_exception)
        out['join'] = outcome(coord.join, threads)
    finally:
      join_all(threads)
    out['should_stop'] = coord.should_stop()
    out['log'] = lines
    return out

  check(scenario, expected=dict(woke=True, raise_requested=None, join=None,
                                should_stop=True, log=[]))


@pytest.mark.parametrize('clean_types,reported,expected', [
    # StopIteration listed: a clean stop.
    ((StopIteration,), StopIteration('exhausted'), None),
    # OutOfRangeError is clean only by default.
    ((StopIteration,), 'oor', Raised(errors.OutOfRangeError, 'done')),
    ([], 'oor', Raised(errors.OutOfRangeError, 'done')),
    ([ValueError], ValueError('v'), None),
    # Subclasses of a listed type are clean too.
    ((LookupError,), KeyError('k'), None),
    ((LookupError,), TypeError('t'), Raised(TypeError, 't')),
])
def test_coordinator_clean_stop_exception_types(check, clean_types, reported,
                                                expected):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator(clean_stop_exception_types=clean_types)
    ex = oor() if reported == 'oor' else reported
    threads = []

    def body():
      try:
        raise ex
      except Exception as e:  # pylint: disable=broad-except
        coord.request_stop(e)

    try:
      with tf_log() as lines:
        start_thread(body, 'worker', threads).join(10)
        result = (coord.should_stop(), outcome(coord.join, threads))
    finally:
      join_all(threads)
    return result, [l[0] for l in lines]

  check(scenario, expected=((True, expected),
                            [] if expected is None else ['INFO']))


def test_coordinator_stop_on_exception(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    threads = []
    after = []

    def quiet():
      with coord.stop_on_exception():
        after.append('quiet body')
      after.append(('after quiet', coord.should_stop()))

    def failing():
      with coord.stop_on_exception():
        raise ValueError('boom')
      # The context manager swallows the exception: this line runs.
      after.append(('after failing', coord.should_stop()))  # pylint: disable=unreachable

    try:
      with tf_log(with_exc_info=True) as lines:
        start_thread(quiet, 'quiet', threads).join(10)
        start_thread(failing, 'failing', threads).join(10)
        result = err_outcome(coord.join, threads, stop_grace_period_secs=0.5)
    finally:
      join_all(threads)
    return after, result, lines

  check(scenario, expected=(
      ['quiet body', ('after quiet', False), ('after failing', True)],
      Raised(ValueError, 'boom'),
      [('INFO', 'Error reported to Coordinator: boom', True)]))


def test_coordinator_join_waits_for_stop_then_threads(check):
  """join() returns once the threads are done; threads that end without a
  stop request end join() without a stop."""

  def scenario(impl, workdir):
    del workdir
    out = {}
    threads = []
    try:
      # Threads that finish on their own: join returns, nobody stopped.
      coord = impl.Coordinator()
      short = [start_thread(lambda: time.sleep(0.1), f'short{i}', threads)
               for i in range(2)]
      out['no_stop'] = (outcome(coord.join, short), coord.should_stop(),
                        coord.joined, [t.is_alive() for t in short])

      # Threads waiting for the stop, one registered, one passed to join.
      coord = impl.Coordinator()
      done = []

      def waiter(name):
        coord.wait_for_stop()
        time.sleep(0.05)
        done.append(name)

      registered = threading.Thread(target=lambda: waiter('registered'),
                                    name='registered', daemon=True)
      coord.register_thread(registered)
      registered.start()
      threads.append(registered)
      passed = start_thread(lambda: waiter('passed'), 'passed', threads)
      start_thread(lambda: (time.sleep(0.2), coord.request_stop()),
                   'stopper', threads)
      t0 = time.monotonic()
      joined = outcome(coord.join, [passed], stop_grace_period_secs=5)
      out['stop'] = (joined, sorted(done), registered.is_alive(),
                     passed.is_alive(), coord.joined,
                     time.monotonic() - t0 < 5.0)
    finally:
      join_all(threads)
    return out

  check(scenario, expected=dict(
      no_stop=(None, False, True, [False, False]),
      stop=(None, ['passed', 'registered'], False, False, True, True)))


@pytest.mark.parametrize('ignore_live_threads', [False, True])
def test_coordinator_join_grace_period_stragglers(check, ignore_live_threads):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    release = threading.Event()
    threads = []
    try:
      # Ignores the stop for up to 5 s (released in finally).
      lazy = threading.Thread(target=lambda: release.wait(5.0), name='lazy-1',
                              daemon=True)
      coord.register_thread(lazy)
      lazy.start()
      threads.append(lazy)
      prompt = start_thread(coord.wait_for_stop, 'prompt', threads)
      coord.request_stop()
      with tf_log() as lines:
        t0 = time.monotonic()
        result = outcome(coord.join, [prompt], stop_grace_period_secs=0.3,
                         ignore_live_threads=ignore_live_threads)
        elapsed = time.monotonic() - t0
      return dict(result=result, elapsed_ok=0.25 <= elapsed < 3.0,
                  lazy_alive=lazy.is_alive(), prompt_alive=prompt.is_alive(),
                  joined=coord.joined, log=lines)
    finally:
      release.set()
      join_all(threads)

  message = 'Coordinator stopped with threads still running: lazy-1'
  check(scenario, expected=dict(
      result=None if ignore_live_threads else Raised(RuntimeError, message),
      elapsed_ok=True, lazy_alive=True, prompt_alive=False, joined=True,
      log=[('INFO', message)] if ignore_live_threads else []))


def test_coordinator_join_several_stragglers(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    release = threading.Event()
    threads = [start_thread(lambda: release.wait(5.0), f'lazy-{i}')
               for i in range(3)]
    try:
      coord.request_stop()
      try:
        coord.join(threads, stop_grace_period_secs=0.2)
        return 'returned'
      except RuntimeError as e:
        prefix, names = str(e).split(': ', 1)
        # The names come from a set: their order is unspecified.
        return prefix, sorted(names.split(' '))
    finally:
      release.set()
      join_all(threads)

  check(scenario, expected=('Coordinator stopped with threads still running',
                            ['lazy-0', 'lazy-1', 'lazy-2']))


def test_coordinator_reported_exception_beats_stragglers(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    release = threading.Event()
    threads = [start_thread(lambda: release.wait(5.0), 'lazy')]
    try:
      report(coord, ValueError('root cause'))
      with tf_log() as lines:
        result = err_outcome(coord.join, threads, stop_grace_period_secs=0.2,
                             ignore_live_threads=True)
      return result, lines, coord.joined
    finally:
      release.set()
      join_all(threads)

  check(scenario, expected=(Raised(ValueError, 'root cause'), [], True))


def test_coordinator_request_stop_after_join(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    out = {}
    coord.request_stop()
    out['join'] = outcome(coord.join)
    # No exception, or a clean-stop one: nothing happens.
    out['none'] = outcome(coord.request_stop)
    try:
      raise oor()
    except errors.OutOfRangeError as e:
      out['clean'] = outcome(coord.request_stop, e)
    # An exception (in the except clause that caught it) is raised at once.
    late = ValueError('late')
    try:
      raise late
    except ValueError as e:
      try:
        coord.request_stop(e)
        out['exception'] = 'returned'
      except Exception as e2:  # pylint: disable=broad-except
        out['exception'] = (Raised(type(e2), str(e2)), e2 is late)
    # An exc_info tuple too, from anywhere.
    try:
      raise KeyError('tuple')
    except KeyError:
      info = sys.exc_info()
    out['tuple'] = outcome(coord.request_stop, info)
    out['state'] = (coord.should_stop(), coord.joined,
                    outcome(coord.raise_requested_exception))
    return out

  check(scenario, expected=dict(
      join=None, none=None, clean=None,
      exception=(Raised(ValueError, 'late'), True),
      tuple=Raised(KeyError, "'tuple'"), state=(True, True, None)))


def test_coordinator_request_stop_after_join_outside_except(check):
  """TF quirk: after join, an exception passed outside an except clause makes
  request_stop raise sys.exc_info()[1], i.e. `raise None`."""

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    coord.request_stop()
    coord.join()
    return outcome(coord.request_stop, ValueError('not being handled'))

  check(scenario, expected=Raised(
      TypeError, 'exceptions must derive from BaseException'))


def test_coordinator_exception_outside_except_clause(check):
  """TF quirk: an exception instance reported outside an except clause (so
  sys.exc_info() is empty) is logged, then request_stop itself fails
  formatting its complaint (TypeError), the stop is not set, and the recorded
  (None, None, None) makes raise_requested_exception / join `raise None`."""

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    with tf_log(with_exc_info=True) as lines:
      request = outcome(coord.request_stop, ValueError('not raised'))
    return (request, coord.should_stop(),
            outcome(coord.raise_requested_exception), lines)

  check(scenario, expected=(
      Raised(TypeError, 'not all arguments converted during string '
             'formatting'),
      False,
      Raised(TypeError, 'exceptions must derive from BaseException'),
      [('INFO', "Error reported to Coordinator: <class 'ValueError'>, "
        'not raised', False)]))


def test_coordinator_clear_stop(check):

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    release = threading.Event()
    threads = []
    out = {}
    try:
      lazy = threading.Thread(target=lambda: release.wait(5.0), name='lazy',
                              daemon=True)
      coord.register_thread(lazy)
      lazy.start()
      threads.append(lazy)
      report(coord, ValueError('one'))
      out['join1'] = err_outcome(coord.join, stop_grace_period_secs=0.2)
      out['joined1'] = coord.joined
      coord.clear_stop()
      out['cleared'] = (coord.should_stop(), coord.joined,
                        coord.wait_for_stop(0.01),
                        outcome(coord.raise_requested_exception))
      # join() forgot its registered threads: `lazy` (alive) is no straggler.
      coord.request_stop()
      with tf_log() as lines:
        out['join2'] = outcome(coord.join, stop_grace_period_secs=0.2)
      out['log2'] = lines
      out['lazy_alive'] = lazy.is_alive()
      # A new exception is recorded again after clear_stop.
      coord.clear_stop()
      report(coord, TypeError('two'))
      out['join3'] = err_outcome(coord.join)
      out['raise3'] = err_outcome(coord.raise_requested_exception)
    finally:
      release.set()
      join_all(threads)
    return out

  check(scenario, expected=dict(
      join1=Raised(ValueError, 'one'), joined1=True,
      cleared=(False, False, False, None), join2=None, log2=[],
      lazy_alive=True, join3=Raised(TypeError, 'two'),
      raise3=Raised(TypeError, 'two')))


def test_coordinator_threads_report_while_others_wait(check):
  """The usual pattern: workers loop on should_stop(); one fails; join
  re-raises its exception once all stopped."""

  def scenario(impl, workdir):
    del workdir
    coord = impl.Coordinator()
    threads = []
    iterations = {}

    def worker(name, fail_at):
      n = 0
      with coord.stop_on_exception():
        while not coord.should_stop():
          n += 1
          if fail_at is not None and n == fail_at:
            raise RuntimeError(f'{name} failed')
          time.sleep(0.005)
      iterations[name] = n >= (fail_at or 1)

    try:
      for i in range(3):
        coord.register_thread(start_thread(
            lambda i=i: worker(f'w{i}', 5 if i == 1 else None), f'w{i}',
            threads))
      result = err_outcome(coord.join, stop_grace_period_secs=5)
    finally:
      join_all(threads)
    return result, dict(sorted(iterations.items())), coord.joined

  check(scenario, expected=(Raised(RuntimeError, 'w1 failed'),
                            {'w0': True, 'w1': True, 'w2': True}, True))


# ---------------------------------------------------------------------------
# Queue runners: TF1 input pipelines in monitored sessions
# ---------------------------------------------------------------------------


def test_string_input_producer_epochs(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      x = v1.train.string_input_producer(['a', 'b', 'c'], num_epochs=2,
                                         shuffle=False).dequeue()
      result = drain(impl, counted(x), workdir=workdir)
      result['files'] = ckpt_files(workdir)
      return result

  check(scenario, expected=dict(
      examples=[b'a', b'b', b'c'] * 2, steps=6,
      ended_by=ended("FIFOQueue '_N_input_producer'", 1), after_with=True,
      files=['checkpoint', 'graph.pbtxt',
             'model.ckpt-0.data-00000-of-00001', 'model.ckpt-0.index',
             'model.ckpt-0.meta', 'model.ckpt-6.data-00000-of-00001',
             'model.ckpt-6.index', 'model.ckpt-6.meta']))


def test_input_producer_rows(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      rows = tf.constant([[1, 2], [3, 4], [5, 6]])
      x = v1.train.input_producer(rows, num_epochs=2, shuffle=False,
                                  capacity=4).dequeue()
      return drain(impl, counted(x))

  check(scenario, expected=dict(
      examples=[[1, 2], [3, 4], [5, 6]] * 2, steps=6,
      ended_by=ended("FIFOQueue '_N_input_producer/FIFOQueueV2'", 1), after_with=True))


def test_range_input_producer_batch_with_smaller_final_batch(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = v1.train.range_input_producer(10, num_epochs=1,
                                        shuffle=False).dequeue()
      batch = v1.train.batch([x], batch_size=3, capacity=4,
                             allow_smaller_final_batch=True)
      return drain(impl, counted(batch))

  check(scenario, expected=dict(
      examples=[[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]], steps=4,
      ended_by=ended("FIFOQueue '_N_batch/fifo_queue'", 3), after_with=True))


def test_range_input_producer_batch_drops_final_partial_batch(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = v1.train.range_input_producer(7, num_epochs=1,
                                        shuffle=False).dequeue()
      batch = v1.train.batch([x], batch_size=2, capacity=3)
      result = drain(impl, counted(batch))
      # dequeue_many may take the last element before failing: the counts in
      # the message depend on timing.
      result['ended_by'] = result['ended_by'].type
      return result

  check(scenario, expected=dict(
      examples=[[0, 1], [2, 3], [4, 5]], steps=3,
      ended_by=errors.OutOfRangeError, after_with=True))


def test_shuffle_batch_same_multiset(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = v1.train.range_input_producer(10, num_epochs=2, shuffle=True,
                                        seed=3).dequeue()
      batch = v1.train.shuffle_batch(
          [x], batch_size=4, capacity=20, min_after_dequeue=5, num_threads=2,
          seed=4, allow_smaller_final_batch=True)
      result = drain(impl, counted(batch))
      batches = result.pop('examples')
      result['sizes'] = [len(b) for b in batches]
      result['multiset'] = sorted(v for b in batches for v in b)
      return result

  check(scenario, expected=dict(
      steps=5,
      ended_by=ended("RandomShuffleQueue '_N_shuffle_batch/random_shuffle_queue'",
                     4),
      after_with=True, sizes=[4] * 5,
      multiset=sorted(list(range(10)) * 2)))


def test_fifo_queue_runner_enqueue_many(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(4, [tf.int32], shapes=[[]])
      data = v1.train.limit_epochs(tf.range(10), num_epochs=2)
      qr = v1.train.QueueRunner(q, [q.enqueue_many([data])])
      v1.train.add_queue_runner(qr)
      return drain(impl, counted(q.dequeue()))

  check(scenario, expected=dict(
      examples=list(range(10)) * 2, steps=20,
      ended_by=ended("FIFOQueue '_N_fifo_queue'", 1), after_with=True))


def test_random_shuffle_queue_runner_two_enqueue_ops(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      q = tf.queue.RandomShuffleQueue(32, 5, [tf.int32], shapes=[[]], seed=7)
      # Two enqueue threads share the epoch counter: 3 epochs in all.
      data = v1.train.limit_epochs(tf.range(10), num_epochs=3)
      qr = v1.train.QueueRunner(
          q, [q.enqueue_many([data]), q.enqueue_many([data])])
      v1.train.add_queue_runner(qr)
      result = drain(impl, counted(q.dequeue()))
      result['examples'] = sorted(result['examples'])
      return result

  check(scenario, expected=dict(
      examples=sorted(list(range(10)) * 3), steps=30,
      ended_by=ended("RandomShuffleQueue '_N_random_shuffle_queue'", 1),
      after_with=True))


def test_two_queue_runners_chained(check):
  """A FIFOQueue fed by a producer feeding a second queue (two runners, two
  threads on the second), dequeued in batches of 5 with dequeue_many."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = v1.train.range_input_producer(12, num_epochs=1,
                                        shuffle=False).dequeue()
      q = tf.queue.FIFOQueue(6, [tf.int32], shapes=[[]])
      qr = v1.train.QueueRunner(q, [q.enqueue(x), q.enqueue(x)])
      v1.train.add_queue_runner(qr)
      result = drain(impl, counted(q.dequeue_many(5)))
      batches = result.pop('examples')
      result['multiset'] = sorted(v for b in batches for v in b)
      result['distinct'] = len(set(result['multiset']))
      # The counts in the message depend on timing (see above).
      result['ended_by'] = result['ended_by'].type
      # Which 10 of the 12 are delivered depends on the two threads' race.
      result['subset'] = set(result.pop('multiset')) <= set(range(12))
      return result

  # 12 elements, batches of 5: two full batches, the last 2 never delivered.
  check(scenario, expected=dict(steps=2, ended_by=errors.OutOfRangeError,
                                after_with=True, distinct=10, subset=True))


def test_stop_at_step_hook_with_endless_queue(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(3, [tf.int32], shapes=[[]])
      qr = v1.train.QueueRunner(q, [q.enqueue_many([tf.range(4)])])
      v1.train.add_queue_runner(qr)
      return drain(impl, counted(q.dequeue()),
                   hooks=[impl.StopAtStepHook(last_step=10)])

  check(scenario, expected=dict(
      examples=[0, 1, 2, 3, 0, 1, 2, 3, 0, 1], steps=10, ended_by=None,
      after_with=True))


# ---------------------------------------------------------------------------
# Queue runners: errors, stopping, grace period, threads
# ---------------------------------------------------------------------------


def failing_enqueue_graph(good_before_failure=0):
  """A FIFOQueue whose runner's enqueue fails (tf.compat.v1.Assert) once
  `good_before_failure` values 0, 1, ... were enqueued.  Returns the dequeue."""
  counter = v1.get_local_variable('counter', initializer=tf.constant(0))
  value = v1.assign_add(counter, 1) - 1
  check_op = v1.Assert(value < good_before_failure, ['enqueue failed', value])
  with tf.control_dependencies([check_op]):
    value = tf.identity(value)
  q = tf.queue.FIFOQueue(4, [tf.int32], shapes=[[]])
  v1.train.add_queue_runner(v1.train.QueueRunner(q, [q.enqueue(value)]))
  return q.dequeue()


@pytest.mark.parametrize('good_before_failure', [0, 3])
def test_enqueue_error_surfaces_from_with_block(check, good_before_failure):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      deq = failing_enqueue_graph(good_before_failure)
      got = []
      with tf_log() as lines:
        try:
          with impl.MonitoredTrainingSession() as sess:
            while not sess.should_stop():
              assert len(got) < 100
              got.append(plain(sess.run(deq)))
          outcome_ = 'no error'
        except Exception as e:  # pylint: disable=broad-except
          outcome_ = err(e)
      # How many values the model saw before the error surfaced is a race;
      # they are a prefix of what was enqueued.
      return (outcome_, got == list(range(len(got))),
              len(got) <= good_before_failure, coord_lines(lines))

  message = f'assertion failed: [enqueue failed] [{good_before_failure}]'
  check(scenario, expected=(
      Raised(errors.InvalidArgumentError, message), True, True,
      [('INFO', 'Error reported to Coordinator: <class '
        "'tensorflow.python.framework.errors_impl.InvalidArgumentError'>, "
        + message)]))


def test_enqueue_error_raised_by_close(check):
  """Outside `with`: whatever the loop saw first (the OutOfRangeError of the
  cancelled queue, the error itself, or nothing: should_stop() may find the
  error in the coordinator before any run fails, and TF's recoverable
  session then answers True), close() raises the enqueue error."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      deq = failing_enqueue_graph(0)
      sess = impl.MonitoredSession()
      first = None
      try:
        try:
          while not sess.should_stop():
            sess.run(deq)
        except Exception as e:  # pylint: disable=broad-except
          first = type(e)
      finally:
        closed = err_outcome(sess.close)
      return (first in (None, errors.OutOfRangeError, errors.InvalidArgumentError),
              closed, outcome(sess.close))

  check(scenario, expected=(
      True,
      Raised(errors.InvalidArgumentError,
             'assertion failed: [enqueue failed] [0]'),
      Raised(RuntimeError, 'Session is already closed.')))


def test_enqueue_error_in_py_func(check):

  def scenario(impl, workdir):
    del workdir

    def produce():
      raise ValueError('python producer failed')

    with tf.Graph().as_default():
      value = v1.py_func(produce, [], tf.int64, stateful=True)
      value.set_shape([])
      q = tf.queue.FIFOQueue(4, [tf.int64], shapes=[[]])
      v1.train.add_queue_runner(v1.train.QueueRunner(q, [q.enqueue(value)]))
      deq = q.dequeue()
      try:
        with impl.MonitoredTrainingSession() as sess:
          while not sess.should_stop():
            sess.run(deq)
        return 'no error'
      except Exception as e:  # pylint: disable=broad-except
        return type(e), 'python producer failed' in str(e)

  check(scenario, expected=(errors.InvalidArgumentError, True))


@pytest.mark.parametrize('model', ['never_dequeued', 'dequeue_3_steps'])
def test_stop_with_enqueues_blocked_on_full_queue(check, model):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(2, [tf.int32], shapes=[[]])
      qr = v1.train.QueueRunner(
          q, [q.enqueue(tf.constant(7)), q.enqueue(tf.constant(8))])
      v1.train.add_queue_runner(qr)
      if model == 'never_dequeued':
        fetch = counted(tf.constant(0))
      else:
        fetch = counted(q.dequeue())
      examples = []
      sess = impl.MonitoredTrainingSession(
          hooks=[impl.StopAtStepHook(last_step=3)])
      try:
        while not sess.should_stop():
          example, _ = sess.run(fetch)
          examples.append(plain(example))
        time.sleep(0.2)  # the runners fill the queue and block
      finally:
        t0 = time.monotonic()
        sess.close()
        elapsed = time.monotonic() - t0
      return dict(steps=len(examples),
                  examples_ok=set(examples) <= {0, 7, 8},
                  closed_promptly=elapsed < _PROMPT_CLOSE_SECS)

  check(scenario, expected=dict(steps=3, examples_ok=True,
                                closed_promptly=True))


def test_with_block_exit_with_full_queue_is_prompt(check):
  """An exception leaving `with` while enqueues block: the exception comes
  out, promptly."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      q = tf.queue.FIFOQueue(2, [tf.int32], shapes=[[]])
      v1.train.add_queue_runner(
          v1.train.QueueRunner(q, [q.enqueue(tf.constant(1))]))
      deq = q.dequeue()
      t0 = None
      try:
        with impl.MonitoredSession() as sess:
          sess.run(deq)
          time.sleep(0.2)
          t0 = time.monotonic()
          raise KeyError('user error')
      except KeyError as e:
        return repr(e), time.monotonic() - t0 < _PROMPT_CLOSE_SECS

  check(scenario, expected=("KeyError('user error')", True))


def straggler_hook_class(impl):
  """A hook starting, in after_create_session, a thread registered with the
  session's coordinator that ignores the stop for up to 3 s."""

  class StragglerHook(impl.SessionRunHook):

    def __init__(self):
      self.release = threading.Event()
      self.thread = None
      self.stop_seen_by_thread = []

    def after_create_session(self, session, coord):
      del session

      def body():
        self.release.wait(3.0)
        self.stop_seen_by_thread.append(coord.should_stop())

      self.thread = threading.Thread(target=body, name='straggler',
                                     daemon=True)
      coord.register_thread(self.thread)
      self.thread.start()

    def cleanup(self):
      self.release.set()
      if self.thread is not None:
        self.thread.join(10)
        assert not self.thread.is_alive()

  return StragglerHook


@pytest.mark.parametrize('queues', [False, True])
def test_close_respects_stop_grace_period(check, queues):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      if queues:
        q = tf.queue.FIFOQueue(2, [tf.int32], shapes=[[]])
        v1.train.add_queue_runner(
            v1.train.QueueRunner(q, [q.enqueue(tf.constant(5))]))
        fetch = counted(q.dequeue())
      else:
        fetch = counted(tf.constant(5))
      hook = straggler_hook_class(impl)()
      try:
        with tf_log() as lines:
          with impl.MonitoredTrainingSession(
              hooks=[hook, impl.StopAtStepHook(last_step=2)],
              stop_grace_period_secs=0.5) as sess:
            examples = []
            while not sess.should_stop():
              examples.append(plain(sess.run(fetch)[0]))
            t0 = time.monotonic()
          elapsed = time.monotonic() - t0
        return dict(examples=examples,
                    close_after_grace=0.4 <= elapsed < 1.5,
                    straggler_alive_after_close=hook.thread.is_alive(),
                    log=coord_lines(lines))
      finally:
        hook.cleanup()

  check(scenario, expected=dict(
      examples=[5, 5], close_after_grace=True,
      straggler_alive_after_close=True,
      log=[('INFO',
            'Coordinator stopped with threads still running: straggler')]))


def test_no_threads_left_after_30_sessions(check):

  def scenario(impl, workdir):
    del workdir
    native = None if impl is TF_IMPL else impl._native  # pylint: disable=protected-access
    with tf.Graph().as_default():
      x = v1.train.string_input_producer(['a', 'b'], capacity=2).dequeue()
      q = tf.queue.FIFOQueue(2, [tf.string], shapes=[[]])
      v1.train.add_queue_runner(
          v1.train.QueueRunner(q, [q.enqueue(x), q.enqueue(x)]))
      deq = q.dequeue()
      start = threading.active_count()
      python_threads, native_threads, seen = [], [], []
      for _ in range(30):
        sess = impl.MonitoredSession(stop_grace_period_secs=5)
        try:
          seen.append(sorted([sess.run(deq), sess.run(deq)]))
        finally:
          sess.close()
        python_threads.append(threading.active_count() - start)
        native_threads.append(0 if native is None else
                              native.live_native_threads())
      return dict(python_threads=python_threads,
                  native_threads=native_threads,
                  seen_ok=all(set(s) <= {b'a', b'b'} for s in seen))

  check(scenario, expected=dict(python_threads=[0] * 30,
                                native_threads=[0] * 30, seen_ok=True))


def test_hook_coordinator_request_stop(check):
  """A Python hook's coordinator (from after_create_session) stops training
  at the same step."""

  def scenario(impl, workdir):
    del workdir

    class StopHook(impl.SessionRunHook):

      def __init__(self):
        self.coord = None
        self.seen = []

      def after_create_session(self, session, coord):
        self.coord = coord
        self.seen.append(('created', isinstance(coord, impl.Coordinator),
                          coord.should_stop()))

      def after_run(self, run_context, run_values):
        n = sum(1 for s in self.seen if s[0] == 'after_run') + 1
        self.seen.append(('after_run', n, run_context.stop_requested))
        if n == 4:
          self.coord.request_stop()

    with tf.Graph().as_default():
      x = v1.train.range_input_producer(100, shuffle=False).dequeue()
      fetch = counted(x)
      hook = StopHook()
      with impl.MonitoredTrainingSession(hooks=[hook]) as sess:
        examples = []
        while not sess.should_stop():
          examples.append([plain(v) for v in sess.run(fetch)])
        after = sess.should_stop()
      return examples, hook.seen, after, hook.coord.should_stop()

  check(scenario, expected=(
      [[0, 1], [1, 2], [2, 3], [3, 4]],
      [('created', True, False), ('after_run', 1, False),
       ('after_run', 2, False), ('after_run', 3, False),
       ('after_run', 4, False)],
      True, True))


# ---------------------------------------------------------------------------
# fastmts only: sess.coordinator, sess.queue_runner_threads, native threads
# ---------------------------------------------------------------------------


def _fastmts():
  try:
    import fastmts  # pylint: disable=g-import-not-at-top
  except Exception as e:  # pylint: disable=broad-except
    pytest.skip(f'fastmts is not importable ({type(e).__name__}: {e})')
  return fastmts


def endless_queue(n_enqueue_ops=2, capacity=4, n=8):
  """A FIFOQueue fed forever with 0..n-1 by `n_enqueue_ops` enqueue_many ops
  of one QueueRunner."""
  q = tf.queue.FIFOQueue(capacity, [tf.int32], shapes=[[]])
  qr = v1.train.QueueRunner(
      q, [q.enqueue_many([tf.range(n)]) for _ in range(n_enqueue_ops)])
  v1.train.add_queue_runner(qr)
  return q


_SESSIONS = {
    'MonitoredTrainingSession':
        lambda fm, hooks: fm.MonitoredTrainingSession(hooks=hooks),
    'MonitoredSession': lambda fm, hooks: fm.MonitoredSession(hooks=hooks),
    'SingularMonitoredSession':
        lambda fm, hooks: fm.SingularMonitoredSession(hooks=hooks),
}


@pytest.mark.parametrize('kind', sorted(_SESSIONS))
def test_fastmts_session_coordinator(kind):
  fm = _fastmts()

  class CoordHook(fm.SessionRunHook):

    def __init__(self):
      self.coord = None

    def after_create_session(self, session, coord):
      self.coord = coord

  with tf.Graph().as_default():
    deq = endless_queue().dequeue()
    hook = CoordHook()
    sess = _SESSIONS[kind](fm, [hook])
    try:
      coord = sess.coordinator
      assert isinstance(coord, fm.Coordinator)
      assert coord is hook.coord
      assert not coord.should_stop() and not sess.should_stop()
      assert sess.run(deq) == 0
      coord.request_stop()
      assert sess.should_stop()
    finally:
      sess.close()
    assert coord.should_stop() and coord.joined


def test_fastmts_queue_runner_threads():
  fm = _fastmts()
  with tf.Graph().as_default():
    a = endless_queue(n_enqueue_ops=2)
    b = endless_queue(n_enqueue_ops=1)
    fetch = [a.dequeue(), b.dequeue()]
    before = threading.active_count()
    threads = None
    with fm.MonitoredTrainingSession() as sess:
      for _ in range(10):
        sess.run(fetch)
      threads = sess.queue_runner_threads
      assert isinstance(threads, list)
      assert len(threads) >= 3, threads  # one per enqueue op at least
      assert all(isinstance(t.name, str) and t.name for t in threads)
      assert all(t.is_alive() for t in threads), [
          (t.name, t.is_alive()) for t in threads]
      # Native threads: no Python thread was started for the runners.
      assert threading.active_count() == before
      assert fm._native.live_native_threads() >= 3  # pylint: disable=protected-access
    assert not any(t.is_alive() for t in threads), [
        (t.name, t.is_alive()) for t in threads]
    assert fm._native.live_native_threads() == 0  # pylint: disable=protected-access
    assert threading.active_count() == before


def test_fastmts_queue_runner_threads_without_queue_runners():
  fm = _fastmts()
  with tf.Graph().as_default():
    _, train = step_counter()
    with fm.MonitoredSession() as sess:
      sess.run(train)
      assert sess.queue_runner_threads == []
    assert fm._native.live_native_threads() == 0  # pylint: disable=protected-access


def test_fastmts_queue_runner_threads_end_with_the_input():
  """Runners of a finite pipeline end once it is exhausted and the queue
  closed, before the session is closed."""
  fm = _fastmts()
  with tf.Graph().as_default():
    x = v1.train.range_input_producer(5, num_epochs=1,
                                      shuffle=False).dequeue()
    with fm.MonitoredTrainingSession() as sess:
      threads = sess.queue_runner_threads
      got = []
      while not sess.should_stop():
        got.append(int(sess.run(x)))
      # Unreachable: the OutOfRangeError above ends the with block.
    assert got == [0, 1, 2, 3, 4]
    assert not any(t.is_alive() for t in threads)
    assert fm._native.live_native_threads() == 0  # pylint: disable=protected-access


def test_fastmts_python_thread_runs_beside_native_runners():
  fm = _fastmts()
  with tf.Graph().as_default():
    q = tf.queue.FIFOQueue(5000, [tf.float32], shapes=[[]])
    qr = v1.train.QueueRunner(
        q, [q.enqueue_many([tf.random.uniform([500])]) for _ in range(4)])
    v1.train.add_queue_runner(qr)
    batch = q.dequeue_many(200)
    _, train = counted(tf.reduce_sum(batch))
    stop = threading.Event()
    iterations = [0]

    def spin():
      n = 0
      while not stop.is_set():
        n += 1
      iterations[0] = n

    spinner = threading.Thread(target=spin, name='spinner', daemon=True)
    with fm.MonitoredTrainingSession() as sess:
      sess.run(train)
      try:
        spinner.start()
        steps = 0
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
          sess.run(train)
          steps += 1
      finally:
        stop.set()
        spinner.join(10)
    assert not spinner.is_alive()
    assert steps > 5
    # Millions when the runners leave the GIL alone; a few if they hold it.
    assert iterations[0] > 100000, iterations[0]
