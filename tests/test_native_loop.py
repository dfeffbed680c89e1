"""The native step loop and its companions, compared with stock TF.

* ``run_steps(fetches, max_steps=None, feed_dict=None)`` on fastmts's
  monitored sessions: the loop ``while not sess.should_stop() and (max_steps is
  None or n < max_steps): result = sess.run(fetches, feed_dict=feed_dict)``
  run in C++.  In the TF run of a scenario that loop is written in Python
  (:func:`compat_utils.run_steps_or_tf_loop`); ``check`` (conftest.py) compares the two.
* SIGINT during ``run_steps`` (in a child process).
* ``fastmts.patch()`` / ``fastmts.unpatch()``.
* ``fastmts.report_hook_costs()`` and ``sess.hook_cost_report()`` (fastmts
  only).
* No Python function call per step when only natively-run hooks are present
  (``sys.setprofile``; fastmts only).
"""

import collections
import gc
import json
import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import training_util

from compat_utils import (NOT_PASSED, SESSION_KINDS, TF_IMPL, Raised, child_env, ckpt_files,
                          deprecation_counts_as_printed, global_step_of,
                          monitored_session_of_kind, outcome, raised, recording_hook_class,
                          run_steps_or_tf_loop, without_stack_trace)
from hook_test_utils import (CREATED, DIVERGED_ERROR, DIVERGED_WARNING,
                             NAN_LOSS, nan_at, step_graph, tf_log)

v1 = tf.compat.v1

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def tf_outcome(fn, *args, **kwargs):
  """Like outcome(), but a TF error's message loses the Python stack traces
  TF appends (they show the call path, which differs between the two runs)
  and FIFOQueue's numbered shared name '_<n>_q' becomes '_N_q'."""
  result = without_stack_trace(outcome(fn, *args, **kwargs))
  if isinstance(result, Raised) and issubclass(result.type,
                                               tf.errors.OpError):
    result = Raised(result.type, re.sub(r"'_\d+_q'", "'_N_q'", result.message))
  return result


def _saved(*steps):
  return ['checkpoint', 'graph.pbtxt'] + sorted(
      'model.ckpt-%d.%s' % (s, ext) for s in steps
      for ext in ('data-00000-of-00001', 'index', 'meta'))


def I(n):  # pylint: disable=invalid-name
  return np.int64(n)


# ---------------------------------------------------------------------------
# run_steps vs the Python loop
# ---------------------------------------------------------------------------

_FETCHES = {
    'tensor': lambda step, loss, train: train,
    'list': lambda step, loss, train: [train, step],
    'dict': lambda step, loss, train: {'train': train, 'loss': loss},
    'op': lambda step, loss, train: train.op,
    'nested': lambda step, loss, train: {'a': [step, (loss,)], 'b': train},
}

_LAST_RESULT = {  # the result of the run at step 4 (the last one, stop at 5)
    'tensor': I(5),
    'list': [I(5), I(4)],
    'dict': {'train': I(5), 'loss': np.float32(2.0)},
    'op': None,
    'nested': {'a': [I(4), (np.float32(2.0),)], 'b': I(5)},
}

# How the recording hook sees `train` (assign_add on the resource global step
# returns an unread Variable; its op is not named 'train').
TRAIN = ('Variable', 'AssignAddVariableOp')
_FETCHES_LOGGED = {  # how the recording hook sees original_args.fetches
    'tensor': TRAIN,
    'list': [TRAIN, ('Tensor', 'step:0')],
    'dict': {'train': TRAIN, 'loss': ('Tensor', 'loss:0')},
    'op': ('Operation', 'AssignAddVariableOp'),
    'nested': {'a': [('Tensor', 'step:0'), (('Tensor', 'loss:0'),)],
               'b': TRAIN},
}


@pytest.mark.parametrize('fetch', sorted(_FETCHES))
@pytest.mark.parametrize('kind', SESSION_KINDS)
def test_run_steps_until_stop_at_step(check, kind, fetch):
  """Runs to StopAtStepHook's last step; a second call runs nothing."""

  def scenario(impl, workdir):
    log = []
    hook = recording_hook_class(impl)
    with tf.Graph().as_default():
      step, loss, train = step_graph()
      fetches = _FETCHES[fetch](step, loss, train)
      hooks = [v1.train.StopAtStepHook(last_step=5), hook('h', log)]
      with monitored_session_of_kind(impl, kind, hooks, workdir) as sess:
        first = run_steps_or_tf_loop(impl, sess, fetches)
        stop = sess.should_stop()
        n_log = len(log)
        second = run_steps_or_tf_loop(impl, sess, fetches)
        ran_again = len(log) != n_log
        gs = global_step_of(sess)
    return first, stop, second, ran_again, gs, log, ckpt_files(workdir)

  f = _FETCHES_LOGGED[fetch]
  log = [('h', 'begin'), ('h', 'after_create_session', True, True, False)]
  for s in range(5):
    log += [('h', 'before_run', True, True, f, None, True, False),
            ('h', 'after_run', True, None, s == 4)]
  log += [('h', 'end', True)]
  check(scenario, expected=(
      _LAST_RESULT[fetch], True, None, False, I(5), log,
      _saved(0, 2, 4, 5) if kind == 'training' else []))


def _max_steps_expected(m):
  """StopAtStepHook(last_step=5); run_steps(train, max_steps=m), then
  run_steps([train, step]) with no limit."""
  ran = 5 if m is None else min(m, 5)
  first = None if ran == 0 else I(ran)
  second = None if ran == 5 else [I(5), I(4)]
  return (first, ran == 5, I(ran), second, True, I(5))


@pytest.mark.parametrize('max_steps', [0, 1, 3, 5, 8, None, 'default'])
def test_run_steps_max_steps(check, max_steps):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      step, _, train = step_graph()
      with impl.MonitoredSession(
          hooks=[v1.train.StopAtStepHook(last_step=5)]) as sess:
        m = NOT_PASSED if max_steps == 'default' else max_steps
        first = run_steps_or_tf_loop(impl, sess, train, max_steps=m)
        out = [first, sess.should_stop(), global_step_of(sess)]
        out.append(run_steps_or_tf_loop(impl, sess, [train, step], max_steps=None))
        out += [sess.should_stop(), global_step_of(sess)]
    return tuple(out)

  check(scenario, expected=_max_steps_expected(
      None if max_steps == 'default' else max_steps))


def test_run_steps_repeated_without_stop_hook(check):
  """No stop hook: max_steps bounds each call; calls continue where the
  previous one ended; max_steps=0 runs nothing."""

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      step, _, train = step_graph()
      with impl.MonitoredSession(
          hooks=[recording_hook_class(impl)('h', log)]) as sess:
        del log[:]
        out = []
        for m in (2, 1, 0, 3):
          out.append((run_steps_or_tf_loop(impl, sess, [step, train], max_steps=m),
                      sess.should_stop(), global_step_of(sess)))
        n_steps = sum(1 for e in log if e[1] == 'before_run')
    return out, n_steps

  check(scenario, expected=(
      [([I(1), I(2)], False, I(2)), ([I(2), I(3)], False, I(3)),
       (None, False, I(3)), ([I(5), I(6)], False, I(6))], 6))


def test_run_steps_nan_tensor_hook_fail(check):
  """fail_on_nan_loss=True: the NaN step raises out of run_steps, later steps
  did not run; the session is not stopped, so a second call goes on."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = step_graph(nan_at(3))
      hooks = [v1.train.StopAtStepHook(last_step=6),
               v1.train.NanTensorHook(loss, fail_on_nan_loss=True)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        out = [outcome(run_steps_or_tf_loop, impl, sess, [train, step]),
               sess.should_stop(), global_step_of(sess)]
        out += [outcome(run_steps_or_tf_loop, impl, sess, [train, step]),
                sess.should_stop(), global_step_of(sess)]
    return out, lines

  check(scenario, expected=(
      [NAN_LOSS, False, I(4), [I(6), I(5)], True, I(6)],
      CREATED + [DIVERGED_ERROR]))


def test_run_steps_nan_tensor_hook_stop(check):
  """fail_on_nan_loss=False: the NaN step requests stop; its result is
  returned."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = step_graph(nan_at(3))
      hooks = [v1.train.NanTensorHook(loss, fail_on_nan_loss=False),
               v1.train.StopAtStepHook(last_step=6)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        out = [run_steps_or_tf_loop(impl, sess, [train, step, loss]),
               sess.should_stop(), global_step_of(sess),
               run_steps_or_tf_loop(impl, sess, [train, step, loss]),
               global_step_of(sess)]
    return out, lines

  check(scenario, expected=(
      [[I(4), I(3), np.float32(np.nan)], True, I(4), None, I(4)],
      CREATED + [DIVERGED_WARNING]))


def test_run_steps_logging_tensor_hook(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = step_graph()
      hooks = [v1.train.StopAtStepHook(last_step=10),
               v1.train.LoggingTensorHook({'step': step, 'loss': loss},
                                          every_n_iter=3, at_end=True)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        out = [run_steps_or_tf_loop(impl, sess, train, max_steps=4),
               run_steps_or_tf_loop(impl, sess, train)]
    return out, lines

  check(scenario, expected=([I(4), I(10)], CREATED + [
      ('INFO', 'loss = 0.0, step = 0'),
      ('INFO', 'loss = 1.5, step = 3 (x.xxx sec)'),
      ('INFO', 'loss = 3.0, step = 6 (x.xxx sec)'),
      ('INFO', 'loss = 4.5, step = 9 (x.xxx sec)'),
      ('INFO', 'loss = 5.0, step = 10 (x.xxx sec)')]))


@pytest.mark.parametrize('k', [0, 3])
def test_run_steps_python_hook_requests_stop(check, k):
  """A Python hook requesting stop at step k (after_run) ends run_steps after
  that step; the native StopAtStepHook is later than that."""

  def scenario(impl, workdir):
    del workdir
    log = []
    hook = recording_hook_class(impl)

    def stop_at_k(run_context, run_values):
      if run_values.results >= k:
        run_context.request_stop()

    with tf.Graph().as_default():
      step, loss, train = step_graph()
      hooks = [hook('a', log, request=impl.SessionRunArgs(step),
                    on_after_run=stop_at_k),
               v1.train.StopAtStepHook(last_step=100),
               v1.train.NanTensorHook(loss),
               hook('b', log)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        del log[:]
        out = [run_steps_or_tf_loop(impl, sess, {'t': train}), sess.should_stop(),
               run_steps_or_tf_loop(impl, sess, {'t': train}), global_step_of(sess)]
    return out, log

  log = []
  fetches = {'t': TRAIN}
  for s in range(k + 1):
    log += [('a', 'before_run', True, True, fetches, None, True, False),
            ('b', 'before_run', True, True, fetches, None, True, False),
            ('a', 'after_run', True, I(s), False),
            ('b', 'after_run', True, None, s == k)]
  log += [('a', 'end', True), ('b', 'end', True)]
  check(scenario, expected=(
      [{'t': I(k + 1)}, True, None, I(k + 1)], log))


def test_run_steps_python_hook_raises(check):
  """An exception from a Python hook's after_run at step 2 leaves run_steps
  as it leaves run; the next call goes on."""

  def scenario(impl, workdir):
    del workdir
    log = []

    def boom_at_2(run_context, run_values):
      del run_context
      if run_values.results == 2:
        raise ValueError('boom at 2')

    with tf.Graph().as_default():
      step, _, train = step_graph()
      hooks = [v1.train.StopAtStepHook(last_step=5),
               recording_hook_class(impl)(
                   'h', log, request=impl.SessionRunArgs(step),
                   on_after_run=boom_at_2)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        out = [outcome(run_steps_or_tf_loop, impl, sess, train), sess.should_stop(),
               global_step_of(sess), run_steps_or_tf_loop(impl, sess, train),
               sess.should_stop()]
    return out, [e[1:] for e in log if e[1] == 'after_run']

  check(scenario, expected=(
      [Raised(ValueError, 'boom at 2'), False, I(3), I(5), True],
      [('after_run', True, I(s), s == 4) for s in range(5)]))


@pytest.mark.parametrize('raise_on', [1, 2])
def test_run_steps_preempted_in_after_run_runs_the_step_again(check, raise_on):
  """A hook's after_run raising AbortedError: as TF's run does, the session is
  created again and the step runs again, so that step still counts as owed
  towards max_steps (and the retried step's result is the loop's)."""

  def scenario(impl, workdir):
    del workdir
    calls = []

    class AbortOnce(impl.SessionRunHook):

      def after_run(self, run_context, run_values):
        calls.append(len(calls) + 1)
        if len(calls) == raise_on:
          raise tf.errors.AbortedError(None, None, 'preempted')

    with tf.Graph().as_default():
      step, _, train = step_graph()
      with impl.MonitoredSession(hooks=[AbortOnce()]) as sess:
        out = run_steps_or_tf_loop(impl, sess, [step, train], max_steps=3)
        return out, sess.should_stop(), global_step_of(sess), len(calls)

  # The variables start again from their initializers in the new session.
  expected = {1: ([I(2), I(3)], False, I(3), 4), 2: ([I(1), I(2)], False, I(2), 4)}
  check(scenario, expected=expected[raise_on])


def test_run_steps_tf_error(check):
  """A failing op raises TF's error (same class and message) out of
  run_steps; the failed step did not increment the global step."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      step = tf.identity(gs.read_value(), name='step')
      check_op = tf.debugging.Assert(step < 3, [step], name='check')
      with tf.control_dependencies([check_op]):
        train = v1.assign_add(gs, 1, name='train')
      with impl.MonitoredSession(
          hooks=[v1.train.StopAtStepHook(last_step=10)]) as sess:
        return [tf_outcome(run_steps_or_tf_loop, impl, sess, train), sess.should_stop(),
                global_step_of(sess),
                tf_outcome(run_steps_or_tf_loop, impl, sess, train, max_steps=2),
                global_step_of(sess)]

  err = Raised(tf.errors.InvalidArgumentError,
               'Graph execution error:\n\nassertion failed: [3]\n'
               '\t [[{{node Assert}}]]')
  check(scenario, expected=[err, False, I(3), err, I(3)])


def test_run_steps_feed_dict(check):
  """feed_dict reaches every step and the hooks; a missing feed raises TF's
  error."""

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      p = v1.placeholder(tf.float32, (), name='p')
      step = tf.identity(gs.read_value(), name='step')
      scaled = tf.identity(tf.cast(step, tf.float32) * p, name='scaled')
      with tf.control_dependencies([scaled]):
        train = v1.assign_add(gs, 1, name='train')
      hooks = [v1.train.StopAtStepHook(last_step=4),
               recording_hook_class(impl)('h', log)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        del log[:]
        out = [
            tf_outcome(run_steps_or_tf_loop, impl, sess, [train, scaled], max_steps=1),
            run_steps_or_tf_loop(impl, sess, [train, scaled], max_steps=2,
                      feed_dict={p: 2.0}, positional=True),
            global_step_of(sess),
            run_steps_or_tf_loop(impl, sess, [train, scaled], feed_dict={'p:0': 0.5}),
            sess.should_stop()]
    return out, [e[:2] + e[4:6] for e in log if e[1] == 'before_run']

  fetched = [TRAIN, ('Tensor', 'scaled:0')]
  check(scenario, expected=(
      [Raised(tf.errors.InvalidArgumentError,
              "Graph execution error:\n\nNode: 'p'\nYou must feed a value "
              "for placeholder tensor 'p' with dtype float\n\t [[{{node p}}]]"),
       [I(2), np.float32(2.0)], I(2), [I(4), np.float32(1.5)], True],
      [('h', 'before_run', fetched, None),
       ('h', 'before_run', fetched, {('Tensor', 'p:0'): 2.0}),
       ('h', 'before_run', fetched, {('Tensor', 'p:0'): 2.0}),
       ('h', 'before_run', fetched, {'p:0': 0.5}),
       ('h', 'before_run', fetched, {'p:0': 0.5})]))


@pytest.mark.parametrize('kind', SESSION_KINDS)
def test_run_steps_after_close(check, kind):
  """run_steps after close raises the same exception class as run after
  close (stock TF's run: AttributeError)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = step_graph()
      sess = monitored_session_of_kind(impl, kind, [], workdir)
      first = run_steps_or_tf_loop(impl, sess, train, max_steps=2)
      sess.close()
      if impl is TF_IMPL:
        err = raised(sess.run, train)
      else:
        err = raised(sess.run_steps, train)
    return first, getattr(err, 'type', err)

  check(scenario, expected=(I(2), AttributeError))


def _queue_graph(k):
  """The train op dequeues one element of a queue that holds 10, 11, ...,
  9 + k and is closed (by the local_init_op returned)."""
  gs = v1.train.get_or_create_global_step()
  queue = tf.queue.FIFOQueue(capacity=k, dtypes=[tf.int32], shapes=[()],
                             name='q')
  fill = queue.enqueue_many([tf.range(10, 10 + k)], name='fill')
  with tf.control_dependencies([fill]):
    fill_and_close = queue.close(name='close')
  x = queue.dequeue(name='x')
  with tf.control_dependencies([x]):
    train = v1.assign_add(gs, 1, name='train')
  return x, train, fill_and_close


_OUT_OF_RANGE = Raised(
    tf.errors.OutOfRangeError,
    "Graph execution error:\n\nNode: 'x'\nFIFOQueue '_N_q' is closed and has "
    'insufficient elements (requested 1, current size 0)\n\t [[{{node x}}]]')


def _raise(e):
  raise e


@pytest.mark.parametrize('python_hook', [False, True])
def test_run_steps_out_of_range_ends_with_block(check, python_hook):
  """MonitoredTrainingSession's `with` swallows the OutOfRangeError that
  run_steps raises when the input is exhausted, and saves the final
  checkpoint (hooks' end() runs) as after a clean exit."""

  def scenario(impl, workdir):
    log = []
    seen = []
    with tf.Graph().as_default(), tf_log(workdir) as lines:
      x, train, init = _queue_graph(4)
      hooks = [v1.train.StopAtStepHook(last_step=100),
               v1.train.LoggingTensorHook({'x': x}, every_n_iter=1)]
      if python_hook:
        hooks.append(recording_hook_class(impl)('h', log))

      def body():
        with impl.MonitoredTrainingSession(
            checkpoint_dir=workdir, hooks=hooks,
            scaffold=impl.Scaffold(local_init_op=init),
            save_checkpoint_steps=1000, save_summaries_steps=None,
            save_summaries_secs=None, log_step_count_steps=None) as sess:
          body.sess = sess
          try:
            run_steps_or_tf_loop(impl, sess, [train, x])
          except Exception as e:  # pylint: disable=broad-except
            seen.append(tf_outcome(_raise, e))
            raise
          seen.append('not reached')
        return 'exited cleanly'

      exit_outcome = outcome(body)
      closed_stop = body.sess.should_stop()
    return (exit_outcome, seen, closed_stop, [e[1] for e in log],
            lines, ckpt_files(workdir))

  log = []
  if python_hook:
    log = (['begin', 'after_create_session'] +
           ['before_run', 'after_run'] * 4 + ['before_run', 'end'])
  check(scenario, expected=(
      'exited cleanly', [_OUT_OF_RANGE], True, log,
      [('INFO', 'Create CheckpointSaverHook.'),
       ('INFO', 'Graph was finalized.'),
       ('INFO', 'Running local_init_op.'),
       ('INFO', 'Done running local_init_op.'),
       ('INFO', 'Calling checkpoint listeners before saving checkpoint 0...'),
       ('INFO', 'Saving checkpoints for 0 into DIR/model.ckpt.'),
       ('INFO', 'Calling checkpoint listeners after saving checkpoint 0...'),
       ('INFO', 'x = 10'), ('INFO', 'x = 11 (x.xxx sec)'),
       ('INFO', 'x = 12 (x.xxx sec)'), ('INFO', 'x = 13 (x.xxx sec)'),
       ('INFO', 'Calling checkpoint listeners before saving checkpoint 4...'),
       ('INFO', 'Saving checkpoints for 4 into DIR/model.ckpt.'),
       ('INFO', 'Calling checkpoint listeners after saving checkpoint 4...')],
      _saved(0, 4)))


def test_run_steps_out_of_range_without_with(check):
  """Outside a `with`, the OutOfRangeError just propagates from run_steps
  after the steps that succeeded; the session still closes."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x, train, init = _queue_graph(3)
      sess = impl.MonitoredSession(
          session_creator=impl.ChiefSessionCreator(
              scaffold=impl.Scaffold(local_init_op=init)),
          hooks=[v1.train.StopAtStepHook(last_step=100)])
      out = [run_steps_or_tf_loop(impl, sess, {'x': x, 't': train}, max_steps=2),
             tf_outcome(run_steps_or_tf_loop, impl, sess, {'x': x, 't': train}),
             sess.should_stop(), global_step_of(sess), outcome(sess.close)]
    return out

  check(scenario, expected=[{'x': np.int32(11), 't': I(2)}, _OUT_OF_RANGE,
                            False, I(3), None])


def test_run_steps_negative_max_steps(fastmts):
  log = []
  with tf.Graph().as_default():
    _, _, train = step_graph()
    hooks = [fastmts.StopAtStepHook(last_step=5),
             recording_hook_class(fastmts)('h', log)]
    with fastmts.MonitoredSession(hooks=hooks) as sess:
      del log[:]
      for bad in (-1, -5):
        with pytest.raises(ValueError):
          sess.run_steps(train, max_steps=bad)
      # Nothing ran; the session is usable.
      assert log == []
      assert global_step_of(sess) == 0
      assert not sess.should_stop()
      assert sess.run_steps(train) == 5


# ---------------------------------------------------------------------------
# SIGINT during run_steps (in a child process)
# ---------------------------------------------------------------------------

_SIGINT_CHILD = textwrap.dedent('''
    import json, os, signal, sys, threading, time
    # Ctrl-C's Python handler even if this process was started with SIGINT
    # ignored (a background job of a shell without job control is).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'
    import tensorflow as tf
    import fastmts
    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1

    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      m = tf.random.normal([300, 300], seed=1)
      work = tf.reduce_sum(tf.matmul(m, m))
      with tf.control_dependencies([work]):
        train = v1.assign_add(gs, 1)
      sess = fastmts.MonitoredSession()
      for _ in range(3):  # warm up
        sess.run(train)
      start_steps = int(sess.run(gs))

      state = {}
      counter = [0]
      done = threading.Event()

      def spin():
        while not done.is_set():
          counter[0] += 1
          time.sleep(0.0005)

      def fire():
        state['counter_at_kill'] = counter[0]
        state['t_kill'] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

      def watchdog():
        print('WATCHDOG: run_steps still running 60 s after SIGINT', flush=True)
        os._exit(3)

      dog = threading.Timer(60.5, watchdog)  # a hang, even on a loaded machine
      dog.daemon = True
      spinner = threading.Thread(target=spin, daemon=True)
      timer = threading.Timer(0.5, fire)
      timer.daemon = True
      how = 'returned'
      try:
        dog.start()
        spinner.start()
        time.sleep(0.05)
        counter_at_start = counter[0]
        timer.start()
        try:
          sess.run_steps(train)
        except KeyboardInterrupt:
          how = 'KeyboardInterrupt'
        t_end = time.monotonic()
      finally:
        done.set()
        timer.cancel()
        spinner.join(5)
      steps = int(sess.run(gs)) - start_steps  # still usable
      sess.close()
      dog.cancel()
      print('RESULT ' + json.dumps({
          'how': how,
          'seconds_after_kill': t_end - state.get('t_kill', float('inf')),
          'steps': steps,
          'counter_during_run_steps':
              state.get('counter_at_kill', 0) - counter_at_start,
          'closed': True,
      }), flush=True)
''')


@pytest.mark.timeout(200)  # the child's bound, and then some
def test_run_steps_sigint(fastmts):
  del fastmts  # imported by the child
  proc = subprocess.run([sys.executable, '-c', _SIGINT_CHILD], env=child_env(),
                        capture_output=True, text=True, timeout=150,
                        check=False)
  report = '\n'.join(['rc=%s' % proc.returncode, 'stdout:', proc.stdout,
                      'stderr:', proc.stderr[-4000:]])
  assert proc.returncode == 0, report
  results = [l for l in proc.stdout.splitlines() if l.startswith('RESULT ')]
  assert len(results) == 1, report
  r = json.loads(results[0][len('RESULT '):])
  assert r['how'] == 'KeyboardInterrupt', report
  assert 0 <= r['seconds_after_kill'] < 1.0, report
  assert r['steps'] >= 5, report  # it really ran for a while
  # The GIL was released: the other thread ran while run_steps did.
  assert r['counter_during_run_steps'] >= 10, report
  assert r['closed'] is True, report


def _c_signal_handler(signum):
  """The C-level handler address the OS has for `signum` (sigaction), which
  Python's signal.getsignal does not show."""
  import ctypes  # pylint: disable=import-outside-toplevel
  libc = ctypes.CDLL(None, use_errno=True)
  action = ctypes.create_string_buffer(256)  # struct sigaction; handler first
  assert libc.sigaction(signum, None, action) == 0
  return ctypes.c_void_p.from_buffer(action).value


class _Signalled(Exception):
  pass


@pytest.mark.timeout(60)
@pytest.mark.parametrize('python_hook', [False, True])
def test_run_steps_python_signal_handler(fastmts, python_hook):
  """A Python signal handler runs within a step of the signal while
  run_steps steps (with only native hooks the loop holds no GIL and watches
  the signal natively; its fallback check every 100 ms would be too late
  here), its exception ends the loop, and the OS handler is Python's again
  afterwards."""
  import signal  # pylint: disable=import-outside-toplevel
  import threading  # pylint: disable=import-outside-toplevel
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    train = v1.assign_add(gs, 1)
    hooks = [recording_hook_class(fastmts)('py', [])] if python_hook else []
    sent, handled = [], []

    loop_ended = threading.Event()

    def handler(signum, frame):
      del frame
      handled.append((signum, time.monotonic()))
      if len(handled) >= 4:
        raise _Signalled()

    def send():
      # Each signal only once the previous one was handled: two arriving
      # before Python runs the handler make one call (signals do not queue),
      # and the loop would never see the fourth.
      for i in range(4):
        time.sleep(0.15)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 20
        while len(handled) <= i and time.monotonic() < deadline:
          time.sleep(0.001)
      # Python may run a handler inside an unrelated object's __del__ (seen:
      # a cyclic collection finalising an old graph during the Python hook),
      # and an exception raised there is printed and dropped, stock TF or
      # not. If the loop goes on well past the fourth, signal again, so the
      # test checks the loop and not where the collector ran.
      deadline = time.monotonic() + 20
      while not loop_ended.wait(2.0) and time.monotonic() < deadline:
        os.kill(os.getpid(), signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
      c_before = _c_signal_handler(signal.SIGUSR1)
      with fastmts.MonitoredSession(hooks=hooks) as sess:
        sess.run(train)
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
          with pytest.raises(_Signalled):
            sess.run_steps(train)
        finally:
          loop_ended.set()
          sender.join(10)
        assert _c_signal_handler(signal.SIGUSR1) == c_before
        assert [h[0] for h in handled[:4]] == [signal.SIGUSR1] * 4
        delays = [h[1] - t for h, t in zip(handled, sent)]
        # Three of four within 30 ms (the fallback check's 100 ms period puts
        # most beyond it); a loaded machine may hold one up (seen: 38 ms under
        # ASan beside two test runs), a hang not.
        assert sorted(delays)[2] < 0.03 and max(delays) < 1.0, delays
        steps = int(sess.run(gs))  # the session is still usable
        assert steps > 100
        assert int(sess.run_steps(train, max_steps=3)) == steps + 3
      assert _c_signal_handler(signal.SIGUSR1) == c_before
    finally:
      signal.signal(signal.SIGUSR1, previous)


@pytest.mark.timeout(60)
def test_run_steps_keeps_a_handler_installed_meanwhile(fastmts):
  """A handler installed by a hook while run_steps runs stays installed
  (the loop's watch steps aside instead of restoring the old one)."""
  import signal  # pylint: disable=import-outside-toplevel
  seen = []
  previous = signal.signal(signal.SIGUSR2, lambda *a: seen.append('old'))
  try:
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      train = v1.assign_add(gs, 1)

      def install(values):
        signal.signal(signal.SIGUSR2, lambda *a: seen.append('new'))
        return str(values)

      hook = v1.train.LoggingTensorHook({'gs': gs}, every_n_iter=5, formatter=install)
      with fastmts.MonitoredSession(hooks=[hook]) as sess:
        sess.run_steps(train, max_steps=10)
        os.kill(os.getpid(), signal.SIGUSR2)
        sess.run_steps(train, max_steps=2)  # the handler runs at a check
    assert seen == ['new']
  finally:
    signal.signal(signal.SIGUSR2, previous)


# ---------------------------------------------------------------------------
# fastmts.patch() / fastmts.unpatch()
# ---------------------------------------------------------------------------

_SESSIONS = ['MonitoredTrainingSession', 'MonitoredSession',
             'SingularMonitoredSession']


def _train_names():
  return [n for n in dir(v1.train) if not n.startswith('__')]


def _patched_hook_names(fastmts):
  """Stock hook classes fastmts exports under TF's names."""
  return sorted({'StopAtStepHook'} | {
      n for n in dir(fastmts) if n.endswith('Hook') and n != 'SessionRunHook'
      and hasattr(v1.train, n)})


def test_patch_and_unpatch(fastmts):
  originals = {n: getattr(v1.train, n) for n in _train_names()}
  try:
    fastmts.patch()
    for name in _SESSIONS + _patched_hook_names(fastmts):
      assert getattr(v1.train, name) is getattr(fastmts, name), name
    assert v1.train.MonitoredTrainingSession is not originals[
        'MonitoredTrainingSession']
  finally:
    fastmts.unpatch()
  for name, value in originals.items():
    assert getattr(v1.train, name) is value, name
  assert set(_train_names()) == set(originals)


def test_patch_twice_unpatch_once(fastmts):
  originals = {n: getattr(v1.train, n) for n in _train_names()}
  try:
    fastmts.patch()
    fastmts.patch()
    for name in _SESSIONS + _patched_hook_names(fastmts):
      assert getattr(v1.train, name) is getattr(fastmts, name), name
  finally:
    fastmts.unpatch()
  for name, value in originals.items():
    assert getattr(v1.train, name) is value, name
  # And once more, for good measure.
  try:
    fastmts.patch()
    assert v1.train.MonitoredSession is fastmts.MonitoredSession
  finally:
    fastmts.unpatch()
  for name, value in originals.items():
    assert getattr(v1.train, name) is value, name


def test_patched_script_same_results(check, impl):
  """A script using only tf.compat.v1.train names gives the same results,
  logs and files after fastmts.patch(), and its sessions are fastmts's."""
  session_modules = []

  def script(workdir):
    # The restores' Saver calls it (1.15-2.21): its warning comes once per
    # process, on whichever side restores first.
    deprecation_counts_as_printed(v1.train.get_checkpoint_mtimes)
    with tf.Graph().as_default(), tf_log(workdir) as lines:
      step, loss, train = step_graph(nan_at(7))
      hooks = [v1.train.StopAtStepHook(last_step=6),
               v1.train.NanTensorHook(loss),
               v1.train.LoggingTensorHook({'step': step}, every_n_iter=2)]
      out = []
      with v1.train.MonitoredTrainingSession(
          checkpoint_dir=workdir, hooks=hooks, save_checkpoint_steps=2,
          save_summaries_steps=None, save_summaries_secs=None,
          log_step_count_steps=None) as sess:
        session_modules.append(type(sess).__module__)
        while not sess.should_stop() and len(out) < 20:
          out.append(sess.run([train, loss]))
      with v1.train.SingularMonitoredSession(
          hooks=[v1.train.StopAtStepHook(num_steps=2)],
          checkpoint_dir=workdir) as sess:
        session_modules.append(type(sess).__module__)
        while not sess.should_stop() and len(out) < 20:
          out.append(sess.run(train))
      with v1.train.MonitoredSession(
          session_creator=v1.train.ChiefSessionCreator(
              checkpoint_dir=workdir),
          hooks=[v1.train.StopAtStepHook(last_step=9)]) as sess:
        session_modules.append(type(sess).__module__)
        while not sess.should_stop() and len(out) < 20:
          out.append(sess.run(train))
    return out, lines, ckpt_files(workdir)

  def scenario(scenario_impl, workdir):
    if scenario_impl is TF_IMPL:
      return script(workdir)
    scenario_impl.patch()
    try:
      return script(workdir)
    finally:
      scenario_impl.unpatch()

  original = v1.train.MonitoredTrainingSession
  result = check(scenario)
  assert v1.train.MonitoredTrainingSession is original
  out, _, files = result
  assert out == ([[I(s + 1), np.float32(1.0 / (1 + s))] for s in range(6)] +
                 [I(7), I(8), I(7), I(8), I(9)]), out
  assert files == _saved(0, 2, 4, 6), files
  assert [m.split('.')[0] for m in session_modules[:3]] == ['tensorflow'] * 3
  if impl is not TF_IMPL:
    assert [m.split('.')[0] for m in session_modules[3:]] == ['fastmts'] * 3


# ---------------------------------------------------------------------------
# Per-hook cost report (fastmts only)
# ---------------------------------------------------------------------------


def _sleepy_hook_class(fastmts):

  class SleepyHook(fastmts.SessionRunHook):

    # 20 ms a step: well above one TF run (StopAtStepHook's fresh read of
    # the step, once) even under the sanitizer on a loaded machine.
    def after_run(self, run_context, run_values):
      time.sleep(0.02)

  return SleepyHook


def test_hook_cost_report(fastmts):
  sleepy = _sleepy_hook_class(fastmts)
  try:
    fastmts.report_hook_costs(enabled=True)
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = step_graph()
      hooks = [fastmts.StopAtStepHook(last_step=20), sleepy(),
               v1.train.NanTensorHook(loss),
               v1.train.LoggingTensorHook({'step': step}, every_n_iter=5)]
      names = ['StopAtStepHook', 'SleepyHook', 'NanTensorHook',
               'LoggingTensorHook']
      sess = fastmts.MonitoredSession(hooks=hooks)
      try:
        start = time.monotonic()
        for _ in range(5):
          sess.run(train)
        assert sess.run_steps(train) == 20
        wall = time.monotonic() - start
        report = sess.hook_cost_report()
        n_before_close = len(lines)
      finally:
        sess.close()
  finally:
    fastmts.report_hook_costs(False)

  assert report is not None
  assert isinstance(report.steps, int) and not isinstance(report.steps, bool)
  assert report.steps == 20
  assert 0 < report.run_seconds <= wall
  assert [h.name for h in report.hooks] == names
  for h in report.hooks:
    assert 0 <= h.before_run_seconds <= wall, h.name
    assert 0 <= h.after_run_seconds <= wall, h.name
  sleepy_cost = report.hooks[1]
  assert sleepy_cost.after_run_seconds >= 0.02 * 20
  assert all(h.after_run_seconds < sleepy_cost.after_run_seconds
             for h in report.hooks if h is not sleepy_cost)
  text = str(report)
  for name in names:
    assert name in text, text

  before_close = lines[:n_before_close]
  at_close = lines[n_before_close:]
  assert not any('hook cost' in m.lower() for _, m in before_close), lines
  cost_lines = [(level, m) for level, m in at_close if 'hook cost' in m.lower()]
  assert cost_lines and all(level == 'INFO' for level, _ in cost_lines), lines
  logged = '\n'.join(m for _, m in at_close)
  for name in names:
    assert name in logged, logged


def test_hook_cost_report_training_session_hook_order(fastmts, tmp_path):
  """MonitoredTrainingSession (chief, no distribution) runs chief_only_hooks,
  its own StepCounterHook, SummarySaverHook and CheckpointSaverHook, then
  hooks (TF's order)."""
  sleepy = _sleepy_hook_class(fastmts)
  try:
    fastmts.report_hook_costs()  # enabled=True by default
    with tf.Graph().as_default():
      _, _, train = step_graph()
      with fastmts.MonitoredTrainingSession(
          checkpoint_dir=str(tmp_path), hooks=[sleepy()],
          chief_only_hooks=[fastmts.StopAtStepHook(last_step=3)],
          save_summaries_steps=10, log_step_count_steps=10) as sess:
        sess.run_steps(train)
        report = sess.hook_cost_report()
  finally:
    fastmts.report_hook_costs(False)
  assert report.steps == 3
  assert [h.name for h in report.hooks] == [
      'StopAtStepHook', 'StepCounterHook', 'SummarySaverHook',
      'CheckpointSaverHook', 'SleepyHook']


def test_hook_cost_report_disabled(fastmts):
  try:
    fastmts.report_hook_costs(False)
    with tf.Graph().as_default(), tf_log() as lines:
      _, _, train = step_graph()
      with fastmts.MonitoredSession(
          hooks=[fastmts.StopAtStepHook(last_step=3)]) as sess:
        sess.run_steps(train)
        assert sess.hook_cost_report() is None
  finally:
    fastmts.report_hook_costs(False)
  assert not any('hook cost' in m.lower() for _, m in lines), lines


def test_hook_cost_report_switch_applies_to_sessions_created_after(fastmts):
  try:
    with tf.Graph().as_default():
      _, _, train = step_graph()
      fastmts.report_hook_costs(True)
      with fastmts.MonitoredSession() as enabled_sess:
        fastmts.report_hook_costs(False)
        with fastmts.MonitoredSession() as disabled_sess:
          fastmts.report_hook_costs(True)
          enabled_sess.run_steps(train, max_steps=2)
          disabled_sess.run_steps(train, max_steps=2)
          assert disabled_sess.hook_cost_report() is None
          report = enabled_sess.hook_cost_report()
          assert report is not None
          assert report.steps == 2
          assert report.hooks == []
  finally:
    fastmts.report_hook_costs(False)


# ---------------------------------------------------------------------------
# No Python per step with natively-run hooks (fastmts; TF for contrast)
# ---------------------------------------------------------------------------


def _python_calls(fn):
  """Counter of Python-level function calls ('call' profile events, not
  'c_call') made while fn() runs, fn's own frame excluded."""
  calls = collections.Counter()
  own = fn.__code__

  def profiler(frame, event, arg):
    del arg
    if event == 'call' and frame.f_code is not own:
      code = frame.f_code
      calls['%s:%s' % (os.path.basename(code.co_filename), code.co_name)] += 1

  gc.collect()
  gc.disable()
  sys.setprofile(profiler)
  try:
    fn()
  finally:
    sys.setprofile(None)
    gc.enable()
  return calls


def _native_hooks_session(impl, workdir):
  """MonitoredTrainingSession with TF's natively-run hooks; its defaults'
  rare actions (summaries, step rate, checkpoints) don't fire once warm."""
  gs = v1.train.get_or_create_global_step()
  # The increment waits for the global step read the stock hooks fetch (as
  # TF's optimizers arrange), so StepCounterHook never sees a stale step and
  # never warns (which would be Python calls).
  read = training_util._get_or_create_global_step_read()  # pylint: disable=protected-access
  loss = tf.identity(tf.cast(read, tf.float32) * 0.5, name='loss')
  with tf.control_dependencies([read, loss]):
    train = v1.assign_add(gs, 1, name='train')
  hooks = [v1.train.StopAtStepHook(last_step=10**9),
           v1.train.NanTensorHook(loss),
           v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=10**6)]
  sess = impl.MonitoredTrainingSession(
      checkpoint_dir=workdir, hooks=hooks, save_summaries_steps=10**6,
      log_step_count_steps=10**6)
  return sess, train


def test_no_python_calls_per_step(fastmts, tmp_path):
  n = 200
  counts = {}
  for name, impl in (('tf', TF_IMPL), ('fastmts', fastmts)):
    workdir = tmp_path / name
    workdir.mkdir()
    with tf.Graph().as_default():
      sess, train = _native_hooks_session(impl, str(workdir))
      try:
        for _ in range(5):  # warm up: first-step logging, plan caching
          sess.run(train)

        def run_loop():
          for _ in range(n):
            sess.run(train)  # pylint: disable=cell-var-from-loop

        counts[name, 'run'] = _python_calls(run_loop)
        if impl is not TF_IMPL:
          sess.run_steps(train, max_steps=3)  # warm up
          counts[name, 'run_steps'] = _python_calls(
              lambda: sess.run_steps(train, max_steps=n))  # pylint: disable=cell-var-from-loop
          counts[name, 'run_steps_x2'] = _python_calls(
              lambda: sess.run_steps(train, max_steps=2 * n))  # pylint: disable=cell-var-from-loop
      finally:
        sess.close()

  per_step_tf = sum(counts['tf', 'run'].values()) / n
  print('\nPython function calls per step of sess.run(train_op) with '
        'StopAtStepHook, NanTensorHook, LoggingTensorHook and '
        'MonitoredTrainingSession defaults: stock TF %.1f, fastmts %.2f; '
        'fastmts run_steps: %d calls for %d steps, %d for %d steps' % (
            per_step_tf, sum(counts['fastmts', 'run'].values()) / n,
            sum(counts['fastmts', 'run_steps'].values()), n,
            sum(counts['fastmts', 'run_steps_x2'].values()), 2 * n))

  # sess.run itself is native: not even a Python frame of its own per step.
  run_calls = counts['fastmts', 'run']
  assert sum(run_calls.values()) <= 5, (
      'Python calls in %d steps of sess.run: %s' % (n, run_calls.most_common(10)))
  # run_steps: a bounded number of calls (setup and teardown of the loop),
  # the same for n and 2 n steps.
  totals = {}
  for key, steps in (('run_steps', n), ('run_steps_x2', 2 * n)):
    calls = counts['fastmts', key]
    totals[key] = sum(calls.values())
    assert totals[key] <= 50, (
        'run_steps over %d steps made %d Python calls: %s' % (
            steps, totals[key], calls.most_common(10)))
  assert totals['run_steps_x2'] <= totals['run_steps'] + 5, totals
