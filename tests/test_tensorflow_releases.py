"""fastmts on whichever TensorFlow is installed: the release gate at import,
the extension's independence from any one TF build, and the raw C handles it
reads from TF's Python objects (pybind11's conduit from TF 2.21, its instance
layout from 2.2, SWIG's objects in 1.15 to 2.1)."""

import ast
import os
import re
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

import source_tree

# A bound on a hang, not on slowness: a child here takes under a second, loaded or not
# (its `import tensorflow` fails at once). Below the suite's 120 s per test
# (pyproject.toml), so that it fires first.
SUBPROCESS_TIMEOUT = 90


def _python(code):
  return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                        timeout=SUBPROCESS_TIMEOUT, stdin=subprocess.DEVNULL,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))


def test_import_without_tensorflow_says_what_to_install(fastmts):
  # As on a machine with no TF installed: `import tensorflow` fails.
  proc = _python("import sys; sys.modules['tensorflow'] = None; import fastmts")
  assert proc.returncode != 0
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith('ImportError: fastmts needs TensorFlow 1.15 or 2.0 to 2.21, and '
                         '`import tensorflow` failed'), proc.stderr
  assert "pip install 'tensorflow-cpu>=2.12,<2.22'" in last
  assert "pip install 'fastmts[cpu]'" in last
  assert "'numpy<2'" in last and "'protobuf<=3.20'" in last


def test_a_tensorflow_that_fails_to_import_is_named_in_one_line(fastmts):
  """TF 2.11 and older under numpy 2 fail with a TypeError, not an ImportError."""
  proc = _python("import sys, types\n"
                 "broken = types.ModuleType('tensorflow')\n"
                 "def fail(name): raise TypeError('Unable to convert function return value')\n"
                 "broken.__getattr__ = fail\n"
                 "class Finder:\n"
                 "  def find_spec(self, name, path=None, target=None):\n"
                 "    if name == 'tensorflow': raise TypeError('Unable to convert function return value')\n"
                 "sys.meta_path.insert(0, Finder())\n"
                 "import fastmts")
  assert proc.returncode != 0
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith('ImportError: fastmts needs TensorFlow 1.15 or 2.0 to 2.21, and '
                         '`import tensorflow` failed (TypeError: Unable to convert'), proc.stderr
  assert "'numpy<2'" in last


@pytest.mark.parametrize('version', ['1.15.5', '2.0.0', '2.4.4', '2.11.1', '2.12.0', '2.12.1',
                                     '2.16.2', '2.19.1', '2.21.0', '2.21.0-rc1',
                                     '2.20.0.dev20250101'])
def test_supported_releases_pass_the_gate(fastmts, version):
  from fastmts import _tensorflow  # pylint: disable=g-import-not-at-top
  major, minor = (int(p) for p in version.split('.')[:2])
  assert _tensorflow.check_release(version) == (major, minor)


@pytest.mark.parametrize('version', ['1.14.0', '1.13.1', '2.22.0', '3.0.0', 'nightly'])
def test_unsupported_releases_fail_the_gate_with_the_range(fastmts, version):
  from fastmts import _tensorflow  # pylint: disable=g-import-not-at-top
  with pytest.raises(ImportError) as raised:
    _tensorflow.check_release(version)
  message = str(raised.value)
  assert message.startswith('fastmts supports TensorFlow 1.15 or 2.0 to 2.21; this is TensorFlow %s: '
                            % version if version[0].isdigit() else
                            "fastmts cannot read the TensorFlow version 'nightly'"), message
  assert "pip install 'tensorflow-cpu>=2.12,<2.22'" in message


def test_the_installed_release_is_the_one_fastmts_runs_on(fastmts):
  from fastmts import _tensorflow  # pylint: disable=g-import-not-at-top
  assert _tensorflow.tf is tf
  assert _tensorflow.RELEASE == tuple(int(p) for p in tf.__version__.split('.')[:2])


@pytest.mark.skipif(shutil.which('readelf') is None, reason='needs readelf (binutils)')
def test_extension_is_bound_to_no_tensorflow_build(fastmts):
  """The extension links no TF library and imports no TF symbol: it binds the
  C API at import to the TF the process loaded, so one wheel serves every
  supported release."""
  path = fastmts._native.__file__  # pylint: disable=protected-access
  dynamic = subprocess.run(['readelf', '--dynamic', '--wide', path], capture_output=True,
                           text=True, timeout=60, check=True).stdout
  needed = [line for line in dynamic.splitlines() if '(NEEDED)' in line]
  assert needed and not [line for line in needed if 'tensorflow' in line], needed
  symbols = subprocess.run(['readelf', '--dyn-syms', '--wide', path], capture_output=True,
                           text=True, timeout=60, check=True).stdout
  undefined_tf = [line.split()[-1] for line in symbols.splitlines()
                  if ' UND ' in line and line.split()[-1].startswith('TF_')]
  assert undefined_tf == []


def test_operation_handles_are_the_operations_themselves(fastmts):
  graph = tf.Graph()
  with graph.as_default():
    a = tf.constant(1.0, name='a')
    b = tf.add(a, a, name='scope/b')
    v = tf.compat.v1.get_variable('v', [], use_resource=True)
  for op in (a.op, b.op, v.op, v.initializer):
    assert fastmts._native.operation_name(op._c_op) == op.name  # pylint: disable=protected-access


def test_which_route_to_the_handles_this_release_takes(fastmts):
  """TF 2.21 and later hand out their C pointers through pybind11's conduit;
  TF 2.2 to 2.20 have none, and fastmts reads pybind11's instance layout;
  1.15 to 2.1 bind the session with SWIG."""
  from fastmts import _tensorflow  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default() as graph:
    op = tf.constant(1.0).op
    session = tf.compat.v1.Session(graph=graph)
  try:
    for wrapper in (session._session, op._c_op):  # pylint: disable=protected-access
      if _tensorflow.RELEASE < (2, 2):
        assert type(wrapper).__name__ == 'SwigPyObject'
        continue
      assert hasattr(wrapper, '_pybind11_conduit_v1_') == (_tensorflow.RELEASE >= (2, 21))
      assert type(wrapper).__basicsize__ == 56  # what the layout route requires
  finally:
    session.close()


@pytest.mark.parametrize('not_a_handle', [object(), 3, 'c_op', tf.DType(1)],
                         ids=['object', 'int', 'str', 'dtype'])
def test_a_non_handle_is_a_type_error_not_a_crash(fastmts, not_a_handle):
  with pytest.raises(TypeError, match='cannot read the TensorFlow C object behind'):
    fastmts._native.operation_name(not_a_handle)  # pylint: disable=protected-access


def test_a_session_wrapper_is_not_an_operation(fastmts):
  """TF's own wrapper of another C type (here the TF_Session) is refused, on
  both routes: the conduit checks the C++ type, the layout route the class."""
  with tf.Graph().as_default() as graph:
    session = tf.compat.v1.Session(graph=graph)
  try:
    with pytest.raises(TypeError, match='cannot read the TensorFlow C object behind'):
      fastmts._native.operation_name(session._session)  # pylint: disable=protected-access
  finally:
    session.close()


# Release facts live in _tensorflow.py (docs/design.md, "When TF changes"):
# each difference between TF releases is a fact named there, the code that
# depends on one names the fact, and nothing else in python/fastmts compares
# TF's version or probes what a release has. These read the source tree.

# The release gate itself: which releases are supported and which one runs.
_GATE = ('SUPPORTED', 'VERSION', 'RELEASE', 'check_release', 'tf')
_VERSION_NAMES = ('__version__', 'VERSION', 'RELEASE', 'SUPPORTED', 'version_info',
                  'LooseVersion', 'StrictVersion', 'Version', 'parse_version')


def _package_modules():
  """(path relative to the package, source) of every module but _tensorflow.py."""
  return [(str(p.relative_to(source_tree.PACKAGE)), p.read_text())
          for p in source_tree.package_files() if p.name != '_tensorflow.py']


def _facts():
  """The public names _tensorflow.py defines at its top level (assigned,
  defined or imported, in try blocks too; an except block's fallback
  definitions and imports, not its locals), the gate's left out."""
  names = set()
  body = [(n, False) for n in ast.parse((source_tree.PACKAGE / '_tensorflow.py').read_text()).body]
  while body:
    node, in_handler = body.pop()
    if isinstance(node, ast.Try):
      body.extend([(n, False) for n in node.body] +
                  [(n, True) for h in node.handlers for n in h.body])
    elif isinstance(node, ast.Assign) and not in_handler:
      names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    elif isinstance(node, ast.FunctionDef):
      names.add(node.name)
    elif isinstance(node, ast.ImportFrom):
      names.update(a.asname or a.name for a in node.names)
  return sorted(n for n in names if not n.startswith('_') and n not in _GATE)


def _names_used(text, name):
  return bool(re.search(r'\b_tensorflow\.%s\b' % name, text) or
              re.search(r'from fastmts\._tensorflow import\b[^\n]*\b%s\b' % name, text))


def test_every_release_fact_is_used_by_name():
  """A fact nothing names is dead (or its users read the release some other
  way): each is named outside _tensorflow.py, or by another fact that is."""
  modules = _package_modules()
  tf_module = (source_tree.PACKAGE / '_tensorflow.py').read_text()
  facts = _facts()
  assert len(facts) >= 15, facts
  used = {n for n in facts if any(_names_used(text, n) for _, text in modules)}
  for name in set(facts) - used:  # used by a fact that is used
    users = [u for u in used if re.search(r'def %s\b[^\n]*\n(?:[ \t]+[^\n]*\n|\n)*?[^\n]*\b%s\b'
                                          % (u, name), tf_module)]
    assert users, '_tensorflow.%s is named nowhere' % name


def _tf_aliases(tree):
  """Names a module binds to TensorFlow's modules (import tensorflow as tf,
  from tensorflow.python... import x as _tf_x)."""
  aliases = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      aliases.update(a.asname or a.name.split('.')[0] for a in node.names
                     if a.name.split('.')[0] in ('tensorflow', 'tensorflow_core'))
    elif isinstance(node, ast.ImportFrom) and (node.module or '').startswith('tensorflow'):
      aliases.update(a.asname or a.name for a in node.names)
  return aliases


def _root_name(node):
  while isinstance(node, ast.Attribute):
    node = node.value
  return node.id if isinstance(node, ast.Name) else None


def _is_int_literal(node):
  """An int written as a literal (ast.Constant, or ast.Num on Python 3.7)."""
  try:
    return type(ast.literal_eval(node)) is int
  except (ValueError, TypeError, SyntaxError):
    return False


def _release_probes(path, text):
  """What in one module compares a release or probes what a release has."""
  tree = ast.parse(text)
  aliases = _tf_aliases(tree)
  # An assertion branches on nothing: what it checks is no probe.
  asserted = {id(n) for a in ast.walk(tree) if isinstance(a, ast.Assert) for n in ast.walk(a)}
  found = []
  for node in ast.walk(tree):
    where = '%s:%d' % (path, getattr(node, 'lineno', 0))
    if isinstance(node, ast.Compare):
      named = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
      named |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
      if 'sys' in named:  # Python's own version (sys.version_info), not TF's
        continue
      for part in [node.left] + node.comparators:
        if {n.attr for n in ast.walk(part) if isinstance(n, ast.Attribute)} & set(_VERSION_NAMES) or (
            {n.id for n in ast.walk(part) if isinstance(n, ast.Name)} & set(_VERSION_NAMES)):
          found.append('%s compares a version' % where)
        if (isinstance(part, ast.Tuple) and part.elts and
            all(_is_int_literal(e) for e in part.elts)):
          found.append('%s compares a release tuple' % where)
    elif isinstance(node, ast.Attribute) and node.attr in ('RELEASE', 'SUPPORTED', 'check_release'):
      found.append('%s reads the release' % where)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
      probe = (node.func.id == 'hasattr' or
               (node.func.id == 'getattr' and len(node.args) == 3))
      if probe and _root_name(node.args[0]) in aliases and id(node) not in asserted:
        found.append('%s probes a TF module with %s' % (where, node.func.id))
    elif isinstance(node, ast.Try):
      caught = {_root_name(h.type) for h in node.handlers if h.type is not None}
      caught |= {_root_name(e) for h in node.handlers if isinstance(h.type, ast.Tuple)
                 for e in h.type.elts}
      imports_tf = any(isinstance(n, (ast.Import, ast.ImportFrom)) and
                       _tf_aliases(ast.Module(body=[n], type_ignores=[]))
                       for n in ast.walk(ast.Module(body=node.body, type_ignores=[])))
      if imports_tf and caught & {'ImportError', 'ModuleNotFoundError', 'AttributeError'}:
        found.append('%s tries an import of TF' % where)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
      if module in ('distutils.version', 'packaging.version', 'pkg_resources',
                    'tensorflow.python.framework.versions'):
        found.append('%s imports %s' % (where, module))
  return found


def test_no_release_is_compared_or_probed_outside_the_release_facts():
  found = [p for path, text in _package_modules() for p in _release_probes(path, text)]
  assert not found, '\n'.join(found)


# What would make native code depend on the TF release it runs on: asking
# TF's C API for the release, or a header's release macros. The native core
# binds the same C API on every release; what differs is found in Python
# (fastmts._tensorflow's release facts) and handed down.
_NATIVE_RELEASE_PROBES = re.compile(r'TF_Version|TF_(MAJOR|MINOR|PATCH)_VERSION|TF_VERSION')


def native_release_probes(path, text):
  return ['%s:%d' % (path, n) for n, line in enumerate(text.splitlines(), 1)
          if _NATIVE_RELEASE_PROBES.search(line)]


def test_no_release_is_probed_in_the_native_code():
  found = [p for path in source_tree.cpp_files()
           for p in native_release_probes(path.relative_to(source_tree.ROOT), path.read_text())]
  assert not found, '\n'.join(found)


def test_the_native_release_check_finds_what_it_looks_for():
  text = ('const char* v = TF_Version();\n#if TF_MAJOR_VERSION > 1\n#endif\n'
          'int tf_version_free = 0;\n')
  assert native_release_probes('x.cc', text) == ['x.cc:1', 'x.cc:2']


def test_the_release_check_finds_what_it_looks_for():
  """The check above on code that does what it forbids."""
  bad = ('import tensorflow as tf\n'
         'from fastmts import _tensorflow\n'
         'from tensorflow.python.training import saver as _tf_saver\n'
         'if _tensorflow.RELEASE < (2, 21): pass\n'
         'if tf.__version__ >= "2.4": pass\n'
         'x = hasattr(_tf_saver.Saver, "save")\n'
         'y = getattr(_tf_saver, "_get_checkpoint_size", None)\n'
         'try:\n'
         '  from tensorflow.python.framework.tensor import Tensor\n'
         'except ImportError:\n'
         '  Tensor = None\n')
  found = sorted(_release_probes('bad.py', bad))
  assert found == [
      'bad.py:4 compares a release tuple', 'bad.py:4 compares a version',
      'bad.py:4 reads the release', 'bad.py:5 compares a version',
      'bad.py:6 probes a TF module with hasattr', 'bad.py:7 probes a TF module with getattr',
      'bad.py:8 tries an import of TF'], found
  assert not _release_probes('good.py', 'import sys\nok = sys.version_info >= (3, 8)\n')


# What each release fact is on each release, as _tensorflow.py's comments
# name the releases (_UNKNOWN: not pinned down for that release). A new release
# that changes one fails here first (docs/design.md, "When TF changes").
_UNKNOWN = object()
_FACTS_BY_RELEASE = {
    'SAVER_HOOK_TAKES_SAVE_GRAPH_DEF': lambda r: r >= (2, 1),
    'SCAFFOLD_TAKES_LOCAL_INIT_FEED_DICT': lambda r: r >= (2, 1),
    'EVENT_FILE_WRITER_KEEPS_MAX_QUEUE': lambda r: r >= (2, 1),
    'FILE_WRITER_ADDS_GRAPH_IN_PARTS': lambda r: True,
    'WRITE_GRAPH_FLOAT_FORMAT': lambda r: '' if r < (2, 21) else None,
    'WRITE_GRAPH_CHECKS_FILE_EXISTS': lambda r: r <= (2, 4),
    'SAVER_SAVE_LOGS_CHECKPOINT_FILES': lambda r: r == (2, 9),
    'SAVER_HOOK_LOGS_LISTENER_CALLS': lambda r: True if r >= (2, 4) else (
        False if r <= (2, 1) else _UNKNOWN),
    'WRITE_GRAPH_IS_DETERMINISTIC': lambda r: True if r >= (2, 4) else (
        False if r in ((1, 15), (2, 1)) else _UNKNOWN),
    'FEED_ERRORS_USE_PERCENT_FORMAT': lambda r: True if r <= (2, 4) else (
        False if r >= (2, 8) else _UNKNOWN),
}


@pytest.mark.parametrize('fact', sorted(_FACTS_BY_RELEASE))
def test_release_facts_are_what_their_releases_say(fastmts, fact):
  from fastmts import _tensorflow  # pylint: disable=g-import-not-at-top
  expected = _FACTS_BY_RELEASE[fact](_tensorflow.RELEASE)
  if expected is _UNKNOWN:
    pytest.skip('%s is not pinned down for TF %s' % (fact, _tensorflow.VERSION))
  assert getattr(_tensorflow, fact) == expected
