"""TF's stock hooks, run natively.

fastmts exports TF's own hook classes, so constructors, argument checks and
begin() (graph work, before the graph is finalized) are TF's. When an
instance of exactly such a class reaches a fastmts monitored session, its
per-step work runs in C++ instead of its Python methods; a subclass (which
may override anything) runs through the Python dispatch unchanged.
"""
from tensorflow.python.training import basic_session_run_hooks as _tf_hooks

from fastmts import _native

StopAtStepHook = _tf_hooks.StopAtStepHook


class _NativeStopAtStep:
  """Native StopAtStepHook configured from a begun TF StopAtStepHook."""

  def __init__(self, hook):
    self._hook = hook
    step = hook._global_step_tensor  # pylint: disable=protected-access
    num_steps = hook._num_steps  # pylint: disable=protected-access
    last_step = hook._last_step  # pylint: disable=protected-access
    self.native = _native.StopAtStepHook(
        step.op._c_op, step.value_index,  # pylint: disable=protected-access
        -1 if num_steps is None else int(num_steps),
        -1 if last_step is None else int(last_step))

  def after_attach(self):
    # TF's hook computes _last_step in its first after_create_session and
    # keeps it; mirror that on the object so reusing it behaves as in TF.
    self._hook._last_step = self.native.last_step  # pylint: disable=protected-access


_NATIVE_OF_CLASS = {
    _tf_hooks.StopAtStepHook: _NativeStopAtStep,
}


def native_hook_of(hook):
  """The native stand-in of a begun stock hook, or None to run it in Python."""
  make = _NATIVE_OF_CLASS.get(type(hook))
  return None if make is None else make(hook)
