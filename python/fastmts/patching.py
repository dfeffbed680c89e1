"""fastmts.patch(): speed up an existing tf.compat.v1 training script with one line.

    import fastmts
    fastmts.patch()   # tf.compat.v1.train.MonitoredTrainingSession is now fastmts's
    ...               # the script, unchanged
    fastmts.unpatch() # TF's own again

Only the public module `tf.compat.v1.train` (also reached as
`tensorflow.compat.v1.train`) is changed; TF's internal modules keep their
own classes, so TF code built on them (e.g. Estimator) is untouched.
"""
import threading

from tensorflow.python.training import basic_session_run_hooks as _tf_hooks

# The public names fastmts provides in place of TF's. The stock hook classes
# are TF's own (fastmts runs them natively), listed so that they resolve to
# fastmts's whatever fastmts exports under those names.
_NAMES = (
    'MonitoredTrainingSession', 'MonitoredSession', 'SingularMonitoredSession', 'Scaffold',
    'SessionCreator', 'ChiefSessionCreator', 'WorkerSessionCreator',
    'StopAtStepHook', 'NanTensorHook', 'LoggingTensorHook', 'CheckpointSaverHook',
    'CheckpointSaverListener', 'StepCounterHook', 'SummarySaverHook', 'GlobalStepWaiterHook',
    'FinalOpsHook', 'FeedFnHook', 'ProfilerHook', 'SecondOrStepTimer',
    'NanLossDuringTrainingError',
)

_lock = threading.Lock()
_originals = {}  # name -> TF's object, while patched


def _train_module():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.compat.v1.train


def patch():
  """Makes tf.compat.v1.train's monitored sessions and stock hooks fastmts's.
  Idempotent; undone by unpatch()."""
  import fastmts  # pylint: disable=g-import-not-at-top
  train = _train_module()
  with _lock:
    for name in _NAMES:
      if name not in _originals:
        _originals[name] = getattr(train, name)
      setattr(train, name, getattr(fastmts, name))


def unpatch():
  """Restores TF's own objects in tf.compat.v1.train (no-op if not patched)."""
  train = _train_module()
  with _lock:
    for name, original in _originals.items():
      setattr(train, name, original)
    _originals.clear()


def is_patched():
  with _lock:
    return bool(_originals)


assert all(hasattr(_tf_hooks, n) for n in _NAMES if n.endswith('Hook'))
