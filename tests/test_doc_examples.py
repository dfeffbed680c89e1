"""Every code example in python/fastmts's docstrings runs here, or says what checks it.

The rules (docs/design.md, "Commands in these documents"): a code example is a run of
lines in a module, class or function docstring of python/fastmts (.py and .pyi) indented
at least 4 columns more than the docstring's text, after a blank line (Markdown's indented
block), or a block fenced by ``` lines, or a run of `>>>` lines. Each is either

- run here: HARNESSES has an entry for it (the module's dotted name, with the class or
  function's qualified name for theirs; `#2` for a docstring's second example). The
  harness runs the example's text as found in the source: it defines the names the
  example leaves to the reader (`d`, `hooks`, `train_op`), and any text it puts in place
  of the example's own (a `...`) is replaced by `_substitute`, which fails once the
  example no longer holds that text; or
- marked: it ends with a comment line `# not-run: HOW` (continued on further `#` lines),
  HOW naming what checks it: a test file `tests/...py` or a test `file.py::test_name`,
  both checked to exist.

An example with neither, or with both, fails `test_every_example_is_run_or_marked`; a
harness whose example is gone fails `test_every_harness_has_its_example`.
`test_the_finder_holds_a_new_example_to_the_rules` checks the finder itself on a made-up
module. Examples that end a process (`sys.exit`) or need several run in processes of
their own (tests/doc_example_rank.py, started and killed by cluster_utils.Cluster).
"""
import ast
import contextlib
import io
import logging
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import tensorflow as tf

import cluster_utils

tf1 = tf.compat.v1
ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'python' / 'fastmts'
RANK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'doc_example_rank.py')
MARK_RE = re.compile(r'^#\s*not-run:\s*(.*)$')
# Hang bounds (docs/design.md, "Hang bounds in tests"), sized as tests/test_agreed_stop.py's
# for the same processes on a loaded 2-core machine (a rank's start, TF's import and its
# server, took up to 25 s beside two CPU-bound processes, a 3-rank trial up to 40 s; here
# a whole example took 6-12 s at load 5-9): each process is killed past
# _PROCESS_BOUND_SECS, the waits on them share one deadline below it, the test's bound is
# above both. The main job's two short runs (14-23 s together at load 5-7) share one
# deadline, tests/test_demo_job.py's bound on one run.
_PROCESS_BOUND_SECS = 150
_WAIT_SECS = 120
_PROCESS_TEST_SECS = 300
_MAIN_JOB_SECS = 300
_IN_PROCESS_TEST_SECS = 120


class Example:
  """One code example: where it is, its text (dedented), and its mark's HOW or None."""

  def __init__(self, key, path, line, source):
    self.key, self.path, self.line, self.source = key, path, line, source
    self.mark = _mark(source)

  @property
  def where(self):
    return '%s:%d (%s)' % (self.path, self.line, self.key)


def _indent(line):
  return len(line) - len(line.lstrip(' '))


def _mark(source):
  """The HOW of a trailing `# not-run: HOW` (continued on `#` lines), or None."""
  lines = source.rstrip('\n').split('\n')
  for k in range(len(lines) - 1, -1, -1):
    m = MARK_RE.match(lines[k].strip())
    if m:
      rest = lines[k + 1:]
      if all(l.strip().startswith('#') for l in rest):
        return ' '.join([m.group(1)] + [l.strip().lstrip('#').strip() for l in rest]).strip()
      return None
    if not lines[k].strip().startswith('#'):
      return None
  return None


def _blocks(doc, text_indent):
  """(line offset in the docstring, dedented text) of each block of `doc`: indented 4
  past the text after a blank line, fenced by ``` lines, or a run of `>>>` lines."""
  lines = doc.split('\n')
  found, i = [], 1  # line 0 is on the opening quotes: the summary, never a block
  while i < len(lines):
    stripped = lines[i].strip()
    if stripped.startswith('```'):  # to the closing fence, both fences left out
      j = i + 1
      while j < len(lines) and not lines[j].strip().startswith('```'):
        j += 1
      start, end, i = i + 1, j, j + 1
    elif stripped.startswith('>>>'):  # to the next blank line
      j = i
      while j < len(lines) and lines[j].strip():
        j += 1
      start, end, i = i, j, j
    elif stripped and _indent(lines[i]) >= text_indent + 4 and not lines[i - 1].strip():
      j = i
      while j < len(lines) and (not lines[j].strip() or
                                _indent(lines[j]) >= text_indent + 4):
        j += 1
      start, end, i = i, j, j
    else:
      i += 1
      continue
    found.append((start, textwrap.dedent('\n'.join(lines[start:end]).rstrip()) + '\n'))
  return found


def find_examples(text, module, path):
  """Every code example of the module source `text` (dotted name `module`)."""
  examples = []

  def visit(node, qualname):
    body = getattr(node, 'body', [])
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)):
      expr = body[0]
      text_indent = 0 if isinstance(node, ast.Module) else expr.col_offset
      key = '.'.join([module] + qualname)
      for n, (offset, source) in enumerate(_blocks(expr.value.value, text_indent)):
        examples.append(Example(key if n == 0 else '%s#%d' % (key, n + 1), path,
                                expr.lineno + offset, source))
    for child in body:
      if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        visit(child, qualname + [child.name])
      else:  # definitions under an if or a try
        for sub in ast.iter_child_nodes(child):
          if isinstance(sub, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(sub, qualname + [sub.name])

  visit(ast.parse(text), [])
  return examples


def _package_examples():
  examples = []
  for path in sorted(PACKAGE.rglob('*.py')) + sorted(PACKAGE.rglob('*.pyi')):
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    module = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
    examples += find_examples(path.read_text(), module, path.relative_to(ROOT).as_posix())
  return examples


EXAMPLES = _package_examples()


def _check_how(how):
  """What is wrong with a mark's HOW (an empty list: nothing)."""
  named = re.findall(r'(?:tests/)?(test_\w+\.py)::(test_\w+)', how)
  paths = [p.rstrip('.,;:)') for p in re.findall(r'\btests/[\w/]+\.py\b', how)]
  problems = []
  if not named and not paths:
    problems.append('names no test (tests/FILE.py or FILE.py::test_name)')
  for path in paths:
    if not (ROOT / path).is_file():
      problems.append('names %s, which does not exist' % path)
  for module, test in named:
    file = ROOT / 'tests' / module
    if not file.is_file() or not re.search(r'^\s*def %s\(' % re.escape(test),
                                          file.read_text(), re.M):
      problems.append('names %s::%s, which does not exist' % (module, test))
  return problems


def _substitute(source, old, new, regex=False):
  """source with `old` (once, exactly) replaced by the harness's `new`."""
  pattern = re.compile(old if regex else re.escape(old), re.M)
  found = pattern.findall(source)
  assert len(found) == 1, 'the harness replaces %r, found %d times in:\n%s' % (
      old, len(found), source)
  return pattern.sub(lambda m: new, source)


def _exec(source, names):
  namespace = dict(names, __name__='__doc_example__')
  exec(compile(source, '<docstring example>', 'exec'), namespace)  # pylint: disable=exec-used
  return namespace


def _step_graph(last_step):
  """global_step, train_op (global_step += 1), hooks [StopAtStepHook(last_step)]."""
  global_step = tf1.train.get_or_create_global_step()
  return global_step, global_step.assign_add(1), [
      tf1.train.StopAtStepHook(last_step=last_step)]


def _checkpoint_step(directory):
  latest = tf1.train.latest_checkpoint(directory)
  return latest and int(tf1.train.load_variable(latest, 'global_step'))


# ---- harnesses: one per example run here ----------------------------------------------


def _run_package_example(source, tmp_path):
  """fastmts: the loop trains until the hooks stop it, checkpointing in `d`."""
  d = str(tmp_path / 'ckpt')
  with tf.Graph().as_default():
    _, train_op, hooks = _step_graph(5)
    _exec(source, dict(d=d, hooks=hooks, train_op=train_op))
  assert _checkpoint_step(d) == 5


def _run_hook_costs_example(source, tmp_path):
  """fastmts.hook_costs: the report is printed, and logged at close."""
  import fastmts  # pylint: disable=g-import-not-at-top
  logger = logging.getLogger('tensorflow')
  records, level = [], logger.level
  handler = logging.Handler()
  handler.emit = records.append
  logger.addHandler(handler)
  logger.setLevel(logging.INFO)
  out = io.StringIO()
  try:
    with tf.Graph().as_default(), contextlib.redirect_stdout(out):
      _, train_op, hooks = _step_graph(4)
      _exec(source, dict(fastmts=fastmts, hooks=hooks, train_op=train_op))
  finally:
    fastmts.report_hook_costs(False)
    logger.removeHandler(handler)
    logger.setLevel(level)
  printed = out.getvalue()
  assert 'fastmts hook cost report: 4 steps' in printed and 'StopAtStepHook' in printed, printed
  logged = [r.getMessage() for r in records]
  assert any(m.startswith('fastmts hook cost report at close:\n') and 'StopAtStepHook' in m
             for m in logged), logged


# What the harness runs in place of the patching example's `...` line (the script).
_PATCHED_SCRIPT = '''\
assert tf.compat.v1.train.MonitoredTrainingSession is fastmts.MonitoredTrainingSession
with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as sess:
  while not sess.should_stop():
    sess.run(train_op)
sessions.append(sess)
'''


def _run_patching_example(source, tmp_path):
  """fastmts.patching: between patch() and unpatch() a script's
  tf.compat.v1.train.MonitoredTrainingSession is fastmts's; TF's again after."""
  import fastmts  # pylint: disable=g-import-not-at-top
  tf_mts = tf1.train.MonitoredTrainingSession
  source = _substitute(source, r'^\.\.\.[ \t]*#.*\n', _PATCHED_SCRIPT, regex=True)
  sessions = []
  try:
    with tf.Graph().as_default():
      _, train_op, hooks = _step_graph(3)
      _exec(source, dict(tf=tf, hooks=hooks, train_op=train_op, sessions=sessions))
  finally:
    fastmts.unpatch()  # the example's own, if it failed before it (a no-op after it)
  assert isinstance(sessions[0], fastmts.MonitoredSession)
  assert tf1.train.MonitoredTrainingSession is tf_mts


def _run_main_synopsis(source, tmp_path):
  """fastmts.__main__: the synopsis's options, each given (few steps, and the per-step
  cost measurement after training off: --overhead-rounds 0); run twice on one --dir,
  the second run resumes from the first's checkpoint and trains --steps more."""
  synopsis = source.strip()
  assert synopsis.startswith('python -m fastmts '), synopsis
  options = dict(re.findall(r'\[(--[\w-]+) ([^\]]+)\]', synopsis))
  assert set(options) == {'--steps', '--dir', '--impl'}, synopsis
  assert 'fastmts' in options['--impl'].split('|'), synopsis
  job_dir = tmp_path / 'job'
  argv = [sys.executable, '-m', 'fastmts', '--steps', '60', '--dir', str(job_dir),
          '--impl', 'fastmts', '--log-every', '30', '--overhead-rounds', '0']
  deadline = time.monotonic() + _MAIN_JOB_SECS
  for expected_step in (60, 120):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=cluster_utils.child_env())
    try:
      out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      out, _ = proc.communicate()
      pytest.fail('python -m fastmts still running at its bound:\n%s'
                  % out.decode(errors='replace')[-3000:])
    finally:
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    text = out.decode(errors='replace')
    assert proc.returncode == 0, text[-3000:]
    assert _checkpoint_step(str(job_dir / 'fastmts')) == expected_step, text[-3000:]
  assert not (job_dir / 'tf').exists()


def _sigterm_one(tmp_path, ranks, example, source, target):
  """Runs `source` in `ranks` processes (tests/doc_example_rank.py), sends SIGTERM to
  rank `target` once every rank trains, and waits for them all: ({rank: exit code},
  [each rank's result], the checkpoint directory)."""
  ckpt = str(tmp_path / 'ckpt')
  options = {'example': example, 'source': source, 'checkpoint_dir': ckpt}
  names = ['worker%d' % i for i in range(ranks)]
  with cluster_utils.Cluster(tmp_path / 'run', num_ps=0, num_workers=ranks) as c:
    for i in range(ranks):
      c.start_worker(i, options=options, script=RANK_SCRIPT, timeout=_PROCESS_BOUND_SECS)
    deadline = time.monotonic() + _WAIT_SECS
    for name in names:  # a signal before the session exists would kill the process
      c.wait_event(name, lambda e: e['event'] == 'training',
                   max(1.0, deadline - time.monotonic()))
    time.sleep(0.3)
    os.kill(c.tasks[names[target]].pid, signal.SIGTERM)
    codes = c.wait_exit(names, timeout=max(1.0, deadline - time.monotonic()))
    described = '\n'.join(c.tasks[n].describe() for n in names)
    results = [c.tasks[n].result() for n in names]
    assert not c.alive_pids()
  return [codes[n] for n in names], results, ckpt, described


def _run_preemption_example(source, tmp_path):
  """fastmts.preemption: SIGTERM to the training process: it exits 143 and the step it
  stopped after is the latest checkpoint (0 steps lost)."""
  codes, [result], ckpt, described = _sigterm_one(tmp_path, 1, 'preemption', source, 0)
  assert codes == [143], described
  assert result['exit_code'] == 143 and result['steps'] > 0, result
  assert result['checkpoint_step'] == result['steps'] == _checkpoint_step(ckpt), result


def _run_agreed_stop_example(source, tmp_path):
  """fastmts.agreed_stop: two ranks with TF's collective ops (CollectiveEngine in place
  of 'horovod'; `...` the ranks' servers, collective config and rank 0's
  checkpoint_dir): a SIGTERM to rank 1 and both ranks exit 143, stopped after the
  same step, which rank 0 checkpointed."""
  source = _substitute(source, "fastmts.AgreedStop('horovod')", 'fastmts.AgreedStop(engine)')
  source = _substitute(source, 'MonitoredTrainingSession(...,',
                       'MonitoredTrainingSession(**session_args,')
  codes, results, ckpt, described = _sigterm_one(tmp_path, 2, 'agreed_stop', source, 1)
  assert codes == [143, 143], described
  assert [r['exit_code'] for r in results] == [143, 143], results
  assert results[0]['steps'] == results[1]['steps'] > 0, results
  assert results[0]['checkpoint_step'] == results[0]['steps'] == _checkpoint_step(ckpt)


# key -> (harness, its pytest-timeout)
HARNESSES = {
    'fastmts': (_run_package_example, _IN_PROCESS_TEST_SECS),
    'fastmts.hook_costs': (_run_hook_costs_example, _IN_PROCESS_TEST_SECS),
    'fastmts.patching': (_run_patching_example, _IN_PROCESS_TEST_SECS),
    'fastmts.__main__': (_run_main_synopsis, _MAIN_JOB_SECS + 60),
    'fastmts.preemption': (_run_preemption_example, _PROCESS_TEST_SECS),
    'fastmts.agreed_stop': (_run_agreed_stop_example, _PROCESS_TEST_SECS),
}


# ---- the rules ------------------------------------------------------------------------


def test_the_package_has_examples():
  keys = {e.key for e in EXAMPLES}
  assert {'fastmts', 'fastmts.agreed_stop', 'fastmts.preemption'} <= keys, keys


def _rule_problems(example, harnesses):
  if example.mark is None:
    if example.key not in harnesses:
      return ['%s: a docstring example is run by tests/test_doc_examples.py (an entry in '
              'HARNESSES) or ends with `# not-run: HOW`, HOW naming the test that checks '
              'it:\n%s' % (example.where, example.source)]
    return []
  if example.key in harnesses:
    return ['%s: marked not-run, and HARNESSES runs it: one or the other' % example.where]
  return ['%s: `# not-run:` %s' % (example.where, p) for p in _check_how(example.mark)]


@pytest.mark.parametrize('example', EXAMPLES, ids=lambda e: e.key)
def test_every_example_is_run_or_marked(example):
  problems = _rule_problems(example, HARNESSES)
  assert not problems, '\n'.join(problems)


def test_every_harness_has_its_example():
  keys = {e.key for e in EXAMPLES}
  assert not set(HARNESSES) - keys, 'harnesses of no example: %s' % sorted(set(HARNESSES) - keys)


_MADE_UP_MODULE = '''\
"""A module.

    run_me()          # an example: unmarked
"""


class Thing:
  """A class.
  >>> Thing()
  <Thing>

  Args:
    x: its argument, indented in an Args section,
      and continued: no example.
  """

  def method(self):
    """A method.

        self.method()
        # not-run: tests/test_doc_examples.py runs nothing like it

    Text again.

        other()
        # not-run: a fragment, checked by nothing

    ```python
    fenced()
    ```
    """
'''


def test_the_finder_holds_a_new_example_to_the_rules():
  found = find_examples(_MADE_UP_MODULE, 'm', 'm.py')
  assert [(e.key, e.line, e.source, e.mark) for e in found] == [
      ('m', 3, 'run_me()          # an example: unmarked\n', None),
      ('m.Thing', 9, '>>> Thing()\n<Thing>\n', None),
      ('m.Thing.method', 20, 'self.method()\n# not-run: tests/test_doc_examples.py runs '
       'nothing like it\n', 'tests/test_doc_examples.py runs nothing like it'),
      ('m.Thing.method#2', 25, 'other()\n# not-run: a fragment, checked by nothing\n',
       'a fragment, checked by nothing'),
      ('m.Thing.method#3', 29, 'fenced()\n', None),
  ]
  problems = [p for e in found for p in _rule_problems(e, {'m.Thing.method': None})]
  rule = r'\((m[\w.#]*)\): (a docstring example|marked not-run|`# not-run:` names no test)'
  assert [re.search(rule, p).groups() for p in problems] == [
      ('m', 'a docstring example'), ('m.Thing', 'a docstring example'),
      ('m.Thing.method', 'marked not-run'), ('m.Thing.method#2', '`# not-run:` names no test'),
      ('m.Thing.method#3', 'a docstring example')]


# ---- running ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    'example',
    [pytest.param(e, marks=pytest.mark.timeout(HARNESSES[e.key][1]), id=e.key)
     for e in EXAMPLES if e.key in HARNESSES])
def test_example_runs(example, tmp_path):
  HARNESSES[example.key][0](example.source, tmp_path)
