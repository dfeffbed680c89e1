"""What runs one of TF's stock hooks natively: its native runner
(`NativeRunner`) and the one object that keeps the hook's state on TF's hook
object and in its native hook in step (`HookStateSync`).

A module of its own, importing nothing of fastmts's hooks, so that a runner
may be written beside the hook it runs (basic_session_run_hooks.py, and
modules that file imports) without an import cycle.
"""


class NativeRunner:
  """Runs one begun stock hook (TF's object, `tf_hook`) natively: it makes
  the hook's native hook (`native_hook`, which the HookedSession dispatches)
  and its methods are the calls into TF's own code of that hook.

  `hooked` is the HookedSession (a weak proxy, as hooked_session.py hands it
  over): its `tf_sess` is the session of the moment. A runner whose hook
  keeps state on TF's object has a HookStateSync (`state`).

  The native hook's callbacks are the runner's own bound methods
  (`save=self._save`): a native hook holds a bound method's object weakly
  (PythonCallback, cpp/binding/hook_config_conversion.h), so the runner,
  which owns its native hook, is not kept alive by it, and the cycle the
  garbage collector could not see through a native object does not form.

  Subclasses set `native_hook` (and `state`) in `__init__`; `accepts(hook)`,
  a staticmethod where defined, says which instances of the class run
  natively (without it every instance does).
  """

  state = None
  native_hook = None

  def __init__(self, tf_hook, hooked):
    self.tf_hook = tf_hook
    self.hooked = hooked

  def write_state_to_tf_hook(self):
    """At close, before any end(): TF's object gets the state the native hook
    kept, so it holds it even when no end() runs."""
    if self.state is not None:
      self.state.to_tf_hook()

  def on_session_attached(self):
    """After the native dispatch is bound to a new TF session."""


class HookStateSync:
  """Keeps the state a stock hook keeps on TF's hook object and the copy its
  native hook keeps in step: TF's timer (`_timer`, unless `timer=False`)
  and the fields named in `fields` (pairs of TF's attribute and the native
  hook's property), steps typed as TF types them (`as_step`).

  The native hook moves its copy on the steps no Python runs; TF's object is
  brought up to it (`to_tf_hook`) before TF's code reads it and when the
  session closes. TF's code that may move TF's timer runs inside
  `running_tf_code()`, which copies TF's timer into the native hook
  afterwards, even if that code raised: TF's timer is the reference. Every
  write of fastmts's to TF's hook object goes through here (`set_tf_step`,
  `set_tf_value` for what the native hook hands over as arguments).
  """

  # pylint: disable=protected-access
  # (TF's hooks keep this state in private attributes, and TF's code of the
  # hook reads it there: writing them is this class's purpose.)

  __slots__ = ('_tf_hook', '_as_step', '_fields', '_timer', 'native_hook')

  def __init__(self, tf_hook, as_step, fields=(), timer=True):
    self._tf_hook = tf_hook
    self._as_step = as_step  # the type of the steps TF keeps
    self._fields = tuple(fields)
    self._timer = timer
    self.native_hook = None  # set once the native hook is made

  def to_tf_hook(self):
    """TF's object where the native hook is: its fields, and its timer once
    the native timer has fired."""
    native = self.native_hook
    for tf_name, native_name in self._fields:
      self.set_tf_step(tf_name, getattr(native, native_name))
    if self._timer:
      last_step, last_time = native.timer_state
      if last_step is not None:
        self.set_tf_timer(last_step, last_time)

  def set_tf_step(self, tf_name, step):
    """TF's attribute `tf_name` set to a step (or None), typed as TF's."""
    setattr(self._tf_hook, tf_name, None if step is None else self._as_step(step))

  def tf_step(self, tf_name):
    """TF's attribute `tf_name`, a step (or None), as the native hook takes
    it (TF's code of the hook may have moved it)."""
    step = getattr(self._tf_hook, tf_name)
    return None if step is None else int(step)

  def set_tf_value(self, tf_name, value):
    """TF's attribute `tf_name` set to a value that is not a step."""
    setattr(self._tf_hook, tf_name, value)

  def set_tf_timer(self, last_step, last_time):
    """TF's timer set to a state the native timer had."""
    timer = self._tf_hook._timer
    timer._last_triggered_step = None if last_step is None else self._as_step(last_step)
    timer._last_triggered_time = last_time

  def tf_timer_to_native(self):
    """The native timer set to TF's (of a hook with a timer)."""
    if not self._timer:
      return
    timer = self._tf_hook._timer
    self.native_hook.set_timer_state(timer._last_triggered_step,
                                     timer._last_triggered_time or 0.0)

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
