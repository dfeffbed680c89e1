"""The preemption policy: what a PreemptionHook feeds and a session asks.

One SessionPreemption per PreemptionHook (the hook makes it, and it stays
with the hook from session to session) owns:

* the record: the `Preemption` made by the first signal;
* the signal routing: it watches its PreemptionPolicy's signals through the
  process-wide router, and on the first one records it, logs, and asks for
  the stop: of the fastmts session that adopted it (`of`), which reports the
  signal to its agreed stop, if any (session_agreement.stop_on_signal), or
  else of the coordinator the hook was given (TF's own MonitoredSession);
* the close: later signals wait for it; the report at close; the previous
  handlers put back.

The hook only feeds it (begin, the coordinator, its end() and the step it
checkpointed) and stays a plain hook. A fastmts session's layers ask it as
their StopPolicy (session_layers). See docs/preemption.md.
"""
import contextlib
import os
import signal
import threading
import time

from tensorflow.python.platform import tf_logging as logging

from fastmts import _native
from fastmts import session_layers

# The module users import them from (fastmts.preemption, fastmts): what
# tracebacks and help() name.
_PUBLIC_MODULE = 'fastmts.preemption'


class Preemption:
  """What happened after a preemption signal (`MonitoredSession.preemption`).

  Attributes:
    signal: the first signal received (a `signal.Signals`).
    signals_received: every delivery counted until the session closed.
    received_at: `time.time()` when the first signal's handler ran: at once
      between steps, or when a long TF call of the main thread (a periodic
      save) returns; the seconds below count from then.
    step: the global step of the checkpoint written at the stop (chief), or
      None (worker; or the stop was cut short, e.g. the save failed).
    checkpoint_path: that checkpoint's path prefix, or None.
    seconds_to_checkpoint: from the signal until that checkpoint was complete.
    seconds_to_close: from the signal until the session had closed.
    exit_code: 128 + the signal (143 for SIGTERM), what a shell reports for a
      process the signal ended: exit with it if the cluster expects that.
    by_peer: True when the signal went to another rank of the job and the
      ranks agreed to stop (fastmts.AgreedStop): `received_at` is then when
      this rank began to close.
  """
  __module__ = _PUBLIC_MODULE

  def __init__(self, signum, grace_period_secs):
    self.signal = signal.Signals(signum)
    self.signals_received = 1
    self.received_at = time.time()
    self._received_monotonic = time.monotonic()
    self.grace_period_secs = grace_period_secs
    self.step = None
    self.checkpoint_path = None
    self.seconds_to_checkpoint = None
    self.seconds_to_close = None
    self.by_peer = False

  @property
  def exit_code(self):
    """128 + the signal number."""
    return 128 + int(self.signal)

  def seconds_since_signal(self):
    """Seconds since the first signal (monotonic clock)."""
    return time.monotonic() - self._received_monotonic

  def grace_left(self):
    """Seconds of the grace period still left (never below 0)."""
    return max(0.0, self.grace_period_secs - self.seconds_since_signal())

  def __repr__(self):
    return ('Preemption(signal=%s, signals_received=%d, step=%r, checkpoint_path=%r, '
            'seconds_to_checkpoint=%s, seconds_to_close=%s)' % (
                self.signal.name, self.signals_received, self.step, self.checkpoint_path,
                _secs(self.seconds_to_checkpoint), _secs(self.seconds_to_close)))


def _secs(value):
  return 'None' if value is None else '%.3f' % value


class Preempted(RuntimeError):
  """Raised where training cannot go on after a preemption signal: a `run`
  after the stop, a worker's wait for the chief, a session re-creation.
  `preemption` is the session's `Preemption` record."""
  __module__ = _PUBLIC_MODULE

  def __init__(self, message, preemption):
    super().__init__(message)
    self.preemption = preemption


class _SignalRouter:
  """One Python handler per watched signal, process-wide, shared by every
  watching SessionPreemption; the handler that was there before is called
  as well and put back when the last policy watching that signal is
  released."""

  def __init__(self):
    self._policies = []
    self._previous = {}      # signal -> the handler before ours
    self._deferred = []      # (previous handler, signum) to call at release
    # One bound method, so that getsignal() can tell whether ours is still in place.
    self._handler = self._handle

  def add(self, policy):
    if threading.current_thread() is not threading.main_thread():
      raise ValueError('fastmts.PreemptionHook watches signals, which Python lets only the '
                       'main thread do: create the monitored session in the main thread')
    for s in policy.signals:
      if s not in self._previous:
        self._previous[s] = signal.signal(s, self._handler)
    self._policies.append(policy)

  def remove(self, policy):
    if policy not in self._policies:
      return
    self._policies.remove(policy)
    watched = {s for p in self._policies for s in p.signals}
    if threading.current_thread() is threading.main_thread():
      # (Elsewhere Python cannot: ours stays, passing signals on as before.)
      for s in [s for s in self._previous if s not in watched]:
        previous = self._previous.pop(s)
        if signal.getsignal(s) is self._handler:  # a handler installed after ours stays
          signal.signal(s, previous if previous is not None else signal.SIG_DFL)
    if not any(p.stopping for p in self._policies):
      deferred, self._deferred = self._deferred, []
      for handler, signum in deferred:
        handler(signum, None)

  def _pass_on(self, signum, frame):
    """Does what the handler before ours would have done."""
    previous = self._previous.get(signum)
    if callable(previous):
      previous(signum, frame)
    elif previous != signal.SIG_IGN:  # the default action, e.g. ending the process
      signal.signal(signum, signal.SIG_DFL)
      del self._previous[signum]
      os.kill(os.getpid(), signum)

  def _handle(self, signum, frame):
    policies = [p for p in self._policies if signum in p.signals]
    if not policies:  # left in place by a release outside the main thread
      self._pass_on(signum, frame)
      return
    first = not any(p.record is not None for p in policies)
    for policy in policies:
      policy.signalled(signum)
    previous = self._previous.get(signum)
    if not callable(previous) or previous is signal.default_int_handler:
      return  # SIG_DFL / SIG_IGN / Ctrl-C's KeyboardInterrupt would cut the stop
    if first:
      previous(signum, frame)
    else:
      self._deferred.append((previous, signum))


_ROUTER = _SignalRouter()


def _request_stop(coord):
  """Stops `coord` from a signal handler, which runs in the main thread
  between two bytecodes: it must not wait for a lock that thread may hold.
  fastmts's coordinator stops natively; another (TF's) is stopped here if
  its lock is free, else from a short-lived thread once it is."""
  native = getattr(coord, 'native', None)
  if isinstance(native, _native.Coordinator):
    native.request_stop()
    return
  lock = getattr(coord, '_lock', None)
  if lock is None or lock.acquire(blocking=False):
    if lock is not None:
      lock.release()
    coord.request_stop()
    return
  threading.Thread(target=coord.request_stop, name='fastmts-preemption-stop',
                   daemon=True).start()


def _report_close(preemption, closed):
  """At the close of a preempted session: the record's last figure, and
  the log line an operator looks for."""
  preemption.seconds_to_close = preemption.seconds_since_signal()
  saved = ('step %d checkpointed as %s %.2f s after it' % (
      preemption.step, preemption.checkpoint_path, preemption.seconds_to_checkpoint)
           if preemption.checkpoint_path else 'nothing checkpointed')
  log = logging.info if preemption.seconds_to_close <= preemption.grace_period_secs else (
      logging.warning)
  log('fastmts: preempted by %s%s: %s; session %s %.2f s after the signal (grace period %g s).',
      preemption.signal.name, ' (sent to another rank)' if preemption.by_peer else '', saved,
      'closed' if closed else 'close failed', preemption.seconds_to_close,
      preemption.grace_period_secs)


class SessionPreemption(session_layers.StopPolicy):
  """The preemption policy of one PreemptionHook (see the module doc): it
  owns the record (`record`, None before a signal) and routes the signal
  to the stop; the hook feeds it; a fastmts session adopts it (`of`) and
  its layers ask it as their StopPolicy.

  Args:
    policy: the PreemptionPolicy (`signals`, `grace_period_secs`).
    checkpoints: whether the hook checkpoints the stop's step (a chief):
      what the log line at the signal says.
  """

  def __init__(self, policy, checkpoints):
    self.policy = policy
    self.record = None
    self._checkpoints = checkpoints
    self._coord = None         # the coordinator the hook was given
    self._stop_session = None  # the stop of the fastmts session that adopted it
    self._stopping = False     # the stop's work (a close, the hook's end()) is under way

  @classmethod
  def of(cls, hooks, stop_session):
    """The policy of a fastmts session with `hooks`: the one the first
    PreemptionHook among them feeds, adopted by the session, or the policy
    of a session nothing stops from outside (session_layers.NO_STOP).

    `stop_session(exit_code)` is called in the signal handler (it must take
    no lock) with the record's `exit_code`: the signal arrived, and the
    session decides how it stops. The adoption ends at `release()`."""
    policy = next((p for p in (getattr(h, 'session_preemption', None) for h in hooks)
                   if isinstance(p, cls)), None)
    if policy is None:
      return session_layers.NO_STOP
    policy._stop_session = stop_session
    return policy

  @property
  def signals(self):
    """The signals watched (the PreemptionPolicy's)."""
    return self.policy.signals

  @property
  def stopping(self):
    """Whether the stop's work (a session's close, the hook's end()) is
    under way: further signals wait for it to end."""
    return self._stopping

  # What the hook feeds it.

  def watch(self):
    """The hook began: watch the signals (in the main thread only: raises
    ValueError elsewhere)."""
    _ROUTER.add(self)

  def session_created(self, coord):
    """The hook's after_create_session: keeps `coord` (the stop under TF's
    own MonitoredSession), and stops at once if the signal came while the
    session was being created."""
    self._coord = coord
    if self.record is not None:
      self._stop()

  @contextlib.contextmanager
  def hook_ending(self):
    """Around the hook's end(): once preempted, later signals wait for it;
    afterwards the handlers are put back, unless a fastmts session does it
    at its close."""
    if self.record is not None:
      self._stopping = True
    try:
      yield
    finally:
      if self._stop_session is None:
        self.release()

  def checkpointed(self, step, checkpoint_path):
    """The hook's end() checkpointed the stop's `step` at `checkpoint_path`."""
    self.record.step = step
    self.record.checkpoint_path = checkpoint_path
    self.record.seconds_to_checkpoint = self.record.seconds_since_signal()

  # The signal's routing.

  def signalled(self, signum):
    """A watched signal arrived (the router calls it in the handler; takes
    no lock): the first one is recorded, logged and stops the session;
    later ones are counted."""
    if self.record is not None:
      self.record.signals_received += 1
      return
    self.record = Preemption(signum, self.policy.grace_period_secs)
    logging.warning('fastmts: %s received: training stops after the step in flight%s.',
                    self.record.signal.name,
                    ', which is checkpointed' if self._checkpoints else '')
    self._stop()

  def _stop(self):
    if self._stop_session is not None:  # the session decides how (its agreed stop, if any)
      self._stop_session(self.record.exit_code)
    elif self._coord is not None:
      _request_stop(self._coord)

  def preempted_by_peer(self, signum):
    """Another rank's signal stopped this one too (an agreed stop): it is
    recorded as this rank's, so the chief's hook saves the step and every
    rank's `preemption` tells the same."""
    if self.record is None:
      self.record = Preemption(signum, self.policy.grace_period_secs)
      self.record.by_peer = True

  # What the session's layers ask (session_layers.StopPolicy).

  def grace_left(self, secs):
    """`secs`, cut to what the grace period has left once preempted."""
    record = self.record
    return secs if record is None else min(secs, record.grace_left())

  def check_recreation(self):
    """Raises Preempted once preempted: a new session would outlast the
    grace period."""
    record = self.record
    if record is not None:  # a new session would outlast the grace period
      raise Preempted('Session not re-created: %s received' % record.signal.name, record)

  def raise_if_stopped(self, what):
    """Raises Preempted in a wait (`what`) of the session's creation once
    preempted."""
    record = self.record
    if record is not None:
      raise Preempted('%s ended: %s received' % (what, record.signal.name), record)

  def error_for_run_after_stop(self, error):
    """Preempted once preempted (a run after the stop); else None."""
    del error
    record = self.record
    if record is None:
      return None
    return Preempted('Run called even after should_stop requested: training stopped on %s.' %
                     record.signal.name, record)

  def before_close(self):
    """Once preempted, later signals wait for the close to end."""
    if self.record is not None:
      self._stopping = True

  def after_close(self, closed):
    """Reports the preempted close (the record's last figure, the log line)
    and releases the signals."""
    record = self.record  # also of a signal that came during the close
    if record is not None and record.seconds_to_close is None:
      _report_close(record, closed)
    self.release()

  def release(self):
    """Puts back the signal handlers that were there before (and calls the
    user's handler for signals that came during the stop); the session that
    adopted it, if any, lets it go. Idempotent."""
    self._stopping = False
    self._stop_session = None
    _ROUTER.remove(self)
