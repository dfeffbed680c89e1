"""The aliases of the names fastmts.patch() rebinds, listed from the loaded
modules themselves (tests/test_patch_aliases.py, in process and in fresh
interpreters).

An alias is a public attribute of a loaded module of TensorFlow or
tensorflow-estimator whose object is one of TF's objects that patch()
replaces (or the fastmts object standing for it). The walk is this test's
own, wider than patch()'s: it starts from every module in sys.modules,
whatever its package, and follows every module object a module binds
(TFModuleWrapper's wrapped modules, lazy loaders that copied their module's
names), reading namespaces without attribute access so that nothing loads.
"""
import collections
import sys
import types

PACKAGES = ('tensorflow', 'tensorflow_core', 'tensorflow_estimator')


def _own(obj):
  try:
    return object.__getattribute__(obj, '__dict__')
  except AttributeError:
    return None


def _ours(name):
  return isinstance(name, str) and name.split('.', 1)[0] in PACKAGES


def name_of(module):
  """The module's own __name__ (a lazy loader's: the module it loads)."""
  return _own(module).get('__name__')


def binds(module, name):
  """Whether the module's own namespace binds `name`. Not hasattr(): a
  LazyLoader that misses a name reloads and copies its module's names
  again, which would hide a stale copy."""
  return name in _own(module)


def loaded_modules():
  """[(label, module)]: every loaded module object of PACKAGES once,
  labelled with a way to reach it (its sys.modules key, or the module
  binding it and the attribute; sys.modules keys first)."""
  pending = collections.deque((key, module) for key, module in list(sys.modules.items())
                              if module is not None)
  seen, found = set(), []
  while pending:
    label, module = pending.popleft()
    if id(module) in seen:
      continue
    seen.add(id(module))
    own = _own(module)
    if own is None:
      continue
    if _ours(own.get('__name__')):
      found.append((label, module))
    for attr, value in list(own.items()):
      if issubclass(type(value), types.ModuleType) and id(value) not in seen:
        pending.append(('%s.%s' % (label, attr), value))
  return found


def replaced_objects(fastmts, public_train):
  """{id(TF's object): (name, TF's object, fastmts's)} for the names patch()
  binds to an object other than TF's, read from `public_train`
  (tf.compat.v1.train) while unpatched."""
  from fastmts import patching  # pylint: disable=g-import-not-at-top
  result = {}
  for name in patching._NAMES:  # pylint: disable=protected-access
    theirs, ours = getattr(public_train, name), getattr(fastmts, name)
    if theirs is not ours:
      result[id(theirs)] = (name, theirs, ours)
  return result


def aliases(replaced):
  """[(label, module, attribute, TF's object, fastmts's)] for every public
  attribute of a loaded module of PACKAGES bound to TF's object or to
  fastmts's, as its namespace holds it."""
  both = {}
  for name, theirs, ours in replaced.values():
    both[id(theirs)] = both[id(ours)] = (theirs, ours)
  found = []
  for label, module in loaded_modules():
    for attr, value in list(_own(module).items()):
      if id(value) in both and not attr.startswith('_'):
        theirs, ours = both[id(value)]
        if value is theirs or value is ours:
          found.append((label, module, attr, theirs, ours))
  return found


def misses(found, want):
  """The labels.attributes of `found` whose attribute, read as a user reads
  it (getattr), is not the object `want` ('ours' or 'theirs') picks."""
  return sorted('%s.%s' % (label, attr) for label, module, attr, theirs, ours in found
                if getattr(module, attr) is not (ours if want == 'ours' else theirs))
