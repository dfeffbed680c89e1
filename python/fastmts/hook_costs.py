"""Opt-in report of where the time of the steps goes, hook by hook.

    fastmts.report_hook_costs(True)      # sessions created from now on
    with fastmts.MonitoredTrainingSession(hooks=hooks) as sess:
      while not sess.should_stop():
        sess.run(train_op)
      print(sess.hook_cost_report())     # also logged when the session closes

The native dispatch times each hook's before_run and after_run and the TF run
itself; timing costs two clock reads per call, hence opt-in.
"""
import collections

_enabled = [False]

HookCost = collections.namedtuple('HookCost', ['name', 'before_run_seconds', 'after_run_seconds'])
HookCost.__doc__ = "One hook's total time in before_run and after_run."


def report_hook_costs(enabled=True):
  """Turns per-hook cost tracking on (or off) for sessions created afterwards."""
  _enabled[0] = bool(enabled)


def enabled():
  """Whether sessions created now track where their steps' time goes."""
  return _enabled[0]


class HookCostReport:
  """Totals since the session was created: `steps`, `run_seconds` (in TF's
  run) and `hooks`, a list of HookCost in dispatch order."""

  def __init__(self, steps, run_seconds, hooks):
    self.steps = steps
    self.run_seconds = run_seconds
    self.hooks = hooks

  def __str__(self):
    per_step = lambda seconds: seconds / self.steps * 1e6 if self.steps else 0.0
    width = max([len('TF run')] + [len(h.name) for h in self.hooks])
    lines = ['fastmts hook cost report: %d steps, microseconds per step' % self.steps,
             '%-*s %12s %12s' % (width, 'hook', 'before_run', 'after_run')]
    for h in self.hooks:
      lines.append('%-*s %12.1f %12.1f' % (width, h.name, per_step(h.before_run_seconds),
                                           per_step(h.after_run_seconds)))
    lines.append('%-*s %12.1f' % (width, 'TF run', per_step(self.run_seconds)))
    return '\n'.join(lines)

  __repr__ = __str__
