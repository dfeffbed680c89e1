"""TF's _HookedSession in Python, for sessions the native core cannot run.

A session creator may return a session-like object that is not a plain
tf.compat.v1.Session: TF's debugger wrappers (LocalCLIDebugWrapperSession,
DumpingDebugWrapperSession), a user's wrapper, a Session subclass with its
own `run`. Stock TF runs every step through that object's `run`, and so
must fastmts: there is no TF_Session the native dispatch could run behind
the object's back without skipping what the wrapper does. Such a session is
run here, in Python, with TF's semantics: every hook's own Python methods
(TF's code for the stock hooks), the merged fetches, feeds and options, and
the object's `run`.
"""
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import session as session_lib

from fastmts import _tensorflow
from fastmts import errors
from fastmts.session_run_hook import SessionRunArgs
from fastmts.session_run_hook import SessionRunContext
from fastmts.session_run_hook import SessionRunValues


def runs_natively(sess):
  """Whether the native dispatch can run `sess`: a tf.compat.v1 Session
  (BaseSession) whose `run` is TF's own, so that running its TF_Session
  directly is what its `run` would do. Every session reaches the native core
  through here first, so the first one proves the C handles (RuntimeError if
  they are wrong; nothing after that)."""
  if not (isinstance(sess, session_lib.BaseSession) and
          type(sess).run is session_lib.BaseSession.run and
          getattr(sess, '_session', None) is not None):
    return False
  _tensorflow.check_handles(sess.graph)
  return True


def _raise_if_feeds_intersect(feeds1, feeds2, message):
  intersection = set(feeds1.keys()) & set(feeds2.keys())
  if intersection:
    raise RuntimeError(message + ' Conflict(s): ' + str(list(intersection)))


class PythonHookDispatch:
  """The hooks of one monitored session around `sess.run`, as TF's
  _HookedSession calls them."""

  def __init__(self, sess, hooks, merge_run_options):
    self._sess = sess
    self._hooks = hooks
    self._merge_run_options = merge_run_options
    self.stop_requested = False
    self.steps_run = 0

  def after_create_session(self, coord):
    """Every hook's after_create_session, in order."""
    for hook in self._hooks:
      hook.after_create_session(self._sess, coord)

  def end(self):
    """Every hook's end(), in order."""
    for hook in self._hooks:
      hook.end(self._sess)

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """One step with hooks, as TF's _HookedSession.run."""
    if self.stop_requested:
      raise errors.RunAfterStopError(errors.RUN_AFTER_STOP_MESSAGE)
    actual_fetches = {'caller': fetches}
    run_context = SessionRunContext(
        original_args=SessionRunArgs(fetches, feed_dict), session=self._sess)
    options = options or config_pb2.RunOptions()
    feed_dict = self._before_run(run_context, actual_fetches, feed_dict, options)
    run_metadata = run_metadata or config_pb2.RunMetadata()
    outputs = self._sess.run(fetches=actual_fetches, feed_dict=feed_dict, options=options,
                             run_metadata=run_metadata)
    self.steps_run += 1
    for hook in self._hooks:
      hook.after_run(
          run_context,
          SessionRunValues(results=outputs[hook] if hook in outputs else None,
                           options=options, run_metadata=run_metadata))
    self.stop_requested = self.stop_requested or run_context.stop_requested
    return outputs['caller']

  def _before_run(self, run_context, fetch_dict, user_feed_dict, options):
    """Every hook's before_run; adds their fetches to fetch_dict and their
    options to options; returns the feeds to run with."""
    hook_feeds = {}
    for hook in self._hooks:
      request = hook.before_run(run_context)
      if request is not None:
        if request.fetches is not None:
          fetch_dict[hook] = request.fetches
        if request.feed_dict:
          _raise_if_feeds_intersect(hook_feeds, request.feed_dict,
                                    'Same tensor is fed by two hooks.')
          hook_feeds.update(request.feed_dict)
        if request.options:
          self._merge_run_options(options, request.options)
    if not hook_feeds:
      return user_feed_dict
    if not user_feed_dict:
      return hook_feeds
    _raise_if_feeds_intersect(user_feed_dict, hook_feeds,
                              'Same tensor is fed by a SessionRunHook and user.')
    hook_feeds.update(user_feed_dict)
    return hook_feeds

  def run_steps(self, fetches, max_steps, feed_dict, coord, progress):
    """run() until stop, `max_steps` (None: no bound) or the coordinator's
    stop, as the native loop does, counting them in `progress`; the last
    step's results, or None."""
    result = None
    while ((max_steps is None or progress.steps < max_steps) and not self.stop_requested and
           not (coord is not None and coord.should_stop())):
      result = self.run(fetches, feed_dict)
      progress.steps += 1
    return result
