"""The session TF's own stock-hook code gets when fastmts runs it natively.

StepCounterHook, SummarySaverHook and ProfilerHook read the global step with
`run_context.session.run(tensor)` on the steps where they act. Through TF's
Python Session.run that read costs more than a whole small training step;
here a plain fetch goes through the plan cache and one native TF_SessionRun.
Feeds, options and everything else are the raw session's own.
"""
from tensorflow.python.client import session as session_lib

from fastmts._internal import errors


class StockHookSession(session_lib.SessionInterface):
  """A view of the HookedSession's current raw session."""

  def __init__(self, hooked):
    self._hooked = hooked

  @property
  def graph(self):
    """The TF session's graph."""
    return self._hooked.tf_sess.graph

  @property
  def sess_str(self):
    """The TF session's target."""
    return self._hooked.tf_sess.sess_str

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """A run without hooks: fetches alone run natively on the attached
    session; with feeds, options or metadata, the TF session's own run."""
    if feed_dict or options is not None or run_metadata is not None:
      return self._hooked.tf_sess.run(fetches, feed_dict=feed_dict, options=options,
                                      run_metadata=run_metadata)
    plan = self._hooked.plans.fetch_plan(fetches)
    try:
      outputs = self._hooked.native.run_plain(plan.native)
    except errors.StatusError as e:
      raise errors.from_status(e, self._hooked.graph, self._hooked.tf_sess) from None
    return plan.build(outputs)

  def partial_run_setup(self, fetches, feeds=None):
    """The TF session's partial_run_setup."""
    return self._hooked.tf_sess.partial_run_setup(fetches, feeds)

  def partial_run(self, handle, fetches, feed_dict=None):
    """The TF session's partial_run."""
    return self._hooked.tf_sess.partial_run(handle, fetches, feed_dict)
