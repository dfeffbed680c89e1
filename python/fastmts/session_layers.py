"""The layers of a monitored session, as TF's _WrappedSession and its subclasses.

A monitored session is a stack of layers, each wrapping the one below as
`_sess` (TF's name; code reaches the raw session as `sess._sess._sess...`):
_RecoverableSession (re-creates the session on AbortedError/UnavailableError)
over _CoordinatedSession (the Coordinator, queue runners and grace period)
over HookedSession (the hook dispatch around one merged run: hooked_session).

_WrappedSession declares what every layer answers and delegates each of it
to the layer below once; a layer overrides only what it changes.

Recovery follows one rule, TF's _RecoverableSession's: a call that raises
AbortedError or UnavailableError closes the session, creates a new one and
(run, run_step_fn) calls again on it; `run_steps` returns RECREATED instead,
its caller counts the steps done and goes on. The new session is created
before the call returns or retries (TF creates it at the next call, in the
same order of close and creation), so that `should_stop()` after a recovered
`run_steps` asks the new session.

An external stop (a signal the session was told to watch) reaches the layers
only through a StopPolicy, which they ask: whether the stop was requested,
how much of its grace period is left, whether a session may be re-created,
what a run after the stop raises. This module's StopPolicy is the one of a
session without any: nothing ever stops it from outside.
"""
import threading
import time

from tensorflow.python.framework import errors
from tensorflow.python.platform import tf_logging as logging

from fastmts._internal import errors as fastmts_errors
from fastmts import queue_runner

# The errors that close the session and create a new one, as in TF.
RECOVERABLE_ERRORS = (errors.AbortedError, errors.UnavailableError)

# run_steps: the session was re-created after a recoverable error; no result.
RECREATED = object()

# How long close() lets queue-runner threads end by themselves after the
# stop before it takes them for blocked in TF (they end within one run).
QUEUE_RUNNER_STOP_SECS = 0.25

# TF's log text when a failed session is about to be re-created.
_RECREATE_NOTICE = (
    'This may be due to a preemption in '
    'a connected worker or parameter server. The current '
    'session will be closed and a new session will be '
    'created. This error may also occur due to a gRPC failure '
    'caused by high memory or network bandwidth usage in the '
    'parameter servers. If this error occurs repeatedly, try '
    'increasing the number of parameter servers assigned to '
    'the job. Error: %s')
_RUN_NOTICE = 'An error was raised. ' + _RECREATE_NOTICE
_CHECK_STOP_NOTICE = ('An error was raised while considering whether the '
                      'session is complete. ' + _RECREATE_NOTICE)
_CREATE_NOTICE = (
    'An error was raised while a session was being created. '
    'This may be due to a preemption of a connected worker '
    'or parameter server. A new session will be created. '
    'This error may also occur due to a gRPC failure caused '
    'by high memory or network bandwidth usage in the '
    'parameter servers. If this error occurs repeatedly, try '
    'increasing the number of parameter servers assigned to '
    'the job. Error: %s')


class StopPolicy:
  """What the layers ask about a stop that comes from outside the session.
  This base is the policy of a session nothing stops from outside."""

  # The stop's record (what the session reports), or None before any.
  record = None

  @property
  def stop_requested(self):
    """Whether the session was told to stop from outside."""
    return self.record is not None

  def grace_left(self, secs):
    """`secs` (a wait's own bound), cut to what the stop leaves of its
    grace period."""
    return secs

  def check_recreation(self):
    """Raises if a session must not be re-created (it would outlast the
    stop's grace period)."""

  def raise_if_stopped(self, what):
    """Raises if a wait (`what`) must end for the stop."""
    del what

  def error_for_run_after_stop(self, error):
    """The error a run refused after the stop raises instead of `error`
    (fastmts._internal.errors.RunAfterStopError), or None to raise TF's."""
    del error

  def before_close(self):
    """The session's close begins."""

  def after_close(self, closed):
    """The session's close ended (`closed`: without an error)."""
    del closed

  def preempted_by_peer(self, signum):
    """Before the close: another rank was preempted by `signum`, and the
    ranks agreed to stop (fastmts.AgreedStop)."""
    del signum

  def release(self):
    """The session is gone (closed, or its creation failed)."""


NO_STOP = StopPolicy()

# The stop policy of the session whose raw session this thread is creating,
# for waits inside a session creator (a worker's wait for its chief).
_creating = threading.local()


class creating_with:  # pylint: disable=invalid-name
  """Context manager: a session with `stop_policy` is being created here."""

  def __init__(self, stop_policy):
    self._policy = stop_policy
    self._outer = None

  def __enter__(self):
    self._outer = getattr(_creating, 'policy', None)
    _creating.policy = self._policy

  def __exit__(self, *exc_info):
    _creating.policy = self._outer


def raise_if_stopped(what):
  """In a wait (`what`) of a session's creation: raises once the stop
  policy of the session being created says the wait must end."""
  policy = getattr(_creating, 'policy', None)
  if policy is not None:
    policy.raise_if_stopped(what)


def log_close_error(e):
  """TF's log line for a recoverable error of a close (not raised)."""
  logging.error(
      'An error occurred when attempting to close the '
      'session. This may be due to a preemption in a '
      'connected worker or parameter server. Error: %s', e)


class StepContext:
  """What `step_fn` gets: the raw `session`, `run_with_hooks` and `request_stop`."""

  def __init__(self, session, run_with_hooks_fn):
    self._session = session
    self._run_with_hooks_fn = run_with_hooks_fn

  @property
  def session(self):
    """The raw session (tf.compat.v1.Session)."""
    return self._session

  def run_with_hooks(self, *args, **kwargs):
    """Same as `MonitoredSession.run`. Accepts the same arguments."""
    return self._run_with_hooks_fn(*args, **kwargs)

  def request_stop(self):
    """Stops the loop: raises StopIteration out of `run_step_fn`."""
    raise StopIteration('step_fn has requested the iterations to stop.')


class _WrappedSession:
  """One layer of a monitored session around the layer below, `_sess`.

  Every layer answers the calls below; this base hands each to the layer
  below. `_sess` is None once the layer closed it.
    graph
    should_stop(): this layer's `_check_stop()`, else the layer below's.
    _check_stop(): this layer's own reason to stop (here: none).
    close()
    run(fetches, feed_dict, options, run_metadata): one step with hooks.
    run_failed(error, fetches): the native fast path's step of `fetches`
      (no feeds, no options) raised `error`: raise it, or carry on as run()
      would have.
    run_steps(fetches, max_steps, feed_dict, progress): steps until a stop,
      counted in `progress` (a LoopProgress); the last step's results.
    run_step_fn(step_fn, raw_session, run_with_hooks)
    raw_session: the tf.compat.v1.Session at the bottom (None once closed).
    coordinator: the Coordinator of the session's threads (None once closed).
    queue_runner_threads: the threads running the graph's QueueRunners.
    steps_run: the steps completed so far, failed ones excluded.
  The bottom layer, HookedSession (hooked_session), answers each of these
  over the raw session itself.
  """

  def __init__(self, sess):
    self._sess = sess

  @property
  def graph(self):
    return self._sess.graph

  def should_stop(self):
    if self._check_stop():
      return True
    return self._sess is None or self._sess.should_stop()

  def _check_stop(self):
    return False

  def close(self):
    if self._sess:
      try:
        self._sess.close()
      except RECOVERABLE_ERRORS as e:
        log_close_error(e)
      finally:
        self._sess = None

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                          run_metadata=run_metadata)

  def run_failed(self, error, fetches):
    return self._sess.run_failed(error, fetches)

  def run_steps(self, fetches, max_steps, feed_dict, progress):
    return self._sess.run_steps(fetches, max_steps, feed_dict, progress)

  def run_step_fn(self, step_fn, raw_session, run_with_hooks):
    run_with_hooks = run_with_hooks or self.run
    return step_fn(StepContext(raw_session, run_with_hooks))

  @property
  def raw_session(self):
    return None if self._sess is None else self._sess.raw_session

  @property
  def coordinator(self):
    return None if self._sess is None else self._sess.coordinator

  @property
  def queue_runner_threads(self):
    return [] if self._sess is None else self._sess.queue_runner_threads

  @property
  def steps_run(self):
    return self._sess.steps_run


class _RecoverableSession(_WrappedSession):
  """Re-creates the wrapped session on AbortedError / UnavailableError (see
  the module docstring for the rule), bounded by a RecoveryPolicy if any."""

  def __init__(self, sess_creator, policy=None, stop_policy=NO_STOP):
    self._sess_creator = sess_creator
    self._policy = policy  # None: TF's retry forever, at once
    self._stop_policy = stop_policy
    self._recreations = 0  # consecutive, since the last successful step
    self._steps_at_last_recreation = None
    self._sess = None
    super().__init__(self._create_session())

  def _before_recreating(self, error):
    """Before a re-creation after `error`: raises the stop policy's error if
    a new session would outlast a stop, raises `error` once the recovery
    policy's bound is passed, else waits its backoff. A step run since the
    last re-creation resets the count."""
    self._stop_policy.check_recreation()
    if self._policy is None:
      return
    # No session (its creation failed): no step ran since the last count.
    steps = self._sess.steps_run if self._sess else self._steps_at_last_recreation
    if steps != self._steps_at_last_recreation:
      self._recreations = 0
    self._steps_at_last_recreation = steps
    self._recreations += 1
    if not self._policy.allows(self._recreations):
      raise error
    time.sleep(self._policy.pause_before(self._recreations))

  def _create_session(self):
    while True:
      try:
        return self._sess_creator.create_session()
      except RECOVERABLE_ERRORS as e:
        self._before_recreating(e)
        logging.info(_CREATE_NOTICE, e)

  def _recreate(self, error, notice=_RUN_NOTICE):
    """The one recovery: after `error` (recoverable), closes the session and
    creates a new one, or raises (see _before_recreating)."""
    self._before_recreating(error)
    logging.info(notice, error)
    self.close()
    self._sess = self._create_session()

  def _check_stop(self):
    try:
      if self._sess:
        # The layer protocol's own call, TF's private name for it.
        return self._sess._check_stop()  # pylint: disable=protected-access
      return True
    except RECOVERABLE_ERRORS as e:
      if self._stop_policy.stop_requested:
        return True  # stopping anyway: close() reports what failed
      self._recreate(e, _CHECK_STOP_NOTICE)
      return False
    except Exception:  # pylint: disable=broad-except
      return True

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    if not self._sess:
      self._sess = self._create_session()
    while True:
      try:
        return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                              run_metadata=run_metadata)
      except RECOVERABLE_ERRORS as e:
        self._recreate(e)

  def run_failed(self, error, fetches):
    """As run() after its first step of `fetches` raised `error`."""
    try:
      return self._sess.run_failed(error, fetches)
    except RECOVERABLE_ERRORS as e:
      self._recreate(e)
    return self.run(fetches)

  def run_steps(self, fetches, max_steps, feed_dict, progress):
    """As the layer below's; RECREATED once the session was re-created."""
    if not self._sess:
      self._sess = self._create_session()
    try:
      return self._sess.run_steps(fetches, max_steps, feed_dict, progress)
    except RECOVERABLE_ERRORS as e:
      self._recreate(e)
      return RECREATED

  def run_step_fn(self, step_fn, raw_session, run_with_hooks):
    if not self._sess:
      self._sess = self._create_session()
    while True:
      try:
        return self._sess.run_step_fn(step_fn, raw_session, self._sess.run)
      except RECOVERABLE_ERRORS as e:
        self._recreate(e)


class _CoordinatedSession(_WrappedSession):
  """The hooked session under a Coordinator (TF's _CoordinatedSession over
  _HookedSession): errors of run are weighed against the coordinator's, and
  close stops and joins its threads within the grace period."""

  def __init__(self, hooked, coord, queue_runners, stop_grace_period_secs=120,
               stop_policy=NO_STOP):
    super().__init__(hooked)  # TF's name: code reaches the raw session as ._sess._sess
    self._coord = coord
    self._queue_runners = queue_runners
    self._stop_grace_period_secs = stop_grace_period_secs
    self._stop_policy = stop_policy

  def _grace_period_secs(self):
    return self._stop_policy.grace_left(self._stop_grace_period_secs)

  def _check_stop(self):
    self._coord.raise_requested_exception()
    return self._coord.should_stop()

  def close(self):
    self._coord.request_stop()
    try:
      self._release_threads_blocked_in_tf()
      self._coord.join(stop_grace_period_secs=self._grace_period_secs(),
                       ignore_live_threads=True)
    finally:
      try:
        self._close_hooked()
      except Exception:  # pylint: disable=broad-except
        pass
      finally:
        # Closing the session released any native thread still blocked in
        # TF (its run fails); none may outlive the session.
        if self._queue_runners is not None:
          self._queue_runners.join()
          self._queue_runners = None

  def _release_threads_blocked_in_tf(self):
    """Queue-runner threads (fastmts's native ones, and TF's QueueRunner
    threads that hooks start, e.g. SyncReplicasOptimizer's chief runner)
    run only TF ops: after the stop and its cancel ops they end within a
    run, unless one is blocked in an op nothing will complete (such as the
    sync-replicas chief's take_grad). TF would wait out the whole grace
    period for it; closing the session cancels it at once. Done only when
    such threads are all that is left, since other Python threads may still
    use the session in their grace period (the hooks' end() already ran:
    nothing is lost), and only once every runner's cancel op has run (its
    thread ended; within the grace period, as TF's join waits): their
    queues are closed then, so the close cancels no enqueue of an open
    queue (which TF logs, and TF's order never does)."""
    alive = [t for t in self._coord.registered_threads() if t.is_alive()]
    if not alive or not all(queue_runner.runs_only_tf_ops(t) for t in alive):
      return
    cancelling = [t for t in alive if queue_runner.runs_cancel_op(t)]
    queue_runner.poll_until(lambda: not any(t.is_alive() for t in cancelling),
                            time.monotonic() + self._grace_period_secs())
    if queue_runner.poll_until(lambda: not any(t.is_alive() for t in alive),
                               time.monotonic() + QUEUE_RUNNER_STOP_SECS):
      return
    self._close_hooked()
    if self._queue_runners is not None:
      self._queue_runners.join()

  def _close_hooked(self):
    hooked, self._sess = self._sess, None
    if hooked is not None:
      hooked.close()

  @property
  def coordinator(self):
    return self._coord

  @property
  def queue_runner_threads(self):
    return [] if self._queue_runners is None else list(self._queue_runners.threads)

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    try:
      return self._sess.run(fetches, feed_dict, options, run_metadata)
    except Exception as e:  # pylint: disable=broad-except
      self._raise_run_error(e)

  def run_steps(self, fetches, max_steps, feed_dict, progress):
    try:
      return self._sess.run_steps(fetches, max_steps, feed_dict, progress)
    except Exception as e:  # pylint: disable=broad-except
      self._raise_run_error(e)

  def run_failed(self, error, fetches):
    try:
      return self._sess.run_failed(error, fetches)  # raises: nothing is retried below
    except Exception as e:  # pylint: disable=broad-except
      self._raise_run_error(e)

  def _raise_run_error(self, original_exception):
    """As TF: a step's own error is raised, unless the coordinator holds a
    recoverable error, which recovery must see instead."""
    if isinstance(original_exception, RECOVERABLE_ERRORS):
      raise original_exception
    if isinstance(original_exception, fastmts_errors.RunAfterStopError):
      instead = self._stop_policy.error_for_run_after_stop(original_exception)
      if instead is not None:
        raise instead from None
    try:
      self._coord.raise_requested_exception()
    except RECOVERABLE_ERRORS:
      raise
    except Exception:  # pylint: disable=broad-except
      pass
    if isinstance(original_exception, fastmts_errors.RunAfterStopError):
      raise fastmts_errors.as_tf_error(original_exception) from None
    raise original_exception
