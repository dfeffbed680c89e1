"""TF's stock hooks, run natively.

fastmts exports TF's own hook classes, so constructors, argument checks and
begin() (graph work, before the graph is finalized) are TF's. When an
instance of exactly such a class reaches a fastmts monitored session, its
per-step work runs in C++ instead of its Python methods; a subclass (which
may override anything) runs through the Python dispatch unchanged.
"""
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import basic_session_run_hooks as _tf_hooks

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import async_checkpoint as async_checkpoint_lib
from fastmts._internal import c_handles
from fastmts._internal import checkpoint_saver
from fastmts._internal import class_identity
from fastmts._internal import fetches as fetches_lib
from fastmts._internal.native_runner import HookStateSync
from fastmts._internal.native_runner import NativeRunner
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
  exported once), whichever monitored session runs it: those of its
  CheckpointSaver (checkpoint_saver.saver_of), asynchronous or not.
  """

  def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
               checkpoint_basename='model.ckpt', scaffold=None, listeners=None,
               save_graph_def=True, *, async_checkpoint=False):
    super().__init__(checkpoint_dir, save_secs=save_secs, save_steps=save_steps, saver=saver,
                     checkpoint_basename=checkpoint_basename, scaffold=scaffold,
                     listeners=listeners, **save_graph_def_argument(save_graph_def))
    saver_class = (async_checkpoint_lib.AsyncCheckpointSaver if async_checkpoint else
                   checkpoint_saver.CheckpointSaver)
    checkpoint_saver.set_saver_of(self, saver_class(self))

  def after_create_session(self, session, coord):
    """TF's: graph.pbtxt and the first save, the meta graph exported once."""
    checkpoint_saver.saver_of(self).after_create_session(session)

  def before_run(self, run_context):
    """TF's, after delivering a background write that has ended (its
    listeners' stop request becomes the step's)."""
    if checkpoint_saver.saver_of(self).deliver_write(wait=False):
      run_context.request_stop()
    return super().before_run(run_context)

  def _save(self, session, step):
    return checkpoint_saver.saver_of(self).save(session, step)

  def end(self, session):
    """TF's final save, after the write in flight is delivered."""
    checkpoint_saver.saver_of(self).end(session)


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


# What the runners below read of TF's hooks' configuration. TF's hooks keep
# it in private attributes (set by their constructors and begin()), and
# TF's own methods of the hook, which the runners stand in for, read it there.
# pylint: disable=protected-access


def _global_step(hook):
  """The native `global_step` keyword: the hook's global step tensor."""
  return c_handles.output_of(hook._global_step_tensor)


def _step_type(hook):
  """The type TF gives the steps its hook keeps (the global step's dtype)."""
  return hook._global_step_tensor.dtype.as_numpy_dtype


def _timer_of(hook):
  """The hook's SecondOrStepTimer (or NeverTriggerTimer)."""
  return hook._timer


def _steps_per_run(hook):
  """The steps one run makes (the native `steps_per_run` keyword)."""
  return int(hook._steps_per_run)


def _timer_config(timer):
  """The native `timer` keyword of TF's timer: (every_secs, every_steps, never)."""
  if isinstance(timer, _tf_hooks.NeverTriggerTimer):
    return None, None, True
  return _optional_float(timer._every_secs), _optional_float(timer._every_steps), False


def _timed_on_integer_global_step(hook):
  """Whether a hook that follows the global step with TF's timer
  (CheckpointSaverHook, StepCounterHook, SummarySaverHook, ProfilerHook)
  can run natively: TF's SecondOrStepTimer on an integer global step."""
  step = getattr(hook, '_global_step_tensor', None)
  return (type(getattr(hook, '_timer', None)) is _tf_hooks.SecondOrStepTimer and
          step is not None and step.dtype.base_dtype.is_integer)


# pylint: enable=protected-access


def _optional_float(value):
  return None if value is None else float(value)


class _NativeStopAtStepHook(NativeRunner):
  """StopAtStepHook: the global step compared natively with the last step."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    # pylint: disable=protected-access
    # (TF's StopAtStepHook keeps its configuration in private attributes.)
    num_steps, last_step = tf_hook._num_steps, tf_hook._last_step
    self.state = HookStateSync(tf_hook, _step_type(tf_hook), timer=False)
    self.native_hook = self.state.native_hook = _native.StopAtStepHook(
        global_step=_global_step(tf_hook), num_steps=0 if num_steps is None else int(num_steps),
        last_step=None if last_step is None else int(last_step), on_last_step=self._on_last_step)

  def _on_last_step(self, value):
    # TF's hook computes _last_step (global step + num_steps, a numpy int)
    # in its first after_create_session and keeps it; so does the object
    # here, so reusing it behaves as in TF.
    self.state.set_tf_step('_last_step', value)


# TF's NanTensorHook.after_run logs from these lines.
_LOG_NAN_ERROR = TFSite(_tf_hooks.NanTensorHook.after_run, 'logging.error(')
_LOG_NAN_WARNING = TFSite(_tf_hooks.NanTensorHook.after_run, 'logging.warning(')


class _NativeNanTensorHook(NativeRunner):
  """NanTensorHook; the rare NaN path logs (and raises) as TF does."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    # pylint: disable=protected-access
    # (TF's NanTensorHook keeps its configuration in private attributes.)
    self._fail = bool(tf_hook._fail_on_nan_loss)
    self.native_hook = _native.NanTensorHook(loss=c_handles.output_of(tf_hook._loss_tensor),
                                             fail_on_nan_loss=self._fail, on_nan=self._on_nan)

  def _on_nan(self):
    failure_message = 'Model diverged with loss = NaN.'
    if self._fail:
      _LOG_NAN_ERROR.call(logging.error, failure_message)
      raise NanLossDuringTrainingError
    _LOG_NAN_WARNING.call(logging.warning, failure_message)

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

  # pylint: disable=protected-access
  # (TF's LoggingTensorHook keeps its tensors and formatter in private
  # attributes, and logs in its private _log_tensors.)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self._plan = fetches_lib.PlanCache(ops.get_default_graph(), None).fetch_plan(
        tf_hook._current_tensors)
    self.state = HookStateSync(tf_hook, int, fields=[('_iter_count', 'iter_count')])
    self.native_hook = self.state.native_hook = _native.LoggingTensorHook(
        tensors=self._plan.native, timer=_timer_config(_timer_of(tf_hook)),
        log=self._log, end=self._end)
    # A formatter is the user's code, and may do more than format.
    if tf_hook._formatter is None and '_log_tensors' not in vars(tf_hook):
      self.native_hook.set_quiet_unless_logged_by(logging.get_logger())

  def _log(self, iter_count, values):
    with self.state.running_tf_code():
      self.state.set_tf_step('_iter_count', iter_count)
      self.tf_hook._log_tensors(self._plan.build(values))

  def _end(self):
    self.state.to_tf_hook()
    self.tf_hook.end(self.hooked.tf_sess)  # TF's own: logs once more when at_end

  @staticmethod
  def accepts(hook):
    timer = getattr(hook, '_timer', None)
    return type(timer) in (_tf_hooks.SecondOrStepTimer, _tf_hooks.NeverTriggerTimer)


class _NativeCheckpointSaverHook(NativeRunner):
  """CheckpointSaverHook: the global step fetched and its gate kept natively;
  Python runs only when the gate opens, and then TF's own timer and the
  hook's CheckpointSaver (checkpoint_saver.py: synchronous or in the
  background), so files and log lines are TF's; after_create_session and
  end are the saver's too. The user's listeners get TF's raw session, as in
  TF."""

  accepts = staticmethod(_timed_on_integer_global_step)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self._saver = checkpoint_saver.saver_of(tf_hook)
    self._timer = _timer_of(tf_hook)
    self._as_step = _step_type(tf_hook)
    self.state = HookStateSync(tf_hook, self._as_step)
    writer = self._saver.writer  # None unless it writes in the background
    self.native_hook = self.state.native_hook = _native.CheckpointSaverHook(
        global_step=_global_step(tf_hook), timer=_timer_config(self._timer),
        steps_per_run=_steps_per_run(tf_hook),
        save=self._save, after_create_session=self._after_create_session, end=self._end,
        writer=writer, deliver_write=None if writer is None else self._deliver_write)

  def _save(self, fresh_step):
    # The body of TF's after_run once the gate opened for the fresh step.
    global_step = self._as_step(fresh_step)
    with self.state.running_tf_code():
      if not self._timer.should_trigger_for_step(global_step):  # TF's clock decides
        return False
      self._timer.update_last_triggered_step(global_step)
      return bool(self._saver.save(self.hooked.tf_sess, global_step))

  def _after_create_session(self):
    with self.state.running_tf_code():
      self._saver.after_create_session(self.hooked.tf_sess)

  def _deliver_write(self):
    return self._saver.deliver_write(wait=False)

  def _end(self):
    with self.state.running_tf_code():
      self._saver.end(self.hooked.tf_sess)


class _NativeStepCounterHook(NativeRunner):
  """StepCounterHook: the global step fetched, its gate kept and the step
  rates counted natively; TF's own `_log_and_record` writes them (handed
  over in batches inside run_steps: StepRateBatch, cpp/core/step_rate_batch.h),
  or the native summary writer does when TF's log line would not print; for
  a stuck step TF's whole after_run runs; after_create_session and end are
  TF's."""

  # pylint: disable=protected-access
  # (TF's StepCounterHook keeps its configuration in private attributes and
  # records in its private _log_and_record.)

  accepts = staticmethod(_timed_on_integer_global_step)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self._as_step = _step_type(tf_hook)
    self.state = HookStateSync(tf_hook, self._as_step,
                               fields=[('_last_global_step', 'last_step')])
    last = getattr(tf_hook, '_last_global_step', None)
    self.native_hook = self.state.native_hook = _native.StepCounterHook(
        global_step=_global_step(tf_hook), timer=_timer_config(_timer_of(tf_hook)),
        steps_per_run=_steps_per_run(tf_hook),
        last_step=None if last is None else int(last), after_run_stuck=self._after_run_stuck,
        record=self._record, after_create_session=self._after_create_session, end=self._end)
    if tf_hook._summary_writer is not None:
      native_writer = event_file_writer.summary_writer_of(tf_hook._summary_writer)
      if native_writer is not None:
        self.native_hook.set_summary_writer(native_writer, tf_hook._summary_tag,
                                            logging.get_logger())

  def _after_run_stuck(self, stale_step):
    # TF's after_run compares with _last_global_step: the sync sets it.
    run_context = SessionRunContext(original_args=SessionRunArgs(None),
                                    session=self.hooked.stock_hook_session)
    with self.state.running_tf_code():
      self.tf_hook.after_run(run_context, SessionRunValues(
          results=self._as_step(stale_step), options=config_pb2.RunOptions(),
          run_metadata=config_pb2.RunMetadata()))
    return run_context.stop_requested

  def _after_create_session(self):
    with self.state.running_tf_code():
      self.tf_hook.after_create_session(self.hooked.tf_sess, self.hooked.coord)

  def _end(self):
    with self.state.running_tf_code():
      self.tf_hook.end(self.hooked.tf_sess)

  def _record(self, rates, timer_last_step, timer_last_time):
    """The rest of TF's after_run for each step where its timer fired (values
    typed as TF computes them; a batch of StepRateBatch's), then TF's timer
    where the native one was at the hand-over. When a record fails, TF's
    timer stops at that record, and the native one goes back there too (TF's
    timer is the reference): the records after it were never written."""
    as_step = self._as_step
    for elapsed_steps, elapsed_secs, global_step, triggered_at in rates:
      try:
        self.tf_hook._log_and_record(as_step(elapsed_steps), elapsed_secs, as_step(global_step))
      except BaseException:
        self.state.set_tf_timer(global_step, triggered_at)
        self.state.tf_timer_to_native()
        raise
    self.state.set_tf_timer(timer_last_step, timer_last_time)


# The ops whose output is a Summary TF's C++ serialized (MergeSummary parses
# its inputs and serializes them again).
_SUMMARY_OP_TYPES = frozenset((
    'MergeSummary', 'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummary',
    'AudioSummaryV2', 'TensorSummary', 'TensorSummaryV2'))


class _ScheduledRunner(NativeRunner):
  """What the runners of TF's scheduled hooks (SummarySaverHook,
  ProfilerHook) share: TF's after_run on the hook object, set as TF's
  before_run left it; `end` is TF's own."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self._as_step = _step_type(tf_hook)
    self.state = HookStateSync(tf_hook, self._as_step, fields=[('_next_step', 'next_step')])

  def _run_tf_after_run(self, stale_step, next_step, due, results, options, run_metadata):
    """TF's after_run; returns the step it expects next, as the native
    schedule keeps it."""
    with self.state.running_tf_code():
      self.state.set_tf_step('_next_step', next_step)
      self.state.set_tf_value('_request_summary', due)
      results['global_step'] = self._as_step(stale_step)
      run_context = SessionRunContext(original_args=SessionRunArgs(None),
                                      session=self.hooked.stock_hook_session)
      self.tf_hook.after_run(run_context, SessionRunValues(results=results, options=options,
                                                           run_metadata=run_metadata))
    return self.state.tf_step('_next_step')

  def _end(self):
    self.tf_hook.end(self.hooked.tf_sess)


class _NativeSummarySaverHook(_ScheduledRunner):
  """SummarySaverHook: the global step fetched and the schedule kept
  natively; on due steps (and its first) the summaries are fetched and
  written natively when TF's summary ops serialized them, else TF's own
  after_run writes them, so event files and log lines are TF's."""

  # pylint: disable=protected-access
  # (TF's SummarySaverHook keeps its writer in a private attribute and finds
  # its summary op with its private _get_summary_op.)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self._summary_plan = None
    self.native_hook = self.state.native_hook = _native.SummarySaverHook(
        global_step=_global_step(tf_hook), timer=_timer_config(_timer_of(tf_hook)),
        after_run=self._after_run, end=self._end)

  def _after_run(self, stale_step, next_step, due, summaries):
    results = {}
    if summaries is not None and self._summary_plan is not None:
      results['summary'] = self._summary_plan.build(summaries)
    return self._run_tf_after_run(stale_step, next_step, due, results,
                                  config_pb2.RunOptions(), config_pb2.RunMetadata())

  def on_session_attached(self):
    # The Scaffold's summary op exists once the session is created.
    summary_op = self.tf_hook._get_summary_op()
    self._summary_plan = None if summary_op is None else self.hooked.plans.fetch_plan(summary_op)
    self.native_hook.set_summaries(None if summary_op is None else self._summary_plan.native)
    # Summaries a TF summary op serialized are written natively; bytes from
    # elsewhere (a constant, a py_func) are TF's Python's to parse.
    if all(tensor.op.type in _SUMMARY_OP_TYPES for tensor in summary_op or ()):
      self.native_hook.set_summary_writer(
          event_file_writer.summary_writer_of(self.tf_hook._summary_writer))

  @staticmethod
  def accepts(hook):
    # Without a writer TF's SummarySaverHook fetches summaries every step and
    # drops them; rare enough to leave to Python.
    return _timed_on_integer_global_step(hook) and bool(hook._summary_writer)


class _NativeProfilerHook(_ScheduledRunner):
  """ProfilerHook: the global step fetched and the schedule kept natively; a
  due step asks for a full trace and TF's own after_run writes the
  timeline, so timelines and log lines are TF's."""

  accepts = staticmethod(_timed_on_integer_global_step)

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self.native_hook = self.state.native_hook = _native.ProfilerHook(
        global_step=_global_step(tf_hook), timer=_timer_config(_timer_of(tf_hook)),
        after_run=self._after_run, end=self._end)

  def _after_run(self, stale_step, next_step, due, run_metadata):
    metadata = config_pb2.RunMetadata()
    if run_metadata is not None:
      metadata.ParseFromString(run_metadata)
    options = config_pb2.RunOptions()
    if due:
      options.trace_level = config_pb2.RunOptions.FULL_TRACE
    return self._run_tf_after_run(stale_step, next_step, due, {}, options, metadata)


class _NativeFinalOpsHook(NativeRunner):
  """FinalOpsHook has no per-step work; TF's own end() runs the final ops,
  so final_ops_values is set on the user's hook object."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self.native_hook = _native.EndOnlyHook(end=self._end)

  def _end(self):
    self.tf_hook.end(self.hooked.tf_sess)


class _NativeFeedFnHook(NativeRunner):
  """FeedFnHook: the user's feed_fn (read from the hook each step, as TF
  does) is called natively before each step and its feeds merged natively."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self.native_hook = _native.FeedFnHook(feeds=self._feeds)

  def _feeds(self):
    return self.hooked.plans.hook_feeds(self.tf_hook.feed_fn())


class _NativeGlobalStepWaiterHook(NativeRunner):
  """GlobalStepWaiterHook: TF's own before_run (which polls the global step
  and logs) runs until the worker has started; then nothing runs."""

  def __init__(self, tf_hook, hooked):
    super().__init__(tf_hook, hooked)
    self.native_hook = _native.GlobalStepWaiterHook(wait=self._wait)

  def _wait(self):
    # pylint: disable=protected-access
    # (TF's GlobalStepWaiterHook keeps whether the worker started privately.)
    if not self.tf_hook._worker_is_started:
      self.tf_hook.before_run(SessionRunContext(original_args=SessionRunArgs(None),
                                                session=self.hooked.tf_sess))
    return bool(self.tf_hook._worker_is_started)


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
  """The NativeRunner (fastmts._internal.native_runner) of a begun stock
  hook, or None to run it in Python.

  `hooked` is the HookedSession (a weak proxy); its `tf_sess` is the session
  of the moment.
  """
  runner_class = _NATIVE_RUNNER_OF_CLASS.get(type(hook))
  # A runner class without `accepts` takes every instance of its class.
  if runner_class is None or not getattr(runner_class, 'accepts', lambda hook: True)(hook):
    return None
  return runner_class(hook, hooked)
