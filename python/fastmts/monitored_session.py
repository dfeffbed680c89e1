"""MonitoredSession, SingularMonitoredSession and MonitoredTrainingSession.

Layered as TF's monitored_session.py: a _RecoverableSession (re-creates the
session on AbortedError/UnavailableError) wraps a _CoordinatedSession
(Coordinator, queue runners, grace period) which wraps the HookedSession
(native hook dispatch around one TF_SessionRun). Creation, recovery and
close are rare and stay in Python; the step itself is native.
"""
import numbers
import os
import time
import weakref

from tensorflow.python.distribute import distribute_coordinator_context
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import basic_session_run_hooks
from tensorflow.python.training import monitored_session as _tf_monitored_session
from tensorflow.python.util import function_utils

from fastmts import _native
from fastmts import async_checkpoint as async_checkpoint_lib
from fastmts import basic_session_run_hooks as fastmts_hooks
from fastmts import class_identity
from fastmts import errors as fastmts_errors
from fastmts import fetches as fetches_lib
from fastmts.file_formats import graph_events
from fastmts import preemption as preemption_lib
from fastmts.coordinator import Coordinator
from fastmts.hooked_session import HookedSession
from fastmts.hooked_session import LoopProgress
from fastmts import python_hooked_session
from fastmts import queue_runner
from fastmts.queue_runner import QueueRunners
from fastmts.recovery import RecoveryPolicy
from fastmts.session_creators import ChiefSessionCreator
from fastmts.session_creators import Scaffold
from fastmts.session_creators import SessionCreator
from fastmts.session_creators import WorkerSessionCreator

# TF's own sentinel, so code that passes tf's USE_DEFAULT explicitly works.
USE_DEFAULT = _tf_monitored_session.USE_DEFAULT

_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

# run_steps: the session was re-created after a preemption; no result.
_NOT_RUN = object()

# How long close() lets queue-runner threads end by themselves after the
# stop before it takes them for blocked in TF (they end within one run).
_QUEUE_RUNNER_STOP_SECS = 0.25

# TF's log text when a preempted session is about to be re-created.
_RECREATE_NOTICE = (
    'This may be due to a preemption in '
    'a connected worker or parameter server. The current '
    'session will be closed and a new session will be '
    'created. This error may also occur due to a gRPC failure '
    'caused by high memory or network bandwidth usage in the '
    'parameter servers. If this error occurs repeatedly, try '
    'increasing the number of parameter servers assigned to '
    'the job. Error: %s')


def _step_counter_hook(summary_dir, log_step_count_steps):
  return basic_session_run_hooks.StepCounterHook(
      output_dir=summary_dir, every_n_steps=log_step_count_steps)


def _summary_saver_hook(scaffold, summary_dir, save_summaries_steps, save_summaries_secs):
  return basic_session_run_hooks.SummarySaverHook(
      scaffold=scaffold, save_steps=save_summaries_steps, save_secs=save_summaries_secs,
      output_dir=summary_dir)


def _checkpoint_saver_hook(scaffold, checkpoint_dir, save_checkpoint_steps,
                           save_checkpoint_secs, save_graph_def, async_checkpoint):
  if async_checkpoint:  # fastmts's form of the hook
    return fastmts_hooks.CheckpointSaverHook(
        checkpoint_dir, save_steps=save_checkpoint_steps, save_secs=save_checkpoint_secs,
        scaffold=scaffold, save_graph_def=save_graph_def, async_checkpoint=True)
  return basic_session_run_hooks.CheckpointSaverHook(
      checkpoint_dir, save_steps=save_checkpoint_steps, save_secs=save_checkpoint_secs,
      scaffold=scaffold, **fastmts_hooks.save_graph_def_argument(save_graph_def))


def _saves(steps, secs):
  return bool((steps and steps > 0) or (secs and secs > 0))


def _create_monitored_session_with_worker_context(
    worker_context, scaffold, checkpoint_dir=None, hooks=None, chief_only_hooks=None,
    save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None,
    config=None, stop_grace_period_secs=120, log_step_count_steps=100, max_wait_secs=7200,
    save_checkpoint_steps=None, summary_dir=None, save_graph_def=True, recovery=None,
    end_on_interrupt=False, async_checkpoint=False, preemption=None):
  """MonitoredTrainingSession under a distribute-coordinator worker context:
  TF's rules for which task writes summaries and checkpoints, and where."""
  all_hooks = list(hooks or [])
  if chief_only_hooks and worker_context.is_chief:
    all_hooks.extend(chief_only_hooks)
  tmpdir = None
  if type(worker_context._strategy).__name__ in (  # pylint: disable=protected-access
      'CollectiveAllReduceStrategy', 'CollectiveAllReduceStrategyV1',
      'MultiWorkerMirroredStrategy'):
    tmpdir = ('tmp_%s_%d' % (worker_context.task_type, worker_context.task_id)
              if worker_context.task_type else 'tmp')
    if save_checkpoint_secs:
      logging.warning('Collective ops may deadlock with '
                      '`save_checkpoints_secs` please use '
                      '`save_checkpoint_steps` instead. Clearing '
                      '`save_checkpoint_secs` and setting '
                      '`save_checkpoint_steps` to 1000 now.')
      save_checkpoint_secs = None
      save_checkpoint_steps = 1000
    if save_summaries_secs:
      logging.warning('Collective ops may run out of sync with'
                      '`save_summaries_secs`, please use '
                      '`save_summaries_steps` instead.')

  def where(base, owns):  # this task's own dir, its tmp dir, or none
    if owns:
      return base
    return os.path.join(base, tmpdir) if tmpdir else None

  summary_dir = summary_dir or checkpoint_dir
  summaries_to = where(summary_dir, worker_context.should_save_summary) if summary_dir else None
  if summaries_to and log_step_count_steps and log_step_count_steps > 0:
    all_hooks.append(_step_counter_hook(summaries_to, log_step_count_steps))
  # As in TF, the checkpoint hook is only considered when summaries are on.
  if summary_dir and _saves(save_summaries_steps, save_summaries_secs):
    if summaries_to:
      all_hooks.append(_summary_saver_hook(scaffold, summaries_to, save_summaries_steps,
                                           save_summaries_secs))
    checkpoints_to = (where(checkpoint_dir, worker_context.should_checkpoint)
                      if checkpoint_dir else None)
    if checkpoints_to and _saves(save_checkpoint_steps, save_checkpoint_secs):
      all_hooks.append(_checkpoint_saver_hook(scaffold, checkpoints_to, save_checkpoint_steps,
                                              save_checkpoint_secs, save_graph_def,
                                              async_checkpoint))
  if preemption:
    all_hooks.append(preemption_lib.PreemptionHook(
        checkpoint_dir if checkpoint_dir and worker_context.should_checkpoint else None,
        policy=preemption, scaffold=scaffold))
  logging.info('all_hooks %r', all_hooks)
  session_creator = worker_context.session_creator(
      scaffold, config=config, checkpoint_dir=checkpoint_dir, max_wait_secs=max_wait_secs)
  return MonitoredSession(session_creator=session_creator, hooks=all_hooks,
                          stop_grace_period_secs=stop_grace_period_secs, recovery=recovery,
                          end_on_interrupt=end_on_interrupt)


def MonitoredTrainingSession(  # pylint: disable=invalid-name
    master='',
    is_chief=True,
    checkpoint_dir=None,
    scaffold=None,
    hooks=None,
    chief_only_hooks=None,
    save_checkpoint_secs=USE_DEFAULT,
    save_summaries_steps=USE_DEFAULT,
    save_summaries_secs=USE_DEFAULT,
    config=None,
    stop_grace_period_secs=120,
    log_step_count_steps=100,
    max_wait_secs=7200,
    save_checkpoint_steps=USE_DEFAULT,
    summary_dir=None,
    save_graph_def=True,
    *,
    recovery=None,
    end_on_interrupt=False,
    async_checkpoint=False,
    preemption=None):
  """Creates a `MonitoredSession` for training, as
  `tf.compat.v1.train.MonitoredTrainingSession` does.

  fastmts only, keyword arguments:
    async_checkpoint: the checkpoints of `checkpoint_dir` are written by a
      native thread from a snapshot taken at the save's step (see
      fastmts.CheckpointSaverHook); off by default, as TF.
    recovery: a RecoveryPolicy bounding re-creations of a preempted session,
      with backoff; None retries forever, as TF.
    end_on_interrupt: when the `with` block ends by KeyboardInterrupt (Ctrl-C),
      still run the hooks' end() -- the final checkpoint, FinalOpsHook,
      summaries -- before closing; TF skips end() on any exception.
    preemption: True, or a fastmts.PreemptionPolicy (signals, grace period):
      on SIGTERM (the policy's signals) training stops after the step in
      flight, the chief checkpoints that step in `checkpoint_dir` at close,
      workers write nothing, and `sess.preemption` tells what happened (see
      fastmts.PreemptionHook); off by default: TF's process dies.

  For a chief, sets up initialization/restoring and the default hooks (step
  counter, summaries, and checkpoints when `checkpoint_dir` is set, with
  `chief_only_hooks`); a worker waits for the chief to initialize, up to
  `max_wait_secs`. Defaults: checkpoints every 600 s, summaries every 100
  steps. See TF's documentation for every argument; behaviour is the same.

  Returns:
    A fastmts `MonitoredSession`.
  """
  if save_summaries_steps == USE_DEFAULT and save_summaries_secs == USE_DEFAULT:
    save_summaries_steps = 100
    save_summaries_secs = None
  elif save_summaries_secs == USE_DEFAULT:
    save_summaries_secs = None
  elif save_summaries_steps == USE_DEFAULT:
    save_summaries_steps = None

  if save_checkpoint_steps == USE_DEFAULT and save_checkpoint_secs == USE_DEFAULT:
    save_checkpoint_steps = None
    save_checkpoint_secs = 600
  elif save_checkpoint_secs == USE_DEFAULT:
    save_checkpoint_secs = None
  elif save_checkpoint_steps == USE_DEFAULT:
    save_checkpoint_steps = None

  scaffold = scaffold or Scaffold()
  preemption = preemption_lib.PreemptionPolicy.of(preemption)
  worker_context = distribute_coordinator_context.get_current_worker_context()
  if worker_context:
    return _create_monitored_session_with_worker_context(
        worker_context, scaffold, checkpoint_dir=checkpoint_dir, hooks=hooks,
        chief_only_hooks=chief_only_hooks, save_checkpoint_secs=save_checkpoint_secs,
        save_summaries_steps=save_summaries_steps, save_summaries_secs=save_summaries_secs,
        config=config, stop_grace_period_secs=stop_grace_period_secs,
        log_step_count_steps=log_step_count_steps, max_wait_secs=max_wait_secs,
        save_checkpoint_steps=save_checkpoint_steps, summary_dir=summary_dir,
        save_graph_def=save_graph_def, recovery=recovery, end_on_interrupt=end_on_interrupt,
        async_checkpoint=async_checkpoint, preemption=preemption)

  if not is_chief:
    session_creator = WorkerSessionCreator(
        scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs)
    worker_hooks = list(hooks or [])
    if preemption:
      worker_hooks.append(preemption_lib.PreemptionHook(policy=preemption))
    return MonitoredSession(session_creator=session_creator, hooks=worker_hooks,
                            stop_grace_period_secs=stop_grace_period_secs, recovery=recovery,
                            end_on_interrupt=end_on_interrupt)

  all_hooks = list(chief_only_hooks or [])
  session_creator = ChiefSessionCreator(
      scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config)
  summary_dir = summary_dir or checkpoint_dir
  if summary_dir:
    if log_step_count_steps and log_step_count_steps > 0:
      all_hooks.append(_step_counter_hook(summary_dir, log_step_count_steps))
    if _saves(save_summaries_steps, save_summaries_secs):
      all_hooks.append(_summary_saver_hook(scaffold, summary_dir, save_summaries_steps,
                                           save_summaries_secs))
  if checkpoint_dir and _saves(save_checkpoint_steps, save_checkpoint_secs):
    all_hooks.append(_checkpoint_saver_hook(scaffold, checkpoint_dir, save_checkpoint_steps,
                                            save_checkpoint_secs, save_graph_def,
                                            async_checkpoint))
  if hooks:
    all_hooks.extend(hooks)
  if preemption:  # last: what a CheckpointSaverHook's end() saved is not saved again
    all_hooks.append(preemption_lib.PreemptionHook(checkpoint_dir, policy=preemption,
                                                   scaffold=scaffold))
  return MonitoredSession(session_creator=session_creator, hooks=all_hooks,
                          stop_grace_period_secs=stop_grace_period_secs, recovery=recovery,
                          end_on_interrupt=end_on_interrupt)


class _MonitoredSession:
  """See `MonitoredSession` or `SingularMonitoredSession`."""

  def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs=120,
               recovery=None, end_on_interrupt=False):
    if recovery is not None and not isinstance(recovery, RecoveryPolicy):
      raise TypeError('recovery must be a fastmts.RecoveryPolicy or None, got %r' % (recovery,))
    self._end_on_interrupt = end_on_interrupt
    self._graph_was_finalized = ops.get_default_graph().finalized
    self._hooks = hooks or []
    self._preemption_hook = preemption_lib.hook_of(self._hooks)
    if self._preemption_hook is not None:
      me = weakref.proxy(self)
      self._preemption_hook.bind_session(lambda: me._on_preemption_signal())  # pylint: disable=protected-access
    try:
      for h in self._hooks:
        # A stock hook's begin() first gets its FileWriter from the cache; made
        # here, just before, the writer computes the GraphDef once, not twice.
        graph_events.make_cached_writer(graph_events.writer_dir_of_begin(h))
        h.begin()
      worker_context = distribute_coordinator_context.get_current_worker_context()
      if not session_creator and worker_context:
        session_creator = worker_context.session_creator()
      self._coordinated_creator = self._CoordinatedSessionCreator(
          session_creator=session_creator or ChiefSessionCreator(),
          hooked=HookedSession(self._hooks),
          stop_grace_period_secs=stop_grace_period_secs,
          preemption_hook=self._preemption_hook)
      if should_recover:
        self._sess = _RecoverableSession(self._coordinated_creator, recovery)
      else:
        self._sess = self._coordinated_creator.create_session()
    except BaseException:
      if self._preemption_hook is not None:  # no close will put the handlers back
        self._preemption_hook.release()
      raise
    self._fast_run = self._fast_run_of(self._coordinated_creator.hooked)
    if type(self).run is _MonitoredSession.run:  # not overridden by a subclass
      # `sess.run` is then the native entry itself: no Python frame and no
      # pybind11 dispatch per step. Calls it does not take as they are go
      # on to the method below, so their errors are Python's own.
      me = weakref.proxy(self)
      self.run = _native.fast_run_entry(
          self._fast_run, lambda *args, **kwargs: _MonitoredSession.run(me, *args, **kwargs))

  def _on_preemption_signal(self):
    """A preemption signal arrived (in its handler): the step in flight, if
    any, is the last one."""
    self._coordinated_creator.hooked.request_stop()

  @property
  def preemption(self):
    """None, or once a preemption signal arrived (see fastmts.PreemptionHook,
    on by MonitoredTrainingSession's `preemption`), its `Preemption` record:
    the signal, the step checkpointed and where, and the times it took."""
    hook = self._preemption_hook
    return None if hook is None else hook.preemption

  def _fast_run_of(self, hooked):
    """run() itself: the native fast path (no Python at all when every hook
    is native). It reaches back only through a weak proxy (a native object
    in a reference cycle would never be collected)."""
    me = weakref.proxy(self)
    return _native.FastRun(
        hooked.native, fetches_lib.LEAF_TYPES, hooked.fast_layout,
        hooked.step_state if hooked.has_python_hooks else None,
        lambda *args: me._slow_run(*args),  # pylint: disable=protected-access
        lambda error, fetches: me._fast_run_failed(error, fetches))  # pylint: disable=protected-access

  def _slow_run(self, fetches, feed_dict, options, run_metadata):
    # After close, self._sess is None and TF raises AttributeError here too.
    return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                          run_metadata=run_metadata)

  def _fast_run_failed(self, error, fetches):
    """A step of the fast path raised `error`: carry on as run() would have."""
    if isinstance(error, fastmts_errors.StatusError):
      hooked = self._coordinated_creator.hooked
      error = fastmts_errors.from_status(error, hooked.graph, hooked.tf_sess)
    return self._sess.run_failed(error, fetches)

  @property
  def graph(self):
    """The graph that was launched in this session."""
    if self._tf_sess() is None:
      return None
    return self._tf_sess().graph

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """Runs one step with hooks; same arguments and results as `tf.Session.run`."""
    return self._fast_run(fetches, feed_dict, options, run_metadata)

  def run_steps(self, fetches, max_steps=None, feed_dict=None):
    """Runs steps in C++ until a hook requests stop, the coordinator stops,
    `max_steps` steps ran (None: no bound) or a step fails; returns the last
    step's results (None if no step ran).

    Same as `while not sess.should_stop(): result = sess.run(fetches,
    feed_dict)` (bounded by max_steps), with the same errors, but no Python
    runs per step when every hook is native. `feed_dict` is converted once.
    Ctrl-C ends it between two steps with KeyboardInterrupt.
    """
    if max_steps is not None:
      if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral):
        raise TypeError('max_steps must be an int or None, got %r' % (max_steps,))
      if max_steps < 0:
        raise ValueError('max_steps must be >= 0, got %d' % max_steps)
    if self._sess is None:
      return self.run(fetches, feed_dict=feed_dict)  # raises as run does after close
    result, done = None, 0
    while (max_steps is None or done < max_steps) and not self.should_stop():
      progress = LoopProgress()
      try:
        last = self._sess.run_steps(fetches, None if max_steps is None else max_steps - done,
                                    feed_dict, progress)
      finally:
        done += progress.steps
      if last is not _NOT_RUN:
        result = last
    return result

  def hook_cost_report(self):
    """Where the time of the steps went, hook by hook (a HookCostReport), if
    fastmts.report_hook_costs(True) was on when the session was created;
    otherwise None."""
    return self._coordinated_creator.hooked.cost_report()

  def run_step_fn(self, step_fn):
    """Runs `step_fn(step_context)`, as TF's `MonitoredSession.run_step_fn`.

    Raises:
      StopIteration: if `step_fn` called `request_stop()`.
      ValueError: if `step_fn` does not take exactly `step_context` (and `self`).
    """
    step_fn_arguments = function_utils.fn_args(step_fn)
    if step_fn_arguments != ('step_context',) and step_fn_arguments != (
        'self', 'step_context'):
      raise ValueError(
          '`step_fn` may either have one `step_context` argument, or'
          ' `self` and `step_context` arguments if it\'s an instance'
          ' method. Got {} instead.'.format(step_fn_arguments))
    return self._sess.run_step_fn(step_fn, self._tf_sess(), run_with_hooks=None)

  class StepContext:
    """What `step_fn` gets: the raw `session`, `run_with_hooks` and `request_stop`."""

    def __init__(self, session, run_with_hooks_fn):
      self._session = session
      self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self):
      return self._session

    def run_with_hooks(self, *args, **kwargs):
      """Same as `MonitoredSession.run`. Accepts the same arguments."""
      return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self):
      """Stops the loop: raises StopIteration out of `run_step_fn`."""
      raise StopIteration('step_fn has requested the iterations to stop.')

  def should_stop(self):
    return self._sess is None or self._sess.should_stop()

  def close(self):
    self._close_internal()

  def __enter__(self):
    return self

  def __exit__(self, exception_type, exception_value, traceback):
    if exception_type in [errors.OutOfRangeError, StopIteration]:
      exception_type = None
    if (self._end_on_interrupt and exception_type is not None and
        issubclass(exception_type, KeyboardInterrupt)):
      # Opted in: Ctrl-C ends training as a normal stop would (hooks' end()
      # saves the final checkpoint), and KeyboardInterrupt still propagates.
      self._close_internal(None)
      return False
    if exception_type is not None and self.preemption is not None:
      # Preempted: whatever ended the block (Preempted, the user's handler's
      # SystemExit, ...), the hooks' end() saves the last step; it propagates.
      self._close_internal(None)
      return False
    self._close_internal(exception_type)
    # __exit__ should return True to suppress an exception.
    return exception_type is None

  class _CoordinatedSessionCreator(SessionCreator):
    """Creates the raw session, its Coordinator and queue runners, and binds
    the hook dispatch to it."""

    def __init__(self, session_creator, hooked, stop_grace_period_secs, preemption_hook=None):
      self._session_creator = session_creator
      self._hooked = hooked
      self.preemption_hook = preemption_hook
      self.coord = None
      self.tf_sess = None
      self.queue_runners = None
      self._stop_grace_period_secs = stop_grace_period_secs

    @property
    def hooked(self):
      return self._hooked

    def create_session(self):
      self.tf_sess = self._session_creator.create_session()
      self.coord = Coordinator(clean_stop_exception_types=[])
      self.queue_runners = None
      if not python_hooked_session.runs_natively(self.tf_sess):
        # A wrapped session: TF's own queue-runner threads, through its run.
        queue_runner.start_tf_queue_runners(self.tf_sess, self.coord)
      else:
        queue_runner.start_tf_queue_runners(self.tf_sess, self.coord, with_threads=False)
        if ops.get_collection(ops.GraphKeys.QUEUE_RUNNERS):
          self.queue_runners = QueueRunners(self.tf_sess, self.coord)
      try:
        self._hooked.attach(self.tf_sess, self.coord)  # hooks' after_create_session
      except Exception:
        # TF leaves its queue-runner threads running forever when a hook
        # fails here; nothing fastmts started outlives the failed creation.
        if self.queue_runners is not None:
          self.queue_runners.shut_down(self.coord, _QUEUE_RUNNER_STOP_SECS)
        raise
      return _CoordinatedSession(self._hooked, self.coord, self.queue_runners,
                                 self._stop_grace_period_secs, self.preemption_hook)

    @property
    def preemption(self):
      return None if self.preemption_hook is None else self.preemption_hook.preemption

  def _close_internal(self, exception_type=None):
    preemption = self.preemption
    if preemption is not None:
      self._preemption_hook.stopping = True  # later signals wait for the close
    closed = False
    try:
      self._close_session(exception_type)
      closed = True
    finally:
      if self._preemption_hook is not None:
        preemption = self.preemption  # also of a signal that came during the close
        if preemption is not None and preemption.seconds_to_close is None:
          preemption_lib.report_close(preemption, closed)
        self._preemption_hook.release()

  def _close_session(self, exception_type):
    try:
      self._coordinated_creator.hooked.hand_back()
      if not exception_type:
        self._coordinated_creator.hooked.end()
    finally:
      report = self._coordinated_creator.hooked.cost_report()
      if report is not None and self._sess is not None:
        logging.info('fastmts hook cost report at close:\n%s', report)
      try:
        if self._sess is None:
          raise RuntimeError('Session is already closed.')
        self._sess.close()
      finally:
        self._sess = None
        self._coordinated_creator.tf_sess = None
        self._coordinated_creator.coord = None
        self._coordinated_creator.queue_runners = None
        if not self._graph_was_finalized:
          ops.get_default_graph()._unsafe_unfinalize()  # pylint: disable=protected-access

  @property
  def coordinator(self):
    """The Coordinator of the current session (None when closed): its
    threads stop when it does; hooks get it in after_create_session."""
    return self._coordinated_creator.coord

  @property
  def queue_runner_threads(self):
    """The threads running the graph's QueueRunners (native ones, thread-
    like: name, is_alive(), join(); Python threading.Threads for runners
    that run their own loop); empty when there are none or when closed."""
    runners = self._coordinated_creator.queue_runners
    return list(runners.threads) if runners is not None else []

  def _is_closed(self):
    """True once closed (for tests, as in TF)."""
    return self._coordinated_creator.tf_sess is None

  def _tf_sess(self):
    """The underlying tf.compat.v1.Session (None when closed)."""
    return self._coordinated_creator.tf_sess


# The public classes also subclass TF's, only so that isinstance checks
# against TF's classes (TF's debugger wrappers make them, as user code does)
# accept fastmts's sessions; _MonitoredSession comes first and defines every
# method and attribute TF's classes define (a test checks), so none of TF's
# code runs on a fastmts session.


class MonitoredSession(_MonitoredSession, _tf_monitored_session.MonitoredSession,
                       metaclass=class_identity.StandsFor,
                       stands_for=_tf_monitored_session.MonitoredSession):
  """Session-like object that handles initialization, recovery and hooks.

  Same contract as `tf.compat.v1.train.MonitoredSession`: hooks' `begin()`
  at construction, then the session from `session_creator` (a
  `ChiefSessionCreator` by default), queue runners, `after_create_session`;
  each `run()` calls the hooks around one merged run; `close()` calls `end()`
  and closes, and the context manager suppresses `OutOfRangeError` and
  `StopIteration`. `AbortedError`/`UnavailableError` re-create the session.
  """

  def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120, *,
               recovery=None, end_on_interrupt=False):
    super().__init__(session_creator, hooks, should_recover=True,
                     stop_grace_period_secs=stop_grace_period_secs, recovery=recovery,
                     end_on_interrupt=end_on_interrupt)


class SingularMonitoredSession(_MonitoredSession, _tf_monitored_session.SingularMonitoredSession,
                               metaclass=class_identity.StandsFor,
                               stands_for=_tf_monitored_session.SingularMonitoredSession):
  """Like `MonitoredSession`, always a chief, no recovery, with `raw_session()`."""

  def __init__(self, hooks=None, scaffold=None, master='', config=None, checkpoint_dir=None,
               stop_grace_period_secs=120, checkpoint_filename_with_path=None):
    session_creator = ChiefSessionCreator(
        scaffold=scaffold, master=master, config=config, checkpoint_dir=checkpoint_dir,
        checkpoint_filename_with_path=checkpoint_filename_with_path)
    super().__init__(session_creator, hooks, should_recover=False,
                     stop_grace_period_secs=stop_grace_period_secs)

  def raw_session(self):
    """Returns underlying `TensorFlow.Session` object."""
    return self._tf_sess()


class _RecoverableSession:
  """Re-creates the wrapped session on AbortedError / UnavailableError."""

  def __init__(self, sess_creator, policy=None):
    self._sess_creator = sess_creator
    self._policy = policy  # None: TF's retry forever, at once
    self._recreations = 0  # consecutive, since the last successful step
    self._steps_at_last_recreation = None
    self._sess = self._create_session()

  def _before_recreating(self):
    """Called in the handler of a preemption error, before a re-creation:
    with a policy, re-raises the error once the bound is passed, else waits
    the backoff. A step run since the last re-creation resets the count."""
    preemption = self._sess_creator.preemption
    if preemption is not None:  # a new session would outlast the grace period
      raise preemption_lib.Preempted(
          'Session not re-created: %s received' % preemption.signal.name, preemption)
    if self._policy is None:
      return
    steps = self._sess_creator.hooked.steps_run
    if steps != self._steps_at_last_recreation:
      self._recreations = 0
    self._steps_at_last_recreation = steps
    self._recreations += 1
    if not self._policy.allows(self._recreations):
      raise  # pylint: disable=misplaced-bare-raise
    time.sleep(self._policy.pause_before(self._recreations))

  @property
  def graph(self):
    return self._sess.graph

  def _create_session(self):
    while True:
      try:
        return self._sess_creator.create_session()
      except _PREEMPTION_ERRORS as e:
        self._before_recreating()
        logging.info(
            'An error was raised while a session was being created. '
            'This may be due to a preemption of a connected worker '
            'or parameter server. A new session will be created. '
            'This error may also occur due to a gRPC failure caused '
            'by high memory or network bandwidth usage in the '
            'parameter servers. If this error occurs repeatedly, try '
            'increasing the number of parameter servers assigned to '
            'the job. Error: %s', e)

  def _check_stop(self):
    try:
      if self._sess:
        return self._sess._check_stop()  # pylint: disable=protected-access
      return True
    except _PREEMPTION_ERRORS as e:
      if self._sess_creator.preemption is not None:
        return True  # stopping anyway: close() reports what failed
      self._before_recreating()
      logging.info('An error was raised while considering whether the '
                   'session is complete. ' + _RECREATE_NOTICE, e)
      self.close()
      self._sess = self._create_session()
      return False
    except Exception:  # pylint: disable=broad-except
      return True

  def should_stop(self):
    if self._check_stop():
      return True
    return self._sess.should_stop() if self._sess else True

  def close(self):
    if self._sess:
      try:
        self._sess.close()
      except _PREEMPTION_ERRORS as e:
        _log_close_preemption(e)
      finally:
        self._sess = None

  def _log_preemption(self, e):
    logging.info('An error was raised. ' + _RECREATE_NOTICE, e)

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    while True:
      try:
        if not self._sess:
          self._sess = self._create_session()
        return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                              run_metadata=run_metadata)
      except _PREEMPTION_ERRORS as e:
        self._before_recreating()
        self._log_preemption(e)
        self.close()
        self._sess = None

  def run_failed(self, error, fetches):
    """A step of `fetches` (no feeds or options) raised `error` in the native
    fast path: raise it, or on preemption re-create and retry, as run() does."""
    try:
      return self._sess.run_failed(error, fetches)
    except _PREEMPTION_ERRORS as e:
      self._before_recreating()
      self._log_preemption(e)
      self.close()
      self._sess = None
    return self.run(fetches)

  def run_steps(self, fetches, max_steps, feed_dict, progress):
    """As the session's run_steps; on preemption, re-creates the session and
    returns _NOT_RUN (the caller counts the steps that ran, in `progress`,
    and goes on)."""
    try:
      if not self._sess:
        self._sess = self._create_session()
      return self._sess.run_steps(fetches, max_steps, feed_dict, progress)
    except _PREEMPTION_ERRORS as e:
      self._before_recreating()
      self._log_preemption(e)
      self.close()
      self._sess = self._create_session()
      return _NOT_RUN

  def run_step_fn(self, step_fn, raw_session, run_with_hooks):
    while True:
      try:
        if not self._sess:
          self._sess = self._create_session()
        run_with_hooks = self._sess.run
        return self._sess.run_step_fn(step_fn, raw_session, run_with_hooks)
      except _PREEMPTION_ERRORS as e:
        self._before_recreating()
        self._log_preemption(e)
        self.close()
        self._sess = None


def _is_run_after_stop(error):
  return (type(error) is RuntimeError and  # pylint: disable=unidiomatic-typecheck
          str(error) == 'Run called even after should_stop requested.')


def _log_close_preemption(e):
  logging.error(
      'An error occurred when attempting to close the '
      'session. This may be due to a preemption in a '
      'connected worker or parameter server. Error: %s', e)


class _CoordinatedSession:
  """The hooked session under a Coordinator (TF's _CoordinatedSession over
  _HookedSession): errors of run are weighed against the coordinator's, and
  close stops and joins its threads within the grace period."""

  def __init__(self, hooked, coord, queue_runners, stop_grace_period_secs=120,
               preemption_hook=None):
    self._sess = hooked  # TF's name: code reaches the raw session as ._sess._sess
    self._coord = coord
    self._queue_runners = queue_runners
    self._stop_grace_period_secs = stop_grace_period_secs
    self._preemption_hook = preemption_hook

  def _preemption(self):
    return None if self._preemption_hook is None else self._preemption_hook.preemption

  def _grace_period_secs(self):
    """stop_grace_period_secs, cut to what the cluster's grace period has
    left once preempted."""
    preemption = self._preemption()
    if preemption is None:
      return self._stop_grace_period_secs
    return min(self._stop_grace_period_secs, preemption.grace_left())

  @property
  def graph(self):
    return self._sess.graph

  def _check_stop(self):
    self._coord.raise_requested_exception()
    return self._coord.should_stop()

  def should_stop(self):
    if self._check_stop():
      return True
    return self._sess is None or self._sess.stop_requested

  def close(self):
    self._coord.request_stop()
    try:
      self._release_threads_blocked_in_tf()
      self._coord.join(stop_grace_period_secs=self._grace_period_secs(),
                       ignore_live_threads=True)
    finally:
      try:
        self._close_hooked()
      except Exception:  # pylint: disable=broad-except
        pass
      finally:
        # Closing the session released any native thread still blocked in
        # TF (its run fails); none may outlive the session.
        if self._queue_runners is not None:
          self._queue_runners.join()
          self._queue_runners = None

  def _release_threads_blocked_in_tf(self):
    """Queue-runner threads (fastmts's native ones, and TF's QueueRunner
    threads that hooks start, e.g. SyncReplicasOptimizer's chief runner)
    run only TF ops: after the stop and its cancel ops they end within a
    run, unless one is blocked in an op nothing will complete (such as the
    sync-replicas chief's take_grad). TF would wait out the whole grace
    period for it; closing the session cancels it at once. Done only when
    such threads are all that is left, since other Python threads may still
    use the session in their grace period (the hooks' end() already ran:
    nothing is lost), and only once every runner's cancel op has run (its
    thread ended; within the grace period, as TF's join waits): their
    queues are closed then, so the close cancels no enqueue of an open
    queue (which TF logs, and TF's order never does)."""
    alive = [t for t in self._coord.registered_threads() if t.is_alive()]
    if not alive or not all(queue_runner.runs_only_tf_ops(t) for t in alive):
      return
    cancelling = [t for t in alive if queue_runner.runs_cancel_op(t)]
    queue_runner.poll_until(lambda: not any(t.is_alive() for t in cancelling),
                            time.monotonic() + self._grace_period_secs())
    if queue_runner.poll_until(lambda: not any(t.is_alive() for t in alive),
                               time.monotonic() + _QUEUE_RUNNER_STOP_SECS):
      return
    self._close_hooked()
    if self._queue_runners is not None:
      self._queue_runners.join()

  def _close_hooked(self):
    hooked, self._sess = self._sess, None
    if hooked is None:
      return
    tf_sess = hooked.tf_sess
    hooked.detach()  # native code must not hold the session past its close
    async_checkpoint_lib.settle_writes_on(tf_sess)  # its save op runs on the session
    try:
      tf_sess.close()
    except _PREEMPTION_ERRORS as e:
      _log_close_preemption(e)

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    try:
      return self._sess.run(fetches, feed_dict, options, run_metadata)
    except Exception as e:  # pylint: disable=broad-except
      self._raise_run_error(e)

  def run_steps(self, fetches, max_steps, feed_dict, progress):
    try:
      return self._sess.run_steps(fetches, max_steps, feed_dict, self._coord, progress)
    except Exception as e:  # pylint: disable=broad-except
      self._raise_run_error(e)

  def run_failed(self, error, fetches):
    del fetches  # nothing is retried at this level
    self._raise_run_error(error)

  def _raise_run_error(self, original_exception):
    """As TF: a step's own error is raised, unless the coordinator holds a
    preemption error, which recovery must see instead."""
    if isinstance(original_exception, _PREEMPTION_ERRORS):
      raise original_exception
    preemption = self._preemption()
    if preemption is not None and _is_run_after_stop(original_exception):
      raise preemption_lib.Preempted(
          'Run called even after should_stop requested: training stopped on %s.' %
          preemption.signal.name, preemption) from None
    try:
      self._coord.raise_requested_exception()
    except _PREEMPTION_ERRORS:
      raise
    except Exception:  # pylint: disable=broad-except
      pass
    raise original_exception

  def run_step_fn(self, step_fn, raw_session, run_with_hooks):
    run_with_hooks = run_with_hooks or self.run
    return step_fn(_MonitoredSession.StepContext(raw_session, run_with_hooks))
