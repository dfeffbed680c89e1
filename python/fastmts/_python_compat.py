"""What differs between the Pythons fastmts runs on (3.7 to 3.13), decided
once: the Python side of cpp/binding/python_compat.h, as _tensorflow.py is
for TF's releases."""
import _signal  # the C module: answers in plain ints, without signal's enums


def valid_signals():
  """The signal numbers valid on this platform, as ints: signal.valid_signals()
  (Python 3.8 and later); on 3.7 every number below NSIG."""
  if hasattr(_signal, 'valid_signals'):
    return _signal.valid_signals()
  return range(1, _signal.NSIG)
