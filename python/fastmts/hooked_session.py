"""TF's _HookedSession, with the dispatch in C++.

HookedSession is the bottom layer of a monitored session: it answers every
call of the layers' protocol (session_layers._WrappedSession) over the raw
session it wraps. Its dispatcher is chosen at attach, per raw session: the
native dispatch, or, for a session the native core cannot run, TF's own
_HookedSession (python_hooked_session.TFHookDispatch), which its methods
then hand each call to.

The native dispatch calls every hook around one merged TF_SessionRun. A
native hook (see basic_session_run_hooks) runs there without Python; a
Python hook is wrapped in a _PythonHookRunner that the native dispatch calls
with the GIL held. RunOptions merge by TF's rule in both (see
merge_run_options; docs/design.md, the hook contract).
"""
import _signal
import contextlib
import weakref

from tensorflow.core.protobuf import config_pb2

from fastmts import _native
from fastmts import _python_compat
from fastmts._internal import async_checkpoint as async_checkpoint_lib
from fastmts import basic_session_run_hooks
from fastmts._internal import errors
from fastmts._internal import fetches as fetches_lib
from fastmts import hook_costs
from fastmts._internal import python_hooked_session
from fastmts import session_layers
from fastmts._internal import stock_hook_session
from fastmts.session_run_hook import SessionRunArgs
from fastmts.session_run_hook import SessionRunContext
from fastmts.session_run_hook import SessionRunValues


merge_run_options = python_hooked_session.merge_run_options
merge_full_trace = python_hooked_session.merge_full_trace

def _signals_with_python_handlers():
  """The signals Python has a handler of its own for (Ctrl-C's
  default_int_handler among them): the native loop watches these. (The C
  module `_signal` answers without `signal`'s enum conversions.)"""
  getsignal = _signal.getsignal
  return [s for s in _python_compat.valid_signals() if callable(getsignal(s))]


class LoopProgress:
  """The steps one run_steps call completed so far: known when it raises,
  and its own even when other threads step the same session meanwhile."""
  __slots__ = ('steps',)

  def __init__(self):
    self.steps = 0


class _StepState:
  """What the Python hooks of one step share (only built when there are any)."""
  __slots__ = ('run_context', 'options', 'run_metadata', 'metadata_requested',
               'metadata_parsed', 'plans')

  def __init__(self, run_context, options, run_metadata, metadata_requested):
    self.run_context = run_context
    self.options = options
    self.run_metadata = run_metadata
    # The caller gave run_metadata: TF parses it after the run, before any
    # hook's after_run (and fails there if it is no RunMetadata).
    self.metadata_requested = metadata_requested
    self.metadata_parsed = False
    self.plans = {}


class _PythonHookRunner:
  """The Python side of one Python hook in the native dispatch, which calls
  the hook's before_run/after_run itself and this for the rest."""

  args_type = SessionRunArgs
  values_type = SessionRunValues
  leaf_types = fetches_lib.LEAF_TYPES

  def __init__(self, hook, session):
    self._hook = hook
    self._session = session  # the HookedSession: current tf session, coord, plans

  def fast_layout(self, fetches):
    return self._session.fast_layout(fetches)

  def after_create_session(self):
    self._hook.after_create_session(self._session.tf_sess, self._session.coord)

  def resolve(self, state, request):
    """A hook's SessionRunArgs -> (RunPlan, FeedPlan, feed values, options)."""
    plan = native_plan = options = None
    if request.fetches is not None:
      plan = self._session.plans.fetch_plan(request.fetches)
      native_plan = plan.native
    state.plans[self] = plan
    feed_plan, values = self._session.plans.hook_feeds(request.feed_dict)
    if request.options:
      merge_run_options(state.options, request.options)
      options = state.options.SerializeToString()
    return native_plan, feed_plan, values, options

  def build(self, state, outputs):
    plan = state.plans.get(self)
    return plan.build(outputs) if plan is not None else None

  @staticmethod
  def take_full_trace(state):
    """A native hook asked for a full trace (ProfilerHook): the step's
    options, which the Python hooks' after_run see (the caller's own
    RunOptions when given), carry it too."""
    merge_full_trace(state.options)

  @staticmethod
  def take_metadata(state, serialized):
    if not state.metadata_parsed:
      state.run_metadata.ParseFromString(serialized)
      state.metadata_parsed = True

  def end(self):
    self._hook.end(self._session.tf_sess)


class HookedSession:
  """A tf.compat.v1.Session run with hooks: the bottom layer of a monitored
  session. It answers the layers' protocol (session_layers._WrappedSession:
  graph, should_stop, close, run, run_failed, run_steps, run_step_fn,
  raw_session, coordinator, steps_run) over the raw session it wraps, and
  owns the hooks' dispatch (end, request_stop, the hook state and costs),
  which outlives each raw session.

  Built once per monitored session from its hooks; attach() binds each raw
  session the creator makes (again after recovery) and chooses its
  dispatcher: the native one, or, for a session the native core cannot run
  (a wrapper such as TF's debugger sessions), TF's own _HookedSession, which
  runs every step through the session's own `run`, as TF does. close()
  closes that raw session.
  """

  def __init__(self, hooks):
    native_hooks = []
    self._native_runners = []  # of stock hooks; their native hooks' callbacks hold them weakly
    self._python_hook_objects = []
    # The native hooks hold Python callables that reach back here; a cycle
    # through a native object is invisible to the garbage collector, so
    # they hold this session only weakly.
    me = weakref.proxy(self)
    for hook in hooks:
      runner = basic_session_run_hooks.native_runner_of(hook, me)
      if runner is None:
        native_hooks.append(_native.PythonHook(hook, _PythonHookRunner(hook, me)))
        self._python_hook_objects.append(hook)
      else:
        native_hooks.append(runner.native_hook)
        self._native_runners.append(runner)
    self._native = _native.HookedSession(native_hooks)
    self._hooks = list(hooks)  # TF's name, as _HookedSession keeps them
    self._hook_names = [type(hook).__name__ for hook in hooks]
    if hook_costs.enabled():
      self._native.track_costs(True)
    self.tf_sess = None  # the raw session wrapped now (TF's `_sess`), None when closed
    self.coord = None
    self.plans = None
    self._graph = None  # the last raw session's: errors raised after its close name its ops
    self.agreement = None  # the session's SessionAgreement (fastmts.AgreedStop), if any
    self._tf_dispatch = None  # the TFHookDispatch of a session run by TF's code
    self._tf_dispatch_steps = 0  # steps run by earlier ones
    self._native_holds_state = False  # of the stock hooks, until handed back
    # What TF's own code of natively run stock hooks gets as the session.
    self.stock_hook_session = stock_hook_session.StockHookSession(self)

  # ---- binding raw sessions ------------------------------------------------

  def attach(self, tf_sess, coord):
    """Binds a freshly created TF session (also after recovery) and runs
    the hooks' after_create_session."""
    self.tf_sess = tf_sess
    self.coord = coord
    self._graph = tf_sess.graph
    if not python_hooked_session.runs_natively(tf_sess):
      if self.agreement is not None:
        raise ValueError('fastmts.AgreedStop needs a session fastmts steps natively (a plain '
                         'tf.compat.v1.Session), not %s' % type(tf_sess).__name__)
      # The stock hooks' own Python methods run now: they carry on from
      # what the native dispatch did with them so far.
      self.write_hook_state_to_tf_hooks()
      self._tf_dispatch = python_hooked_session.TFHookDispatch(tf_sess, coord, self._hooks)
      self._tf_dispatch.after_create_session()
      return
    self.plans = fetches_lib.PlanCache(tf_sess.graph, tf_sess)
    self._native_holds_state = True
    with self._tf_errors():  # native hooks may read the step here
      self._native.attach(tf_sess)
    for runner in self._native_runners:
      runner.on_session_attached()

  def write_hook_state_to_tf_hooks(self):
    """Brings what natively run stock hooks keep of their schedules natively
    (what TF's after_run leaves on the hook object) into TF's objects. Done
    at close before any end(): TF's objects hold that state even when their
    end() never runs (the `with` block raised, or an earlier hook's end()
    did), and an object used again in a new session carries on from it."""
    if not self._native_holds_state:
      return
    self._native_holds_state = False
    for runner in self._native_runners:
      runner.write_state_to_tf_hook()

  def _detach(self):
    """Unbinds the TF session (it is being closed)."""
    if self._tf_dispatch is not None:
      self._tf_dispatch_steps += self._tf_dispatch.steps_run
      self._tf_dispatch = None
    self._native.detach()
    self.tf_sess = None
    self.coord = None
    self.plans = None

  def close(self):
    """Closes the raw session (the layer above closes this one). Native
    code lets go of it first; an async checkpoint's write, whose save op
    runs on it, is settled before it goes. A recoverable error of TF's
    close is logged, as TF's _WrappedSession.close does."""
    tf_sess = self.tf_sess
    if tf_sess is None:
      return
    self._detach()  # native code must not hold the session past its close
    async_checkpoint_lib.settle_writes_on(tf_sess)
    try:
      tf_sess.close()
    except session_layers.RECOVERABLE_ERRORS as e:
      session_layers.log_close_error(e)

  # ---- the layers' protocol --------------------------------------------------

  @property
  def graph(self):
    """The graph of the raw session (the last one's once closed)."""
    return self._graph

  @property
  def _sess(self):
    """TF's _HookedSession keeps the raw session as `_sess`; code (TF's own
    tests among it) reaches it so: monitored._sess._sess._sess._sess."""
    return self.tf_sess

  @property
  def raw_session(self):
    """The tf.compat.v1.Session wrapped now (None when closed)."""
    return self.tf_sess

  @property
  def coordinator(self):
    """The Coordinator of the raw session's threads (None when closed)."""
    return self.coord

  @property
  def queue_runner_threads(self):
    """Empty here: the layer above runs the queue runners."""
    return []

  def should_stop(self):
    """Whether a hook requested stop (the bottom of the layers' should_stop)."""
    if self._tf_dispatch is not None:
      return self._tf_dispatch.should_stop()
    return self._native.stop_requested

  def _check_stop(self):
    return self.should_stop()

  def request_stop(self):
    """Stops the session as a hook's stop request would: should_stop() is
    True and a further run raises. Takes no lock (for a signal handler)."""
    if self._tf_dispatch is not None:
      self._tf_dispatch.request_stop()
    else:
      self._native.request_stop()

  @property
  def steps_run(self):
    """Steps completed on this session, failed ones excluded."""
    steps = self._native.steps_run + self._tf_dispatch_steps
    return steps + self._tf_dispatch.steps_run if self._tf_dispatch is not None else steps

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """One step with hooks, as TF's _HookedSession.run."""
    if self._tf_dispatch is not None:
      return self._tf_dispatch.run(fetches, feed_dict, options, run_metadata)
    plan, feed_plan, values, serialized_options = self._plan_for(fetches, feed_dict, options)
    state = None
    if self._python_hook_objects:
      state = self.step_state(fetches, feed_dict, options, run_metadata)
      serialized_options = state.options.SerializeToString()
    with self._tf_errors():
      outputs, metadata, traced = self._native.run(plan.native, feed_plan, values,
                                                   serialized_options, run_metadata is not None,
                                                   state)
    if traced and state is None and options is not None:
      merge_full_trace(options)  # TF merges into the caller's object
    if run_metadata is not None and (state is None or not state.metadata_parsed):
      run_metadata.ParseFromString(metadata or b'')  # as TF, whatever run_metadata is
    return plan.build(outputs)

  def run_failed(self, error, fetches):
    """The native fast path's step raised `error`: a TF error of the native
    core (StatusError) becomes the tf.errors class TF raises; nothing is
    retried at this level."""
    del fetches
    if isinstance(error, errors.StatusError):
      raise errors.from_status(error, self._graph, self.tf_sess) from None
    raise error

  def run_steps(self, fetches, max_steps, feed_dict, progress):
    """Steps natively until stop, `max_steps` (None: no bound), the
    coordinator's stop or an error; the last step's results, or None.
    `progress` (a LoopProgress) counts this call's steps, also when it
    raises. The feeds are converted once, before the first step. Without
    Python hooks the loop runs without the GIL; the signals Python has
    handlers for still reach them within one step."""
    if self._tf_dispatch is not None:
      return self._tf_dispatch.run_steps(fetches, max_steps, feed_dict, progress)
    plan, feed_plan, values, _ = self._plan_for(fetches, feed_dict)
    make_state = None
    if self._python_hook_objects:
      make_state = lambda: self.step_state(fetches, feed_dict)
    with self._tf_errors():
      outputs = self._native.run_loop(plan.native, feed_plan, values,
                                      -1 if max_steps is None else max_steps,
                                      getattr(self.coord, 'native', None), make_state,
                                      _signals_with_python_handlers(), progress)
    return None if outputs is None else plan.build(outputs)

  def run_step_fn(self, step_fn, raw_session, run_with_hooks):
    """`step_fn(StepContext)`, as TF's _WrappedSession.run_step_fn."""
    return step_fn(session_layers.StepContext(raw_session, run_with_hooks or self.run))

  # ---- the hooks' dispatch, for the monitored session --------------------------

  def end(self):
    """Every hook's end(), in order."""
    if self._tf_dispatch is not None:
      self._tf_dispatch.end()
      return
    with self._tf_errors():
      self._native.end()

  @property
  def native(self):
    """The native HookedSession (fastmts._native)."""
    return self._native

  @property
  def has_python_hooks(self):
    """Whether any hook runs as Python methods (not natively)."""
    return bool(self._python_hook_objects)

  def cost_report(self):
    """Where the steps' time went, hook by hook (a HookCostReport), or
    None when cost tracking is off."""
    costs = self._native.costs()
    if costs is None:
      return None
    steps, run_seconds, before, after = costs
    return hook_costs.HookCostReport(steps, run_seconds, [
        hook_costs.HookCost(*c) for c in zip(self._hook_names, before, after)])

  def fast_layout(self, fetches):
    """For the native fast path (see _native.FastRun)."""
    return self.plans.fast_layout(fetches)

  @contextlib.contextmanager
  def _tf_errors(self):
    """TF errors from the native core (StatusError) become the tf.errors
    class TF raises, as a TF run's do."""
    try:
      yield
    except errors.StatusError as e:
      raise errors.from_status(e, self._graph, self.tf_sess) from None

  def step_state(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """What the Python hooks of one step share (see _StepState)."""
    # tuple.__new__ builds the SessionRunArgs namedtuple without running
    # its two Python-level constructors (this is once per step).
    original_args = tuple.__new__(SessionRunArgs, (fetches, feed_dict, None))
    return _StepState(
        SessionRunContext(original_args=original_args, session=self.tf_sess),
        options or config_pb2.RunOptions(),
        run_metadata or config_pb2.RunMetadata(),
        run_metadata is not None)

  def _plan_for(self, fetches, feed_dict, options=None):
    """The step's plans, and its serialized options. TF resolves the
    caller's fetches and feeds only after the hooks' before_run: when they
    cannot be resolved, the Python hooks' before_run still run (their wishes
    unused), then the error is raised, as in TF."""
    try:
      plan, feed_plan, values = self.plans.plan_for(fetches, feed_dict)
      serialized_options = options.SerializeToString() if options is not None else None
    except Exception:  # pylint: disable=broad-except
      if self._python_hook_objects:
        run_context = self.step_state(fetches, feed_dict).run_context
        for hook in self._python_hook_objects:
          hook.before_run(run_context)
      raise
    return plan, feed_plan, values, serialized_options
