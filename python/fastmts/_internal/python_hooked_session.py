"""TF's own _HookedSession, for sessions the native core cannot run.

A session creator may return a session-like object that is not a plain
tf.compat.v1.Session: TF's debugger wrappers (LocalCLIDebugWrapperSession,
DumpingDebugWrapperSession), a user's wrapper, a Session subclass with its
own `run`. Stock TF runs every step through that object's `run`, and so
must fastmts: there is no TF_Session the native dispatch could run behind
the object's back without skipping what the wrapper does. Such a session is
run by TF's own _HookedSession (tensorflow/python/training/
monitored_session.py), the same class with the same behaviour on every
release fastmts supports (1.15 to 2.21): every hook's own Python methods,
the merged fetches, feeds and options (TF's merge rule), the object's `run`.
TFHookDispatch adds only what a fastmts layer asks of a dispatcher.
"""
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import session as session_lib
from tensorflow.python.training import monitored_session as _tf_monitored_session

from fastmts import _tensorflow
from fastmts._internal import errors


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


def merge_run_options(options, incoming_options):
  """TF's RunOptions merge rule, TF's own code (_HookedSession's): the
  larger of the numbers (trace_level, timeout_in_ms, inter_op_thread_pool,
  output_partition_graphs), the OR of the flags, debug watches appended."""
  # TF's RunOptions merge rule is a private method of its private _HookedSession.
  _tf_monitored_session._HookedSession._merge_run_options(  # pylint: disable=protected-access
      None, options, incoming_options)


# What a native hook's full-trace request merges into a step's options.
_FULL_TRACE = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)


def merge_full_trace(options):
  """The full-trace rule, on the Python side: a native hook asked for a full
  trace of the step (ProfilerHook), so `options` (a RunOptions: the step's
  merged ones, which Python hooks' after_run see, or the caller's own, into
  which TF merges) carry FULL_TRACE, by TF's merge rule: the larger trace
  level wins, and FULL_TRACE is the largest (tests/test_hook_profiler.py
  pins that order). The native side appends the same field to the step's
  serialized options (cpp/core/run_options.h, with_full_trace)."""
  merge_run_options(options, _FULL_TRACE)


class TFHookDispatch:
  """The hooks of one monitored session around `sess.run`, by TF's own
  _HookedSession; the calls a HookedSession hands its dispatcher (run,
  run_steps, end, should_stop, request_stop) and the steps it ran."""

  # pylint: disable=protected-access
  # (It drives TF's private _HookedSession, which keeps its stop request in _should_stop.)

  def __init__(self, sess, coord, hooks):
    self._sess = sess
    self._coord = coord
    self._hooks = hooks
    self._tf_hooked = _tf_monitored_session._HookedSession(sess, hooks)
    self.steps_run = 0

  def after_create_session(self):
    """Every hook's after_create_session, in order (TF's creator calls them)."""
    for hook in self._hooks:
      hook.after_create_session(self._sess, self._coord)

  def end(self):
    """Every hook's end(), in order (TF's _MonitoredSession calls them)."""
    for hook in self._hooks:
      hook.end(self._sess)

  def should_stop(self):
    """Whether a hook requested stop."""
    return self._tf_hooked._should_stop

  def request_stop(self):
    """As a hook's stop request (takes no lock: for a signal handler)."""
    self._tf_hooked._should_stop = True

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """One step with hooks, TF's _HookedSession.run; a run after a stop
    request raises TF's message as RunAfterStopError (the layers' type)."""
    if self._tf_hooked._should_stop:
      raise errors.RunAfterStopError(errors.RUN_AFTER_STOP_MESSAGE)
    outputs = self._tf_hooked.run(fetches, feed_dict=feed_dict, options=options,
                                  run_metadata=run_metadata)
    self.steps_run += 1
    return outputs

  def run_steps(self, fetches, max_steps, feed_dict, progress):
    """run() until stop, `max_steps` (None: no bound) or the coordinator's
    stop, as the native loop does, counting them in `progress`; the last
    step's results, or None."""
    result = None
    coord = self._coord
    while ((max_steps is None or progress.steps < max_steps) and not self.should_stop() and
           not (coord is not None and coord.should_stop())):
      result = self.run(fetches, feed_dict)
      progress.steps += 1
    return result
