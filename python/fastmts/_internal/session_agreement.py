"""The agreed stop of one fastmts monitored session (fastmts.AgreedStop).

Built at the session's construction, after the hooks' begin() and before
the session is created (the graph is not finalized yet): the vote's ops in
the graph and the native StopAgreement, which the native HookedSession then
asks after every step (cpp/core/agreed_stop.h). A hook's stop request and a
watched signal (SIGTERM) become this rank's wish; the vote turns the ranks' wishes
into one stop at one step. See docs/distributed.md.
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
