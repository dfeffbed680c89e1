"""fastmts's own options of a monitored session, as one value.

    sess = fastmts.MonitoredTrainingSession(
        checkpoint_dir=..., options=fastmts.SessionOptions(preemption=True))
    # not-run: a fragment; tests/test_session_options.py runs each option's
    # path, e.g. test_session_options.py::test_keywords_and_options_are_one_value

What TF's signatures lack: recovery, end_on_interrupt, async_checkpoint,
preemption and agreed_stop. MonitoredTrainingSession, MonitoredSession and
SingularMonitoredSession each take them as one `options` value, or as the
same keywords (which make that value), and pass the value on; only the code
that uses an option reads it. An option is added here (a field, its check,
its documentation) and where it is used, nothing between (docs/design.md,
"Adding an option").
"""
import dataclasses
import typing

from fastmts.agreed_stop import AgreedStop
from fastmts.preemption import PreemptionPolicy
from fastmts.recovery import RecoveryPolicy


def _check_bool(name, value):
  if not isinstance(value, bool):
    raise TypeError('%s must be a bool, got %r' % (name, value))


@dataclasses.dataclass(frozen=True)
class SessionOptions:
  """fastmts's options of a monitored session (all off by default, as TF).

  Attributes:
    recovery: a RecoveryPolicy bounding re-creations of a preempted session,
      with backoff; None retries forever, as TF. (A SingularMonitoredSession
      never re-creates its session: it takes None only.)
    end_on_interrupt: when the `with` block ends by KeyboardInterrupt
      (Ctrl-C), still run the hooks' end() -- the final checkpoint,
      FinalOpsHook, summaries -- before closing; TF skips end() on any
      exception.
    async_checkpoint: MonitoredTrainingSession's checkpoints of
      `checkpoint_dir` are written by a native thread from a snapshot taken
      at the save's step (see fastmts.CheckpointSaverHook).
    preemption: None, True, or a fastmts.PreemptionPolicy (True: the
      default policy; stored as a policy): MonitoredTrainingSession adds a
      fastmts.PreemptionHook: on SIGTERM (the policy's signals) training
      stops after the step in flight, the chief checkpoints that step, and
      `sess.preemption` tells what happened; off: TF's process dies.
    agreed_stop: a fastmts.AgreedStop: the ranks of a data-parallel job
      (Horovod, TF's collective ops) stop at one step, the one the first of
      them wished to stop at, so none fails in an allreduce;
      `sess.agreed_stop` tells how. None: nothing added to the graph or step.

  async_checkpoint and preemption choose MonitoredTrainingSession's default
  hooks; a MonitoredSession runs the hooks it is given (a
  fastmts.CheckpointSaverHook(async_checkpoint=True), a PreemptionHook), so
  as keywords they are MonitoredTrainingSession's only.
  """
  recovery: typing.Optional[RecoveryPolicy] = None
  end_on_interrupt: bool = False
  async_checkpoint: bool = False
  preemption: typing.Optional[PreemptionPolicy] = None
  agreed_stop: typing.Optional[AgreedStop] = None

  def __post_init__(self):
    if self.recovery is not None and not isinstance(self.recovery, RecoveryPolicy):
      raise TypeError('recovery must be a fastmts.RecoveryPolicy or None, got %r'
                      % (self.recovery,))
    _check_bool('end_on_interrupt', self.end_on_interrupt)
    _check_bool('async_checkpoint', self.async_checkpoint)
    # Frozen: the one normalisation (True -> the default policy) is set so.
    object.__setattr__(self, 'preemption', PreemptionPolicy.of(self.preemption))
    if self.agreed_stop is not None and not isinstance(self.agreed_stop, AgreedStop):
      raise TypeError('agreed_stop must be a fastmts.AgreedStop or None, got %r'
                      % (self.agreed_stop,))

  @classmethod
  def of(cls, options, keywords, caller, keyword_names=None):
    """The options of a call to `caller` (its name, for errors) that got
    `options` (None or a SessionOptions) and `keywords` (the rest of its
    keyword arguments), of which it takes `keyword_names` (None: every
    field). A keyword it does not take is a TypeError, as Python's own."""
    names = keyword_names or tuple(f.name for f in dataclasses.fields(cls))
    for name in keywords:
      if name not in names:
        raise TypeError('%s() got an unexpected keyword argument %r' % (caller, name))
    if options is None:
      return cls(**keywords)
    if not isinstance(options, cls):
      raise TypeError('options must be a fastmts.SessionOptions or None, got %r' % (options,))
    if keywords:
      raise TypeError('%s() got fastmts options both as options= and as keywords (%s): '
                      'give one' % (caller, ', '.join(sorted(keywords))))
    return options


# What MonitoredSession and SingularMonitoredSession take as keywords.
SESSION_KEYWORDS = ('recovery', 'end_on_interrupt', 'agreed_stop')
