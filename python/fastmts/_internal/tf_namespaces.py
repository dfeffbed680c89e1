"""The loaded modules of TensorFlow and tensorflow-estimator, read without
loading anything: what patch() rebinds and unpatch() restores.

TF and the estimator bind the public names in many modules besides the one
that defines them: their internal modules (`training.training`, the
estimator's `hooks.basic_session_run_hooks`) and their generated API
modules (`tf.train` and `tf.compat.v1.train`, separate modules in 1.15;
`tf.estimator` and `tf.compat.v1.estimator`, from the estimator's `_api` or
`python.estimator.api._v1` / `_v2`). Some of those module objects are not in
sys.modules: a TFModuleWrapper's wrapped module, and a LazyLoader (tf.estimator
from TF 2.0), which copies its module's names into itself when it loads and
stays with whoever took it before (`from tensorflow import estimator`, a
wrapper's cache). So the walk starts at every module in sys.modules, the
user's included, and follows every module object a module binds; it
yields only TF's and the estimator's.
"""
import sys
import types

# TF 1.15 to 2.1 are the package tensorflow_core, aliased as tensorflow: their
# API modules may be loaded under both names. tensorflow-estimator (TF up to
# 2.15) re-exports TF's hooks under tf.estimator from its own package.
PACKAGES = ('tensorflow', 'tensorflow_core', 'tensorflow_estimator')


def _in_packages(name):
  return isinstance(name, str) and name.split('.', 1)[0] in PACKAGES


def _namespace(module):
  """The module's own __dict__, read past any __getattr__ or
  __getattribute__ of its class (so a lazy loader stays unloaded and a
  swapped module shows its own globals); None if it has none."""
  try:
    return object.__getattribute__(module, '__dict__')
  except AttributeError:
    return None


def bindings(objects):
  """[(module, its namespace, attribute name, object)] for every public
  attribute of a loaded module object of PACKAGES whose object is one of
  `objects` (an id -> object map), whatever name it is bound under. The
  modules: those in sys.modules (one object may be there under two names)
  and those bound by a module (any module's, the user's too), transitively;
  each read once."""
  pending = [module for module in list(sys.modules.values()) if module is not None]
  seen = set()
  is_module_kind = {}  # type -> whether a module type: one issubclass() per type
  found = []
  while pending:
    module = pending.pop()
    if id(module) in seen:
      continue
    seen.add(id(module))
    own = _namespace(module)
    if own is None:
      continue
    of_packages = _in_packages(own.get('__name__'))
    for name, value in list(own.items()):
      kind = type(value)  # not isinstance(): no attribute of a lazy object is read
      if kind not in is_module_kind:
        is_module_kind[kind] = issubclass(kind, types.ModuleType)
      if is_module_kind[kind]:
        if id(value) not in seen:
          pending.append(value)
      elif (of_packages and id(value) in objects and value is objects[id(value)] and
            not name.startswith('_')):
        found.append((module, own, name, value))
  return found
