"""fastmts.patch(): speed up an existing tf.compat.v1 training script with one line.

    import fastmts
    fastmts.patch()   # tf.compat.v1.train.MonitoredTrainingSession is now fastmts's
    ...               # the script, unchanged
    fastmts.unpatch() # TF's own again

patch() rebinds every place TensorFlow binds the public names: the public
`tf.compat.v1.train` and TF's internal modules (`tensorflow.python.training.
monitored_session` and the others that import from it), so libraries that
build their sessions from TF's internal modules at call time (tf_slim's
training and evaluation, TF's own `training.evaluation`) get fastmts too.
A module outside TensorFlow that took its own reference before patch()
(`from ...monitored_session import MonitoredSession`) keeps TF's class.
"""
import sys
import threading
import types

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
# Modules whose class patch() swapped: name -> (module, its class before).
_swapped = {}
# Attribute reads from outside a swapped module: module name -> {name: object}.
_read_from_outside = {}


class _ModuleReadFromOutside(types.ModuleType):
  """The class of a TF module that defines one of the names while patched.

  Code that reads the name as the module's attribute (`monitored_session.
  MonitoredSession`, `from ... import`, tf_slim and TF's evaluation among
  it) gets fastmts's object; the module's own code reads its globals and
  keeps TF's, so TF's classes still work for whoever holds them (their
  `super(MonitoredSession, self)` names TF's class)."""

  def __getattribute__(self, name):
    table = _read_from_outside.get(types.ModuleType.__getattribute__(self, '__name__'))
    if table is not None and name in table:
      return table[name]
    return types.ModuleType.__getattribute__(self, name)


# TF 1.15 to 2.1 are the package tensorflow_core, aliased as tensorflow:
# their API modules are loaded under both names (tf.compat.v1.train is one or
# the other, depending on the way in).
_TENSORFLOW_PACKAGES = ('tensorflow', 'tensorflow_core')


def _tensorflow_modules():
  """The loaded modules of TensorFlow (its public API modules included)."""
  for name, module in list(sys.modules.items()):
    if module is not None and name.split('.', 1)[0] in _TENSORFLOW_PACKAGES:
      yield name, module


def _holders(objects):
  """(module name, module, attribute name, object) for every TensorFlow
  module that binds one of `objects` (an id -> object map) under one of
  _NAMES."""
  for module_name, module in _tensorflow_modules():
    try:
      namespace = object.__getattribute__(module, '__dict__')  # lazy loaders stay unloaded
    except AttributeError:
      continue
    for name in _NAMES:
      value = namespace.get(name)
      if value is not None and id(value) in objects:
        yield module_name, module, name, value


def _train_module():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.compat.v1.train


def patch():
  """Makes TF's monitored sessions and stock hooks fastmts's, wherever TF binds
  them. Idempotent; undone by unpatch()."""
  import fastmts  # pylint: disable=g-import-not-at-top
  train = _train_module()
  with _lock:
    for name in _NAMES:
      if name not in _originals:
        _originals[name] = getattr(train, name)
    replaced = {id(_originals[n]): _originals[n] for n in _NAMES
                if _originals[n] is not getattr(fastmts, n)}
    for module_name, module, name, original in list(_holders(replaced)):
      replacement = getattr(fastmts, name)
      if (getattr(original, '__module__', None) == module_name and
          type(module) in (types.ModuleType, _ModuleReadFromOutside)):
        _swapped.setdefault(module_name, (module, type(module)))
        _read_from_outside.setdefault(module_name, {})[name] = replacement
        module.__class__ = _ModuleReadFromOutside
      else:
        setattr(module, name, replacement)  # through a wrapper's own __setattr__
    for name in _NAMES:  # the public module, whatever kind of module it is
      setattr(train, name, getattr(fastmts, name))


def unpatch():
  """Restores TF's own objects wherever patch() put fastmts's, modules of
  TF loaded since included (no-op if not patched)."""
  import fastmts  # pylint: disable=g-import-not-at-top
  with _lock:
    for module, module_class in _swapped.values():
      module.__class__ = module_class
    _swapped.clear()
    _read_from_outside.clear()
    ours = {id(getattr(fastmts, n)): getattr(fastmts, n) for n, original in _originals.items()
            if original is not getattr(fastmts, n)}
    for _, module, name, _ in list(_holders(ours)):
      setattr(module, name, _originals[name])
    train = _train_module()
    for name, original in _originals.items():
      setattr(train, name, original)
    _originals.clear()


def is_patched():
  """Whether patch() is in effect."""
  with _lock:
    return bool(_originals)


assert all(hasattr(_tf_hooks, n) for n in _NAMES if n.endswith('Hook'))
