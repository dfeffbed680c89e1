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

The hook does two things: it feeds its preemption policy (a
SessionPreemption, _internal/session_preemption.py, made with the hook),
which owns the record and the signal handlers and routes the signal to the
stop; and, on the chief, it saves the step. A fastmts session adopts that
policy and asks it the rest.
"""
import numbers
import os
import re
import signal

from tensorflow.python.framework import ops
from tensorflow.python.platform import gfile
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import session_run_hook
from tensorflow.python.training import training_util

from fastmts import _native
from fastmts import _python_compat
from fastmts._internal import native_runner
from fastmts._internal import session_preemption
# The record and error are made by the policy; users import them from here.
from fastmts._internal.session_preemption import Preempted  # pylint: disable=unused-import
from fastmts._internal.session_preemption import Preemption  # pylint: disable=unused-import
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


class PreemptionHook(session_run_hook.SessionRunHook):
  """Stops training at the step boundary on a preemption signal and, given a
  `checkpoint_dir`, checkpoints that step at the stop (see the module doc).

  Works with fastmts's monitored sessions (fully: the native loop, the
  waits, `Preempted`) and with TF's own MonitoredSession (the stop through
  the coordinator, the save in end()). Put it after any CheckpointSaverHook:
  what that hook's end() saved is not saved again.

  The hook feeds its preemption policy, `session_preemption` (a
  SessionPreemption, made with the hook), which owns the record and routes
  the signal to the stop; `preemption` is that record.

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
    self.session_preemption = session_preemption.SessionPreemption(
        policy, checkpoints=self._checkpoint_dir is not None)

  @property
  def preemption(self):
    """The Preemption record once a signal arrived, else None."""
    return self.session_preemption.record

  def begin(self):
    """Finds the global step (to checkpoint) and starts watching the signals."""
    if self._checkpoint_dir is not None:
      # The global step's read as TF's own hooks make it (TF's private helper).
      self._global_step = training_util._get_or_create_global_step_read()  # pylint: disable=protected-access
      if self._global_step is None:
        raise RuntimeError('Global step should be created to use PreemptionHook with a '
                           'checkpoint_dir.')
    self.session_preemption.watch()

  def after_create_session(self, session, coord):
    """Hands the coordinator to the policy, which stops at once if the
    signal came while the session was being created."""
    del session
    self.session_preemption.session_created(coord)

  def end(self, session):
    """After a signal, on the chief: checkpoints the last step, unless an
    earlier hook's end() (TF's CheckpointSaverHook) already has."""
    with self.session_preemption.hook_ending():
      if self.preemption is not None and self._checkpoint_dir is not None:
        self._checkpoint(session)

  def release(self):
    """Puts back the signal handlers that were there before (and calls the
    user's handler for signals that came during the stop). Idempotent."""
    self.session_preemption.release()

  def _checkpoint(self, session):
    step = int(session.run(self._global_step))
    latest = checkpoint_management.latest_checkpoint(self._checkpoint_dir)
    if latest is None or _step_of(latest) != step:
      latest = os.path.join(self._checkpoint_dir, self._basename)
      gfile.MakeDirs(self._checkpoint_dir)
      logging.info('Saving checkpoints for %d into %s.', step, latest)
      latest = self._get_saver().save(session, latest, global_step=step)
    self.session_preemption.checkpointed(step, latest)

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


class NativePreemptionHook(native_runner.NativeRunner):
  """The native runner of a PreemptionHook: it has no per-step work, its
  signal handler stops the session. Its after_create_session runs once the
  session is attached (a stop it requests must outlive the attach), its
  end() where TF's would."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self.native_hook = _native.EndOnlyHook(end=self._end)

  def _end(self):
    self.tf_hook.end(self.hooked.tf_sess)

  def on_session_attached(self):
    """The hook's after_create_session, once the session is attached."""
    self.tf_hook.after_create_session(self.hooked.tf_sess, self.hooked.coord)
