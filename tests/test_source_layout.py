"""The source tree keeps the shape its readers rely on (docs/design.md):
cpp/ is its three layers, one folder each (core/, tf_access/, binding/),
plus tests/ (the core's C++ unit tests) and the CMakeLists.txt that builds them; a layer's areas of their own sit
in subfolders (core/file_formats/, as python/fastmts/file_formats/);
the native core knows nothing of Python and is a library of its own,
bindings live in one file per area, files stay small or say why not, and
every file and public function says what it is."""

import ast
import glob
import os
import re

import pytest

import source_tree

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CPP = os.path.join(_ROOT, 'cpp')
_MAX_LINES = 400
# An over-long file states why at its top, in words such as these.
_REASON = re.compile(r'over (the usual )?(about )?400 lines', re.IGNORECASE)
# cpp/'s layers, lowest first, and the folders (besides its own) whose headers
# each may include; only binding/ and tf_access/ may include Python's or
# pybind11's. Each folder's README.md says the same in words.
_LAYERS = {'core': (), 'tf_access': ('core',), 'binding': ('core', 'tf_access')}
_KNOWS_PYTHON = ('tf_access', 'binding')
# The areas a layer keeps in a subfolder of its own (each with its README.md).
_AREAS = {'core': ('file_formats',)}
# cpp/tests/: the core's unit tests (GoogleTest, run by ctest), built only
# with FASTMTS_BUILD_TESTS; they include the core's headers and their own,
# never Python's, pybind11's or the other layers'.
_TESTS = 'tests'
_TESTS_INCLUDE = ('core', _TESTS)


# The build: the top CMakeLists.txt (project, options), and cpp/CMakeLists.txt,
# the targets, whose sources it names relative to cpp/.
_CPP_CMAKE = 'CMakeLists.txt'


def _cmake():
  return _read(os.path.join(_ROOT, 'CMakeLists.txt')) + _read(os.path.join(_CPP, _CPP_CMAKE))


def _sources_of(target_call):
  """The cpp/ files listed in the CMake call that starts with `target_call`."""
  text = _read(os.path.join(_CPP, _CPP_CMAKE))
  start = text.index(target_call)
  return ['cpp/' + path for path in
          re.findall(r'^\s*([\w/]+\.\w+)\s*$', text[start:text.index(')', start)], re.MULTILINE)]


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
  return [str(p) for p in source_tree.cpp_files()]


def _relative(path):
  return os.path.relpath(path, _ROOT).replace(os.sep, '/')


def _layer_of(path):
  """The layer folder of a cpp/ file (cpp/<layer>/<file>, or
  cpp/<layer>/<area>/<file> for an area of _AREAS), 'tests' for
  cpp/tests/<file>, or None."""
  parts = os.path.relpath(path, _CPP).split(os.sep)
  if len(parts) == 2 and parts[0] in tuple(_LAYERS) + (_TESTS,):
    return parts[0]
  if len(parts) == 3 and parts[1] in _AREAS.get(parts[0], ()):
    return parts[0]
  return None


def test_every_source_file_sits_in_a_layer_folder():
  """cpp/ holds the layer folders and tests/ only, each with its README.md,
  as does each area's subfolder; every source file sits directly in one of
  them."""
  assert sorted(os.listdir(_CPP)) == sorted(list(_LAYERS) + [_TESTS, _CPP_CMAKE])
  folders = list(_LAYERS) + [_TESTS] + ['%s/%s' % (layer, area)
                                          for layer, areas in _AREAS.items() for area in areas]
  for folder in folders:
    assert _read(os.path.join(_CPP, folder, 'README.md')).startswith('# cpp/' + folder)
  stray = [_relative(p) for p in glob.glob(os.path.join(_CPP, '**', '*'), recursive=True)
           if not os.path.isdir(p) and _layer_of(p) is None and _relative(p) != 'cpp/' + _CPP_CMAKE]
  assert not stray, 'files outside the layer folders: %s' % stray


def test_every_source_file_is_built_once():
  built = (_sources_of('add_library(fastmts_core') + _sources_of('pybind11_add_module(_native') +
           _sources_of('add_executable(fastmts_core_tests'))
  assert sorted(built) == sorted(set(built))
  on_disk = sorted(_relative(p) for p in _cpp_files() if p.endswith('.cc'))
  assert sorted(built) == on_disk


def test_the_unit_tests_build_without_python():
  """The core's unit tests are a CMake option (off for pip's build) that
  builds without the extension, so they need no Python or pybind11; ctest
  runs them."""
  text = _cmake()
  assert re.search(r'option\(FASTMTS_BUILD_TESTS "[^"]*" OFF\)', text)
  assert re.search(r'option\(FASTMTS_BUILD_MODULE "[^"]*" ON\)', text)
  module = text[text.index('if(FASTMTS_BUILD_MODULE)'):]
  module = module[:module.index('endif()')]
  assert 'find_package(Python' in module and 'find_package(pybind11' in module
  assert text.count('find_package(Python') == 1 and text.count('find_package(pybind11') == 1
  assert 'gtest_discover_tests(fastmts_core_tests)' in text
  assert 'ctest --output-on-failure' in _read(os.path.join(_ROOT, '.ci', 'cpp_tests'))
  assert '.ci/cpp_tests' in _read(os.path.join(_ROOT, '.ci', 'run'))


def test_the_core_library_is_the_core_folder():
  """The static library the extension links is exactly cpp/core/, so the
  rule below is also a fact of the build."""
  core = sorted(_relative(p) for p in _cpp_files()
                if p.endswith('.cc') and _layer_of(p) == 'core')
  assert sorted(_sources_of('add_library(fastmts_core STATIC')) == core
  assert 'target_link_libraries(_native PRIVATE fastmts_core)' in _cmake()
  assert not re.search(r'target_link_libraries\(fastmts_core[^)]*(pybind11|Python)', _cmake())


def _includes(path):
  return re.findall(r'^#include [<"]([^>"]+)[>"]', _read(path), re.MULTILINE)


@pytest.mark.parametrize('path', _cpp_files(), ids=_relative)
def test_includes_follow_the_layers(path):
  """A file includes project headers by their folder ("core/run_plan.h"),
  only from its own layer and those below it; only binding/ and tf_access/
  include Python or pybind11."""
  layer = _layer_of(path)
  allowed = _TESTS_INCLUDE if layer == _TESTS else (layer,) + _LAYERS[layer]
  for inc in _includes(path):
    if inc.startswith('pybind11/') or inc == 'Python.h':
      assert layer in _KNOWS_PYTHON, '%s (%s) includes %s' % (_relative(path), layer, inc)
      continue
    if os.path.exists(os.path.join(_CPP, inc)):
      assert inc.split('/')[0] in allowed, (
          '%s (%s) includes %s' % (_relative(path), layer, inc))
    else:  # a system header, never a bare name of one of ours
      assert not glob.glob(os.path.join(_CPP, '**', inc), recursive=True), (
          '%s includes %s without its folder' % (_relative(path), inc))


def test_the_module_file_only_calls_one_registration_per_area():
  text = _read(os.path.join(_CPP, 'binding', 'module.cc'))
  assert len(text.splitlines()) <= 60
  registered = re.findall(r'^\s+(register_\w+)\(m\);', text, re.MULTILINE)
  assert len(registered) >= 6
  for name in registered:  # each defined in a binding file of its own
    defined = [p for p in glob.glob(os.path.join(_CPP, 'binding', '*_binding.cc'))
               if re.search(r'^void %s\(' % name, _read(p), re.MULTILINE)]
    assert len(defined) == 1, name
  assert 'py::class_' not in text and 'm.def(' not in text


@pytest.mark.parametrize('path', _cpp_files(), ids=_relative)
def test_cpp_file_is_small_or_says_why(path):
  text = _read(path)
  if len(text.splitlines()) > _MAX_LINES:
    assert _REASON.search(_opening_comment(text)), (
        '%s has %d lines and no reason at its top' % (path, len(text.splitlines())))


@pytest.mark.parametrize('path', _cpp_files(), ids=_relative)
def test_cpp_file_says_what_it_is(path):
  """A header opens with a comment; a .cc does, or its header does."""
  if _opening_comment(_read(path)):
    return
  header = path[:-3] + '.h'
  assert path.endswith('.cc') and os.path.exists(header), path
  assert _opening_comment(_read(header)), header


def _python_files():
  return [str(p) for p in source_tree.package_files()]


def test_file_formats_are_an_area_of_their_own():
  """TF's file formats (graph.pbtxt's text format, event files) are written
  by cpp/core/file_formats/ and python/fastmts/file_formats/, and nothing
  of them is left beside the rest of the core."""
  core = os.listdir(os.path.join(_CPP, 'core'))
  for name in ('text_format', 'python_float_repr', 'event_file', 'event_writer', 'summary_writer'):
    assert name + '.cc' not in core and name + '.h' not in core, name
    assert os.path.exists(os.path.join(_CPP, 'core', 'file_formats', name + '.cc')), name
  package = os.path.join(_ROOT, 'python', 'fastmts')
  for name in ('graph_io', 'graph_events', 'event_file_writer', 'text_format_schema'):
    assert not os.path.exists(os.path.join(package, name + '.py')), name
    assert os.path.exists(os.path.join(package, 'file_formats', name + '.py')), name


def _package_relative(path):
  return os.path.relpath(path, os.path.join(_ROOT, 'python', 'fastmts'))


@pytest.mark.parametrize('path', _python_files(), ids=_package_relative)
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
