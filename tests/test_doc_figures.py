"""Test counts typed in the docs are the counts pytest collects.

docs/compatibility.md types the size of the release tests (`RELEASE_TESTS` of
.ci/test_sets, what .ci/all_releases runs on every release), with the date it was
counted: one figure where TF ships tf.estimator (up to 2.15: tests/test_estimator.py's
tests run) and one from 2.16 (that file is one skip). This test collects the set on the
TF installed and holds both figures to it; a change of the set fails here until the
figures and their date are brought up to date. The results of past runs in the same
tables ("43 passed" on 2026-12-02) are of their own day's set and are not checked.
"""
import ast
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

import cluster_utils

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPATIBILITY = ROOT / 'docs' / 'compatibility.md'
ESTIMATOR_TESTS = 'tests/test_estimator.py'
# The sentence that carries the figures (whitespace normalized).
FIGURES_RE = re.compile(r'The release tests: (\d+) where TF ships tf\.estimator \(up to 2\.15\) '
                        r'and (\d+) from 2\.16 \(counted (\d{4}-\d\d-\d\d);')
# pytest --collect-only of the set imports TF once: 4-6 s at load 2, 30 s at load 7 beside
# the docs' commands; a bound on a hang, sized for a loaded 2-core machine (docs/design.md,
# "Hang bounds in tests"). The test runs at most two, one after the other.
COLLECT_SECS = 150
# Fixtures of tests/conftest.py that parametrize a test: a static count cannot see them.
PARAMETRIZED_FIXTURES = {'impl', 'check', 'graph_files_path'}


def _release_tests():
  text = (ROOT / '.ci' / 'test_sets').read_text()
  files = re.search(r'^RELEASE_TESTS="\n(.*?)"', text, re.M | re.S).group(1).split()
  assert ESTIMATOR_TESTS in files, files
  return files


def _collect(files):
  """(tests collected, modules skipped at collection) of `files` on this TF."""
  proc = subprocess.Popen(
      [sys.executable, '-m', 'pytest', '--collect-only', '-q', '-p', 'no:cacheprovider',
       '-rs'] + files, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      start_new_session=True, env=cluster_utils.child_env())
  try:
    out, _ = proc.communicate(timeout=COLLECT_SECS)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    pytest.fail('pytest --collect-only still running after %d s:\n%s'
                % (COLLECT_SECS, out.decode(errors='replace')[-3000:]))
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  text = out.decode(errors='replace')
  m = re.search(r'^(\d+) tests? collected', text, re.M)
  assert m and proc.returncode == 0, text[-3000:]
  skipped = re.findall(r'^SKIPPED \[(\d+)\] (\S+?):\d+:', text, re.M)
  return int(m.group(1)), {path: int(n) for n, path in skipped}


def _static_count(path):
  """The tests of a module by its source: each test function times the lengths of its
  parametrize lists (literals only)."""
  total = 0
  for node in ast.parse((ROOT / path).read_text()).body:
    if not (isinstance(node, ast.FunctionDef) and node.name.startswith('test_')):
      continue
    assert not PARAMETRIZED_FIXTURES & {a.arg for a in node.args.args}, node.name
    cases = 1
    for deco in node.decorator_list:
      if isinstance(deco, ast.Call) and getattr(deco.func, 'attr', None) == 'parametrize':
        values = deco.args[1]
        assert isinstance(values, (ast.List, ast.Tuple)), '%s: not a literal' % node.name
        cases *= len(values.elts)
    total += cases
  return total


def _typed_figures():
  text = ' '.join(COMPATIBILITY.read_text().split())
  m = FIGURES_RE.search(text)
  assert m, 'docs/compatibility.md: no sentence matching %s' % FIGURES_RE.pattern
  return int(m.group(1)), int(m.group(2)), m.group(3)


@pytest.mark.timeout(2 * COLLECT_SECS + 60)
def test_the_release_test_counts_in_compatibility_md_are_collected():
  with_estimator, without_estimator, counted = _typed_figures()
  collected, skipped = _collect(_release_tests())
  estimator = _static_count(ESTIMATOR_TESTS)
  if ESTIMATOR_TESTS in skipped:  # no tf.estimator here: the file is one skip
    assert skipped[ESTIMATOR_TESTS] == 1, skipped
    others = collected
  else:  # its tests are collected: the static count must agree with them
    estimator_collected, _ = _collect([ESTIMATOR_TESTS])
    assert estimator_collected == estimator, (estimator_collected, estimator)
    others = collected - estimator
  actual = (others + estimator, others + 1)
  assert (with_estimator, without_estimator) == actual, (
      'docs/compatibility.md says the release tests are %d where TF ships tf.estimator and '
      '%d from 2.16 (counted %s); pytest collects %d and %d: update the figures and their '
      'date' % ((with_estimator, without_estimator, counted) + actual))
