"""The agreed stop of one fastmts monitored session (fastmts.AgreedStop).

Built at the session's construction, after the hooks' begin() and before
the session is created (the graph is not finalized yet): the vote's ops in
the graph and the native StopAgreement, which the native HookedSession then
asks after every step (cpp/core/agreed_stop.h). A hook's stop request and a
watched signal (SIGTERM) become this rank's wish; the vote turns the ranks' wishes
into one stop at one step. What a signal means to a session is decided here
(stop_on_signal: at once, or a wish), and so is what the vote's outcome
means to this rank (a signal to another rank is this rank's too). See
docs/distributed.md.
"""
from fastmts import _native
from fastmts.agreed_stop import AgreedStop
from fastmts.agreed_stop import AgreedStopRecord
from fastmts._internal import c_handles


class SessionAgreement:
  """The vote of one session: `policy` (an AgreedStop) built into the graph
  and handed to `hooked` (the session's HookedSession)."""

  def __init__(self, policy, hooked):
    wish, vote = policy.build()
    self._wish, self._vote = wish, vote
    self.native = _native.StopAgreement(
        wish=c_handles.output_of(wish), vote=c_handles.output_of(vote),
        every_n_steps=policy.every_n_steps)
    hooked.native.set_agreement(self.native)
    hooked.agreement = self

  @classmethod
  def of(cls, policy, hooked):
    """None when `policy` is None (off: nothing built), else the session's."""
    if policy is None:
      return None
    if not isinstance(policy, AgreedStop):
      raise TypeError('agreed_stop must be a fastmts.AgreedStop or None, got %r' % (policy,))
    return cls(policy, hooked)

  def wish(self, exit_code):
    """This rank was preempted (in the signal handler; takes no lock): it
    wishes to stop with `exit_code`, which the vote hands every rank."""
    self.native.wish(exit_code)

  def report_peer_signal(self, stop_policy):
    """Before the close: if the ranks agreed to stop because another rank
    got a signal (the vote's exit code is 128 + it), `stop_policy` (the
    session's) records it as this rank's own (preempted_by_peer), so that the
    chief checkpoints the step and every rank reports the same."""
    record = self.record
    if record is not None and record.preempted:
      stop_policy.preempted_by_peer(record.exit_code - 128)

  def barrier(self, tf_sess):
    """At the close of ranks that agreed to stop, after the hooks' end()
    (the chief's checkpoint): one more vote, which every rank runs once, so
    that no rank leaves (and no launcher that ends a job at its first exit,
    such as horovodrun, cuts the chief's save short) before all are there."""
    if self.record is not None:
      tf_sess.run(self._vote, feed_dict={self._wish: 0})

  @property
  def record(self):
    """An AgreedStopRecord once the ranks agreed to stop, else None."""
    outcome = self.native.outcome
    return None if outcome == 0 else AgreedStopRecord(self.native.steps, outcome)


def stop_on_signal(agreement, hooked, exit_code):
  """A watched signal arrived (in its handler: takes no lock) and asks the
  session `hooked` (its HookedSession) to stop, with `exit_code` (128 + the
  signal). Without an agreed stop (`agreement` None) the step in flight is
  the last: the session and its coordinator stop at once. With one, it is
  this rank's wish (`agreement.wish`): the session stops at the step the
  ranks' vote agrees on, and its coordinator with it at close."""
  if agreement is not None:
    agreement.wish(exit_code)
    return
  hooked.request_stop()
  if hooked.coord is not None:  # none while the session is being created
    hooked.coord.native.request_stop()  # fastmts's Coordinator: native, no lock
