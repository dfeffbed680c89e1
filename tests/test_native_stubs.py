"""The type stubs of the native module (python/fastmts/_native.pyi) list what
it defines: every class, function, method and property, with the native
signatures' parameter names (regenerate with `python .ci/native_stubs.py >
python/fastmts/_native.pyi`). Annotations are not compared: how pybind11
spells a type changes between its releases."""
import ast
import os
import runpy

import pytest

pytestmark = pytest.mark.timeout(60)

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _shape(source):
  """{name: None (a function) or {member: [parameter names]}} of a stub."""
  out = {}
  for node in ast.parse(source).body:
    if isinstance(node, ast.FunctionDef):
      out.setdefault(node.name, []).append([a.arg for a in node.args.args])
    elif isinstance(node, ast.ClassDef):
      members = {}
      for item in node.body:
        if isinstance(item, ast.FunctionDef):
          members.setdefault(item.name, []).append([a.arg for a in item.args.args])
      out[node.name] = members
  return out


def test_stubs_list_what_the_native_module_defines(fastmts):
  with open(os.path.join(_ROOT, 'python', 'fastmts', '_native.pyi')) as f:
    checked_in = f.read()
  generator = runpy.run_path(os.path.join(_ROOT, '.ci', 'native_stubs.py'))
  assert _shape(checked_in) == _shape(generator['stubs']())
  public = {n for n in dir(fastmts._native) if not n.startswith('_')}  # pylint: disable=protected-access
  assert set(_shape(checked_in)) == public
  assert os.path.exists(os.path.join(_ROOT, 'python', 'fastmts', 'py.typed'))
