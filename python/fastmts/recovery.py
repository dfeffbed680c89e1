"""An opt-in bound on re-creating a preempted session (TF retries forever).

    sess = fastmts.MonitoredTrainingSession(
        ..., recovery=fastmts.RecoveryPolicy(max_recreations=5, backoff_secs=1.0))
    # not-run: a fragment; tests/test_distributed.py runs policies, e.g.
    # test_distributed.py::test_recovery_policy_gives_up_after_max_recreations

When `run` (or a hook in it) raises AbortedError or UnavailableError, TF's
MonitoredSession closes the session and creates a new one, again and again,
at once. With a policy, the k-th consecutive re-creation waits
min(backoff_secs * 2**(k-1), max_backoff_secs) first, and after
`max_recreations` consecutive re-creations the next such error is
raised. A step that succeeds resets the count.
"""
import numbers


class RecoveryPolicy:
  """How many consecutive re-creations, and how long to wait before each."""

  def __init__(self, max_recreations=None, backoff_secs=0.0, max_backoff_secs=60.0):
    if max_recreations is not None:
      if isinstance(max_recreations, bool) or not isinstance(max_recreations, numbers.Integral):
        raise TypeError('max_recreations must be None or an int, got %r' % (max_recreations,))
      if max_recreations < 0:
        raise ValueError('max_recreations must be >= 0, got %r' % (max_recreations,))
    for name, value in (('backoff_secs', backoff_secs), ('max_backoff_secs', max_backoff_secs)):
      if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError('%s must be a number, got %r' % (name, value))
      if value < 0:
        raise ValueError('%s must be >= 0, got %r' % (name, value))
    self.max_recreations = max_recreations
    self.backoff_secs = float(backoff_secs)
    self.max_backoff_secs = float(max_backoff_secs)

  def allows(self, recreation):
    """Whether the `recreation`-th consecutive re-creation (from 1) may happen."""
    return self.max_recreations is None or recreation <= self.max_recreations

  def pause_before(self, recreation):
    """Seconds to wait before the `recreation`-th consecutive re-creation."""
    return min(self.backoff_secs * 2.0 ** (recreation - 1), self.max_backoff_secs)

  def __repr__(self):
    return 'RecoveryPolicy(max_recreations=%r, backoff_secs=%r, max_backoff_secs=%r)' % (
        self.max_recreations, self.backoff_secs, self.max_backoff_secs)
