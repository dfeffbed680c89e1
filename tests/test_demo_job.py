"""The main job (`python -m fastmts`, `fastmts-demo`) as a user starts it: no TF C++ log lines
unless the user asked for TF's logging (fastmts/_quiet_start.py), and what
MonitoredTrainingSession costs per step over a bare Session.run loop, stock and fastmts."""
import os
import re
import subprocess
import sys

import pytest

from compat_utils import SANITIZED

# A TF C++ log line below the error level, or absl's notice before its first line.
TF_LOG_LINE = re.compile(r'^(?:[IW]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+:\d+\] |'
                         r'WARNING: All log messages before absl::InitializeLog)', re.M)
SHORT_RUN = ['--steps', '100', '--log-every', '50', '--overhead-rounds', '1',
             '--overhead-steps', '10']
TIMEOUT_SECS = 300

pytestmark = [
    pytest.mark.timeout(TIMEOUT_SECS + 60),
    pytest.mark.skipif(SANITIZED, reason='commands are run by the unsanitized suite'),
]


def _env(**set_vars):
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  env.update(set_vars)
  return env


def _run(argv, env):
  done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        timeout=TIMEOUT_SECS)
  out = done.stdout.decode(errors='replace')
  assert done.returncode == 0, out[-3000:]
  return out


def _plain_tf_import_logs(env):
  """Whether importing TF alone prints C++ log lines in `env` (it depends on the release
  and the machine)."""
  return bool(TF_LOG_LINE.search(_run([sys.executable, '-c', 'import tensorflow'], env)))


def test_main_job_prints_no_tf_log_lines():
  out = _run([sys.executable, '-m', 'fastmts'] + SHORT_RUN, _env())
  assert not TF_LOG_LINE.search(out), out[:3000]
  assert 'fastmts/stock steps/s' in out, out[-3000:]


def test_demo_script_prints_no_tf_log_lines():
  script = os.path.join(os.path.dirname(sys.executable), 'fastmts-demo')
  if not os.path.exists(script):
    pytest.skip('no fastmts-demo script beside %s (fastmts not installed there)'
                % sys.executable)
  out = _run([script] + SHORT_RUN, _env())
  assert not TF_LOG_LINE.search(out), out[:3000]


def test_main_job_keeps_tf_logs_a_user_asked_for():
  env = _env(TF_CPP_MIN_LOG_LEVEL='0')
  out = _run([sys.executable, '-m', 'fastmts'] + SHORT_RUN, env)
  assert bool(TF_LOG_LINE.search(out)) == _plain_tf_import_logs(env), out[:3000]


def test_importing_fastmts_elsewhere_hides_nothing():
  env = _env()
  out = _run([sys.executable, '-c', 'import os, fastmts; '
              'print("level set:", "TF_CPP_MIN_LOG_LEVEL" in os.environ)'], env)
  assert 'level set: False' in out, out[-3000:]
  assert bool(TF_LOG_LINE.search(out)) == _plain_tf_import_logs(env), out[:3000]


def test_main_job_measures_what_the_monitored_session_costs():
  out = _run([sys.executable, '-m', 'fastmts'] + SHORT_RUN, _env(TF_CPP_MIN_LOG_LEVEL='2'))
  assert 'What MonitoredTrainingSession itself costs per step' in out, out[-3000:]
  rows = {}
  for label in ('Session.run loop', 'stock MonitoredTrainingSession',
                'fastmts MonitoredTrainingSession'):
    found = re.search(r'^  %s +([\d.]+) us/step' % label, out, re.M)
    assert found, out[-3000:]
    rows[label] = float(found.group(1))
  assert all(us > 0 for us in rows.values()), rows
  assert re.search(r'^  fastmts: -?[\d.]+ us less per step than stock', out, re.M), out[-3000:]


def test_main_job_without_the_measurement():
  out = _run([sys.executable, '-m', 'fastmts', '--overhead-rounds', '0'] + SHORT_RUN[:4],
             _env(TF_CPP_MIN_LOG_LEVEL='2'))
  assert 'What MonitoredTrainingSession itself costs' not in out, out[-3000:]
  assert 'fastmts/stock steps/s' in out, out[-3000:]


def test_main_job_shows_everything_when_tensorflow_fails_to_import(tmp_path):
  """The quiet start drops only TF's log lines of a successful import: a failed one is
  printed whole, its C++ log lines included."""
  import fastmts  # pylint: disable=import-outside-toplevel
  site = tmp_path / 'site'
  (site / 'tensorflow').mkdir(parents=True)
  (site / 'tensorflow' / '__init__.py').write_text(
      "import sys\n"
      "sys.stderr.write('I0000 00:00:1.000000   1 port.cc:153] a TF log line\\n')\n"
      "raise ImportError('undefined symbol: _ZN10tensorflow8internal15LogMessageFatalD1Ev')\n")
  env = _env(PYTHONPATH=os.pathsep.join(
      [str(site), os.path.dirname(os.path.dirname(os.path.abspath(fastmts.__file__)))]))
  done = subprocess.run([sys.executable, '-m', 'fastmts'] + SHORT_RUN, env=env, cwd=str(site),
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_SECS)
  out = done.stdout.decode(errors='replace')
  assert done.returncode != 0, out
  assert 'port.cc:153] a TF log line' in out, out
  assert 'undefined symbol' in out and 'fastmts needs TensorFlow' in out, out
