"""TF's stock hooks, run natively.

fastmts exports TF's own hook classes, so constructors, argument checks and
begin() (graph work, before the graph is finalized) are TF's. When an
instance of exactly such a class reaches a fastmts monitored session, its
per-step work runs in C++ instead of its Python methods; a subclass (which
may override anything) runs through the Python dispatch unchanged.
"""
import weakref

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import basic_session_run_hooks as _tf_hooks

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import async_checkpoint as async_checkpoint_lib
from fastmts._internal import fetches as fetches_lib
from fastmts._internal import checkpoint_saver
from fastmts._internal import class_identity
from fastmts.file_formats import event_file_writer
from fastmts import preemption
from fastmts.session_run_hook import SessionRunArgs
from fastmts.session_run_hook import SessionRunContext
from fastmts.session_run_hook import SessionRunValues
from fastmts._internal.tf_call_sites import TFSite

StopAtStepHook = _tf_hooks.StopAtStepHook
NanTensorHook = _tf_hooks.NanTensorHook
LoggingTensorHook = _tf_hooks.LoggingTensorHook
NanLossDuringTrainingError = _tf_hooks.NanLossDuringTrainingError
SecondOrStepTimer = _tf_hooks.SecondOrStepTimer
CheckpointSaverListener = _tf_hooks.CheckpointSaverListener
StepCounterHook = _tf_hooks.StepCounterHook
SummarySaverHook = _tf_hooks.SummarySaverHook
GlobalStepWaiterHook = _tf_hooks.GlobalStepWaiterHook
FinalOpsHook = _tf_hooks.FinalOpsHook
FeedFnHook = _tf_hooks.FeedFnHook
ProfilerHook = _tf_hooks.ProfilerHook


class CheckpointSaverHook(_tf_hooks.CheckpointSaverHook, metaclass=class_identity.StandsFor,
                          stands_for=_tf_hooks.CheckpointSaverHook):
  """TF's CheckpointSaverHook (same arguments, files and log lines), with
  one fastmts argument:

    async_checkpoint: keyword only, default False. When True, a save only
      takes a snapshot of the saved variables at that step, and a native
      thread writes the checkpoint (the same files, TF's own save ops); see
      fastmts/_internal/async_checkpoint.py for exactly where that differs.

  Its session-side methods are fastmts's (native graph.pbtxt, the meta graph
  exported once), whichever monitored session runs it.
  """

  def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
               checkpoint_basename='model.ckpt', scaffold=None, listeners=None,
               save_graph_def=True, *, async_checkpoint=False):
    super().__init__(checkpoint_dir, save_secs=save_secs, save_steps=save_steps, saver=saver,
                     checkpoint_basename=checkpoint_basename, scaffold=scaffold,
                     listeners=listeners, **save_graph_def_argument(save_graph_def))
    self._fastmts_async = async_checkpoint_lib.AsyncCheckpoints() if async_checkpoint else None

  def after_create_session(self, session, coord):
    """TF's: graph.pbtxt and the first save, the meta graph exported once."""
    checkpoint_saver.after_create_session(self, session)

  def before_run(self, run_context):
    """TF's, after delivering an asynchronous write that has ended (its
    listeners' stop request becomes the step's)."""
    if self._fastmts_async is not None and self._fastmts_async.deliver(wait=False):
      run_context.request_stop()
    return super().before_run(run_context)

  def _save(self, session, step):
    return checkpoint_saver.save(self, session, step)

  def end(self, session):
    """TF's final save, after the write in flight is delivered."""
    checkpoint_saver.end(self, session)


def save_graph_def_argument(save_graph_def):
  """TF's CheckpointSaverHook's save_graph_def argument: {} where TF's hook
  has none (1.15, which always writes the graph), unless it asks for what
  that hook cannot do."""
  if _tensorflow.SAVER_HOOK_TAKES_SAVE_GRAPH_DEF:
    return {'save_graph_def': save_graph_def}
  if not save_graph_def:
    raise TypeError('save_graph_def=%r: the CheckpointSaverHook of TensorFlow %s always '
                    'saves the graph' % (save_graph_def, _tensorflow.VERSION))
  return {}


def _optional_float(value):
  return None if value is None else float(value)


def _output(tensor):
  return tensor.op._c_op, tensor.value_index  # pylint: disable=protected-access


def _step_type(hook):
  """The type TF gives the steps its hook keeps (the global step's dtype)."""
  return hook._global_step_tensor.dtype.as_numpy_dtype  # pylint: disable=protected-access


class HookStateSync:
  """Keeps the state a stock hook keeps on TF's hook object and the copy its
  native hook keeps in step: TF's timer (`_timer`) and the fields named in
  `fields` (pairs of TF's attribute and the native hook's property).

  The native hook moves its copy on the steps no Python runs; TF's object is
  brought up to it (`to_tf_hook`) before TF's code reads it and when the
  session closes. TF's code that may move TF's timer runs inside
  `running_tf_code()`, which copies TF's timer into the native hook
  afterwards, even if that code raised: TF's timer is the reference.
  """

  __slots__ = ('_tf_hook', '_as_step', '_fields', 'native_hook')

  def __init__(self, tf_hook, as_step, fields=()):
    self._tf_hook = tf_hook
    self._as_step = as_step  # the type of the steps TF keeps
    self._fields = tuple(fields)
    self.native_hook = None  # set once the native hook is made

  def to_tf_hook(self):
    """TF's object where the native hook is: its fields, and its timer once
    the native timer has fired."""
    native, as_step = self.native_hook, self._as_step
    for tf_name, native_name in self._fields:
      value = getattr(native, native_name)
      setattr(self._tf_hook, tf_name, None if value is None else as_step(value))
    last_step, last_time = native.timer_state
    if last_step is not None:
      self.set_tf_timer(last_step, last_time)

  def set_tf_timer(self, last_step, last_time):
    """TF's timer set to a state the native timer had."""
    timer = self._tf_hook._timer  # pylint: disable=protected-access
    timer._last_triggered_step = None if last_step is None else self._as_step(last_step)  # pylint: disable=protected-access
    timer._last_triggered_time = last_time  # pylint: disable=protected-access

  def tf_timer_to_native(self):
    """The native timer set to TF's."""
    timer = self._tf_hook._timer  # pylint: disable=protected-access
    self.native_hook.set_timer_state(timer._last_triggered_step,  # pylint: disable=protected-access
                                     timer._last_triggered_time or 0.0)  # pylint: disable=protected-access

  def running_tf_code(self):
    """`with sync.running_tf_code():` around TF's own code of the hook."""
    return _RunningTFCode(self)


class _RunningTFCode:
  """HookStateSync.running_tf_code's context (a class, not a generator: it
  runs inside the loop, on the steps where a hook acts)."""

  __slots__ = ('_sync',)

  def __init__(self, sync):
    self._sync = sync

  def __enter__(self):
    self._sync.to_tf_hook()

  def __exit__(self, *exc_info):
    self._sync.tf_timer_to_native()
    return False


class NativeRunner:
  """Runs one begun stock hook (TF's object, `tf_hook`) natively: it makes
  the hook's native hook (`native_hook`, which the HookedSession dispatches)
  and holds the calls into TF's own code of that hook.

  `hooked` is the HookedSession (held weakly): its `tf_sess` is the session
  of the moment. A runner whose hook keeps state on TF's object has a
  HookStateSync (`state`). The native hook's callbacks hold the runner only
  weakly (`self._weak`): a cycle through a native object is invisible to the
  garbage collector.
  """

  state = None

  def __init__(self, tf_hook, hooked):
    self.tf_hook = tf_hook
    self.hooked = hooked
    self._weak = weakref.proxy(self)
    self.native_hook = None

  # `accepts(hook)` (a staticmethod), where defined, says which instances of
  # the class run natively; without it every instance does.

  def write_state_to_tf_hook(self):
    """At close, before any end(): TF's object gets the state the native hook
    kept, so it holds it even when no end() runs."""
    if self.state is not None:
      self.state.to_tf_hook()

  def on_session_attached(self):
    """After the native dispatch is bound to a new TF session."""


class _NativeStopAtStepHook(NativeRunner):
  """StopAtStepHook: the global step compared natively with the last step."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    as_step = _step_type(tf_hook)
    num_steps = tf_hook._num_steps  # pylint: disable=protected-access
    last_step = tf_hook._last_step  # pylint: disable=protected-access

    def on_last_step(value):
      # TF's hook computes _last_step (global step + num_steps, a numpy int)
      # in its first after_create_session and keeps it; so does the object
      # here, so reusing it behaves as in TF.
      tf_hook._last_step = as_step(value)  # pylint: disable=protected-access

    self.native_hook = _native.StopAtStepHook(
        global_step=_output(tf_hook._global_step_tensor),  # pylint: disable=protected-access
        num_steps=0 if num_steps is None else int(num_steps),
        last_step=None if last_step is None else int(last_step), on_last_step=on_last_step)


# TF's NanTensorHook.after_run logs from these lines.
_LOG_NAN_ERROR = TFSite(_tf_hooks.NanTensorHook.after_run, 'logging.error(')
_LOG_NAN_WARNING = TFSite(_tf_hooks.NanTensorHook.after_run, 'logging.warning(')


class _NativeNanTensorHook(NativeRunner):
  """NanTensorHook; the rare NaN path logs (and raises) as TF does."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    fail = bool(tf_hook._fail_on_nan_loss)  # pylint: disable=protected-access

    def on_nan():
      failure_message = 'Model diverged with loss = NaN.'
      if fail:
        _LOG_NAN_ERROR.call(logging.error, failure_message)
        raise NanLossDuringTrainingError
      _LOG_NAN_WARNING.call(logging.warning, failure_message)

    self.native_hook = _native.NanTensorHook(loss=_output(tf_hook._loss_tensor),  # pylint: disable=protected-access
                                             fail_on_nan_loss=fail, on_nan=on_nan)

  @staticmethod
  def accepts(hook):
    # TF's np.isnan works on any float loss; the native check on float scalars.
    loss = getattr(hook, '_loss_tensor', None)
    return (isinstance(loss, _tensorflow.Tensor) and loss.shape.rank == 0 and
            loss.dtype.base_dtype in (dtypes.float16, dtypes.bfloat16, dtypes.float32,
                                      dtypes.float64))


class _NativeLoggingTensorHook(NativeRunner):
  """LoggingTensorHook: trigger decisions native; logging itself is TF's own
  _log_tensors on the hook object, so lines and formats are TF's. With TF's
  default formatting, a firing step whose line TF's logger would not print
  only moves the timer, natively (see native_hooks.h)."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    plan = fetches_lib.PlanCache(ops.get_default_graph(), None).fetch_plan(
        tf_hook._current_tensors)  # pylint: disable=protected-access
    self.state = HookStateSync(tf_hook, int, fields=[('_iter_count', 'iter_count')])
    me = self._weak

    def log(iter_count, values):
      with me.state.running_tf_code():
        tf_hook._iter_count = iter_count  # pylint: disable=protected-access
        tf_hook._log_tensors(plan.build(values))  # pylint: disable=protected-access

    def end():
      me.state.to_tf_hook()
      tf_hook.end(me.hooked.tf_sess)  # TF's own: logs once more when at_end

    self.native_hook = self.state.native_hook = _native.LoggingTensorHook(
        tensors=plan.native, timer=_timer_config(tf_hook._timer),  # pylint: disable=protected-access
        log=log, end=end)
    # A formatter is the user's code, and may do more than format.
    if tf_hook._formatter is None and '_log_tensors' not in vars(tf_hook):  # pylint: disable=protected-access
      self.native_hook.set_quiet_unless_logged_by(logging.get_logger())

  @staticmethod
  def accepts(hook):
    timer = getattr(hook, '_timer', None)
    return type(timer) in (_tf_hooks.SecondOrStepTimer, _tf_hooks.NeverTriggerTimer)


def _timed_on_integer_global_step(hook):
  """Whether a hook that follows the global step with TF's timer
  (CheckpointSaverHook, StepCounterHook, SummarySaverHook, ProfilerHook)
  can run natively: TF's SecondOrStepTimer on an integer global step."""
  step = getattr(hook, '_global_step_tensor', None)
  return (type(getattr(hook, '_timer', None)) is _tf_hooks.SecondOrStepTimer and
          step is not None and step.dtype.base_dtype.is_integer)


def _timer_config(timer):
  """The native `timer` keyword of TF's timer: (every_secs, every_steps, never)."""
  if isinstance(timer, _tf_hooks.NeverTriggerTimer):
    return None, None, True
  return (_optional_float(timer._every_secs), _optional_float(timer._every_steps),  # pylint: disable=protected-access
          False)


class _NativeCheckpointSaverHook(NativeRunner):
  """CheckpointSaverHook: the global step fetched and its gate kept natively;
  Python runs only when the gate opens, and then TF's own timer and `_save`,
  so files and log lines are TF's; after_create_session and end are
  fastmts's (checkpoint_saver.py). The user's listeners get TF's raw
  session, as in TF."""

  accepts = staticmethod(_timed_on_integer_global_step)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    timer = tf_hook._timer  # pylint: disable=protected-access
    as_step = _step_type(tf_hook)
    self.state = HookStateSync(tf_hook, as_step)
    me = self._weak

    def save(fresh_step):
      # The body of TF's after_run once the gate opened for the fresh step.
      global_step = as_step(fresh_step)
      with me.state.running_tf_code():
        if not timer.should_trigger_for_step(global_step):  # TF's clock decides
          return False
        timer.update_last_triggered_step(global_step)
        return bool(checkpoint_saver.save(tf_hook, me.hooked.tf_sess, global_step))

    def after_create_session():
      with me.state.running_tf_code():
        checkpoint_saver.after_create_session(tf_hook, me.hooked.tf_sess)

    def end():
      with me.state.running_tf_code():
        checkpoint_saver.end(tf_hook, me.hooked.tf_sess)

    writes = getattr(tf_hook, '_fastmts_async', None)
    self.native_hook = self.state.native_hook = _native.CheckpointSaverHook(
        global_step=_output(tf_hook._global_step_tensor), timer=_timer_config(timer),  # pylint: disable=protected-access
        steps_per_run=int(tf_hook._steps_per_run),  # pylint: disable=protected-access
        save=save, after_create_session=after_create_session, end=end,
        writer=None if writes is None else writes.native,
        deliver_write=None if writes is None else lambda: writes.deliver(wait=False))


class _NativeStepCounterHook(NativeRunner):
  """StepCounterHook: the global step fetched, its gate kept and the step
  rates counted natively; TF's own `_log_and_record` writes them (handed
  over in batches inside run_steps, see native_hooks.h), or the native
  summary writer does when TF's log line would not print; for a stuck step
  TF's whole after_run runs; after_create_session and end are TF's."""

  accepts = staticmethod(_timed_on_integer_global_step)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    as_step = _step_type(tf_hook)
    self.state = HookStateSync(tf_hook, as_step,
                               fields=[('_last_global_step', 'last_step')])
    me = self._weak

    def after_run_stuck(stale_step):
      # TF's after_run compares with _last_global_step: the sync sets it.
      run_context = SessionRunContext(original_args=SessionRunArgs(None),
                                      session=me.hooked.stock_hook_session)
      with me.state.running_tf_code():
        tf_hook.after_run(run_context, SessionRunValues(
            results=as_step(stale_step), options=config_pb2.RunOptions(),
            run_metadata=config_pb2.RunMetadata()))
      return run_context.stop_requested

    def after_create_session():
      with me.state.running_tf_code():
        tf_hook.after_create_session(me.hooked.tf_sess, me.hooked.coord)

    def end():
      with me.state.running_tf_code():
        tf_hook.end(me.hooked.tf_sess)

    last = getattr(tf_hook, '_last_global_step', None)
    self.native_hook = self.state.native_hook = _native.StepCounterHook(
        global_step=_output(tf_hook._global_step_tensor), timer=_timer_config(tf_hook._timer),  # pylint: disable=protected-access
        steps_per_run=int(tf_hook._steps_per_run),  # pylint: disable=protected-access
        last_step=None if last is None else int(last), after_run_stuck=after_run_stuck,
        record=lambda *batch: me._record(*batch),  # pylint: disable=protected-access
        after_create_session=after_create_session, end=end)
    native_writer = (None if tf_hook._summary_writer is None else  # pylint: disable=protected-access
                     event_file_writer.summary_writer_of(tf_hook._summary_writer))  # pylint: disable=protected-access
    if native_writer is not None:
      self.native_hook.set_summary_writer(native_writer, tf_hook._summary_tag,  # pylint: disable=protected-access
                                          logging.get_logger())

  def _record(self, rates, timer_last_step, timer_last_time):
    """The rest of TF's after_run for each step where its timer fired (values
    typed as TF computes them), then TF's timer where the native one was; or,
    when a record fails, where TF's timer stopped, at that record (the native
    one goes back there too: the records after it were never written)."""
    as_step = _step_type(self.tf_hook)
    try:
      for elapsed_steps, elapsed_secs, global_step, triggered_at in rates:
        try:
          self.tf_hook._log_and_record(as_step(elapsed_steps), elapsed_secs, as_step(global_step))  # pylint: disable=protected-access
        except BaseException:
          timer_last_step, timer_last_time = global_step, triggered_at
          self.native_hook.set_timer_state(timer_last_step, timer_last_time)
          raise
    finally:
      self.state.set_tf_timer(timer_last_step, timer_last_time)


# The ops whose output is a Summary TF's C++ serialized (MergeSummary parses
# its inputs and serializes them again).
_SUMMARY_OP_TYPES = frozenset((
    'MergeSummary', 'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummary',
    'AudioSummaryV2', 'TensorSummary', 'TensorSummaryV2'))


def _run_tf_after_run(runner, stale_step, next_step, due, results, options, run_metadata):
  """TF's after_run of a scheduled hook (SummarySaverHook, ProfilerHook) on
  the hook object, set as TF's before_run left it; returns the step it
  expects next, as the native schedule keeps it."""
  tf_hook, as_step = runner.tf_hook, _step_type(runner.tf_hook)
  with runner.state.running_tf_code():
    tf_hook._next_step = None if next_step is None else as_step(next_step)  # pylint: disable=protected-access
    tf_hook._request_summary = due  # pylint: disable=protected-access
    results['global_step'] = as_step(stale_step)
    run_context = SessionRunContext(original_args=SessionRunArgs(None),
                                    session=runner.hooked.stock_hook_session)
    tf_hook.after_run(run_context, SessionRunValues(results=results, options=options,
                                                    run_metadata=run_metadata))
  next_step = tf_hook._next_step  # pylint: disable=protected-access
  return None if next_step is None else int(next_step)


class _NativeSummarySaverHook(NativeRunner):
  """SummarySaverHook: the global step fetched and the schedule kept
  natively; on due steps (and its first) the summaries are fetched and
  written natively when TF's summary ops serialized them, else TF's own
  after_run writes them, so event files and log lines are TF's."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self.state = HookStateSync(tf_hook, _step_type(tf_hook), fields=[('_next_step', 'next_step')])
    self._summary_plan = None
    me = self._weak

    def after_run(stale_step, next_step, due, summaries):
      results = {}
      if summaries is not None and me._summary_plan is not None:  # pylint: disable=protected-access
        results['summary'] = me._summary_plan.build(summaries)  # pylint: disable=protected-access
      return _run_tf_after_run(me, stale_step, next_step, due, results,
                               config_pb2.RunOptions(), config_pb2.RunMetadata())

    self.native_hook = self.state.native_hook = _native.SummarySaverHook(
        global_step=_output(tf_hook._global_step_tensor), timer=_timer_config(tf_hook._timer),  # pylint: disable=protected-access
        after_run=after_run, end=lambda: tf_hook.end(me.hooked.tf_sess))

  def on_session_attached(self):
    # The Scaffold's summary op exists once the session is created.
    summary_op = self.tf_hook._get_summary_op()  # pylint: disable=protected-access
    self._summary_plan = None if summary_op is None else self.hooked.plans.fetch_plan(summary_op)
    self.native_hook.set_summaries(None if summary_op is None else self._summary_plan.native)
    # Summaries a TF summary op serialized are written natively; bytes from
    # elsewhere (a constant, a py_func) are TF's Python's to parse.
    if all(tensor.op.type in _SUMMARY_OP_TYPES for tensor in summary_op or ()):
      self.native_hook.set_summary_writer(
          event_file_writer.summary_writer_of(self.tf_hook._summary_writer))  # pylint: disable=protected-access

  @staticmethod
  def accepts(hook):
    # Without a writer TF's SummarySaverHook fetches summaries every step and
    # drops them; rare enough to leave to Python.
    return _timed_on_integer_global_step(hook) and bool(hook._summary_writer)  # pylint: disable=protected-access


class _NativeProfilerHook(NativeRunner):
  """ProfilerHook: the global step fetched and the schedule kept natively; a
  due step asks for a full trace and TF's own after_run writes the
  timeline, so timelines and log lines are TF's."""

  accepts = staticmethod(_timed_on_integer_global_step)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self.state = HookStateSync(tf_hook, _step_type(tf_hook), fields=[('_next_step', 'next_step')])
    me = self._weak

    def after_run(stale_step, next_step, due, run_metadata):
      metadata = config_pb2.RunMetadata()
      if run_metadata is not None:
        metadata.ParseFromString(run_metadata)
      options = config_pb2.RunOptions()
      if due:
        options.trace_level = config_pb2.RunOptions.FULL_TRACE
      return _run_tf_after_run(me, stale_step, next_step, due, {}, options, metadata)

    self.native_hook = self.state.native_hook = _native.ProfilerHook(
        global_step=_output(tf_hook._global_step_tensor), timer=_timer_config(tf_hook._timer),  # pylint: disable=protected-access
        after_run=after_run, end=lambda: tf_hook.end(me.hooked.tf_sess))


class _NativeFinalOpsHook(NativeRunner):
  """FinalOpsHook has no per-step work; TF's own end() runs the final ops,
  so final_ops_values is set on the user's hook object."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    me = self._weak
    self.native_hook = _native.EndOnlyHook(end=lambda: tf_hook.end(me.hooked.tf_sess))


class _NativeFeedFnHook(NativeRunner):
  """FeedFnHook: the user's feed_fn (read from the hook each step, as TF
  does) is called natively before each step and its feeds merged natively."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    me = self._weak
    self.native_hook = _native.FeedFnHook(
        feeds=lambda: me.hooked.plans.hook_feeds(tf_hook.feed_fn()))


class _NativeGlobalStepWaiterHook(NativeRunner):
  """GlobalStepWaiterHook: TF's own before_run (which polls the global step
  and logs) runs until the worker has started; then nothing runs."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    me = self._weak

    def wait():
      if not tf_hook._worker_is_started:  # pylint: disable=protected-access
        tf_hook.before_run(SessionRunContext(original_args=SessionRunArgs(None),
                                             session=me.hooked.tf_sess))
      return bool(tf_hook._worker_is_started)  # pylint: disable=protected-access

    self.native_hook = _native.GlobalStepWaiterHook(wait=wait)


# Exact classes only: a subclass may override anything and runs in Python.
_NATIVE_RUNNER_OF_CLASS = {
    preemption.PreemptionHook: preemption.NativePreemptionHook,
    _tf_hooks.StopAtStepHook: _NativeStopAtStepHook,
    _tf_hooks.NanTensorHook: _NativeNanTensorHook,
    _tf_hooks.LoggingTensorHook: _NativeLoggingTensorHook,
    _tf_hooks.CheckpointSaverHook: _NativeCheckpointSaverHook,
    CheckpointSaverHook: _NativeCheckpointSaverHook,
    _tf_hooks.StepCounterHook: _NativeStepCounterHook,
    _tf_hooks.SummarySaverHook: _NativeSummarySaverHook,
    _tf_hooks.ProfilerHook: _NativeProfilerHook,
    _tf_hooks.FinalOpsHook: _NativeFinalOpsHook,
    _tf_hooks.FeedFnHook: _NativeFeedFnHook,
    _tf_hooks.GlobalStepWaiterHook: _NativeGlobalStepWaiterHook,
}


def native_runner_of(hook, hooked):
  """The NativeRunner of a begun stock hook, or None to run it in Python.

  `hooked` is the HookedSession (a weak proxy); its `tf_sess` is the session
  of the moment.
  """
  runner_class = _NATIVE_RUNNER_OF_CLASS.get(type(hook))
  # A runner class without `accepts` takes every instance of its class.
  if runner_class is None or not getattr(runner_class, 'accepts', lambda hook: True)(hook):
    return None
  return runner_class(hook, hooked)
