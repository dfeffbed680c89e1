"""The preemption policy of one fastmts monitored session.

A session that runs a PreemptionHook creates and owns a SessionPreemption:
the hook feeds it the signal (and stays a plain hook, which also works under
TF's own MonitoredSession); the session's layers ask it, as their StopPolicy
(session_layers), what the stop means to them; the session tells it when its
close begins and ends. See docs/preemption.md.
"""
from tensorflow.python.platform import tf_logging as logging

from fastmts import session_layers
from fastmts.preemption import Preempted
from fastmts.preemption import PreemptionHook


def report_close(preemption, closed):
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
  """The preemption policy of one fastmts monitored session: its
  PreemptionHook feeds it the signal, the session's layers ask it (as their
  StopPolicy) what the stop means to them, and the session tells it when its
  close begins and ends.

  `stop_session()` stops the session as a hook's stop request would; it runs
  in the signal handler and takes no lock.
  """

  def __init__(self, hook, stop_session):
    self._hook = hook
    self._stop_session = stop_session
    self.closing = False  # a close after the signal is under way
    hook._feeds(self)  # pylint: disable=protected-access

  @classmethod
  def of(cls, hooks, stop_session):
    """The policy of the first PreemptionHook among `hooks`, or the policy
    of a session without one (nothing stops it from outside)."""
    hook = next((h for h in hooks if isinstance(h, PreemptionHook)), None)
    return session_layers.NO_STOP if hook is None else cls(hook, stop_session)

  def signalled(self):
    """The hook's report: the first signal arrived (in its handler). True
    when the ranks agree on the stop (fastmts.AgreedStop): the coordinator
    then stops with the session, not at once."""
    return self._stop_session()

  def preempted_by_peer(self, signum):
    """Another rank's preemption stopped this one too (an agreed stop): it
    is recorded as this rank's, so the chief's hook saves the step and every
    rank's `preemption` tells the same."""
    self._hook._preempted_by_peer(signum)  # pylint: disable=protected-access

  @property
  def record(self):
    """The hook's Preemption record, or None before a signal."""
    return self._hook.preemption

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
      self.closing = True  # later signals wait for the close

  def after_close(self, closed):
    """Reports the preempted close (the record's last figure, the log line)
    and releases the hook."""
    record = self.record  # also of a signal that came during the close
    if record is not None and record.seconds_to_close is None:
      report_close(record, closed)
    self.release()

  def release(self):
    """Puts the signal handlers back (the hook's release)."""
    self.closing = False
    self._hook.release()
