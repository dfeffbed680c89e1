"""The speed floor that benchmarks compare against."""
from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import fetches as fetches_lib


def native_floor_loop(tf_session, fetches, steps, reread=None, reread_period=100, reread_at=(),
                      periodic=None, periodic_period=10, feed_dict=None):
  """Runs `fetches` `steps` times as bare TF_SessionRun calls in a C++ loop
  (GIL released) on a tf.compat.v1.Session; returns the elapsed seconds.

  With `reread` (a tensor), after each step i with i % reread_period in
  `reread_at` it also runs `reread` alone in the calling thread, once for
  each time it is listed there: the re-reads of the global step that TF's
  StepCounterHook and SummarySaverHook make on the steps where their timers
  may fire, made as fastmts's native hooks make them.

  With `periodic` (more fetches), every step i with i % periodic_period == 0
  fetches them too, in the same run: SummarySaverHook's summary steps.

  With `feed_dict`, every step feeds it, converted once before the loop (as
  Session.run converts it, with TF's errors): the least TF work a fed step
  can be."""
  _tensorflow.check_handles(tf_session.graph)  # as runs_natively() does for the sessions
  plans = fetches_lib.PlanCache(tf_session.graph, tf_session)
  reread_plan = None
  if reread is not None:
    if not all(0 <= at < reread_period for at in reread_at):
      raise ValueError('reread_at must lie in [0, reread_period), got %r' % (reread_at,))
    reread_plan = plans.fetch_plan(reread).native
  periodic_plan = None
  if periodic is not None:
    periodic_plan = plans.fetch_plan(list(_as_list(fetches)) + list(_as_list(periodic))).native
  feed_plan = feed_values = None
  if feed_dict:
    feed_plan, feed_values = plans.hook_feeds(feed_dict)
  return _native.floor_loop(tf_session, plans.fetch_plan(fetches).native, int(steps),
                            reread_plan, int(reread_period), list(reread_at), periodic_plan,
                            int(periodic_period), feed_plan, feed_values)


def _as_list(fetches):
  return fetches if isinstance(fetches, (list, tuple)) else [fetches]
