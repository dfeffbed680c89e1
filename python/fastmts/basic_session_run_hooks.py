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
from fastmts import async_checkpoint as async_checkpoint_lib
from fastmts import fetches as fetches_lib
from fastmts import checkpoint_saver
from fastmts import class_identity
from fastmts.file_formats import event_file_writer
from fastmts import preemption
from fastmts.session_run_hook import SessionRunArgs
from fastmts.session_run_hook import SessionRunContext
from fastmts.session_run_hook import SessionRunValues
from fastmts.tf_call_sites import TFSite

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
      fastmts/async_checkpoint.py for exactly where that differs.

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


class _timer_handed_back:  # pylint: disable=invalid-name
  """`with _timer_handed_back(native, timer):` runs TF's own hook code, then
  hands TF's timer state to the native mirror of that timer: whether the code
  moved it or not, and even if it raised. (A class, not a generator-based
  context manager: it runs on the steps where a hook acts, inside the loop.)"""

  __slots__ = ('_native', '_timer')

  def __init__(self, native, timer):
    self._native = native
    self._timer = timer

  def __enter__(self):
    return None

  def __exit__(self, *exc_info):
    timer = self._timer
    self._native.adopt_timer(timer._last_triggered_step, timer._last_triggered_time or 0.0)  # pylint: disable=protected-access
    return False


def _set_tf_timer(timer, as_step, last_step, last_time):
  """TF's timer where its native mirror is."""
  timer._last_triggered_step = None if last_step is None else as_step(last_step)  # pylint: disable=protected-access
  timer._last_triggered_time = last_time  # pylint: disable=protected-access


def _catch_up_tf_timer(timer, native, as_step):
  """TF's timer where the native hook `native` moved it, once it fired."""
  last_step, last_time = native.timer_state
  if last_step is not None:
    _set_tf_timer(timer, as_step, last_step, last_time)


def _output(tensor):
  return tensor.op._c_op, tensor.value_index  # pylint: disable=protected-access


class _NativeStopAtStep:
  """Native StopAtStepHook configured from a begun TF StopAtStepHook."""

  def __init__(self, hook, owner):
    del owner
    step = hook._global_step_tensor  # pylint: disable=protected-access
    num_steps = hook._num_steps  # pylint: disable=protected-access
    last_step = hook._last_step  # pylint: disable=protected-access
    as_step = step.dtype.as_numpy_dtype

    def on_last_step(value):
      # TF's hook computes _last_step (global step + num_steps, a numpy int)
      # in its first after_create_session and keeps it; so does the object
      # here, so reusing it behaves as in TF.
      hook._last_step = as_step(value)  # pylint: disable=protected-access

    self.native = _native.StopAtStepHook(
        step.op._c_op, step.value_index,  # pylint: disable=protected-access
        0 if num_steps is None else int(num_steps),
        None if last_step is None else int(last_step), on_last_step)


# TF's NanTensorHook.after_run logs from these lines.
_LOG_NAN_ERROR = TFSite(_tf_hooks.NanTensorHook.after_run, 'logging.error(')
_LOG_NAN_WARNING = TFSite(_tf_hooks.NanTensorHook.after_run, 'logging.warning(')


class _NativeNanTensor:
  """Native NanTensorHook; the rare NaN path logs (and raises) as TF does."""

  def __init__(self, hook, owner):
    del owner
    loss = hook._loss_tensor  # pylint: disable=protected-access
    fail = bool(hook._fail_on_nan_loss)  # pylint: disable=protected-access

    def on_nan():
      failure_message = 'Model diverged with loss = NaN.'
      if fail:
        _LOG_NAN_ERROR.call(logging.error, failure_message)
        raise NanLossDuringTrainingError
      _LOG_NAN_WARNING.call(logging.warning, failure_message)

    self.native = _native.NanTensorHook(*_output(loss), fail, on_nan)

  @staticmethod
  def accepts(hook):
    # TF's np.isnan works on any float loss; the native check on float scalars.
    loss = getattr(hook, '_loss_tensor', None)
    return (isinstance(loss, _tensorflow.Tensor) and loss.shape.rank == 0 and
            loss.dtype.base_dtype in (dtypes.float16, dtypes.bfloat16, dtypes.float32,
                                      dtypes.float64))


class _NativeLoggingTensor:
  """Native trigger decisions for LoggingTensorHook; logging itself is TF's
  own _log_tensors on the hook object, so lines and formats are TF's. With
  TF's default formatting, a firing step whose line TF's logger would not
  print only moves the timer, natively (see native_hooks.h)."""

  def __init__(self, hook, owner):
    plan = fetches_lib.PlanCache(ops.get_default_graph(), None).fetch_plan(
        hook._current_tensors)  # pylint: disable=protected-access
    timer = hook._timer  # pylint: disable=protected-access
    never = isinstance(timer, _tf_hooks.NeverTriggerTimer)

    me = weakref.proxy(self)  # the native hook's callbacks must not keep it alive

    def log(iter_count, values):
      hook._iter_count = iter_count  # pylint: disable=protected-access
      me.catch_up_timer()  # steps that did not log moved the native timer only
      with _timer_handed_back(me.native, timer):
        hook._log_tensors(plan.build(values))  # pylint: disable=protected-access

    self._hook, self._owner = hook, owner
    self.native = _native.LoggingTensorHook(
        plan.native, None if never else _optional_float(timer._every_secs),  # pylint: disable=protected-access
        None if never else _optional_float(timer._every_steps), never, log,  # pylint: disable=protected-access
        lambda: me.end())  # pylint: disable=unnecessary-lambda  (me.end would keep self)
    # A formatter is the user's code, and may do more than format.
    if hook._formatter is None and '_log_tensors' not in vars(hook):  # pylint: disable=protected-access
      self.native.set_quiet_unless_logged_by(logging.get_logger())

  def end(self):
    self.catch_up_timer()
    self._hook.end(self._owner.tf_sess)  # TF's own: logs once more when at_end

  def catch_up_timer(self):
    _catch_up_tf_timer(self._hook._timer, self.native, int)  # pylint: disable=protected-access

  def hand_back(self):
    self._hook._iter_count = self.native.iter_count  # pylint: disable=protected-access
    self.catch_up_timer()

  @staticmethod
  def accepts(hook):
    timer = getattr(hook, '_timer', None)
    return type(timer) in (_tf_hooks.SecondOrStepTimer, _tf_hooks.NeverTriggerTimer)


class _NativeGlobalStepGated:
  """CheckpointSaverHook and StepCounterHook: the global step is fetched, the
  timer consulted and the step read afresh natively; Python runs only where
  the hook acts, and then TF's own code, so files and log lines are TF's:
  CheckpointSaverHook's timer and `_save`; StepCounterHook's
  `_log_and_record` for the step rates counted natively (handed over in
  batches inside run_steps, see native_hooks.h); for a stuck step TF's
  whole after_run; after_create_session and end."""

  def __init__(self, hook, owner):
    timer = hook._timer  # pylint: disable=protected-access
    step = hook._global_step_tensor  # pylint: disable=protected-access
    as_step = step.dtype.as_numpy_dtype
    is_step_counter = type(hook) is _tf_hooks.StepCounterHook

    self._hook, self._as_step, self._is_step_counter = hook, as_step, is_step_counter
    me = weakref.proxy(self)  # the native hook's callbacks must not keep it alive

    def act(stale_step):
      me.hand_back()  # TF's after_run compares with _last_global_step
      # CheckpointSaverHook hands the session on to the user's listeners:
      # they get TF's raw session, as in TF.
      session = owner.stock_hook_session if is_step_counter else owner.tf_sess
      run_context = SessionRunContext(original_args=SessionRunArgs(None), session=session)
      with _timer_handed_back(me.native, timer):
        hook.after_run(run_context, SessionRunValues(
            results=as_step(stale_step), options=config_pb2.RunOptions(),
            run_metadata=config_pb2.RunMetadata()))
      return run_context.stop_requested

    def save(fresh_step):
      # The body of TF's CheckpointSaverHook.after_run once its timer fired
      # for the fresh step.
      global_step = as_step(fresh_step)
      with _timer_handed_back(me.native, timer):
        if not timer.should_trigger_for_step(global_step):  # TF's clock decides
          return False
        timer.update_last_triggered_step(global_step)
        return bool(checkpoint_saver.save(hook, owner.tf_sess, global_step))

    def record(rates, timer_last_step, timer_last_time):
      # The rest of TF's StepCounterHook.after_run for each step where its
      # timer fired (values typed as TF computes them), then TF's timer
      # where the native one is; or, when a record fails, where TF's timer
      # stopped, at that record (the native one goes back there too: the
      # records after it were never written).
      try:
        for elapsed_steps, elapsed_secs, global_step, triggered_at in rates:
          try:
            hook._log_and_record(as_step(elapsed_steps), elapsed_secs, as_step(global_step))  # pylint: disable=protected-access
          except BaseException:
            timer_last_step, timer_last_time = global_step, triggered_at
            me.native.adopt_timer(timer_last_step, timer_last_time)
            raise
      finally:
        _set_tf_timer(timer, as_step, timer_last_step, timer_last_time)

    # TF's code below reads TF's timer: it first catches up with the
    # records written natively.
    def after_create_session():
      me.hand_back()
      with _timer_handed_back(me.native, timer):
        if is_step_counter:
          hook.after_create_session(owner.tf_sess, owner.coord)
        else:
          checkpoint_saver.after_create_session(hook, owner.tf_sess)

    def end():
      me.hand_back()
      with _timer_handed_back(me.native, timer):
        if is_step_counter:
          hook.end(owner.tf_sess)
        else:
          checkpoint_saver.end(hook, owner.tf_sess)

    last = getattr(hook, '_last_global_step', None) if is_step_counter else None
    writes = None if is_step_counter else getattr(hook, '_fastmts_async', None)
    self.native = _native.GlobalStepGatedHook(
        *_output(step),
        _optional_float(timer._every_secs), _optional_float(timer._every_steps),  # pylint: disable=protected-access
        int(hook._steps_per_run), is_step_counter,  # pylint: disable=protected-access
        None if last is None else int(last), act,
        None if is_step_counter else save, record if is_step_counter else None,
        after_create_session, end, writer=None if writes is None else writes.native,
        on_written=None if writes is None else lambda: writes.deliver(wait=False))
    summary_writer = hook._summary_writer if is_step_counter else None  # pylint: disable=protected-access
    native_writer = (None if summary_writer is None else
                     event_file_writer.summary_writer_of(summary_writer))
    if native_writer is not None:
      self.native.set_summary_writer(native_writer, hook._summary_tag, logging.get_logger())  # pylint: disable=protected-access

  def hand_back(self):
    # StepCounterHook's _last_global_step moves every step, and its timer
    # on each record written natively: both natively only.
    if self._is_step_counter:
      last_step = self.native.last_step
      self._hook._last_global_step = None if last_step is None else self._as_step(last_step)  # pylint: disable=protected-access
      _catch_up_tf_timer(self._hook._timer, self.native, self._as_step)  # pylint: disable=protected-access

  @staticmethod
  def accepts(hook):
    step = getattr(hook, '_global_step_tensor', None)
    return (type(getattr(hook, '_timer', None)) is _tf_hooks.SecondOrStepTimer and
            step is not None and step.dtype.base_dtype.is_integer)


# The ops whose output is a Summary TF's C++ serialized (MergeSummary parses
# its inputs and serializes them again).
_SUMMARY_OP_TYPES = frozenset((
    'MergeSummary', 'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummary',
    'AudioSummaryV2', 'TensorSummary', 'TensorSummaryV2'))


class _NativeStepScheduled:
  """SummarySaverHook and ProfilerHook: the global step is fetched and the
  schedule kept natively; on the steps where TF's hook acts (and its first
  step) the summaries or the full trace are fetched and TF's own after_run
  writes them, so event files, timelines and log lines are TF's."""

  def __init__(self, hook, owner):
    self._hook = hook
    self._owner = owner
    timer = hook._timer  # pylint: disable=protected-access
    step = hook._global_step_tensor  # pylint: disable=protected-access
    as_step = step.dtype.as_numpy_dtype
    self._is_summary = type(hook) is _tf_hooks.SummarySaverHook
    self._summary_plan = None
    me = weakref.proxy(self)  # the native hook's callbacks must not keep it alive

    def act(stale_step, next_step, requested, extra, run_metadata):
      hook._next_step = None if next_step is None else as_step(next_step)  # pylint: disable=protected-access
      hook._request_summary = requested  # pylint: disable=protected-access
      results = {'global_step': as_step(stale_step)}
      if extra is not None and me._summary_plan is not None:  # pylint: disable=protected-access
        results['summary'] = me._summary_plan.build(extra)  # pylint: disable=protected-access
      metadata = config_pb2.RunMetadata()
      if run_metadata is not None:
        metadata.ParseFromString(run_metadata)
      options = config_pb2.RunOptions()
      if requested and not me._is_summary:  # pylint: disable=protected-access
        options.trace_level = config_pb2.RunOptions.FULL_TRACE
      run_context = SessionRunContext(original_args=SessionRunArgs(None),
                                      session=owner.stock_hook_session)
      with _timer_handed_back(me.native, timer):
        hook.after_run(run_context, SessionRunValues(results=results, options=options,
                                                     run_metadata=metadata))
      next_step = hook._next_step  # pylint: disable=protected-access
      return None if next_step is None else int(next_step)

    self.native = _native.StepScheduledHook(
        *_output(step), _optional_float(timer._every_secs),  # pylint: disable=protected-access
        _optional_float(timer._every_steps), self._is_summary, not self._is_summary, act,  # pylint: disable=protected-access
        lambda: hook.end(owner.tf_sess))

  def hand_back(self):
    # Steps without summaries move the step expected next and the timer
    # natively only.
    next_step = self.native.next_step
    as_step = self._hook._global_step_tensor.dtype.as_numpy_dtype  # pylint: disable=protected-access
    self._hook._next_step = None if next_step is None else as_step(next_step)  # pylint: disable=protected-access
    _catch_up_tf_timer(self._hook._timer, self.native, as_step)  # pylint: disable=protected-access

  def after_attach(self):
    # The Scaffold's summary op exists once the session is created.
    if self._is_summary:
      summary_op = self._hook._get_summary_op()  # pylint: disable=protected-access
      self._summary_plan = None if summary_op is None else self._owner.plans.fetch_plan(summary_op)
      self.native.set_extra(None if summary_op is None else self._summary_plan.native)
      # Summaries a TF summary op serialized are written natively; bytes
      # from elsewhere (a constant, a py_func) are TF's Python's to parse.
      if all(tensor.op.type in _SUMMARY_OP_TYPES for tensor in summary_op or ()):
        self.native.set_summary_writer(
            event_file_writer.summary_writer_of(self._hook._summary_writer))  # pylint: disable=protected-access

  @staticmethod
  def accepts(hook):
    step = getattr(hook, '_global_step_tensor', None)
    if (type(getattr(hook, '_timer', None)) is not _tf_hooks.SecondOrStepTimer or
        step is None or not step.dtype.base_dtype.is_integer):
      return False
    # Without a writer TF's SummarySaverHook fetches summaries every step and
    # drops them; rare enough to leave to Python.
    return type(hook) is not _tf_hooks.SummarySaverHook or bool(hook._summary_writer)  # pylint: disable=protected-access


class _NativeFinalOps:
  """FinalOpsHook has no per-step work; TF's own end() runs the final ops,
  so final_ops_values is set on the user's hook object."""

  def __init__(self, hook, owner):
    self.native = _native.EndOnlyHook(lambda: hook.end(owner.tf_sess))


class _NativeFeedFn:
  """FeedFnHook: the user's feed_fn (read from the hook each step, as TF
  does) is called natively before each step and its feeds merged natively."""

  def __init__(self, hook, owner):
    self.native = _native.FeedFnHook(lambda: owner.plans.hook_feeds(hook.feed_fn()))


class _NativeGlobalStepWaiter:
  """GlobalStepWaiterHook: TF's own before_run (which polls the global step
  and logs) runs until the worker has started; then nothing runs."""

  def __init__(self, hook, owner):

    def wait():
      if not hook._worker_is_started:  # pylint: disable=protected-access
        hook.before_run(SessionRunContext(original_args=SessionRunArgs(None),
                                          session=owner.tf_sess))
      return bool(hook._worker_is_started)  # pylint: disable=protected-access

    self.native = _native.GlobalStepWaiterHook(wait)


class _NativePreemption:
  """fastmts's PreemptionHook has no per-step work: its signal handler stops
  the session. Its after_create_session runs once the session is attached
  (a stop it requests must outlive the attach), its end() where TF's would."""

  def __init__(self, hook, owner):
    self._hook = hook
    self._owner = owner
    self.native = _native.EndOnlyHook(lambda: hook.end(owner.tf_sess))

  def after_attach(self):
    self._hook.after_create_session(self._owner.tf_sess, self._owner.coord)


# Exact classes only: a subclass may override anything and runs in Python.
_NATIVE_OF_CLASS = {
    preemption.PreemptionHook: _NativePreemption,
    _tf_hooks.StopAtStepHook: _NativeStopAtStep,
    _tf_hooks.NanTensorHook: _NativeNanTensor,
    _tf_hooks.LoggingTensorHook: _NativeLoggingTensor,
    _tf_hooks.CheckpointSaverHook: _NativeGlobalStepGated,
    CheckpointSaverHook: _NativeGlobalStepGated,
    _tf_hooks.StepCounterHook: _NativeGlobalStepGated,
    _tf_hooks.SummarySaverHook: _NativeStepScheduled,
    _tf_hooks.ProfilerHook: _NativeStepScheduled,
    _tf_hooks.FinalOpsHook: _NativeFinalOps,
    _tf_hooks.FeedFnHook: _NativeFeedFn,
    _tf_hooks.GlobalStepWaiterHook: _NativeGlobalStepWaiter,
}

def native_hook_of(hook, owner):
  """The native stand-in of a begun stock hook, or None to run it in Python.

  `owner` is the HookedSession; its `tf_sess` is the session of the moment.
  """
  make = _NATIVE_OF_CLASS.get(type(hook))
  # A stand-in without `accepts` takes every instance of its class.
  if make is None or not getattr(make, 'accepts', lambda hook: True)(hook):
    return None
  return make(hook, owner)
