"""fastmts.patch(): speed up an existing tf.compat.v1 training script with one line.

    import fastmts
    fastmts.patch()   # tf.compat.v1.train.MonitoredTrainingSession is now fastmts's
    ...               # the script, unchanged
    fastmts.unpatch() # TF's own again

patch() rebinds every place TensorFlow and tensorflow-estimator bind the
public names: the public `tf.compat.v1.train`, `tf.train` (a module of its
own in 1.15), `tf.estimator` and `tf.compat.v1.estimator`, and the internal
modules (`tensorflow.python.training.monitored_session` and the others that
import from it), so libraries that build their sessions from TF's internal
modules at call time (tf_slim's training and evaluation, TF's own
`training.evaluation`, the estimator) get fastmts too. Where it looks:
tf_namespaces. A module loaded after patch() imports the names from modules
already rebound (the defining module answers with fastmts's from outside),
so it gets fastmts's too; unpatch() restores it with the others. A module
outside TensorFlow that took its own reference before patch() (`from
...monitored_session import MonitoredSession`) keeps TF's class.
"""
import threading
import types

from tensorflow.python.training import basic_session_run_hooks as _tf_hooks

from fastmts._internal import tf_namespaces

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
# Modules whose class patch() swapped: id -> (module, its class before).
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


def _train_module():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.compat.v1.train


def _rebind(replacements):
  """Binds replacements[id(x)] wherever a loaded module of TF or the
  estimator binds x under a public name; the module that defines x
  answers with it from outside only (_ModuleReadFromOutside)."""
  objects = {key: old for key, (old, _) in replacements.items()}
  for module, own, name, old in tf_namespaces.bindings(objects):
    new = replacements[id(old)][1]
    if (own.get('__name__') == getattr(old, '__module__', None) and
        type(module) in (types.ModuleType, _ModuleReadFromOutside)):
      _swapped.setdefault(id(module), (module, type(module)))
      _read_from_outside.setdefault(own['__name__'], {})[name] = new
      module.__class__ = _ModuleReadFromOutside
    else:
      setattr(module, name, new)  # through a wrapper's own __setattr__


def _differing(fastmts):
  """(name, TF's object, fastmts's) for the names whose objects differ."""
  return [(n, _originals[n], getattr(fastmts, n)) for n in _NAMES
          if _originals[n] is not getattr(fastmts, n)]


def patch():
  """Makes TF's monitored sessions and stock hooks fastmts's, wherever TF and
  tensorflow-estimator bind them (modules loaded so far; a module loaded
  later imports them from these). Idempotent, and a second call rebinds the
  modules loaded since; undone by unpatch()."""
  import fastmts  # pylint: disable=g-import-not-at-top
  train = _train_module()
  with _lock:
    for name in _NAMES:
      if name not in _originals:
        _originals[name] = getattr(train, name)
    _rebind({id(theirs): (theirs, ours) for _, theirs, ours in _differing(fastmts)})
    for name in _NAMES:  # the public module, whatever kind of module it is
      setattr(train, name, getattr(fastmts, name))


def unpatch():
  """Restores TF's own objects wherever patch() put fastmts's, modules of
  TF and the estimator loaded since included (no-op if not patched)."""
  import fastmts  # pylint: disable=g-import-not-at-top
  with _lock:
    if not _originals:  # never patched, or unpatched already
      return
    for module, module_class in _swapped.values():
      module.__class__ = module_class
    _swapped.clear()
    _read_from_outside.clear()
    # fastmts's objects are defined outside TF: this swaps no module.
    _rebind({id(ours): (ours, theirs) for _, theirs, ours in _differing(fastmts)})
    train = _train_module()
    for name, original in _originals.items():
      setattr(train, name, original)
    _originals.clear()


def is_patched():
  """Whether patch() is in effect."""
  with _lock:
    return bool(_originals)


assert all(hasattr(_tf_hooks, n) for n in _NAMES if n.endswith('Hook'))
