"""The source tree's files, listed once for the checks that read them
(test_code_shape.py, test_source_layout.py, test_tensorflow_releases.py)."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'python' / 'fastmts'
CPP = ROOT / 'cpp'


def package_files():
  """Every .py file of python/fastmts, sorted."""
  return sorted(PACKAGE.rglob('*.py'))


def cpp_files():
  """Every .cc and .h file under cpp/, sorted."""
  return sorted(p for p in CPP.rglob('*') if p.suffix in ('.cc', '.h'))
