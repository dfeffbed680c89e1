"""The source tree keeps the shape its readers rely on (docs/design.md):
the native core knows nothing of Python, bindings live in one file per
area, files stay small or say why not, and every file and public function
says what it is."""

import ast
import glob
import os
import re

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CPP = os.path.join(_ROOT, 'cpp')
_MAX_LINES = 400
# An over-long file states why at its top, in words such as these.
_REASON = re.compile(r'over (the usual )?(about )?400 lines', re.IGNORECASE)


def _cmake():
  with open(os.path.join(_ROOT, 'CMakeLists.txt')) as f:
    return f.read()


def _sources_of(target_call):
  """The cpp/ files listed in the CMake call that starts with `target_call`."""
  text = _cmake()
  start = text.index(target_call)
  return re.findall(r'cpp/[\w.]+', text[start:text.index(')', start)])


def _read(path):
  with open(path) as f:
    return f.read()


def _opening_comment(text):
  lines = []
  for line in text.splitlines():
    if not line.startswith('//'):
      break
    lines.append(line[2:].strip())
  return ' '.join(lines)


def _cpp_files():
  return sorted(glob.glob(os.path.join(_CPP, '*.h')) + glob.glob(os.path.join(_CPP, '*.cc')))


def test_every_source_file_is_built_once():
  built = _sources_of('add_library(fastmts_core') + _sources_of('pybind11_add_module(_native')
  assert sorted(built) == sorted(set(built))
  on_disk = sorted('cpp/' + os.path.basename(p) for p in glob.glob(os.path.join(_CPP, '*.cc')))
  assert sorted(built) == on_disk


def _includes(path):
  return re.findall(r'^#include [<"]([^>"]+)[>"]', _read(path), re.MULTILINE)


def test_the_core_knows_nothing_of_python():
  core = _sources_of('add_library(fastmts_core')
  seen, todo = set(), [os.path.join(_ROOT, p) for p in core]
  while todo:  # the core's files and every cpp/ header they include
    path = todo.pop()
    if path in seen:
      continue
    seen.add(path)
    for inc in _includes(path):
      assert not inc.startswith('pybind11/') and inc != 'Python.h', (path, inc)
      local = os.path.join(_CPP, inc)
      if os.path.exists(local):
        todo.append(local)
  assert len(seen) > len(core)  # headers were followed


def test_the_module_file_only_calls_one_registration_per_area():
  text = _read(os.path.join(_CPP, 'module.cc'))
  assert len(text.splitlines()) <= 60
  registered = re.findall(r'^\s+(register_\w+)\(m\);', text, re.MULTILINE)
  assert len(registered) >= 6
  for name in registered:  # each defined in a binding file of its own
    defined = [p for p in glob.glob(os.path.join(_CPP, '*_binding.cc'))
               if re.search(r'^void %s\(' % name, _read(p), re.MULTILINE)]
    assert len(defined) == 1, name
  assert 'py::class_' not in text and 'm.def(' not in text


@pytest.mark.parametrize('path', _cpp_files(), ids=os.path.basename)
def test_cpp_file_is_small_or_says_why(path):
  text = _read(path)
  if len(text.splitlines()) > _MAX_LINES:
    assert _REASON.search(_opening_comment(text)), (
        '%s has %d lines and no reason at its top' % (path, len(text.splitlines())))


@pytest.mark.parametrize('path', _cpp_files(), ids=os.path.basename)
def test_cpp_file_says_what_it_is(path):
  """A header opens with a comment; a .cc does, or its header does."""
  if _opening_comment(_read(path)):
    return
  header = path[:-3] + '.h'
  assert path.endswith('.cc') and os.path.exists(header), path
  assert _opening_comment(_read(header)), header


def _python_files():
  return sorted(glob.glob(os.path.join(_ROOT, 'python', 'fastmts', '*.py')))


@pytest.mark.parametrize('path', _python_files(), ids=os.path.basename)
def test_python_module_and_public_names_have_docstrings(path):
  tree = ast.parse(_read(path))
  assert ast.get_docstring(tree), path
  missing = []

  def walk(body, prefix):
    for node in body:
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        if node.name.startswith('_'):
          continue
        if not ast.get_docstring(node):
          missing.append(prefix + node.name)
        if isinstance(node, ast.ClassDef):
          walk(node.body, node.name + '.')

  walk(tree.body, '')
  assert not missing, '%s: no docstring for %s' % (path, ', '.join(missing))
