"""fastmts on whichever TensorFlow is installed: the release gate at import,
the extension's independence from any one TF build, and the raw C handles it
reads from TF's Python objects (pybind11's conduit from TF 2.21, its instance
layout from 2.2, SWIG's objects in 1.15 to 2.1)."""

import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

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
