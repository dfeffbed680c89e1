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
from fastmts import basic_session_run_hooks as fastmts_hooks
from fastmts._internal import class_identity
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
from fastmts.session_creators import ChiefSessionCreator
from fastmts.session_creators import Scaffold
from fastmts.session_creators import SessionCreator
from fastmts.session_creators import WorkerSessionCreator
from fastmts.session_options import SESSION_KEYWORDS
from fastmts.session_options import SessionOptions

# TF's own sentinel, so code that passes tf's USE_DEFAULT explicitly works.
USE_DEFAULT = _tf_monitored_session.USE_DEFAULT

def _saves(steps, secs):
  return bool((steps and steps > 0) or (secs and secs > 0))


def _schedule(steps, secs, default_steps, default_secs):
  """TF's defaults of a (steps, secs) pair of MonitoredTrainingSession: both
  left to USE_DEFAULT take the defaults; one left takes None."""
  if steps == USE_DEFAULT and secs == USE_DEFAULT:
    return default_steps, default_secs
  return (None if steps == USE_DEFAULT else steps), (None if secs == USE_DEFAULT else secs)


class _TrainingArguments:
  """MonitoredTrainingSession's arguments (its parameters, declared once
  there), with TF's defaults applied and fastmts's options as one value."""

  def __init__(self, arguments):
    self.__dict__.update(arguments)
    self.options = SessionOptions.of(self.options, self.fastmts_options,
                                     'MonitoredTrainingSession')
    del self.fastmts_options
    self.save_summaries_steps, self.save_summaries_secs = _schedule(
        self.save_summaries_steps, self.save_summaries_secs, default_steps=100,
        default_secs=None)
    self.save_checkpoint_steps, self.save_checkpoint_secs = _schedule(
        self.save_checkpoint_steps, self.save_checkpoint_secs, default_steps=None,
        default_secs=600)
    self.scaffold = self.scaffold or Scaffold()

  def step_counter_hook(self, summary_dir):
    return basic_session_run_hooks.StepCounterHook(
        output_dir=summary_dir, every_n_steps=self.log_step_count_steps)

  def summary_saver_hook(self, summary_dir):
    return basic_session_run_hooks.SummarySaverHook(
        scaffold=self.scaffold, save_steps=self.save_summaries_steps,
        save_secs=self.save_summaries_secs, output_dir=summary_dir)

  def checkpoint_saver_hook(self, checkpoint_dir):
    if self.options.async_checkpoint:  # fastmts's form of the hook
      return fastmts_hooks.CheckpointSaverHook(
          checkpoint_dir, save_steps=self.save_checkpoint_steps,
          save_secs=self.save_checkpoint_secs, scaffold=self.scaffold,
          save_graph_def=self.save_graph_def, async_checkpoint=True)
    return basic_session_run_hooks.CheckpointSaverHook(
        checkpoint_dir, save_steps=self.save_checkpoint_steps,
        save_secs=self.save_checkpoint_secs, scaffold=self.scaffold,
        **fastmts_hooks.save_graph_def_argument(self.save_graph_def))

  def preemption_hook(self, checkpoint_dir=None):
    return preemption_lib.PreemptionHook(checkpoint_dir, policy=self.options.preemption,
                                         scaffold=self.scaffold)

  @property
  def counts_steps(self):
    return bool(self.log_step_count_steps and self.log_step_count_steps > 0)

  @property
  def saves_summaries(self):
    return _saves(self.save_summaries_steps, self.save_summaries_secs)

  @property
  def saves_checkpoints(self):
    return _saves(self.save_checkpoint_steps, self.save_checkpoint_secs)


def _with_worker_context(worker_context, args):
  """The session creator and hooks under a distribute-coordinator worker
  context: TF's rules for which task writes summaries and checkpoints, and
  where."""
  all_hooks = list(args.hooks or [])
  if args.chief_only_hooks and worker_context.is_chief:
    all_hooks.extend(args.chief_only_hooks)
  tmpdir = None
  # TF's own rule names the strategy's class, read from the context's private attribute.
  if type(worker_context._strategy).__name__ in (  # pylint: disable=protected-access
      'CollectiveAllReduceStrategy', 'CollectiveAllReduceStrategyV1',
      'MultiWorkerMirroredStrategy'):
    tmpdir = ('tmp_%s_%d' % (worker_context.task_type, worker_context.task_id)
              if worker_context.task_type else 'tmp')
    if args.save_checkpoint_secs:
      logging.warning('Collective ops may deadlock with '
                      '`save_checkpoints_secs` please use '
                      '`save_checkpoint_steps` instead. Clearing '
                      '`save_checkpoint_secs` and setting '
                      '`save_checkpoint_steps` to 1000 now.')
      args.save_checkpoint_secs = None
      args.save_checkpoint_steps = 1000
    if args.save_summaries_secs:
      logging.warning('Collective ops may run out of sync with'
                      '`save_summaries_secs`, please use '
                      '`save_summaries_steps` instead.')

  def where(base, owns):  # this task's own dir, its tmp dir, or none
    if owns:
      return base
    return os.path.join(base, tmpdir) if tmpdir else None

  checkpoint_dir = args.checkpoint_dir
  summary_dir = args.summary_dir or checkpoint_dir
  summaries_to = where(summary_dir, worker_context.should_save_summary) if summary_dir else None
  if summaries_to and args.counts_steps:
    all_hooks.append(args.step_counter_hook(summaries_to))
  # As in TF, the checkpoint hook is only considered when summaries are on.
  if summary_dir and args.saves_summaries:
    if summaries_to:
      all_hooks.append(args.summary_saver_hook(summaries_to))
    checkpoints_to = (where(checkpoint_dir, worker_context.should_checkpoint)
                      if checkpoint_dir else None)
    if checkpoints_to and args.saves_checkpoints:
      all_hooks.append(args.checkpoint_saver_hook(checkpoints_to))
  if args.options.preemption:
    all_hooks.append(args.preemption_hook(
        checkpoint_dir if checkpoint_dir and worker_context.should_checkpoint else None))
  logging.info('all_hooks %r', all_hooks)
  session_creator = worker_context.session_creator(
      args.scaffold, config=args.config, checkpoint_dir=checkpoint_dir,
      max_wait_secs=args.max_wait_secs)
  return session_creator, all_hooks


def _as_worker(args):
  """A worker's session creator and hooks: it waits for the chief."""
  session_creator = WorkerSessionCreator(
      scaffold=args.scaffold, master=args.master, config=args.config,
      max_wait_secs=args.max_wait_secs)
  worker_hooks = list(args.hooks or [])
  if args.options.preemption:
    worker_hooks.append(preemption_lib.PreemptionHook(policy=args.options.preemption))
  return session_creator, worker_hooks


def _as_chief(args):
  """The chief's session creator and hooks: it initializes or restores, and
  writes the summaries and checkpoints."""
  all_hooks = list(args.chief_only_hooks or [])
  session_creator = ChiefSessionCreator(
      scaffold=args.scaffold, checkpoint_dir=args.checkpoint_dir, master=args.master,
      config=args.config)
  summary_dir = args.summary_dir or args.checkpoint_dir
  if summary_dir:
    if args.counts_steps:
      all_hooks.append(args.step_counter_hook(summary_dir))
    if args.saves_summaries:
      all_hooks.append(args.summary_saver_hook(summary_dir))
  if args.checkpoint_dir and args.saves_checkpoints:
    all_hooks.append(args.checkpoint_saver_hook(args.checkpoint_dir))
  if args.hooks:
    all_hooks.extend(args.hooks)
  if args.options.preemption:  # last: what a CheckpointSaverHook's end() saved is not saved again
    all_hooks.append(args.preemption_hook(args.checkpoint_dir))
  return session_creator, all_hooks


def MonitoredTrainingSession(  # pylint: disable=invalid-name,unused-argument
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
    options=None,
    **fastmts_options):
  """Creates a `MonitoredSession` for training, as
  `tf.compat.v1.train.MonitoredTrainingSession` does.

  fastmts only: `options`, a fastmts.SessionOptions, or its fields as
  keywords (`recovery`, `end_on_interrupt`, `async_checkpoint`,
  `preemption`, `agreed_stop`; see SessionOptions for each). All are off by
  default, as TF.

  For a chief, sets up initialization/restoring and the default hooks (step
  counter, summaries, and checkpoints when `checkpoint_dir` is set, with
  `chief_only_hooks`); a worker waits for the chief to initialize, up to
  `max_wait_secs`. Defaults: checkpoints every 600 s, summaries every 100
  steps. See TF's documentation for every argument; behaviour is the same.

  Returns:
    A fastmts `MonitoredSession`.
  """
  args = _TrainingArguments(locals())  # the parameters above, as given
  worker_context = distribute_coordinator_context.get_current_worker_context()
  if worker_context:
    session_creator, all_hooks = _with_worker_context(worker_context, args)
  elif not is_chief:
    session_creator, all_hooks = _as_worker(args)
  else:
    session_creator, all_hooks = _as_chief(args)
  return MonitoredSession(session_creator=session_creator, hooks=all_hooks,
                          stop_grace_period_secs=stop_grace_period_secs, options=args.options)


class _MonitoredSession:
  """See `MonitoredSession` or `SingularMonitoredSession`.

  It holds its chain of layers (`_sess`, TF's name: _RecoverableSession or
  _CoordinatedSession over HookedSession) and talks only to its top, as TF's
  _MonitoredSession does; and, as TF's holds its hooks for their begin() and
  end(), the hooks' dispatch it built (`_hooked`, the chain's bottom, which
  outlives each raw session). The creator (`_coordinated_creator`) is only
  built and handed to the chain here; TF's attributes on it stay for code
  that reads them.
  """

  def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs=120,
               options=None):
    options = options or SessionOptions()
    self._end_on_interrupt = options.end_on_interrupt
    _tensorflow.count_as_tf_code_in_errors()  # before hooks' begin() and the Scaffold make ops
    self._graph_was_finalized = ops.get_default_graph().finalized
    self._hooks = hooks or []
    self._agreement = None
    me = weakref.proxy(self)
    # `me` is this session, held weakly: the callback reaches its own method.
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
      self._hooked = HookedSession(self._hooks)
      self._agreement = session_agreement.SessionAgreement.of(options.agreed_stop, self._hooked)
      self._coordinated_creator = self._CoordinatedSessionCreator(
          session_creator=session_creator or ChiefSessionCreator(),
          hooked=self._hooked,
          stop_grace_period_secs=stop_grace_period_secs,
          stop_policy=self._preemption)
      if should_recover:  # the layers keep TF's private class names
        self._sess = session_layers._RecoverableSession(  # pylint: disable=protected-access
            self._coordinated_creator, options.recovery, self._preemption)
      else:
        self._sess = self._coordinated_creator.create_session()
    except BaseException:
      self._preemption.release()  # no close will put the signal handlers back
      raise
    self._fast_run = self._fast_path()

  def _fast_path(self):
    """The fast path, the one way into run() (docs/design.md, "The fast
    path"): a native FastRun, which steps the hooked session itself when it
    can (plain fetches, no feeds or options: no Python at all when every
    hook is native) and otherwise hands the call to the layers, as does
    every failure (their run_failed). When run() is not overridden, the
    instance's `run` is FastRun's vectorcall entry, chosen here once: no
    Python frame and no pybind11 dispatch per step; calls it does not take
    as they are go on to the class's run(), so their errors are Python's
    own. It reaches back only through a weak proxy (a native object in a
    reference cycle would never be collected)."""
    # pylint: disable=protected-access
    # (`me` is this session, held weakly: the callbacks reach its own chain.)
    me = weakref.proxy(self)
    hooked = self._hooked
    fast_run = _native.FastRun(
        hooked.native, fetches_lib.LEAF_TYPES, hooked.fast_layout,
        hooked.step_state if hooked.has_python_hooks else None,
        # After close, _sess is None and these raise AttributeError, as TF's run.
        lambda *args: me._sess.run(*args),
        lambda error, fetches: me._sess.run_failed(error, fetches))
    if type(self).run is _MonitoredSession.run:  # not overridden by a subclass
      self.run = _native.fast_run_entry(
          fast_run, lambda *args, **kwargs: _MonitoredSession.run(me, *args, **kwargs))
    return fast_run

  def _stop_after_step_in_flight(self, exit_code):
    """A stop signal arrived (in its handler), meaning `exit_code`: the
    step in flight, if any, is the last one, unless the agreed stop has the
    ranks vote (session_agreement.stop_on_signal decides)."""
    session_agreement.stop_on_signal(self._agreement, self._hooked, exit_code)

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
    return self._hooked.cost_report()

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
      self._stop_grace_period_secs = stop_grace_period_secs

    # TF's creator keeps the raw session and its coordinator as `tf_sess` and
    # `coord` (None once closed); code reads them there, fastmts asks the layers.
    @property
    def tf_sess(self):
      return self._hooked.tf_sess

    @property
    def coord(self):
      return self._hooked.coord

    def create_session(self):
      with session_layers.creating_with(self._stop_policy):  # its waits ask the policy
        tf_sess = self._session_creator.create_session()
      coord = Coordinator(clean_stop_exception_types=[])
      queue_runners = None
      if not python_hooked_session.runs_natively(tf_sess):
        # A wrapped session: TF's own queue-runner threads, through its run.
        queue_runner.start_tf_queue_runners(tf_sess, coord)
      else:
        queue_runner.start_tf_queue_runners(tf_sess, coord, with_threads=False)
        if ops.get_collection(ops.GraphKeys.QUEUE_RUNNERS):
          queue_runners = QueueRunners(tf_sess, coord)
      try:
        self._hooked.attach(tf_sess, coord)  # hooks' after_create_session
      except Exception:
        # TF leaves its queue-runner threads running forever when a hook
        # fails here; nothing fastmts started outlives the failed creation.
        if queue_runners is not None:
          queue_runners.shut_down(coord, session_layers.QUEUE_RUNNER_STOP_SECS)
        # TF wrote the start's graph files before what failed (a hook after
        # the saver's, the first save): on disk when the error is raised. An
        # error writing them is what TF would have raised first.
        graph_files.wait_and_raise(tf_sess.graph)
        raise
      # The layers keep TF's private class names.
      return session_layers._CoordinatedSession(  # pylint: disable=protected-access
          self._hooked, coord, queue_runners, self._stop_grace_period_secs,
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
    tf_sess = self._tf_sess()
    graph = ops.get_default_graph() if tf_sess is None else tf_sess.graph
    try:
      self._hooked.write_hook_state_to_tf_hooks()
      if not exception_type:
        self._hooked.end()
      if self._agreement is not None:
        self._agreement.barrier(tf_sess)
    finally:
      report = self._hooked.cost_report()
      if report is not None and self._sess is not None:
        logging.info('fastmts hook cost report at close:\n%s', report)
      try:
        if self._sess is None:
          raise RuntimeError('Session is already closed.')
        self._sess.close()
      finally:
        self._sess = None
        if not self._graph_was_finalized:
          # As TF's close: a graph it finalized is open again (TF's private call).
          ops.get_default_graph()._unsafe_unfinalize()  # pylint: disable=protected-access
        # The start's graph files (graph_files) on disk before close returns.
        graph_files.wait_all(graph)
    graph_files.raise_error(graph)

  @property
  def coordinator(self):
    """The Coordinator of the current session (None when closed): its
    threads stop when it does; hooks get it in after_create_session."""
    return None if self._sess is None else self._sess.coordinator

  @property
  def queue_runner_threads(self):
    """The threads running the graph's QueueRunners (native ones, thread-
    like: name, is_alive(), join(); Python threading.Threads for runners
    that run their own loop); empty when there are none or when closed."""
    return [] if self._sess is None else self._sess.queue_runner_threads

  def _is_closed(self):
    """True once closed (for tests, as in TF)."""
    return self._tf_sess() is None

  def _tf_sess(self):
    """The underlying tf.compat.v1.Session (None when closed)."""
    return None if self._sess is None else self._sess.raw_session


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
  fastmts only: `options`, a fastmts.SessionOptions, or the keywords
  `recovery`, `end_on_interrupt` and `agreed_stop`.
  """

  def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120, *,
               options=None, **fastmts_options):
    options = SessionOptions.of(options, fastmts_options, 'MonitoredSession', SESSION_KEYWORDS)
    super().__init__(session_creator, hooks, should_recover=True,
                     stop_grace_period_secs=stop_grace_period_secs, options=options)


class SingularMonitoredSession(_MonitoredSession, _tf_monitored_session.SingularMonitoredSession,
                               metaclass=class_identity.StandsFor,
                               stands_for=_tf_monitored_session.SingularMonitoredSession):
  """Like `MonitoredSession`, always a chief, no recovery, with `raw_session()`.
  fastmts only: `options`, or the keywords `end_on_interrupt` and
  `agreed_stop` (its recovery is None: it never re-creates its session)."""

  def __init__(self, hooks=None, scaffold=None, master='', config=None, checkpoint_dir=None,
               stop_grace_period_secs=120, checkpoint_filename_with_path=None, *,
               options=None, **fastmts_options):
    options = SessionOptions.of(options, fastmts_options, 'SingularMonitoredSession',
                                SESSION_KEYWORDS)
    if options.recovery is not None:
      raise ValueError('SingularMonitoredSession never re-creates its session: its recovery '
                       'must be None, got %r' % (options.recovery,))
    session_creator = ChiefSessionCreator(
        scaffold=scaffold, master=master, config=config, checkpoint_dir=checkpoint_dir,
        checkpoint_filename_with_path=checkpoint_filename_with_path)
    super().__init__(session_creator, hooks, should_recover=False,
                     stop_grace_period_secs=stop_grace_period_secs, options=options)

  def raw_session(self):
    """Returns underlying `TensorFlow.Session` object."""
    return self._tf_sess()
