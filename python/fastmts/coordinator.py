"""TF's Coordinator, with its stop state mirrored natively.

The native loop (run_steps) ends when the coordinator stops without asking
Python each step: request_stop / clear_stop also set the native flag.
"""
from tensorflow.python.training import coordinator as _tf_coordinator

from fastmts import _native


class Coordinator(_tf_coordinator.Coordinator):
  """`tf.compat.v1.train.Coordinator`, whose stop native code can see."""

  def __init__(self, clean_stop_exception_types=None):
    super().__init__(clean_stop_exception_types)
    self.native = _native.Coordinator()

  def request_stop(self, ex=None):
    super().request_stop(ex)
    self.native.request_stop()  # only once TF's own request succeeded

  def clear_stop(self):
    super().clear_stop()
    self.native.clear_stop()
