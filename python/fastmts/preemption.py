"""Opt-in: on a preemption signal, stop after the step in flight and checkpoint it.

    with fastmts.MonitoredTrainingSession(checkpoint_dir=d, preemption=True) as sess:
      while not sess.should_stop():
        sess.run(train_op)
    if sess.preemption:                       # None unless a signal stopped it
      sys.exit(sess.preemption.exit_code)     # 128 + the signal: 143 for SIGTERM

Clusters take machines away with a signal and a grace period (Kubernetes
and Slurm: SIGTERM, then SIGKILL). A stock MonitoredTrainingSession dies on
SIGTERM and loses every step since its last periodic checkpoint. Here a
PreemptionHook installs a Python handler for the policy's signals; when one
arrives:

* the step in flight finishes (a Python handler never runs inside a
  TF_SessionRun; the native loop notices it between two steps), and the
  session stops: `should_stop()` is True, `run_steps` returns, and a further
  `run` raises `Preempted` (a RuntimeError, TF's error for a run after stop);
* at close, the hooks' `end()` run as at any stop, even when the `with`
  block ends by an exception: TF's CheckpointSaverHook saves the last step
  there, and this hook saves it through TF's Saver when nothing else did
  (on the chief: the hook has a checkpoint_dir; workers write nothing);
* waits that could outlast the grace period end: a worker waiting for the
  chief, re-creating a session after a preemption error (both raise
  `Preempted`), and the coordinator's join is capped by what remains of
  `grace_period_secs`;
* the user's own handler of that signal still runs, at once for the first
  signal; later ones, which must not cut the save short, once the session
  has closed. A signal is never lost: each is counted.

The handlers are Python's (`signal.signal`), so the hook must begin in the
main thread; it puts the previous handlers back when the session closes (TF's
own MonitoredSession: at the hook's end(), or `release()`).

The hook only notices the signal and saves; a fastmts session asks the rest
of its SessionPreemption (session_preemption.py), the session-level policy
the hook feeds.
"""
import numbers
import os
import re
import signal
import threading
import time

from tensorflow.python.framework import ops
from tensorflow.python.platform import gfile
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import session_run_hook
from tensorflow.python.training import training_util

from fastmts import _native
from fastmts import _python_compat
from fastmts._tensorflow import checkpoint_management

_UNCATCHABLE = tuple(s for s in (getattr(signal, 'SIGKILL', None),
                                 getattr(signal, 'SIGSTOP', None)) if s is not None)


def signal_name(signum):
  """'SIGTERM' for signal.SIGTERM; numbers Python has no name for as such."""
  try:
    return signal.Signals(signum).name
  except ValueError:
    return 'signal %d' % signum


class PreemptionPolicy:
  """Which signals mean preemption, and the grace period the cluster gives.

  signals: the signals to watch (default SIGTERM, what Kubernetes and Slurm
    send); SIGKILL and SIGSTOP cannot be caught.
  grace_period_secs: the seconds between the signal and the cluster's
    SIGKILL, less a margin (default 25, for Kubernetes' default 30). The
    session's close never waits for threads beyond it, and the report at
    close says whether the stop finished within it.
  """

  def __init__(self, signals=(signal.SIGTERM,), grace_period_secs=25.0):
    if isinstance(signals, numbers.Integral):
      signals = (signals,)
    try:
      signals = tuple(signals)
    except TypeError:
      raise TypeError('signals must be a signal number or a sequence of them, got %r'
                      % (signals,)) from None
    if not signals:
      raise ValueError('signals must name at least one signal')
    valid = _python_compat.valid_signals()
    for s in signals:
      if isinstance(s, bool) or not isinstance(s, numbers.Integral):
        raise TypeError('signals must be signal numbers, got %r' % (s,))
      if s not in valid or s in _UNCATCHABLE:
        raise ValueError('%s cannot be watched for preemption' % (signal_name(s),))
    if isinstance(grace_period_secs, bool) or not isinstance(grace_period_secs, numbers.Real):
      raise TypeError('grace_period_secs must be a number, got %r' % (grace_period_secs,))
    if not grace_period_secs > 0:
      raise ValueError('grace_period_secs must be > 0, got %r' % (grace_period_secs,))
    self.signals = tuple(dict.fromkeys(signal.Signals(s) for s in signals))
    self.grace_period_secs = float(grace_period_secs)

  @classmethod
  def of(cls, preemption):
    """The policy of MonitoredTrainingSession's `preemption` argument
    (None or False: off; True: the default policy; or a policy)."""
    if preemption is None or preemption is False:
      return None
    if preemption is True:
      return cls()
    if isinstance(preemption, cls):
      return preemption
    raise TypeError('preemption must be a bool, None or a fastmts.PreemptionPolicy, got %r'
                    % (preemption,))

  def __repr__(self):
    return 'PreemptionPolicy(signals=(%s), grace_period_secs=%r)' % (
        ', '.join('signal.%s' % s.name for s in self.signals), self.grace_period_secs)


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

  def __init__(self, message, preemption):
    super().__init__(message)
    self.preemption = preemption


class _SignalRouter:
  """One Python handler per watched signal, process-wide, shared by every
  active PreemptionHook; the handler that was there before is called as
  well and put back when the last hook watching that signal is released."""

  def __init__(self):
    self._hooks = []
    self._previous = {}      # signal -> the handler before ours
    self._deferred = []      # (previous handler, signum) to call at release
    # One bound method, so that getsignal() can tell whether ours is still in place.
    self._handler = self._handle

  def add(self, hook):
    if threading.current_thread() is not threading.main_thread():
      raise ValueError('fastmts.PreemptionHook watches signals, which Python lets only the '
                       'main thread do: create the monitored session in the main thread')
    for s in hook.policy.signals:
      if s not in self._previous:
        self._previous[s] = signal.signal(s, self._handler)
    self._hooks.append(hook)

  def remove(self, hook):
    if hook not in self._hooks:
      return
    self._hooks.remove(hook)
    watched = {s for h in self._hooks for s in h.policy.signals}
    if threading.current_thread() is threading.main_thread():
      # (Elsewhere Python cannot: ours stays, passing signals on as before.)
      for s in [s for s in self._previous if s not in watched]:
        previous = self._previous.pop(s)
        if signal.getsignal(s) is self._handler:  # a handler installed after ours stays
          signal.signal(s, previous if previous is not None else signal.SIG_DFL)
    if not any(h.stopping for h in self._hooks):
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
    hooks = [h for h in self._hooks if signum in h.policy.signals]
    if not hooks:  # left in place by a release outside the main thread
      self._pass_on(signum, frame)
      return
    first = not any(h.preemption is not None for h in hooks)
    for hook in hooks:
      hook._signalled(signum)  # pylint: disable=protected-access
    previous = self._previous.get(signum)
    if not callable(previous) or previous is signal.default_int_handler:
      return  # SIG_DFL / SIG_IGN / Ctrl-C's KeyboardInterrupt would cut the stop
    if first:
      previous(signum, frame)
    else:
      self._deferred.append((previous, signum))


_ROUTER = _SignalRouter()


class PreemptionHook(session_run_hook.SessionRunHook):
  """Stops training at the step boundary on a preemption signal and, given a
  `checkpoint_dir`, checkpoints that step at the stop (see the module doc).

  Works with fastmts's monitored sessions (fully: the native loop, the
  waits, `Preempted`) and with TF's own MonitoredSession (the stop through
  the coordinator, the save in end()). Put it after any CheckpointSaverHook:
  what that hook's end() saved is not saved again.

  Args:
    checkpoint_dir: where the chief saves; None on a worker (nothing saved).
    policy: a PreemptionPolicy (default: SIGTERM, 25 s).
    saver, scaffold: the Saver to save with, as CheckpointSaverHook finds
      it: `saver`, else the scaffold's, else the graph's SAVERS collection.
    checkpoint_basename: as CheckpointSaverHook's.
  """

  def __init__(self, checkpoint_dir=None, policy=None, saver=None, scaffold=None,
               checkpoint_basename='model.ckpt'):
    if policy is None:
      policy = PreemptionPolicy()
    if not isinstance(policy, PreemptionPolicy):
      raise TypeError('policy must be a fastmts.PreemptionPolicy, got %r' % (policy,))
    self.policy = policy
    self._checkpoint_dir = os.fspath(checkpoint_dir) if checkpoint_dir is not None else None
    self._saver = saver
    self._scaffold = scaffold
    self._basename = checkpoint_basename
    self._global_step = None
    self._coord = None
    self._session = None       # the SessionPreemption it feeds, in a fastmts session
    self._ending = False       # its end() after a signal is under way
    self.preemption = None     # a Preemption once a signal arrived

  @property
  def stopping(self):
    """Whether the stop's work (the session's close, this end()) is under
    way: further signals wait for it to end."""
    return self._ending or (self._session is not None and self._session.closing)

  def begin(self):
    """Finds the global step (to checkpoint) and starts watching the signals."""
    if self._checkpoint_dir is not None:
      self._global_step = training_util._get_or_create_global_step_read()  # pylint: disable=protected-access
      if self._global_step is None:
        raise RuntimeError('Global step should be created to use PreemptionHook with a '
                           'checkpoint_dir.')
    _ROUTER.add(self)

  def after_create_session(self, session, coord):
    """Keeps the coordinator to stop; stops at once if the signal came while
    the session was being created."""
    self._coord = coord
    if self.preemption is not None:  # the signal came while the session was made
      self._stop()

  def end(self, session):
    """After a signal, on the chief: checkpoints the last step, unless an
    earlier hook's end() (TF's CheckpointSaverHook) already has."""
    if self.preemption is None:
      self._release_unless_session_does()
      return
    self._ending = True
    try:
      if self._checkpoint_dir is not None:
        self._checkpoint(session)
    finally:
      self._release_unless_session_does()

  def release(self):
    """Puts back the signal handlers that were there before (and calls the
    user's handler for signals that came during the stop). Idempotent."""
    self._ending = False
    _ROUTER.remove(self)

  def _feeds(self, session_preemption):
    """A fastmts session runs this hook: the signal is reported to its
    SessionPreemption, which also releases the hook when the session closes."""
    self._session = session_preemption

  def _release_unless_session_does(self):
    if self._session is None:
      self.release()

  def _signalled(self, signum):
    if self.preemption is not None:
      self.preemption.signals_received += 1
      return
    self.preemption = Preemption(signum, self.policy.grace_period_secs)
    logging.warning('fastmts: %s received: training stops after the step in flight%s.',
                    self.preemption.signal.name,
                    ', which is checkpointed' if self._checkpoint_dir is not None else '')
    self._stop()

  def _preempted_by_peer(self, signum):
    if self.preemption is None:
      self.preemption = Preemption(signum, self.policy.grace_period_secs)
      self.preemption.by_peer = True

  def _stop(self):
    if self._session is not None and self._session.signalled():
      return  # the ranks agree on the stop: the coordinator stops with the session
    if self._coord is not None:
      _request_stop(self._coord)

  def _checkpoint(self, session):
    step = int(session.run(self._global_step))
    latest = checkpoint_management.latest_checkpoint(self._checkpoint_dir)
    if latest is None or _step_of(latest) != step:
      latest = os.path.join(self._checkpoint_dir, self._basename)
      gfile.MakeDirs(self._checkpoint_dir)
      logging.info('Saving checkpoints for %d into %s.', step, latest)
      latest = self._get_saver().save(session, latest, global_step=step)
    self.preemption.step = step
    self.preemption.checkpoint_path = latest
    self.preemption.seconds_to_checkpoint = self.preemption.seconds_since_signal()

  def _get_saver(self):
    if self._saver is not None:
      return self._saver
    if self._scaffold is not None and self._scaffold.saver is not None:
      return self._scaffold.saver
    savers = ops.get_collection(ops.GraphKeys.SAVERS)
    if len(savers) != 1:
      raise RuntimeError('PreemptionHook needs exactly one Saver in the SAVERS collection, '
                         'or a saver or scaffold; found %d.' % len(savers))
    return savers[0]


def _step_of(checkpoint_path):
  match = re.search(r'-(\d+)$', checkpoint_path)
  return int(match.group(1)) if match else None


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


class NativePreemptionHook:
  """The native runner of a PreemptionHook (the NativeRunner interface of
  basic_session_run_hooks, which imports this module): it has no per-step
  work, its signal handler stops the session. Its after_create_session runs
  once the session is attached (a stop it requests must outlive the
  attach), its end() where TF's would."""

  state = None

  def __init__(self, tf_hook, hooked):
    self.tf_hook = tf_hook
    self.hooked = hooked
    self.native_hook = _native.EndOnlyHook(end=lambda: tf_hook.end(hooked.tf_sess))

  def write_state_to_tf_hook(self):
    """The hook keeps no state of its own on the native side."""

  def on_session_attached(self):
    """The hook's after_create_session, once the session is attached."""
    self.tf_hook.after_create_session(self.hooked.tf_sess, self.hooked.coord)
