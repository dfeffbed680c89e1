"""The speed floor that benchmarks compare against."""
from fastmts import _native
from fastmts import fetches as fetches_lib


def native_floor_loop(tf_session, fetches, steps):
  """Runs `fetches` `steps` times as bare TF_SessionRun calls in a C++ loop
  (GIL released) on a tf.compat.v1.Session; returns the elapsed seconds."""
  plan = fetches_lib.PlanCache(tf_session.graph, tf_session).fetch_plan(fetches)
  return _native.floor_loop(tf_session, plan.native, int(steps))
