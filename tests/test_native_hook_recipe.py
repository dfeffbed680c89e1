"""The recipe of docs/design.md "Adding a native hook" holds on the tree: a
native hook is its core class (cpp/core/, whose Config declares its fields)
and its Python runner; the binding registers every class of
NativeHookClasses from what the class declares, so adding a hook needs no
binding edit. Checked here from the sources and the built module: each
class listed is registered under its kName with its Config's fields as its
keywords (in the stubs too), hook_binding.cc names no hook class, every hook
class with a kName is listed, and a wrong, missing or unknown keyword is a
TypeError naming it."""

import ast
import os
import re

import pytest

pytestmark = pytest.mark.timeout(60)

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CORE = os.path.join(_ROOT, 'cpp', 'core')
# Where the hook classes and the Config templates they share are declared.
_HOOK_HEADERS = ('native_hooks.h', 'callback_hooks.h', 'hook_components.h')


def _read(*parts):
  with open(os.path.join(_ROOT, *parts)) as f:
    return f.read()


def _core_hooks_source():
  return '\n'.join(_read('cpp', 'core', name) for name in _HOOK_HEADERS)


def _listed_classes():
  """The class names of NativeHookClasses, in order."""
  match = re.search(r'using NativeHookClasses\s*=\s*HookList<([^>]*)>;',
                    _read('cpp', 'core', 'native_hooks.h'))
  assert match, 'NativeHookClasses is not in cpp/core/native_hooks.h'
  return [name.strip() for name in match.group(1).split(',')]


def _block(text, start, closing):
  """text from `start` up to the first `closing` after it."""
  begin = text.index(start)
  return text[begin:text.index(closing, begin)]


def _declared(name):
  """(kName, [(field, required)]) of hook class `name`, read from its
  declaration: its Config struct, or the config template it names."""
  source = _core_hooks_source()
  body = _block(source, 'class %s : public' % name, '\n};')
  k_name = re.search(r'static constexpr const char\* kName = "(\w+)";', body)
  assert k_name, '%s declares no kName' % name
  if 'struct Config {' in body:
    config = _block(body, 'struct Config {', '\n  };')
  else:
    template = re.search(r'using Config = (\w+)<', body)
    assert template, '%s declares no Config' % name
    config = _block(source, 'struct %s {' % template.group(1), '\n};')
  fields = [(field, not optional) for optional, field in
            re.findall(r'\b(optional_)?field\("(\w+)"', config)]
  assert fields, '%s: its Config declares no fields' % name
  return k_name.group(1), fields


def test_every_hook_class_with_a_name_is_listed():
  source = _core_hooks_source()
  declared = [name for name in re.findall(r'^class (\w+) : public \w+ \{', source, re.MULTILINE)
              if 'static constexpr const char* kName' in _block(source, 'class %s :' % name, '\n};')]
  assert declared and sorted(declared) == sorted(_listed_classes())


@pytest.mark.parametrize('name', _listed_classes())
def test_listed_class_is_registered_with_its_config_fields(fastmts, name):
  k_name, fields = _declared(name)
  assert k_name == name  # TF's class name, as _native names it
  cls = getattr(fastmts._native, k_name)  # pylint: disable=protected-access
  assert issubclass(cls, fastmts._native.Hook)  # pylint: disable=protected-access
  assert [(f, required) for f, _, required in cls.config_fields] == fields


def test_the_stubs_list_the_config_fields_as_keywords(fastmts):
  del fastmts
  classes = {node.name: node for node in ast.parse(_read('python', 'fastmts', '_native.pyi')).body
             if isinstance(node, ast.ClassDef)}
  for name in _listed_classes():
    _, fields = _declared(name)
    init = [item for item in classes[name].body
            if isinstance(item, ast.FunctionDef) and item.name == '__init__']
    assert len(init) == 1, name
    assert [a.arg for a in init[0].args.kwonlyargs] == [f for f, _ in fields], name
    assert init[0].args.args[1:] == [], name  # keywords only


def test_the_hook_binding_names_no_hook_class():
  text = _read('cpp', 'binding', 'hook_binding.cc')
  assert 'register_native_hooks(m, NativeHookClasses{})' in text
  named = [name for name in _listed_classes() + ['ScheduledHook']
           if re.search(r'\b%s\b' % name, text)]
  assert not named, 'hook_binding.cc names %s: a new hook would need a binding edit' % named


@pytest.mark.parametrize('name', _listed_classes())
def test_unknown_missing_and_wrong_keywords_are_type_errors_naming_them(fastmts, name):
  cls = getattr(fastmts._native, name)  # pylint: disable=protected-access
  _, fields = _declared(name)
  required = [f for f, is_required in fields if is_required]
  with pytest.raises(TypeError, match="%s\\(\\) got an unexpected keyword argument 'bogus'" % name):
    cls(bogus=1, **{f: None for f, _ in fields})
  with pytest.raises(TypeError) as missing:
    cls()
  assert 'missing' in str(missing.value)
  for field in required:
    assert "'%s'" % field in str(missing.value)
  with pytest.raises(TypeError, match=r"argument '%s'" % fields[0][0]):
    cls(**{f: object() for f in required})
  with pytest.raises(TypeError):
    cls(object())  # keywords only


def _recipe_examples():
  """(language, lines) of the code blocks of design.md's "Adding a native hook"."""
  doc = _read('docs', 'design.md')
  section = _block(doc, '## Adding a native hook', '\n## Glossary')
  # C++ fragments are `text` blocks (the docs' test knows no C++ language).
  return [('cpp' if lang == 'text' else lang, text)
          for lang, text in re.findall(r'```(text|python)\n(.*?)```', section, re.DOTALL)]


def test_the_worked_example_is_the_code():
  """Each line of the recipe's examples (comments and `...` elisions aside)
  is a line of the file it shows."""
  sources = {'cpp': _core_hooks_source(),
             'python': _read('python', 'fastmts', 'basic_session_run_hooks.py')}
  examples = _recipe_examples()
  assert [lang for lang, _ in examples] == ['cpp', 'cpp', 'python']
  for lang, text in examples:
    source_lines = {re.sub(r'\s*(//|#).*$', '', line).strip() for line in sources[lang].splitlines()}
    for line in text.splitlines():
      code = re.sub(r'\s*(//|#).*$', '', line).strip()
      if code and '...' not in code:
        assert code in source_lines, 'design.md shows %r, which is not in the code' % code


def test_the_runner_base_class_imports_nothing():
  """NativeRunner and HookStateSync live in a module that imports nothing,
  so any hook's module (preemption.py, which basic_session_run_hooks.py
  imports for its registry) can subclass them without an import cycle."""
  tree = ast.parse(_read('python', 'fastmts', '_internal', 'native_runner.py'))
  imports = [ast.dump(node) for node in ast.walk(tree)
             if isinstance(node, (ast.Import, ast.ImportFrom))]
  assert not imports
  classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
  assert {'NativeRunner', 'HookStateSync'} <= classes
