"""The two-TFs trap (fastmts/_tf_distributions.py): two TensorFlow distributions laid into one
tensorflow/ folder are named, with the command that repairs them, by `import fastmts`.

Each case runs in its own process on a folder made here that holds what such an install
leaves: a `tensorflow` package whose import fails as a mixed install's does (an undefined
symbol), and the dist-info folders of the distributions that wrote it."""
import os
import subprocess
import sys

import pytest

import fastmts

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(fastmts.__file__)))
TIMEOUT_SECS = 120
BROKEN_IMPORT = ("raise ImportError('/site/tensorflow/libtensorflow_cc.so.2: undefined "
                 "symbol: _ZN10tensorflow8internal15LogMessageFatalD1Ev')\n")


def _site(tmp_path, distributions, tensorflow_init=BROKEN_IMPORT):
  """A folder with a `tensorflow` package and the given (dist-info name, top_level) pairs,
  installed in that order (their dist-info folders' times)."""
  site = tmp_path / 'site'
  (site / 'tensorflow').mkdir(parents=True)
  (site / 'tensorflow' / '__init__.py').write_text(tensorflow_init)
  for i, (dist_info, top_level) in enumerate(distributions):
    folder = site / dist_info
    folder.mkdir()
    if top_level is not None:
      (folder / 'top_level.txt').write_text(top_level)
    os.utime(str(folder), (1e9 + i, 1e9 + i))
  return str(site)


def _import_fastmts(site):
  env = dict(os.environ)
  # The fake TF folder first, then the fastmts under test (and nothing of the real TF's
  # folder is needed: fastmts fails at TF's import).
  env['PYTHONPATH'] = os.pathsep.join([site, PACKAGE_PARENT])
  done = subprocess.run([sys.executable, '-c', 'import fastmts'], env=env, cwd=site,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_SECS)
  return done.returncode, done.stdout.decode(errors='replace')


@pytest.mark.timeout(TIMEOUT_SECS + 30)
def test_two_distributions_in_one_folder_are_named_with_the_repair(tmp_path):
  site = _site(tmp_path, [('tensorflow-2.19.1.dist-info', 'tensorflow\n'),
                          ('tensorflow_cpu-2.19.1.dist-info', 'tensorflow\n')])
  code, out = _import_fastmts(site)
  assert code != 0, out
  assert 'ImportError: fastmts needs TensorFlow' in out, out
  assert 'undefined symbol' in out, out
  assert ('2 TensorFlow distributions are installed into one tensorflow/ folder '
          '(tensorflow 2.19.1, tensorflow-cpu 2.19.1)') in out, out
  # The first installed is the user's own: it is the one put back.
  assert ("Repair: pip uninstall -y tensorflow tensorflow-cpu && "
          "pip install 'tensorflow==2.19.1'") in out, out


@pytest.mark.timeout(TIMEOUT_SECS + 30)
def test_one_distribution_gets_the_install_hint(tmp_path):
  site = _site(tmp_path, [('tensorflow_cpu-2.16.2.dist-info', 'tensorflow\n'),
                          ('tf_slim-1.1.0.dist-info', 'tf_slim\n'),
                          # A meta-package with no files of its own in the folder.
                          ('tensorflow-2.16.2.dist-info', 'tensorflow_meta\n')])
  code, out = _import_fastmts(site)
  assert code != 0, out
  assert 'TensorFlow distributions are installed into one' not in out, out
  assert "pip install 'tensorflow-cpu>=2.12,<2.22'" in out, out


def test_the_real_install_is_one_distribution():
  from fastmts import _tf_distributions  # pylint: disable=import-outside-toplevel
  found = _tf_distributions.installed()
  assert len(found) == 1, found
  assert found[0][0].startswith('tensorflow') or found[0][0].startswith('tf-nightly'), found
