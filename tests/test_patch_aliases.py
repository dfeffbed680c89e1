"""fastmts.patch() reaches every alias of the names it rebinds.

TF and tensorflow-estimator expose the same objects from many modules:
`tf.compat.v1.train`, `tf.train` (a module of its own in 1.15), `tf.estimator`
and `tf.compat.v1.estimator` (the estimator's `_api` and `api._v1` / `_v2`
modules, re-exporting its `hooks` module), TF's internal modules, and module
objects outside sys.modules (a TFModuleWrapper's wrapped module, a lazy
loader's copy). A `tf.estimator.CheckpointSaverHook` left TF's while
`tf.compat.v1.train.CheckpointSaverHook` is fastmts's runs TF's Python save
path. The aliases are listed from the loaded modules themselves
(alias_utils), for the release installed: after patch() each must read as
fastmts's object, after unpatch() as TF's, whether its module was loaded
before patch() or only after it (in a fresh interpreter).
"""
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import alias_utils

pytestmark = pytest.mark.timeout(180)

SUBPROCESS_TIMEOUT = 150  # a bound on a hang; a run takes about two `import tensorflow`


def _load_estimator():
  """Loads tf.estimator and tf.compat.v1.estimator (lazy modules from TF
  2.0); False where TF ships none (2.16 and later) or it cannot load."""
  try:
    tf.estimator.Estimator  # pylint: disable=pointless-statement
    tf.compat.v1.estimator.Estimator  # pylint: disable=pointless-statement
    return True
  except (ImportError, AttributeError):
    return False


def _estimator_labels(found):
  return sorted('%s.%s' % (label, attr) for label, module, attr, _, _ in found
                if alias_utils.name_of(module).startswith('tensorflow_estimator'))


def test_aliases_loaded_before_patch_follow_patch_and_unpatch(fastmts):
  """Every alias in the modules loaded here (tf.estimator's loaded first, as
  a script that imports it does) reads as fastmts's object while patched and
  as TF's after unpatch(), and no module keeps a fastmts object after it."""
  has_estimator = _load_estimator()
  replaced = alias_utils.replaced_objects(fastmts, tf.compat.v1.train)
  assert sorted(name for name, _, _ in replaced.values()) == [
      'CheckpointSaverHook', 'MonitoredSession', 'MonitoredTrainingSession',
      'SingularMonitoredSession', 'WorkerSessionCreator']
  found = alias_utils.aliases(replaced)
  assert all(theirs is getattr(module, attr) for _, module, attr, theirs, _ in found)
  # Not vacuous: the public module and, with an estimator, its modules.
  labels = {label for label, _, _, _, _ in found}
  assert {'tensorflow.python.training.monitored_session',
          'tensorflow.python.training.basic_session_run_hooks'} <= labels, sorted(labels)
  assert bool(_estimator_labels(found)) == has_estimator, _estimator_labels(found)
  fastmts.patch()
  try:
    patched_misses = alias_utils.misses(found, 'ours')
  finally:
    fastmts.unpatch()
  assert patched_misses == [], '%d of %d aliases stayed TF\'s' % (len(patched_misses), len(found))
  assert alias_utils.misses(found, 'theirs') == []
  # Nothing of fastmts's is left anywhere.
  assert alias_utils.misses(alias_utils.aliases(replaced), 'theirs') == []


@pytest.mark.parametrize('module_name', ['estimator', 'compat.v1.estimator', 'compat.v1.train',
                                         'train'])
def test_public_modules_give_fastmts_classes_while_patched(fastmts, module_name):
  """The issue's case, by the public names: tf.estimator.CheckpointSaverHook
  (TF's while tf.compat.v1.train's was fastmts's on 1.15) and the others."""
  if 'estimator' in module_name and not _load_estimator():
    pytest.skip('TF %s ships no tf.estimator' % tf.__version__)
  module = tf
  for part in module_name.split('.'):
    module = getattr(module, part)
  replaced = alias_utils.replaced_objects(fastmts, tf.compat.v1.train)
  names = sorted(name for name, _, _ in replaced.values() if hasattr(module, name))
  if module_name == 'train' and not names:
    pytest.skip('tf.train of TF %s has none of the names (TF 2: tf.compat.v1.train)'
                % tf.__version__)
  assert names, 'tf.%s binds none of the names' % module_name
  fastmts.patch()
  try:
    patched = {name: getattr(module, name) is getattr(fastmts, name) for name in names}
  finally:
    fastmts.unpatch()
  assert patched == dict.fromkeys(names, True)
  assert {name: getattr(module, name) is getattr(tf.compat.v1.train, name) for name in names} == (
      dict.fromkeys(names, True))


_SCRIPT = r'''
import json
import sys
tests_dir, when = sys.argv[1:]
sys.path.insert(0, tests_dir)
import tensorflow as tf
import fastmts
import alias_utils


def load(path):
  module = tf
  try:
    for part in path.split('.'):
      module = getattr(module, part)
    getattr(module, 'CheckpointSaverHook', None)  # loads a lazy module
    return module
  except (ImportError, AttributeError):
    return None


PATHS = ('estimator', 'compat.v1.estimator', 'compat.v2.estimator', 'train')
replaced = alias_utils.replaced_objects(fastmts, tf.compat.v1.train)
if when == 'held from before patch':
  # What `from tensorflow import estimator` binds in the user's module: from
  # TF 2.0 a LazyLoader, which copies the module's names into itself when it
  # loads. (One held only in a container or a local is not reached: like a
  # reference taken from TF's internal modules, it stays TF's.)
  held = {path: load(path) for path in PATHS}
  for path, module in held.items():
    globals()['held_' + path.replace('.', '_')] = module
fastmts.patch()
if when == 'loaded after patch':
  held = {path: load(path) for path in PATHS}
found = alias_utils.aliases(replaced)
report = {
    'loaded': sorted(path for path, module in held.items() if module is not None),
    'aliases': sorted('%s %s.%s' % (alias_utils.name_of(module), label, attr)
                      for label, module, attr, _, _ in found),
    'patched misses': alias_utils.misses(found, 'ours'),
    # The public modules as held, by their names patch() rebinds.
    'held misses': sorted('%s.%s' % (path, name) for path, module in held.items()
                          if module is not None
                          for name, _, ours in replaced.values()
                          if alias_utils.binds(module, name) and getattr(module, name) is not ours),
    'held with a saver hook': sorted(path for path, module in held.items() if module is not None
                                     and alias_utils.binds(module, 'CheckpointSaverHook')),
}
fastmts.unpatch()
report['unpatched misses'] = alias_utils.misses(alias_utils.aliases(replaced), 'theirs')
print(json.dumps(report))
'''


@pytest.mark.parametrize('when', ['loaded after patch', 'held from before patch'])
def test_estimator_modules_loaded_after_patch_or_held_from_before(fastmts, when):
  '''In a fresh interpreter, tf.estimator loaded (lazily from TF 2.0) only
  after patch(), or taken before it as `from tensorflow import estimator`
  does: every alias is fastmts's while patched, TF's after unpatch().'''
  del fastmts
  tests_dir = os.path.dirname(os.path.abspath(__file__))
  proc = subprocess.run([sys.executable, '-c', _SCRIPT, tests_dir, when],
                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, timeout=SUBPROCESS_TIMEOUT,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads(proc.stdout.strip().splitlines()[-1])
  estimator_aliases = [a for a in report['aliases'] if a.startswith('tensorflow_estimator')]
  has_estimator = 'estimator' in report['loaded']
  assert bool(estimator_aliases) == has_estimator, report
  assert report['patched misses'] == [], report
  assert report['unpatched misses'] == [], report
  assert report['held misses'] == [], report
  if has_estimator:
    assert {'estimator', 'compat.v1.estimator'} <= set(report['held with a saver hook']), report
  if not has_estimator:
    pytest.skip('TF %s ships no tf.estimator (checked: tf.compat.v1.train, tf.train)'
                % tf.__version__)
