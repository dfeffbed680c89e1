"""Every command in README.md and docs/*.md runs as written, or says how it is checked.

The rules (docs/design.md, "Commands in these documents"): every fenced block names its
language; a block that is not `text` is either marked `runnable` in its info string (run
here as written), or preceded on the line before by `<!-- smoke: COMMAND -->` (too slow to
run as written: COMMAND, the same script at a small size, is run here) or by
`<!-- not-run: HOW -->` (HOW says what checks it). Also checked: relative links between
these files (anchors included), repository paths named in backticks, and the tests the
bad-input table names.

Commands run in their own process group with a timeout; the whole group is killed
afterwards, whether the command passed, failed or hung. `python` is the interpreter that
runs this test (so the installed fastmts is the one used).
"""
import glob
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys

import pytest

from compat_utils import SANITIZED

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / 'README.md'] + sorted((ROOT / 'docs').glob('*.md'))
# Bounds on a hang, not on slowness, sized for a loaded 2-core machine: beside two
# CPU-bound processes the slowest command (docs/performance.md's compare_builds smoke,
# three processes that each import TF) ran past 100 s, and others took 50 to 80 s. A test
# that runs a command has a pytest-timeout above the command's bound, so that the
# command's bound fires first and the failure shows the command's output.
COMMAND_TIMEOUT_SECS = 600
COMMAND_TEST_TIMEOUT_SECS = COMMAND_TIMEOUT_SECS + 60
# Under .ci/sanitize the commands would run the sanitized build, many times slower, and
# the plain suite has run them already: there only the static checks run.
runs_commands = pytest.mark.skipif(SANITIZED,
                                   reason='commands are run by the unsanitized suite')

SHELL_LANGS = {'bash', 'sh', 'shell'}
CODE_LANGS = SHELL_LANGS | {'python'}
MARK_RE = re.compile(r'^<!--\s*(smoke|not-run):\s*(.*?)\s*-->$')
REPO_PATH_RE = re.compile(r'^(?:cpp|python|tests|bench|docs|\.ci)/[\w./*{},-]+$')


class Block:
  """One fenced block: where it is, its language and flags, its mark, its text."""

  def __init__(self, path, line, info, mark, body):
    words = info.split()
    self.path = path
    self.line = line
    self.lang = words[0] if words else ''
    self.runnable = 'runnable' in words[1:]
    self.mark = mark  # (kind, text) of the comment on the line before, or None
    self.body = body

  @property
  def where(self):
    return '%s:%d' % (self.path.relative_to(ROOT), self.line)


def _parse(path):
  """(blocks, the text outside them) of one Markdown file."""
  blocks, prose = [], []
  lines = path.read_text().split('\n')
  i = 0
  while i < len(lines):
    line = lines[i]
    if line.startswith('```'):
      start = i
      previous = lines[i - 1].strip() if i else ''
      m = MARK_RE.match(previous)
      body = []
      i += 1
      while i < len(lines) and not lines[i].startswith('```'):
        body.append(lines[i])
        i += 1
      assert i < len(lines), '%s:%d: unclosed fence' % (path, start + 1)
      blocks.append(Block(path, start + 1, line[3:].strip(), m.groups() if m else None,
                          '\n'.join(body) + '\n'))
    else:
      prose.append(line)
    i += 1
  return blocks, '\n'.join(prose)


PARSED = {path: _parse(path) for path in DOC_FILES}
BLOCKS = [b for path in DOC_FILES for b in PARSED[path][0]]


def _id(block):
  return block.where


def test_docs_exist():
  names = {p.relative_to(ROOT).as_posix() for p in DOC_FILES}
  assert {'README.md', 'docs/design.md', 'docs/compatibility.md', 'docs/performance.md',
          'docs/distributed.md'} <= names


# A newcomer reads the README whole: what does not fit goes to docs/.
README_MAX_LINES = 170


def test_readme_is_short():
  lines = (ROOT / 'README.md').read_text().count('\n')
  assert lines <= README_MAX_LINES, 'README.md has %d lines (at most %d)' % (
      lines, README_MAX_LINES)


@pytest.mark.parametrize('block', BLOCKS, ids=_id)
def test_every_block_is_marked(block):
  assert block.lang, '%s: a fenced block must name its language (text for output)' % block.where
  if block.lang not in CODE_LANGS:
    assert block.lang == 'text', '%s: unknown language %r' % (block.where, block.lang)
    assert not block.runnable and block.mark is None, '%s: text is never run' % block.where
    return
  marks = int(block.runnable) + int(block.mark is not None)
  assert marks == 1, ('%s: a %s block is either `runnable` or preceded by '
                      '<!-- smoke: ... --> or <!-- not-run: ... -->' % (block.where, block.lang))
  if block.mark is not None:
    kind, text = block.mark
    assert text, '%s: the %s comment must say what it runs or how it is checked' % (
        block.where, kind)
    if kind == 'smoke':
      assert block.lang in SHELL_LANGS, '%s: smoke commands are for shell blocks' % block.where
      scripts = re.findall(r'\S+\.py\b', block.body)
      assert scripts, '%s: a smoke-checked block must run a script' % block.where
      for script in scripts:
        assert script in text, '%s: the smoke command must run %s' % (block.where, script)


# ---- Running --------------------------------------------------------------------------


@pytest.fixture
def command_env(tmp_path):
  """The environment of a command: `python` is this interpreter; scratch in tmp_path."""
  bin_dir = tmp_path / 'bin'
  bin_dir.mkdir()
  # A script that execs this interpreter by its own path, not a symlink: from
  # Python 3.13 a symlink to a venv's python placed in another folder starts
  # the base interpreter, without the venv's site-packages.
  for name in ('python', 'python3'):
    launcher = bin_dir / name
    launcher.write_text('#!/bin/sh\nexec %s "$@"\n' % shlex.quote(sys.executable))
    launcher.chmod(0o755)
  env = dict(os.environ)
  env['PATH'] = '%s%s%s' % (bin_dir, os.pathsep, env.get('PATH', ''))
  env['TMPDIR'] = str(tmp_path)
  env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  return env


def _run(argv, cwd, env, what):
  """Runs argv in its own process group; kills the group afterwards in any case."""
  proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, start_new_session=True)
  try:
    out, _ = proc.communicate(timeout=COMMAND_TIMEOUT_SECS)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    pytest.fail('%s: still running after %d s:\n%s' % (
        what, COMMAND_TIMEOUT_SECS, out.decode(errors='replace')[-4000:]))
  finally:
    try:
      os.killpg(proc.pid, signal.SIGKILL)  # children it left behind
    except ProcessLookupError:
      pass
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  text = out.decode(errors='replace')
  assert proc.returncode == 0, '%s: exit status %d:\n%s' % (what, proc.returncode, text[-4000:])
  return text


def _bash(script, env, what):
  return _run(['bash', '-euo', 'pipefail', '-c', script], ROOT, env, what)


RUNNABLE = [b for b in BLOCKS if b.runnable]
SMOKE = [b for b in BLOCKS if b.mark and b.mark[0] == 'smoke']
# One run of each smoke command, however many blocks name it.
SMOKE_COMMANDS = {}
for _block in SMOKE:
  SMOKE_COMMANDS.setdefault(_block.mark[1], _block)


def test_some_blocks_run():
  # The usage example at least, and the benchmarks' smoke commands.
  assert any(b.lang == 'python' for b in RUNNABLE) and SMOKE


@runs_commands
@pytest.mark.timeout(COMMAND_TEST_TIMEOUT_SECS)
@pytest.mark.parametrize('block', RUNNABLE, ids=_id)
def test_runnable_block(block, command_env, tmp_path):
  if block.lang in SHELL_LANGS:
    _bash(block.body, command_env, block.where)
  else:
    work = tmp_path / 'work'
    work.mkdir()
    script = work / 'snippet.py'
    script.write_text(block.body)
    _run([sys.executable, str(script)], work, command_env, block.where)


@runs_commands
@pytest.mark.timeout(COMMAND_TEST_TIMEOUT_SECS)
@pytest.mark.parametrize('block', list(SMOKE_COMMANDS.values()), ids=_id)
def test_smoke_command(block, command_env):
  _bash(block.mark[1], command_env, '%s (smoke: %s)' % (block.where, block.mark[1]))


def _readme_command(comment):
  """The README's top command whose trailing comment starts with `comment`."""
  top = PARSED[ROOT / 'README.md'][0][0]
  for line in top.body.splitlines():
    command, _, note = line.partition('#')
    if note.strip().startswith(comment):
      return command.strip()
  raise AssertionError('README: no top command commented %r' % comment)


@runs_commands
@pytest.mark.timeout(COMMAND_TEST_TIMEOUT_SECS)
def test_readme_main_job(command_env):
  """The main job's command after its install step (CI installs the package)."""
  command = _readme_command('main job')
  install, _, job = command.rpartition('&&')
  assert install.strip().startswith('pip install'), command
  out = _bash(job.strip(), command_env, 'README main job: ' + job.strip())
  assert 'fastmts/stock steps/s' in out, out[-2000:]
  # What MonitoredTrainingSession itself costs per step over a bare Session.run loop of
  # the same model, stock and fastmts measured side by side in the same run.
  assert 'What MonitoredTrainingSession itself costs per step' in out, out[-2000:]
  for label in ('Session.run loop', 'stock MonitoredTrainingSession',
                'fastmts MonitoredTrainingSession'):
    assert re.search(r'^  %s +[\d.]+ us/step' % label, out, re.M), out[-2000:]
  assert re.search(r'^  fastmts: -?[\d.]+ us less per step than stock', out, re.M), out[-2000:]


def test_ci_runs_the_readme_test_command():
  """CI installs what the README's test command installs, the same extras, from the
  wheel it built (with --only-binary, no compiler reachable), then runs the command."""
  ci = (ROOT / '.ci' / 'run').read_text()
  ci_lines = [re.sub(r'^python3? -m pip ', 'pip ', l.strip()).replace('python3 ', 'python ')
              for l in ci.splitlines() if not l.strip().startswith('#')]
  install, _, test = _readme_command('the test suite').rpartition('&&')
  extras = re.search(r"^pip install '\.(\[[\w,]+\])'$", install.strip()).group(1)
  wheel_install = re.compile(r"^\.ci/no_compiler python3? -m pip install --only-binary fastmts "
                             r"--find-links \S+ 'fastmts%s'$" % re.escape(extras))
  assert any(wheel_install.match(l) for l in ci_lines), 'no install of %s in .ci/run' % extras
  assert test.strip() in ci_lines, 'README test command %r is not in .ci/run' % test


# ---- Links and paths ------------------------------------------------------------------


def _slug(heading):
  """GitHub's anchor of a heading."""
  text = heading.strip().lower().replace('`', '')
  text = re.sub(r'[^\w\- ]', '', text)
  return text.replace(' ', '-')


def _anchors(path):
  return {_slug(line.lstrip('#')) for line in PARSED[path][1].split('\n')
          if re.match(r'^#{1,6} ', line)}


def _links():
  for path in DOC_FILES:
    for target in re.findall(r'\]\(([^)\s]+)\)', PARSED[path][1]):
      if not re.match(r'^[a-z]+:', target):
        yield path, target


@pytest.mark.parametrize('path,target', list(_links()),
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_relative_link_resolves(path, target):
  file_part, _, anchor = target.partition('#')
  resolved = (path.parent / file_part).resolve() if file_part else path
  assert resolved.exists(), '%s: link to a missing file: %s' % (path.name, target)
  if anchor:
    assert resolved in PARSED, '%s: anchor into a file not checked: %s' % (path.name, target)
    assert anchor in _anchors(resolved), '%s: no heading for #%s in %s' % (
        path.name, anchor, resolved.name)


def _expand_braces(pattern):
  m = re.search(r'\{([^{}]*)\}', pattern)
  if not m:
    return [pattern]
  return [e for alt in m.group(1).split(',')
          for e in _expand_braces(pattern[:m.start()] + alt + pattern[m.end():])]


def _named_paths():
  seen = set()
  for path in DOC_FILES:
    prose = PARSED[path][1]
    words = re.findall(r'`([^`\n]+)`', prose)
    for comment in re.findall(r'<!--(.*?)-->', prose, re.S):
      words += comment.replace('`', ' ').split()
    for word in words:
      word = word.split('::')[0].rstrip('.,;:)')
      if REPO_PATH_RE.match(word) and '...' not in word and (path, word) not in seen:
        seen.add((path, word))
        yield path, word


@pytest.mark.parametrize('path,named', list(_named_paths()),
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_named_path_exists(path, named):
  for pattern in _expand_braces(named):
    assert glob.glob(str(ROOT / pattern)), '%s names `%s`, which does not exist' % (
        path.name, pattern)


def _named_tests():
  """(file, test) pairs the docs name as `test_x.py::test_y` (or `B::test_y`, B being
  tests/test_bad_inputs.py, as the bad-input table says)."""
  for path in DOC_FILES:
    for m in re.finditer(r'`(?:tests/)?(test_\w+\.py|B)::(test_\w+)', PARSED[path][1]):
      module = 'test_bad_inputs.py' if m.group(1) == 'B' else m.group(1)
      yield module, m.group(2)


@pytest.mark.parametrize('module,name', sorted(set(_named_tests())))
def test_named_test_exists(module, name):
  source = (ROOT / 'tests' / module).read_text()
  assert re.search(r'^\s*def %s\(' % re.escape(name), source, re.M), (
      'the docs name %s::%s, which does not exist' % (module, name))
