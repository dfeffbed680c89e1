"""The benchmarks cannot lose a runner: where the fastmts they measure lacks one that they
name (here the floor, fastmts.benchmarking.native_floor_loop, as when it moved once and every
ratio to it quietly became n/a), bench/report.py, bench/compare_builds.py and the pytest
benchmarks fail with that reason; none prints n/a or skips.

Each runs as a user runs it, in its own process, on a copy of the installed fastmts whose
benchmarking module lacks the floor, put first on PYTHONPATH (as compare_builds.py puts a
build)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import fastmts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, 'bench')
REASON = 'fastmts.benchmarking.native_floor_loop missing'
# Bounds on a hang: each command imports TF once or twice and measures nothing.
COMMAND_TIMEOUT_SECS = 300


@pytest.fixture(scope='module')
def build_without_floor(tmp_path_factory):
  """A directory holding a copy of the installed fastmts without the floor."""
  build = tmp_path_factory.mktemp('build-without-floor')
  package = os.path.join(str(build), 'fastmts')
  shutil.copytree(os.path.dirname(fastmts.__file__), package,
                  ignore=shutil.ignore_patterns('__pycache__'))
  module = os.path.join(package, 'benchmarking.py')
  with open(module) as f:
    source = f.read()
  assert 'def native_floor_loop(' in source
  with open(module, 'a') as f:
    f.write('\n\ndel native_floor_loop  # tests/test_bench_runners.py: the floor lost\n')
  return str(build)


def _run(argv, build):
  env = dict(os.environ)
  env['PYTHONPATH'] = os.pathsep.join(p for p in (build, env.get('PYTHONPATH')) if p)
  env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_SECS)
  return done.returncode, done.stdout.decode(errors='replace')


def _assert_no_quiet_gap(out):
  assert 'n/a' not in out, out[-3000:]
  assert not re.search(r'\bskipped\b|\bSKIPPED\b', out), out[-3000:]


@pytest.mark.timeout(COMMAND_TIMEOUT_SECS + 60)
def test_report_fails_naming_the_missing_floor(build_without_floor):
  code, out = _run([sys.executable, os.path.join(BENCH, 'report.py'), '--steps', '5',
                    '--repeats', '1', '--graphs', 'trivial'], build_without_floor)
  assert code == 2, out[-3000:]
  assert REASON in out, out[-3000:]
  assert '| scenario |' not in out  # nothing measured, no table
  _assert_no_quiet_gap(out)


@pytest.mark.timeout(COMMAND_TIMEOUT_SECS + 60)
def test_guard_benchmark_fails_naming_the_missing_floor(build_without_floor):
  code, out = _run([sys.executable, '-m', 'pytest', os.path.join(BENCH, 'test_bench_guard.py'),
                    '-p', 'no:cacheprovider', '-q', '-k', 'stop and fastmts-loop'],
                   build_without_floor)
  assert code == 1, out[-3000:]
  assert REASON in out, out[-3000:]
  assert re.search(r'\b1 error\b|\b1 failed\b', out), out[-3000:]
  _assert_no_quiet_gap(out)


@pytest.mark.timeout(COMMAND_TIMEOUT_SECS + 60)
def test_compare_builds_fails_naming_the_missing_floor(build_without_floor):
  code, out = _run([sys.executable, os.path.join(BENCH, 'compare_builds.py'),
                    build_without_floor, build_without_floor, '--runs', '1', '--',
                    '--steps', '5', '--repeats', '1', '--graphs', 'trivial'],
                   build_without_floor)
  assert code != 0, out[-3000:]
  assert 'report.py failed on %s (exit 2)' % build_without_floor in out, out[-3000:]
  assert REASON in out, out[-3000:]
  _assert_no_quiet_gap(out)
