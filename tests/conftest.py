"""Fixtures for the fastmts <-> tf.compat.v1.train compatibility suite.

Each test is parametrized over ``impl``:
  * ``tf``      -- runs the scenario against stock TF only and checks the
                   expected literal (keeps the suite honest about TF itself);
  * ``fastmts`` -- runs the scenario against TF *and* fastmts, asserts both
                   give identical observable results, and checks the literal.
The ``fastmts`` parameter is skipped when ``import fastmts`` fails.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

tf.compat.v1.disable_eager_execution()

from compat_utils import (  # pylint: disable=g-import-not-at-top,wrong-import-position
    LITERALS_HOLD, SANITIZED, TF_IMPL, assert_same, assert_same_kind, estimator_deprecations_out_of_the_way)

try:
  import fastmts as _fastmts  # pylint: disable=g-import-not-at-top
  _FASTMTS_IMPORT_ERROR = None
except Exception as _e:  # pylint: disable=broad-except
  # ImportError, or the compiled extension failing to load.
  _fastmts = None
  _FASTMTS_IMPORT_ERROR = f'{type(_e).__name__}: {_e}'

_NOTHING = object()

if _fastmts is not None:
  from fastmts.file_formats import graph_files as _graph_files  # pylint: disable=g-import-not-at-top
  _DEFAULT_MIN_BYTES = _graph_files.MIN_BYTES


@pytest.fixture(autouse=True)
def _graph_files_in_the_background():
  """Every graph's start files take the background path (graph_files), the
  small graphs of the tests included (graph_files_path below runs a
  module's tests on both paths)."""
  if _fastmts is None:
    yield
    return
  from fastmts.file_formats import graph_files  # pylint: disable=g-import-not-at-top
  saved, graph_files.MIN_BYTES = graph_files.MIN_BYTES, 0
  yield
  graph_files.MIN_BYTES = saved


@pytest.fixture(params=['background', 'in place'])
def graph_files_path(request):
  """The start's graph files written in the background (every graph), or in
  place (graph_files' own threshold: a test's graph is below it), as a user's
  small graph has them. A module whose files are the point runs on both:
  pytestmark = pytest.mark.usefixtures('graph_files_path')."""
  if _fastmts is None:
    yield request.param
    return
  from fastmts.file_formats import graph_files  # pylint: disable=g-import-not-at-top
  saved = graph_files.MIN_BYTES
  graph_files.MIN_BYTES = 0 if request.param == 'background' else _DEFAULT_MIN_BYTES
  yield request.param
  graph_files.MIN_BYTES = saved


@pytest.fixture(params=['tf', 'fastmts'])
def impl(request):
  """The module under test: tf.compat.v1.train or fastmts."""
  if request.param == 'tf':
    # Under .ci/sanitize a case of stock TF alone runs none of fastmts's native
    # code, and the fastmts case runs the same scenario on TF beside it.
    if SANITIZED:
      pytest.skip('stock TF alone, no native code to sanitize (the fastmts case runs it too)')
    return TF_IMPL
  if _fastmts is None:
    pytest.skip('fastmts is not importable (%s); scenario checked against '
                'stock TF only' % _FASTMTS_IMPORT_ERROR)
  return _fastmts


@pytest.fixture
def fastmts():
  """The fastmts module, for fastmts-only tests (skipped if not importable)."""
  if _fastmts is None:
    pytest.skip('fastmts is not importable (%s)' % _FASTMTS_IMPORT_ERROR)
  return _fastmts


@pytest.fixture
def check(impl, tmp_path):
  """check(scenario, expected=...) -> result.

  Runs ``scenario(tf.compat.v1.train, dir)``; when ``impl`` is fastmts also
  runs ``scenario(fastmts, other_dir)`` and asserts the two results are the
  same (values and types).  If ``expected`` is given, the TF result must also
  equal it, so a test can never pass vacuously (on TF 1.15 to 2.11, whose
  results differ from the literals in places, be of its kind:
  compat_utils.LITERALS_HOLD).
  """

  def _check(scenario, expected=_NOTHING):
    ref_dir = tmp_path / 'tf'
    ref_dir.mkdir()
    ref = scenario(TF_IMPL, str(ref_dir))
    result = ref
    if impl is not TF_IMPL:
      impl_dir = tmp_path / 'fastmts'
      impl_dir.mkdir()
      result = scenario(impl, str(impl_dir))
      assert_same(result, ref, 'fastmts result (vs TF)')
    if expected is not _NOTHING and LITERALS_HOLD:
      assert_same(ref, expected, 'TF result (vs expected literal)')
    elif expected is not _NOTHING:  # TF 1.15 to 2.11 (compat_utils.LITERALS_HOLD)
      assert_same_kind(ref, expected, 'TF result (vs the kind of the expected literal)')
    return result

  return _check


@pytest.fixture(scope='session')
def local_server():
  """One in-process gRPC server shared by the distributed tests.

  TF offers no way to stop it; it lives until the process exits.  Tests
  using it must give their variables unique names, since variables live in
  the server's resource containers and outlive the sessions.
  """
  return tf.distribute.Server.create_local_server()


@pytest.fixture(autouse=True)
def _estimator_deprecations_out_of_the_way():
  """TF 2.12 to 2.15 warn once per process, at the first use, that the classes
  of tf.compat.v1.train that tensorflow_estimator's import wrapped are
  deprecated (a test module collected later may import it): before every
  test, those warnings count as printed, so that they are not in one side's
  compared log lines only (compat_utils.estimator_deprecations_out_of_the_way)."""
  estimator_deprecations_out_of_the_way()
  yield
