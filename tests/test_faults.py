"""Faults: errors, signals and crashes, compared with stock TF.

* An exception raised in a Python hook's ``after_create_session`` /
  ``before_run`` / ``after_run`` / ``end``, in a queue-runner thread (an
  enqueue whose value depends on a failing ``Assert``) or in a step (a
  failing op) surfaces exactly once, with its original type: every call
  (construction, ``should_stop``, ``run``, ``close``, the ``with`` block) is
  recorded, and so is every log line mentioning it.  Afterwards no thread is
  left running (``threading.active_count()``; for fastmts also
  ``fastmts._native.live_native_threads()``).  fastmts's after_create_session
  cases run in child processes (with a hook keeping the session and
  coordinator, and 20 failed constructions garbage-collected at once), since
  a crash there would end the whole test run.
* SIGINT during ``run`` (TF and fastmts) and during the native loop
  ``run_steps`` (fastmts), in a child process: KeyboardInterrupt comes out of
  the ``with`` block promptly, the child exits cleanly; with fastmts's
  ``end_on_interrupt=True`` the final checkpoint is at the interrupted step,
  without it (and in TF) only the initial checkpoint exists (TF skips hooks'
  ``end()`` on exceptions).
* SIGKILL during a checkpoint save (a child saving a 64 MB variable every
  step with fastmts, synchronously and with asynchronous checkpoints): the
  latest checkpoint is still restorable, holds its step's values, and a new
  monitored session resumes from it.
"""

import gc
import json
import os
import pickle
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import weakref

import pytest
import tensorflow as tf

from compat_utils import TF_IMPL, child_env
import hook_test_utils

v1 = tf.compat.v1
errors = tf.errors

# Bounds on a hang, not on slowness, sized for a loaded 2-core machine. The child
# processes a test waits for (side by side: the after_create_session children, the SIGINT
# children, the SIGKILL trials) are done within this, all together; beside two CPU-bound
# processes they took up to about 80 s. A test waiting for children has a bound above
# theirs, so that theirs fires first, with what they printed.
_CHILDREN_HANG_BOUND_SECS = 360
_CHILDREN_TEST_BOUND_SECS = _CHILDREN_HANG_BOUND_SECS + 60


def _native_threads(impl):
  if impl is TF_IMPL:
    return 0
  return impl._native.live_native_threads()  # pylint: disable=protected-access


def _wait_threads(start, timeout, impl=TF_IMPL):
  """Polls until threading.active_count() <= start and no native thread
  runs; returns (excess Python threads, native threads)."""
  deadline = time.monotonic() + timeout
  while ((threading.active_count() > start or _native_threads(impl)) and
         time.monotonic() < deadline):
    time.sleep(0.01)
  return threading.active_count() - start, _native_threads(impl)


# ---------------------------------------------------------------------------
# An exception in a hook, a queue-runner thread or a step
# ---------------------------------------------------------------------------


class HookError(Exception):
  """The exception the faulty hooks raise (a type neither TF nor fastmts
  knows, so any wrapping or re-typing shows)."""


_HOOK_METHODS = ('after_create_session', 'before_run', 'after_run', 'end')
FAULTS = _HOOK_METHODS + ('queue_runner', 'step')
# The failing call: after_create_session and end are called once; the run
# hooks raise on their 3rd call, the step fails at its 3rd run, the queue
# runner at its 4th enqueue (values 1, 2, 3 go through).
_AT = 3


def _faulty_hook(impl, method):
  """A hook raising HookError from `method` once (on its _AT-th call for the
  run hooks); it keeps weak references to the session and coordinator it was
  given."""

  class FaultyHook(impl.SessionRunHook):

    def __init__(self):
      self.calls = 0
      self.session = lambda: None
      self.coord = lambda: None

    def _maybe_raise(self, name):
      if name != method:
        return
      self.calls += 1
      if self.calls == (1 if method in ('after_create_session', 'end') else _AT):
        raise HookError('boom in %s' % name)

    def after_create_session(self, session, coord):
      # Weakly: the session must be free to go once the caller drops it.
      self.session, self.coord = weakref.ref(session), weakref.ref(coord)
      self._maybe_raise('after_create_session')

    def before_run(self, run_context):
      self._maybe_raise('before_run')

    def after_run(self, run_context, run_values):
      self._maybe_raise('after_run')

    def end(self, session):
      self._maybe_raise('end')

  return FaultyHook()


def _fault_graph(fault):
  """(fetch, marker): `fetch` = [dequeued value, train]; a queue runner feeds
  1, 2, 3, ... (failing at its 4th enqueue for 'queue_runner'); `train`
  increments the global step (failing at the 3rd run for 'step')."""
  gs = v1.train.get_or_create_global_step()
  counter = v1.get_local_variable('counter', initializer=tf.constant(0))
  value = v1.assign_add(counter, 1)
  if fault == 'queue_runner':
    with tf.control_dependencies([v1.Assert(value < 4, ['enqueue failed', value])]):
      value = tf.identity(value)
  q = tf.queue.FIFOQueue(4, [tf.int32], shapes=[[]])
  v1.train.add_queue_runner(v1.train.QueueRunner(q, [q.enqueue(value)]))
  x = q.dequeue()
  deps = [x]
  if fault == 'step':
    runs = v1.get_local_variable('runs', initializer=tf.constant(0))
    run_no = v1.assign_add(runs, 1)
    deps.append(v1.Assert(tf.not_equal(run_no, _AT), ['step failed', run_no]))
  with tf.control_dependencies(deps):
    train = v1.assign_add(gs, 1)
  marker = {'queue_runner': 'enqueue failed', 'step': 'step failed'}.get(
      fault, 'boom in ')
  return [x, train], marker


def _head(e):
  """The informative line of an exception's message."""
  lines = str(e).splitlines()
  for line in lines:
    if 'assertion failed' in line or 'boom in' in line:
      return line.strip()
  return lines[0] if lines else ''


def _drive_faulty(impl, fault, mode):
  """Runs a monitored session with a fault; returns (observed, leftover).

  observed: dict(surfaced=[(where, type, head)] for every exception of the
  original type (or mentioning the fault) seen by the caller, in order; a
  with block re-raising the very exception `run` raised is ('with', 'same');
  others=[(where, type name)] for any other exception; logged=[(level,
  head)] of the log records mentioning the fault; steps: successful runs).
  leftover: (Python threads, native threads) still running afterwards.

  mode 'with': the usual `with ... as sess: while not sess.should_stop():
  sess.run(...)`, leaving at the first exception.  mode 'explicit': the
  session is created, stepped until should_stop() (a failed run is noted and
  the loop goes on, as a caller retrying would) and closed explicitly, so a
  fault resurfacing in a later should_stop/run/close shows.
  """
  start = threading.active_count()
  with tf.Graph().as_default():
    fetch, marker = _fault_graph(fault)
    original = {'queue_runner': errors.InvalidArgumentError,
                'step': errors.InvalidArgumentError}.get(fault, HookError)
    hooks = [v1.train.StopAtStepHook(last_step=8)]
    faulty = None
    if fault in _HOOK_METHODS:
      faulty = _faulty_hook(impl, fault)
      hooks.append(faulty)
    surfaced, others, seen, steps = [], [], [], [0]

    def note(where, e):
      if isinstance(e, original) or marker in str(e):
        if any(e is s for s in seen):
          surfaced.append((where, 'same'))
        else:
          surfaced.append((where, type(e), _head(e)))
      else:
        others.append((where, type(e).__name__))
      seen.append(e)

    def call(where, fn, reraise):
      try:
        return fn()
      except Exception as e:  # pylint: disable=broad-except
        note(where, e)
        if reraise:
          raise
        return e

    def step(sess):
      sess.run(fetch)
      steps[0] += 1

    sess = None
    try:
      with hook_test_utils.tf_log() as lines:
        if mode == 'with':
          try:
            with impl.MonitoredTrainingSession(hooks=hooks,
                                               stop_grace_period_secs=5) as sess:
              for _ in range(30):
                if call('should_stop', sess.should_stop, True):
                  break
                call('run', lambda: step(sess), True)
          except Exception as e:  # pylint: disable=broad-except
            note('with', e)
        else:
          sess = call('create', lambda: impl.MonitoredTrainingSession(
              hooks=hooks, stop_grace_period_secs=5), False)
          if not isinstance(sess, Exception):
            for _ in range(30):
              stop = call('should_stop', sess.should_stop, False)
              if stop is True or isinstance(stop, Exception):
                break
              call('run', lambda: step(sess), False)
            call('close', sess.close, False)
            call('should_stop after close', sess.should_stop, False)
      # Nothing of the session is referenced any more (the exceptions'
      # tracebacks would hold it).
      sess = None
      del seen[:]
      gc.collect()
      leftover = _wait_threads(start, 1.0, impl)
    finally:
      # TF leaves the queue-runner threads of a session whose hook failed in
      # after_create_session running (blocked on the full queue): stop them.
      coord = faulty.coord() if faulty is not None else None
      if coord is not None:
        coord.request_stop()
        try:
          coord.join(stop_grace_period_secs=5, ignore_live_threads=True)
        except Exception:  # pylint: disable=broad-except
          pass
        if faulty.session() is not None:
          faulty.session().close()
      coord = faulty = None
      _wait_threads(start, 5.0, impl)
    logged = [(level, _head(message)) for level, message in lines
              if marker in message]
  return dict(surfaced=surfaced, others=others, logged=logged,
              steps=steps[0]), leftover


def _expected_faults(fault, mode):
  """What TF does (the literal every fault test checks)."""
  iae = errors.InvalidArgumentError
  if fault == 'after_create_session':
    where = 'with' if mode == 'with' else 'create'
    return dict(surfaced=[(where, HookError, 'boom in after_create_session')],
                others=[], logged=[], steps=0)
  if fault in ('before_run', 'after_run'):
    surfaced = [('run', HookError, 'boom in %s' % fault)]
    if mode == 'with':
      return dict(surfaced=surfaced + [('with', 'same')], others=[], logged=[],
                  steps=_AT - 1)
    # The caller goes on: the session still works and stops at step 8
    # (after_run's failing run did run, but raised: 7 runs returned).
    return dict(surfaced=surfaced, others=[], logged=[],
                steps=7 if fault == 'after_run' else 8)
  if fault == 'end':
    return dict(surfaced=[('with' if mode == 'with' else 'close', HookError,
                           'boom in end')], others=[], logged=[], steps=8)
  if fault == 'step':
    surfaced = [('run', iae, 'assertion failed: [step failed] [%d]' % _AT)]
    if mode == 'with':
      return dict(surfaced=surfaced + [('with', 'same')], others=[], logged=[],
                  steps=_AT - 1)
    return dict(surfaced=surfaced, others=[], logged=[], steps=8)
  assert fault == 'queue_runner'
  message = 'assertion failed: [enqueue failed] [4]'
  return dict(
      surfaced=[('with' if mode == 'with' else 'close', iae, message)],
      others=[], logged=[('INFO', 'Error reported to Coordinator: <class '
                          "'tensorflow.python.framework.errors_impl."
                          "InvalidArgumentError'>, " + message)], steps=3)


def _run_children_side_by_side(argvs, timeout):
  """Starts one Python child per entry of `argvs` (name -> arguments after
  the interpreter) at once, then waits for each; returns {name: (returncode,
  stdout, stderr)}. A child still running `timeout` s after the start is
  killed (noted in its stderr): the call takes at most about `timeout` s,
  however many children; none outlives it, even when it raises."""
  procs, done = {}, {}
  deadline = time.monotonic() + timeout
  try:
    for name, argv in argvs.items():
      procs[name] = subprocess.Popen(
          [sys.executable] + list(argv), env=child_env(), stdout=subprocess.PIPE,
          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    for name, proc in procs.items():
      try:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += '\nTIMEOUT: killed after %d s' % timeout
      done[name] = (proc.returncode, out, err)
  finally:
    for proc in procs.values():
      if proc.poll() is None:
        proc.kill()
        proc.wait(10)
  return done


# A construction failing in after_create_session leaves the queue runners it
# started running, in TF (Python threads, forever) as in fastmts (native
# threads, until the session is garbage-collected -- which has been seen to
# crash the process: test_failed_construction_then_gc_does_not_crash).
# fastmts's after_create_session scenarios therefore run in child processes,
# so that a crash fails them and not the whole test run.
_AFTER_CREATE_SESSION_CHILD = textwrap.dedent(r"""
    import gc, os, pickle, sys, threading
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'
    sys.path.insert(0, sys.argv[1])
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    import fastmts
    import test_faults

    for key in sys.argv[2:]:
      if key == 'kept':
        # A hook keeping the session and coordinator it was given (strongly).
        result = test_faults._keeping_hook_scenario(fastmts)
      elif key in ('with', 'explicit'):
        result = test_faults._drive_faulty(fastmts, 'after_create_session', key)
      else:
        # Failed constructions, each collected at once.
        for i in range(20):
          test_faults._failed_construction(fastmts)
          gc.collect()
        result = fastmts._native.live_native_threads()
      print('RESULT %s %s' % (key, pickle.dumps(result).hex()), flush=True)
""")
# Two children side by side; each reports its keys in turn (a crash loses
# the keys after it).
_CHILD_KEYS = (('kept', 'with', 'explicit'), ('collected',))
_child_results = {}


def _after_create_session_children():
  """{key: (result, reported, rc, report)} of the children (run once per
  test run)."""
  if not _child_results:
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    done = _run_children_side_by_side(
        {keys: ['-c', _AFTER_CREATE_SESSION_CHILD, tests_dir] + list(keys)
         for keys in _CHILD_KEYS}, timeout=_CHILDREN_HANG_BOUND_SECS)
    for keys, (rc, out, err) in done.items():
      results = {}
      for line in out.splitlines():
        if line.startswith('RESULT '):
          _, key, data = line.split(' ', 2)
          results[key] = pickle.loads(bytes.fromhex(data))
      report = '\n'.join(
          ['rc=%s%s' % (rc, ' (SIGSEGV)' if rc == -signal.SIGSEGV else ''),
           'stdout:', out[-2000:], 'stderr:',
           '\n'.join(l for l in err.splitlines()
                     if not l.startswith(('I0000', 'W0000', 'E0000')))[-4000:]])
      for key in keys:
        _child_results[key] = (results.get(key), key in results, rc, report)
  return _child_results


def _child_result(key):
  """The child's result for `key`; fails if the child crashed (before
  reporting it, or at all when key is 'collected')."""
  result, reported, rc, report = _after_create_session_children()[key]
  if not reported or (key == 'collected' and rc != 0):
    pytest.fail('the fastmts child process crashed %s %r: %s' % (
        'after reporting' if reported else 'before reporting', key, report))
  return result


@pytest.mark.timeout(_CHILDREN_TEST_BOUND_SECS)  # fastmts's after_create_session: children
@pytest.mark.parametrize('mode', ['with', 'explicit'])
@pytest.mark.parametrize('fault', FAULTS)
def test_fault_surfaces_once(check, impl, fault, mode):
  leftovers = {}

  def scenario(impl_, workdir):
    del workdir
    if impl_ is not TF_IMPL and fault == 'after_create_session':
      observed, leftover = _child_result(mode)
    else:
      observed, leftover = _drive_faulty(impl_, fault, mode)
    leftovers[impl_.__name__] = leftover
    if fault == 'queue_runner':
      # Whether a run sees the cancelled queue (OutOfRangeError) before the
      # loop's should_stop() sees the stop is a race, in TF as in fastmts.
      # Which steps ran before the error is a race too.
      assert set(t for _, t in observed['others']) <= {'OutOfRangeError'}, observed
      assert 0 <= observed['steps'] <= 3, observed
      observed = dict(observed, others=[], steps=3)
      # So is whether the error first comes out of should_stop() or only
      # out of the with block / close(): TF's _RecoverableSession checks the
      # coordinator, then asks the session below, which checks it again and
      # raises if the queue runner failed in between (seen under ASan).
      surfaced = observed['surfaced']
      if (len(surfaced) == 2 and surfaced[0][0] == 'should_stop' and
          surfaced[1][1:] == ('same',)):
        observed = dict(observed, surfaced=[(surfaced[1][0],) + surfaced[0][1:]])
    return observed

  check(scenario, expected=_expected_faults(fault, mode))
  for name, (python_threads, native_threads) in leftovers.items():
    if name == TF_IMPL.__name__ and fault == 'after_create_session':
      # TF: the queue runners started before the hook failed keep running
      # (both of them, blocked on the full queue) until someone stops them.
      assert (python_threads, native_threads) == (2, 0), name
    else:
      assert (python_threads, native_threads) == (0, 0), (
          '%s left threads running after a fault in %s: python %d, native %d'
          % (name, fault, python_threads, native_threads))


class _KeepingHook(TF_IMPL.SessionRunHook):
  """Keeps the session and coordinator it is given, then fails."""

  def after_create_session(self, session, coord):
    self.kept = (session, coord)
    raise HookError('boom in after_create_session')


def _keeping_hook_scenario(fastmts):
  """(excess Python threads, native threads) 1 s after a construction failed
  in the after_create_session of a hook that kept the session and the
  coordinator; cleans up after itself."""
  start = threading.active_count()
  hook = _KeepingHook()
  try:
    with tf.Graph().as_default():
      _fault_graph('after_create_session')
      try:
        fastmts.MonitoredTrainingSession(hooks=[hook])
      except HookError:
        pass
      gc.collect()
      return _wait_threads(start, 1.0, fastmts)
  finally:
    kept = getattr(hook, 'kept', None)
    hook = None
    if kept is not None:
      kept[1].request_stop()
      _wait_threads(start, 5.0, fastmts)
      kept[0].close()
      kept = None
    gc.collect()


def _failed_construction(impl):
  """A MonitoredTrainingSession (with a queue runner) whose construction
  fails in a hook's after_create_session; the caller moves on."""
  with tf.Graph().as_default():
    _fault_graph('after_create_session')
    try:
      impl.MonitoredTrainingSession(hooks=[_faulty_hook(impl, 'after_create_session')])
    except HookError:
      pass


@pytest.mark.timeout(_CHILDREN_TEST_BOUND_SECS)
def test_after_create_session_failure_stops_queue_runners(fastmts):
  """A hook that keeps the session and coordinator it was given (as hooks
  may) and fails in after_create_session: the session was never handed to
  the caller, so nobody can close it; its queue-runner threads must not keep
  running (stock TF leaves its Python queue-runner threads running forever
  here)."""
  del fastmts  # used by the child
  assert _child_result('kept') == (0, 0)


@pytest.mark.timeout(_CHILDREN_TEST_BOUND_SECS)
def test_failed_construction_then_gc_does_not_crash(fastmts):
  """20 constructions failing in after_create_session, each collected at
  once (gc.collect()), in a child: it must not crash, and no native thread
  may be left."""
  del fastmts  # used by the child
  assert _child_result('collected') == 0


# ---------------------------------------------------------------------------
# SIGINT during run / run_steps (in a child process)
# ---------------------------------------------------------------------------

_SIGINT_CHILD = textwrap.dedent(r'''
    import json, os, signal, sys, threading, time
    # Ctrl-C's Python handler even if this process was started with SIGINT
    # ignored (a background job of a shell without job control is).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    tf.get_logger().setLevel('ERROR')
    v1 = tf.compat.v1
    impl_name, workdir = sys.argv[1], sys.argv[2]
    if impl_name == 'tf':
      impl = v1.train
    else:
      import fastmts as impl

    def watchdog():
      print('WATCHDOG: still running 150 s after the start', flush=True)
      os._exit(3)

    dog = threading.Timer(150.0, watchdog)  # a hang, even on a loaded machine
    dog.daemon = True
    dog.start()
    for mode in sys.argv[3:]:
      loop, _, eoi = mode.partition(':')
      d = os.path.join(workdir, mode.replace(':', '_'))
      stepfile = os.path.join(workdir, mode.replace(':', '_') + '.step')
      with tf.Graph().as_default():
        gs = v1.train.get_or_create_global_step()
        m = tf.random.normal([160, 160], seed=1)
        work = tf.reduce_sum(tf.matmul(m, m))  # about 1 ms
        with tf.control_dependencies([work]):
          new = v1.assign_add(gs, 1)
        # The global step of the last run that happened, written by the run.
        train = tf.group(new, tf.io.write_file(stepfile, tf.strings.as_string(new)))
        hooks = [v1.train.StopAtStepHook(last_step=10 ** 9),
                 v1.train.NanTensorHook(work)]
        kwargs = {'end_on_interrupt': True} if eoi else {}
        state = {}

        def interrupt():
          state['t'] = time.monotonic()
          os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Timer(0.5, interrupt)
        how = 'returned'
        try:
          with impl.MonitoredTrainingSession(checkpoint_dir=d, hooks=hooks,
                                             **kwargs) as sess:
            # After the first step (which builds the executor: slow on a
            # loaded machine), so that the interrupt comes mid-training.
            sess.run(train)
            timer.start()
            if loop == 'run':
              while not sess.should_stop():
                sess.run(train)
            else:
              sess.run_steps(train)
        except KeyboardInterrupt:
          how = 'KeyboardInterrupt'
        finally:
          timer.cancel()
          timer.join()
        t_end = time.monotonic()
        latest = tf.train.latest_checkpoint(d)
        ckpt_step = int(latest.rsplit('-', 1)[1])
        ckpt_gs = int(tf.train.load_checkpoint(latest).get_tensor('global_step'))
        with open(stepfile) as f:
          last_step = int(f.read())
        print('RESULT ' + json.dumps(dict(
            mode=mode, how=how, seconds_after_sigint=t_end - state.get('t', 0),
            last_step=last_step, ckpt_step=ckpt_step, ckpt_gs=ckpt_gs)), flush=True)
    dog.cancel()
''')


_SIGINT_MODES = {'tf': ['run'],
                 'fastmts': ['run', 'run_steps', 'run:eoi', 'run_steps:eoi']}
_sigint_cache = {}


def _sigint_results(impl_name):
  """({mode: result dict}, report) of the child for `impl_name` ('tf' or
  'fastmts'; both children run side by side, once per test run); fails if
  the child did not exit with 0 or reported less than all its modes."""
  if not _sigint_cache:
    workdir = tempfile.mkdtemp(prefix='fastmts-sigint-')
    try:
      argvs = {}
      for name, modes in _SIGINT_MODES.items():
        os.makedirs(os.path.join(workdir, name))
        argvs[name] = ['-c', _SIGINT_CHILD, name, os.path.join(workdir, name)] + modes
      done = _run_children_side_by_side(argvs, timeout=_CHILDREN_HANG_BOUND_SECS)
    finally:
      shutil.rmtree(workdir, ignore_errors=True)
    for name, (rc, out, err) in done.items():
      report = '\n'.join(['rc=%s' % rc, 'stdout:', out, 'stderr:', err[-4000:]])
      results = [json.loads(l[len('RESULT '):]) for l in out.splitlines()
                 if l.startswith('RESULT ')]
      _sigint_cache[name] = (rc, {r['mode']: r for r in results}, report)
  rc, results, report = _sigint_cache[impl_name]
  assert rc == 0, report
  assert sorted(results) == sorted(_SIGINT_MODES[impl_name]), report
  return results, report


def _sigint_outcome(r):
  """What a user sees of an interrupted child run."""
  return dict(
      how=r['how'],
      prompt=0 <= r['seconds_after_sigint'] < 5.0,
      ran=r['last_step'] >= 5,
      ckpt_consistent=r['ckpt_step'] == r['ckpt_gs'],
      final_ckpt_at_last_step=r['ckpt_step'] == r['last_step'],
      only_initial_ckpt=r['ckpt_step'] == 0)


_INTERRUPTED_NO_END = dict(how='KeyboardInterrupt', prompt=True, ran=True,
                           ckpt_consistent=True, final_ckpt_at_last_step=False,
                           only_initial_ckpt=True)
_INTERRUPTED_END = dict(_INTERRUPTED_NO_END, final_ckpt_at_last_step=True,
                        only_initial_ckpt=False)


@pytest.mark.timeout(_CHILDREN_TEST_BOUND_SECS)
def test_sigint_during_run(check):

  def scenario(impl, workdir):
    del workdir
    results, report = _sigint_results('tf' if impl is TF_IMPL else 'fastmts')
    got = _sigint_outcome(results['run'])
    assert got['ran'], report
    return got

  check(scenario, expected=_INTERRUPTED_NO_END)


@pytest.mark.timeout(_CHILDREN_TEST_BOUND_SECS)
def test_sigint_fastmts_run_steps_and_end_on_interrupt(fastmts):
  del fastmts  # imported by the child
  results, report = _sigint_results('fastmts')
  modes = ['run_steps', 'run:eoi', 'run_steps:eoi']
  got = {m: _sigint_outcome(results[m]) for m in modes}
  assert got == {'run_steps': _INTERRUPTED_NO_END, 'run:eoi': _INTERRUPTED_END,
                 'run_steps:eoi': _INTERRUPTED_END}, report


# ---------------------------------------------------------------------------
# SIGKILL during a checkpoint save
# ---------------------------------------------------------------------------

_BIG_MB = 64
_KILL_CHILD = textwrap.dedent(r'''
    import os, sys
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'
    import tensorflow as tf
    import fastmts
    tf.compat.v1.disable_eager_execution()
    tf.get_logger().setLevel('ERROR')
    v1 = tf.compat.v1
    d, mb, async_checkpoint = sys.argv[1], int(sys.argv[2]), sys.argv[3] == 'async'
    extra = {'async_checkpoint': True} if async_checkpoint else {}
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      n = mb * 2 ** 20 // 4
      big = v1.get_variable('big', [n], tf.float32,
                            initializer=v1.zeros_initializer())
      new = v1.assign_add(gs, 1)
      with tf.control_dependencies([new]):
        fill = v1.assign(big, tf.fill([n], tf.cast(new, tf.float32)))
      train = tf.group(new, fill)
      with fastmts.MonitoredTrainingSession(
          checkpoint_dir=d, save_checkpoint_steps=1, save_summaries_steps=None,
          log_step_count_steps=None,
          hooks=[v1.train.StopAtStepHook(last_step=2000)], **extra) as sess:
        while not sess.should_stop():
          sess.run(train)
    print('FINISHED: never killed', flush=True)
''')
# Saver.save writes the .meta last, after the checkpoint state file.
_CKPT_META = re.compile(r'^model\.ckpt-(\d+)\.meta$')


def _ckpt_state(d):
  """(number of complete, recorded checkpoints; a save in progress?)"""
  try:
    names = os.listdir(d)
  except FileNotFoundError:
    return 0, False
  return (sum(1 for n in names if _CKPT_META.match(n)),
          any('_temp' in n or 'tempstate' in n for n in names))


class _KillTrial:
  """A child training with saves every step, killed by SIGKILL:
  'at_save_start' as soon as a save is seen in progress, 'mid_save' 20 ms
  after one was seen (if still in progress), 'random' at a random moment
  (up to 0.3 s) once 2 checkpoints exist."""

  def __init__(self, workdir, how, seed, async_checkpoint):
    self.dir = workdir
    self.how = how
    self.rng = random.Random(seed)
    self.log_path = workdir + '.log'
    with open(self.log_path, 'wb') as log:
      self.proc = subprocess.Popen(
          [sys.executable, '-c', _KILL_CHILD, workdir, str(_BIG_MB),
           'async' if async_checkpoint else 'sync'],
          env=child_env(), stdout=log, stderr=subprocess.STDOUT,
          stdin=subprocess.DEVNULL)
    self.kill_at = None        # monotonic time to kill at, once decided
    self.killed = False
    self.save_in_progress_at_kill = None

  def poll(self, now):
    """Advances the trial; returns True once it is over (killed or dead)."""
    if self.killed:
      return True
    if self.proc.poll() is not None:
      return True
    complete, saving = _ckpt_state(self.dir)
    if complete < 2:
      return False
    if self.kill_at is None:
      if self.how == 'random':
        self.kill_at = now + self.rng.uniform(0.0, 0.3)
      elif saving:
        self.kill_at = now + (0.0 if self.how == 'at_save_start' else 0.02)
    if self.kill_at is not None and now >= self.kill_at:
      if self.how == 'mid_save' and not saving:
        self.kill_at = None  # that save ended: wait for the next one
        return False
      self.proc.kill()  # SIGKILL
      self.proc.wait(10)
      self.killed = True
      self.save_in_progress_at_kill = saving
      return True
    return False

  def cleanup(self):
    if self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait(10)

  def log_tail(self):
    with open(self.log_path, 'rb') as f:
      return f.read().decode(errors='replace')[-3000:]


def _resume(fastmts, d):
  """A new fastmts session restoring the latest checkpoint of `d`: returns
  (restored global step, big[0], big[-1], global step after one more run)."""
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    n = _BIG_MB * 2 ** 20 // 4
    big = v1.get_variable('big', [n], tf.float32,
                          initializer=v1.zeros_initializer())
    train = v1.assign_add(gs, 1)
    ends = [big[0], big[-1]]
    with fastmts.MonitoredTrainingSession(
        checkpoint_dir=d, save_checkpoint_steps=None, save_checkpoint_secs=None,
        save_summaries_steps=None, log_step_count_steps=None) as sess:
      step = int(sess.run(gs))
      first, last = sess.run(ends)
      after = int(sess.run(train))
  return step, float(first), float(last), after


@pytest.mark.timeout(_CHILDREN_TEST_BOUND_SECS)
@pytest.mark.parametrize('async_checkpoint', [False, True], ids=['sync', 'async'])
def test_sigkill_during_checkpoint_save_leaves_previous_restorable(
    fastmts, tmp_path, async_checkpoint):
  hows = ['at_save_start', 'mid_save', 'random']
  trials = []
  try:
    # The three trials run side by side (each child needs a few seconds to
    # start TensorFlow).
    for i, how in enumerate(hows):
      d = str(tmp_path / how)
      os.makedirs(d)
      trials.append(_KillTrial(d, how, seed=i, async_checkpoint=async_checkpoint))
    deadline = time.monotonic() + _CHILDREN_HANG_BOUND_SECS
    pending = list(trials)
    while pending and time.monotonic() < deadline:
      now = time.monotonic()
      pending = [t for t in pending if not t.poll(now)]
      time.sleep(0.001)
    for t in trials:
      t.cleanup()
      assert t.killed, '%s: the child was not killed in time (rc %s)\n%s' % (
          t.how, t.proc.returncode, t.log_tail())
  finally:
    for t in trials:
      t.cleanup()

  for t in trials:
    if t.how != 'random':
      assert t.save_in_progress_at_kill, t.how  # the kill hit a save
    latest = tf.train.latest_checkpoint(t.dir)
    assert latest is not None, (t.how, sorted(os.listdir(t.dir)))
    step = int(latest.rsplit('-', 1)[1])
    reader = tf.train.load_checkpoint(latest)
    assert int(reader.get_tensor('global_step')) == step, t.how
    values = reader.get_tensor('big')
    assert values.shape == (_BIG_MB * 2 ** 20 // 4,), t.how
    assert float(values.min()) == float(values.max()) == float(step), t.how
    del values, reader
    assert step >= 1, t.how
    assert _resume(fastmts, t.dir) == (step, float(step), float(step), step + 1), t.how
