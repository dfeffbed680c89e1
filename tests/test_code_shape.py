"""Checks anyone can run on the tree: the size limits of functions and
classes, and where the preemption feature may be named.

- No Python function over 60 lines or class over 300 in python/fastmts,
  unless its docstring gives the reason ("Over 60 lines: ...").
- No C++ function over 80 lines in cpp/.
- The word "preemption" only in the preemption feature (its hook,
  preemption.py, and the policy the hook feeds,
  _internal/session_preemption.py), its hook's entry in the native-runner registry,
  the session's ownership of them (monitored_session.py) and the public
  names (__init__.py); TF's own message texts quoted as string literals
  do not count, nor does a docstring's `preemption=True` (the public
  argument, which an example that promises a signal's exit code must show).
- The hook and its policy reach no private member of each other: the hook
  feeds the policy through its public methods only, and the policy never
  calls back into the hook.
- No method is put on an instance (an assignment or setattr onto `self.x`
  where the class defines a method x, or onto any object's attribute named
  as a call of TF's session or hook protocols), but for the one exception
  docs/design.md ("The fast path") names: the native `run` entry.
(No TF version comparison outside _tensorflow.py: test_tensorflow_releases.py.)
"""

import ast
import io
import re
import tokenize

import pytest

from source_tree import CPP, PACKAGE, ROOT
from source_tree import cpp_files as _cpp_files
from source_tree import package_files as _package_files

PYTHON_FUNCTION_LINES = 60
PYTHON_CLASS_LINES = 300
CPP_FUNCTION_LINES = 80

_PREEMPTION_OWNERS = {
    'preemption.py',  # the hook and its PreemptionPolicy (signals, grace period)
    '_internal/session_preemption.py',  # the policy the hook feeds: record, error, signal routing
    'monitored_session.py',  # the session's ownership of both
    'basic_session_run_hooks.py',  # the hook's entry in the native-runner registry
    '__init__.py',  # the public names
    'session_options.py',  # the option's value, checked and documented
}

# In the native code, only the agreed stop says what a rank's wish may be
# (a preemption signal's exit code); the signal watch knows signals only.
_NATIVE_PREEMPTION_OWNERS = {'core/agreed_stop.h'}


def python_over_limits(text, where='<text>'):
  """'where:line name (N lines)' of each function or class over its limit
  whose docstring does not say why."""
  found = []
  for node in ast.walk(ast.parse(text)):
    if isinstance(node, ast.ClassDef):
      limit, what = PYTHON_CLASS_LINES, 'class'
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      limit, what = PYTHON_FUNCTION_LINES, 'function'
    else:
      continue
    lines = node.end_lineno - node.lineno + 1
    reason = re.search(r'Over %d lines:' % limit, ast.get_docstring(node) or '')
    if lines > limit and not reason:
      found.append('%s:%d %s %s (%d lines)' % (where, node.lineno, what, node.name, lines))
  return found


def _cpp_without_comments_and_literals(text):
  """The text with comments and string/char literals emptied, lines kept."""
  keep_lines = lambda m: '\n' * m.group().count('\n')
  text = re.sub(r'//[^\n]*', '', text)
  text = re.sub(r'/\*.*?\*/', keep_lines, text, flags=re.S)
  text = re.sub(r'R"(\w*)\((.*?)\)\1"', lambda m: '""' + keep_lines(m), text, flags=re.S)
  text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
  return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


_SCOPE_KEYWORD = re.compile(r'\b(namespace|class|struct|union|enum)\b')
# What ends a function's head before its body: the parameter list, then
# qualifiers, a trailing return type or a constructor's initializer list.
_FUNCTION_HEAD_END = re.compile(
    r'\)\s*(const|noexcept|override|final|mutable|\s)*(->[^{;]*)?\s*(:[^;]*)?$', re.S)


def cpp_functions(text):
  """(head, first line, number of lines) of each outermost function body
  (free functions, methods, constructors; the lambdas and blocks inside a
  function are part of it). A brace matcher over the text without comments
  and literals, enough for this tree's style."""
  text = _cpp_without_comments_and_literals(text)
  open_blocks = []  # (kind, first line, head)
  head_start, line = 0, 1
  for i, ch in enumerate(text):
    if ch == '\n':
      line += 1
    elif ch == '{':
      head = text[head_start:i]
      function_head = _FUNCTION_HEAD_END.search(head)
      if any(block[0] == 'function' for block in open_blocks):
        kind = 'inner'
      elif function_head and re.search(r'\w\s*$', function_head.group(3) or ''):
        kind = 'member_init'  # `y_{x}` in a constructor's initializer list
      elif function_head:
        kind = 'function'
      elif _SCOPE_KEYWORD.search(head):
        kind = 'scope'
      else:
        kind = 'initializer'
      open_blocks.append((kind, line, ' '.join(head.split())))
      if kind != 'member_init':  # the constructor's head goes on after it
        head_start = i + 1
    elif ch == '}':
      kind, first, head = open_blocks.pop()
      if kind == 'function':
        yield head, first, line - first + 1
      if kind != 'member_init':
        head_start = i + 1
    elif ch == ';':
      head_start = i + 1


def cpp_over_limit(text, where='<text>'):
  return ['%s:%d %s (%d lines)' % (where, first, head[-60:], n)
          for head, first, n in cpp_functions(text) if n > CPP_FUNCTION_LINES]


def preemption_mentions(text, where='<text>'):
  """'where:line' of each name, comment or docstring saying "preemption"
  (string literals that are not docstrings are other programs' texts; in a
  docstring, the public argument `preemption=True` is not counted)."""
  docstrings = set()
  for node in ast.walk(ast.parse(text)):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
      body = node.body
      if body and isinstance(body[0], ast.Expr) and isinstance(
          getattr(body[0], 'value', None), ast.Constant) and isinstance(body[0].value.value, str):
        docstrings.add(body[0].lineno)
  found = []
  for tok in tokenize.generate_tokens(io.StringIO(text).readline):
    counted = tok.type in (tokenize.NAME, tokenize.COMMENT) or (
        tok.type == tokenize.STRING and tok.start[0] in docstrings)
    said = tok.string.lower()
    if tok.type == tokenize.STRING:
      said = said.replace('preemption=true', '')
    if counted and 'preemption' in said:
      found.append('%s:%d' % (where, tok.start[0]))
  return found


def test_no_python_function_or_class_over_its_limit_without_a_reason():
  found = [f for p in _package_files()
           for f in python_over_limits(p.read_text(), p.relative_to(ROOT))]
  assert not found, '\n'.join(found)


def test_no_cpp_function_over_its_limit():
  found = [f for p in _cpp_files() for f in cpp_over_limit(p.read_text(), p.relative_to(ROOT))]
  assert not found, '\n'.join(found)


def test_the_cpp_check_sees_every_kind_of_function():
  """The matcher on the forms this tree uses, so a change of style that
  hides functions from it fails here."""
  body = '\n'.join('  x += %d;' % i for i in range(CPP_FUNCTION_LINES))
  text = ('namespace a {\nnamespace {\n'
          'int free_fn(int x) {\n%s\n  return x;\n}\n'
          '}  // namespace\n'
          'class C : public B {\n public:\n'
          '  C(int x) : B(x), y_{x} {\n%s\n  }\n'
          '  int method() const override {\n  auto f = [](int x) { return x; };\n%s\n'
          '  return f(1);\n  }\n  std::vector<int> v_{1, 2};\n};\n'
          'auto trailing(int x) -> int {\n%s\n  return x;\n}\n'
          'const char* s = "}{";\n}  // namespace a\n') % (body, body, body, body)
  heads = [head for head, _, n in cpp_functions(text) if n > CPP_FUNCTION_LINES]
  assert heads == ['int free_fn(int x)', 'public: C(int x) : B(x), y_{x}',
                   'int method() const override', 'auto trailing(int x) -> int'], heads
  assert not cpp_over_limit('namespace a {\nint f() {\n  return 1;\n}\n}\n')


def test_the_python_check_takes_a_stated_reason():
  body = '\n'.join('  x = %d' % i for i in range(PYTHON_FUNCTION_LINES))
  assert python_over_limits('def f():\n%s\n' % body, 'm.py') == ['m.py:1 function f (61 lines)']
  assert not python_over_limits('def f():\n  """Over 60 lines: TF\'s signature."""\n%s\n' % body)


@pytest.mark.parametrize('path', _package_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_preemption_is_named_only_by_its_policy_hook_and_owner(path):
  if str(path.relative_to(PACKAGE)) in _PREEMPTION_OWNERS:
    pytest.skip('%s owns the preemption feature' % path.relative_to(PACKAGE))
  found = preemption_mentions(path.read_text(), path.relative_to(ROOT))
  assert not found, '\n'.join(found)


def native_preemption_mentions(text, where='<text>'):
  """'where:line' of each line of C++ that says "preemption" (a name, a
  comment or a string: the native code has no other programs' texts)."""
  return ['%s:%d' % (where, n) for n, line in enumerate(text.splitlines(), 1)
          if 'preemption' in line.lower()]


@pytest.mark.parametrize('path', _cpp_files(), ids=lambda p: str(p.relative_to(CPP)))
def test_native_code_names_preemption_only_in_the_agreed_stop(path):
  if str(path.relative_to(CPP)) in _NATIVE_PREEMPTION_OWNERS:
    pytest.skip('%s says what a rank\'s wish may be' % path.relative_to(CPP))
  found = native_preemption_mentions(path.read_text(), path.relative_to(ROOT))
  assert not found, '\n'.join(found)


def test_the_native_preemption_check_reads_every_line():
  text = ('// Preemption\nint preemption_code = 1;\nconst char* s = "a PREEMPTION";\n'
          'int other = 2;\n')
  assert native_preemption_mentions(text, 'x.cc') == ['x.cc:1', 'x.cc:2', 'x.cc:3']


def test_the_preemption_check_reads_names_comments_and_docstrings():
  text = ('"""About preemption."""\n'
          'from fastmts import preemption\n'
          "MESSAGE = 'This may be due to a preemption in a connected worker'\n"
          'x = 1  # a Preemption record\n')
  assert preemption_mentions(text, 'm.py') == ['m.py:1', 'm.py:2', 'm.py:4']
  example = '"""Example:\n\n    MonitoredTrainingSession(..., preemption=True)\n"""\n'
  assert not preemption_mentions(example)
  assert preemption_mentions(example.replace('=True', '=True, about preemption'))


def private_members(text):
  """The private names a module's classes define: methods and `self._x`."""
  names = set()
  for cls in (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)):
    for node in ast.walk(cls):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names.add(node.name)
      elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and
            isinstance(node.value, ast.Name) and node.value.id == 'self'):
        names.add(node.attr)
  return {n for n in names if n.startswith('_') and not n.startswith('__')}


def private_reaches(text):
  """The private names a module reaches on objects other than `self` and
  `cls` (`hook._feeds`, `other._x`)."""
  return {node.attr for node in ast.walk(ast.parse(text))
          if isinstance(node, ast.Attribute) and node.attr.startswith('_') and
          not node.attr.startswith('__') and
          not (isinstance(node.value, ast.Name) and node.value.id in ('self', 'cls'))}


def test_the_preemption_hook_and_its_policy_reach_no_private_member_of_the_other():
  hook = (PACKAGE / 'preemption.py').read_text()
  policy = (PACKAGE / '_internal' / 'session_preemption.py').read_text()
  for reaching, owning in ((hook, policy), (policy, hook)):
    crossing = private_reaches(reaching) & private_members(owning)
    assert not crossing, sorted(crossing)


def test_the_private_member_check_finds_a_crossing():
  owner = 'class Hook:\n  def _feeds(self, p):\n    self._session = p\n'
  caller = 'class Policy:\n  def __init__(self, hook):\n    hook._feeds(self)\n    self._x = 1\n'
  assert private_members(owner) == {'_feeds', '_session'}
  assert private_reaches(caller) == {'_feeds'}


# The calls of TF's session and hook protocols: what a method put on an
# instance would shadow.
_PROTOCOL_METHODS = frozenset((
    'run', 'run_step_fn', 'should_stop', 'close', 'create_session', 'begin',
    'after_create_session', 'before_run', 'after_run', 'end', 'request_stop', 'join',
    'run_steps'))
# The native run entry, set on the instance because a class-level run()
# measured 417 ns more a step (docs/design.md, "The fast path").
_METHODS_ON_INSTANCES_ALLOWED = {('monitored_session.py', '_MonitoredSession.run')}


def _is_property(function):
  return any(isinstance(d, ast.Name) and d.id == 'property' or
             isinstance(d, ast.Attribute) and d.attr in ('setter', 'deleter')
             for d in function.decorator_list)


class _MethodsSetOnInstances(ast.NodeVisitor):
  """Collects 'Class.name' of each assignment (or setattr with a literal
  name) that puts a method on an instance."""

  def __init__(self):
    self.classes = []  # (name, its own method names), innermost last
    self.found = []

  def visit_ClassDef(self, node):
    own = {f.name for f in node.body
           if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_property(f)}
    self.classes.append((node.name, own))
    self.generic_visit(node)
    self.classes.pop()

  def _check(self, target):
    if not isinstance(target, ast.Attribute):
      return
    on_self = isinstance(target.value, ast.Name) and target.value.id == 'self'
    name, own = self.classes[-1] if self.classes else ('', set())
    if target.attr in _PROTOCOL_METHODS or (on_self and target.attr in own):
      self.found.append(('%s.%s' % (name, target.attr)).lstrip('.'))

  def visit_Assign(self, node):
    for target in node.targets:
      self._check(target)
    self.generic_visit(node)

  def visit_Call(self, node):
    if (isinstance(node.func, ast.Name) and node.func.id == 'setattr' and
        len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
      self._check(ast.Attribute(value=node.args[0], attr=node.args[1].value))
    self.generic_visit(node)


def methods_set_on_instances(text):
  """'Class.name' (just 'name' outside a class) of each method put on an
  instance: onto `self.x` where the class defines a method x, or onto any
  object's attribute named as a session or hook call; by `=` or setattr."""
  visitor = _MethodsSetOnInstances()
  visitor.visit(ast.parse(text))
  return visitor.found


def test_no_method_is_put_on_an_instance_but_the_native_run_entry():
  found = ['%s: %s' % (p.relative_to(PACKAGE), name) for p in _package_files()
           for name in methods_set_on_instances(p.read_text())
           if (str(p.relative_to(PACKAGE)), name) not in _METHODS_ON_INSTANCES_ALLOWED]
  assert not found, '\n'.join(found)


def test_the_native_run_entry_is_still_the_one_exception():
  """The allowance above names code that exists (when the entry moves to the
  class, the allowance goes too)."""
  text = (PACKAGE / 'monitored_session.py').read_text()
  assert methods_set_on_instances(text).count('_MonitoredSession.run') == 1


def test_the_instance_method_check_finds_each_form():
  text = ('class A:\n  def run(self):\n    pass\n  def go(self):\n    self.go = 1\n'
          '    session.run = 2\n    setattr(self, "close", 3)\n    self.x = 4\n'
          '  @property\n  def p(self):\n    return 1\n  def set_p(self):\n    self.p = 5\n'
          'hook.before_run = print\n')
  assert methods_set_on_instances(text) == ['A.go', 'A.run', 'A.close', 'before_run']
