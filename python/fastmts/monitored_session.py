"""MonitoredSession, SingularMonitoredSession and MonitoredTrainingSession.

Layered as TF's monitored_session.py (the layers: session_layers): a
_RecoverableSession (re-creates the session on AbortedError/UnavailableError)
wraps a _CoordinatedSession (Coordinator, queue runners, grace period) which
wraps the HookedSession (native hook dispatch around one TF_SessionRun).
Creation, recovery and close are rare and stay in Python; the step itself is
native. The session owns the preemption policy of its PreemptionHook, if any
(session_preemption.SessionPreemption), which its layers ask as their StopPolicy.
"""
import numbers
import os
import weakref

from tensorflow.python.distribute import distribute_coordinator_context
from tensorflow.python.framework import errors
from tensorflow.python.framework import ops
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import basic_session_run_hooks
from tensorflow.python.training import monitored_session as _tf_monitored_session
from tensorflow.python.util import function_utils

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import async_checkpoint as async_checkpoint_lib
from fastmts import basic_session_run_hooks as fastmts_hooks
from fastmts._internal import class_identity
from fastmts._internal import errors as fastmts_errors
from fastmts._internal import fetches as fetches_lib
from fastmts.file_formats import graph_events
from fastmts.file_formats import graph_files
from fastmts import preemption as preemption_lib
from fastmts.coordinator import Coordinator
from fastmts.hooked_session import HookedSession
from fastmts.hooked_session import LoopProgress
from fastmts._internal import python_hooked_session
from fastmts import queue_runner
from fastmts import session_layers
from fastmts._internal import session_agreement
from fastmts._internal import session_preemption
from fastmts.queue_runner import QueueRunners
from fastmts.recovery import RecoveryPolicy
from fastmts.session_creators import ChiefSessionCreator
from fastmts.session_creators import Scaffold
from fastmts.session_creators import SessionCreator
from fastmts.session_creators import WorkerSessionCreator

# TF's own sentinel, so code that passes tf's USE_DEFAULT explicitly works.
USE_DEFAULT = _tf_monitored_session.USE_DEFAULT

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


def _schedule(steps, secs, default_steps, default_secs):
  """TF's defaults of a (steps, secs) pair of MonitoredTrainingSession: both
  left to USE_DEFAULT take the defaults; one left takes None."""
  if steps == USE_DEFAULT and secs == USE_DEFAULT:
    return default_steps, default_secs
  return (None if steps == USE_DEFAULT else steps), (None if secs == USE_DEFAULT else secs)


def _create_monitored_session_with_worker_context(
    worker_context, scaffold, checkpoint_dir=None, hooks=None, chief_only_hooks=None,
    save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None,
    config=None, stop_grace_period_secs=120, log_step_count_steps=100, max_wait_secs=7200,
    save_checkpoint_steps=None, summary_dir=None, save_graph_def=True, recovery=None,
    end_on_interrupt=False, async_checkpoint=False, preemption=None, agreed_stop=None):
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
                          end_on_interrupt=end_on_interrupt, agreed_stop=agreed_stop)


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
    preemption=None,
    agreed_stop=None):
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
    agreed_stop: a fastmts.AgreedStop: the ranks of a data-parallel job
      (Horovod, TF's collective ops) stop at one step, the one the first of
      them wished to stop at (a hook's request, a preemption signal), so
      none fails in an allreduce; `sess.agreed_stop` tells how.
      Off by default (None): nothing added to the graph or the step.

  For a chief, sets up initialization/restoring and the default hooks (step
  counter, summaries, and checkpoints when `checkpoint_dir` is set, with
  `chief_only_hooks`); a worker waits for the chief to initialize, up to
  `max_wait_secs`. Defaults: checkpoints every 600 s, summaries every 100
  steps. See TF's documentation for every argument; behaviour is the same.

  Returns:
    A fastmts `MonitoredSession`.

  (Over 60 lines: TF's signature and this documentation; the body is the
  three cases TF's has, worker context, worker and chief.)
  """
  save_summaries_steps, save_summaries_secs = _schedule(
      save_summaries_steps, save_summaries_secs, default_steps=100, default_secs=None)
  save_checkpoint_steps, save_checkpoint_secs = _schedule(
      save_checkpoint_steps, save_checkpoint_secs, default_steps=None, default_secs=600)

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
        async_checkpoint=async_checkpoint, preemption=preemption, agreed_stop=agreed_stop)

  if not is_chief:
    session_creator = WorkerSessionCreator(
        scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs)
    worker_hooks = list(hooks or [])
    if preemption:
      worker_hooks.append(preemption_lib.PreemptionHook(policy=preemption))
    return MonitoredSession(session_creator=session_creator, hooks=worker_hooks,
                            stop_grace_period_secs=stop_grace_period_secs, recovery=recovery,
                            end_on_interrupt=end_on_interrupt, agreed_stop=agreed_stop)

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
                          end_on_interrupt=end_on_interrupt, agreed_stop=agreed_stop)


class _MonitoredSession:
  """See `MonitoredSession` or `SingularMonitoredSession`."""

  def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs=120,
               recovery=None, end_on_interrupt=False, agreed_stop=None):
    if recovery is not None and not isinstance(recovery, RecoveryPolicy):
      raise TypeError('recovery must be a fastmts.RecoveryPolicy or None, got %r' % (recovery,))
    self._end_on_interrupt = end_on_interrupt
    _tensorflow.count_as_tf_code_in_errors()  # before hooks' begin() and the Scaffold make ops
    self._graph_was_finalized = ops.get_default_graph().finalized
    self._hooks = hooks or []
    self._agreement = None
    me = weakref.proxy(self)
    self._preemption = session_preemption.SessionPreemption.of(
        self._hooks, lambda exit_code: me._stop_after_step_in_flight(exit_code))  # pylint: disable=protected-access
    try:
      for h in self._hooks:
        # A stock hook's begin() first gets its FileWriter from the cache; made
        # here, just before, the writer computes the GraphDef once, not twice.
        graph_events.make_cached_writer(graph_events.writer_dir_of_begin(h))
        h.begin()
      worker_context = distribute_coordinator_context.get_current_worker_context()
      if not session_creator and worker_context:
        session_creator = worker_context.session_creator()
      hooked = HookedSession(self._hooks)
      self._agreement = session_agreement.SessionAgreement.of(agreed_stop, hooked)
      self._coordinated_creator = self._CoordinatedSessionCreator(
          session_creator=session_creator or ChiefSessionCreator(),
          hooked=hooked,
          stop_grace_period_secs=stop_grace_period_secs,
          stop_policy=self._preemption)
      if should_recover:
        self._sess = session_layers._RecoverableSession(  # pylint: disable=protected-access
            self._coordinated_creator, recovery, self._preemption)
      else:
        self._sess = self._coordinated_creator.create_session()
    except BaseException:
      self._preemption.release()  # no close will put the signal handlers back
      raise
    self._fast_run = self._fast_run_of(self._coordinated_creator.hooked)
    if type(self).run is _MonitoredSession.run:  # not overridden by a subclass
      # `sess.run` is then the native entry itself: no Python frame and no
      # pybind11 dispatch per step. Calls it does not take as they are go
      # on to the method below, so their errors are Python's own.
      me = weakref.proxy(self)
      self.run = _native.fast_run_entry(
          self._fast_run, lambda *args, **kwargs: _MonitoredSession.run(me, *args, **kwargs))

  def _stop_after_step_in_flight(self, exit_code):
    """A stop signal arrived (in its handler), meaning `exit_code`: the
    step in flight, if any, is the last one, unless the agreed stop has the
    ranks vote (session_agreement.stop_on_signal decides)."""
    session_agreement.stop_on_signal(self._agreement, self._coordinated_creator.hooked,
                                     exit_code)

  @property
  def preemption(self):
    """None, or once a preemption signal arrived (see fastmts.PreemptionHook,
    on by MonitoredTrainingSession's `preemption`), its `Preemption` record:
    the signal, the step checkpointed and where, and the times it took."""
    return self._preemption.record

  @property
  def agreed_stop(self):
    """None, or once the ranks agreed to stop (MonitoredTrainingSession's
    `agreed_stop`), its `AgreedStopRecord`: the step, the exit code."""
    return None if self._agreement is None else self._agreement.record

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
      if last is not session_layers.RECREATED:
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

  StepContext = session_layers.StepContext

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
    if exception_type is not None and self._preemption.stop_requested:
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

    def __init__(self, session_creator, hooked, stop_grace_period_secs,
                 stop_policy=session_layers.NO_STOP):
      self._session_creator = session_creator
      self._hooked = hooked
      self._stop_policy = stop_policy
      self.coord = None
      self.tf_sess = None
      self.queue_runners = None
      self._stop_grace_period_secs = stop_grace_period_secs

    @property
    def hooked(self):
      return self._hooked

    def create_session(self):
      with session_layers.creating_with(self._stop_policy):  # its waits ask the policy
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
          self.queue_runners.shut_down(self.coord, session_layers.QUEUE_RUNNER_STOP_SECS)
        # TF wrote the start's graph files before what failed (a hook after
        # the saver's, the first save): on disk when the error is raised. An
        # error writing them is what TF would have raised first.
        graph_files.wait_and_raise(self.tf_sess.graph)
        raise
      return session_layers._CoordinatedSession(  # pylint: disable=protected-access
          self._hooked, self.coord, self.queue_runners, self._stop_grace_period_secs,
          self._stop_policy)

  def _close_internal(self, exception_type=None):
    if self._agreement is not None:  # a peer's signal that stopped the ranks is this rank's too
      self._agreement.report_peer_signal(self._preemption)
    self._preemption.before_close()
    closed = False
    try:
      self._close_session(exception_type)
      closed = True
    finally:
      self._preemption.after_close(closed)

  def _close_session(self, exception_type):
    tf_sess = self._coordinated_creator.tf_sess
    graph = ops.get_default_graph() if tf_sess is None else tf_sess.graph
    try:
      self._coordinated_creator.hooked.write_hook_state_to_tf_hooks()
      if not exception_type:
        self._coordinated_creator.hooked.end()
      if self._agreement is not None:
        self._agreement.barrier(self._coordinated_creator.tf_sess)
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
        # The start's graph files (graph_files) on disk before close returns.
        graph_files.wait_all(graph)
    graph_files.raise_error(graph)

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
  fastmts only: `recovery`, `end_on_interrupt` and `agreed_stop` as
  `MonitoredTrainingSession`'s.
  """

  def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120, *,
               recovery=None, end_on_interrupt=False, agreed_stop=None):
    super().__init__(session_creator, hooks, should_recover=True,
                     stop_grace_period_secs=stop_grace_period_secs, recovery=recovery,
                     end_on_interrupt=end_on_interrupt, agreed_stop=agreed_stop)


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
