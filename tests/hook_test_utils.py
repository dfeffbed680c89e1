"""Helpers shared by the tests of the hooks fastmts runs natively
(test_hook_*.py, test_native_loop.py, test_coordinator_queues.py, ...):

* what a user observes, as expected values: ``CREATED`` (the lines
  MonitoredSession's session manager logs while creating the session),
  ``NAN_LOSS`` / ``DIVERGED_ERROR`` / ``DIVERGED_WARNING`` (NanTensorHook),
  ``STEPS_10`` (the results of ten train runs from step 0), ``GRAPHS`` and
  :func:`summary` / :func:`start` / :func:`ckpt_log` (event records),
  :func:`ckpt_names` and :func:`save_lines` (CheckpointSaverHook's files and
  log lines);
* :func:`tf_log`, recording what is logged to TF's logger ('tensorflow'),
  and :func:`in_dir` / ``STEP_RATE``, to compare its lines across runs;
* :func:`step_graph`, :func:`read_first_graph` and :func:`nan_at`, graphs
  whose values depend only on the global step, and
  :func:`global_step_read_after`;
* :func:`schedule_state`, what a stock hook object holds of its schedule;
* :func:`events`, the records of a directory's event files, and
  :func:`flush_cached_writer`;
* :func:`controlled_time` (a :class:`FakeClock` that ``time.time`` reads)
  and :func:`tick_runs`, for seconds-based triggers;
* :func:`run_n_times`, n plain ``sess.run`` calls.
"""

import contextlib
import logging
import os
import re
import time

import numpy as np
import tensorflow as tf
from tensorflow.python.training import training_util

from compat_utils import Raised

v1 = tf.compat.v1
SessionLog = tf.compat.v1.SessionLog

NAN_LOSS = Raised(v1.train.NanLossDuringTrainingError,
                  'NaN loss during training.')
DIVERGED_ERROR = ('ERROR', 'Model diverged with loss = NaN.')
DIVERGED_WARNING = ('WARNING', 'Model diverged with loss = NaN.')
# What MonitoredSession's session manager logs while creating the session.
CREATED = [('INFO', 'Graph was finalized.'),
           ('INFO', 'Running local_init_op.'),
           ('INFO', 'Done running local_init_op.')]
# What ten runs of step_graph's `train` return, from step 0.
STEPS_10 = [np.int64(s) for s in range(1, 11)]

_ELAPSED = re.compile(r'\(\d+\.\d{3} sec\)')


class _Recorder(logging.Handler):
  """Appends (level, message[, has exc_info]) of every record to `lines`."""

  def __init__(self, lines, workdir=None, exact=False, with_exc_info=False,
               rewrite=None):
    super().__init__(logging.DEBUG)
    self.lines = lines
    self.workdir = workdir
    self.exact = exact
    self.with_exc_info = with_exc_info
    self.rewrite = rewrite

  def emit(self, record):
    message = record.getMessage()
    if not self.exact:
      message = _ELAPSED.sub('(x.xxx sec)', message)
    if self.workdir:
      message = message.replace(self.workdir, 'DIR')
    if self.rewrite:
      message = self.rewrite(message)
    entry = (record.levelname, message)
    if self.with_exc_info:
      entry += (bool(record.exc_info),)
    self.lines.append(entry)


@contextlib.contextmanager
def tf_log(workdir=None, exact=False, with_exc_info=False, rewrite=None):
  """Yields the list of (level, message) logged to TF's logger meanwhile.

  LoggingTensorHook's '(1.234 sec)' becomes '(x.xxx sec)' unless `exact`
  (for scenarios under a fake clock, where the elapsed time is exact); a
  given `workdir` becomes 'DIR'; a given `rewrite` (str -> str) is applied
  to every message last.  With `with_exc_info`, each entry has a third
  element: whether the record carries exc_info.
  """
  lines = []
  logger = logging.getLogger('tensorflow')
  handler = _Recorder(lines, workdir=workdir, exact=exact,
                      with_exc_info=with_exc_info, rewrite=rewrite)
  old_level = logger.level
  logger.addHandler(handler)
  logger.setLevel(logging.INFO)
  try:
    yield lines
  finally:
    logger.setLevel(old_level)
    logger.removeHandler(handler)


def step_graph(loss_fn=lambda s: tf.cast(s, tf.float32) * 0.5):
  """A graph whose values depend only on the step.

  Returns (step, loss, train): `step` is the global step read *before* this
  run's increment, `loss = loss_fn(step)`, and `train` increments the global
  step after both were computed (so `train` evaluates to step + 1).
  """
  gs = v1.train.get_or_create_global_step()
  step = tf.identity(gs.read_value(), name='step')
  loss = tf.identity(loss_fn(step), name='loss')
  with tf.control_dependencies([step, loss]):
    train = v1.assign_add(gs, 1, name='train')
  return step, loss, train


def global_step_read_after(train):
  """Makes the global-step read tensor that the stock hooks fetch (and read
  afresh) wait for `train`, so every read of it, fresh ones included, runs
  the increment first. Returns it.

  It is the read training_util._get_or_create_global_step_read makes, but
  without its is-initialized cond: TF 2.12 builds that cond in an init_scope,
  outside any control dependency, so there the read would race the increment
  (and so would TF's own results)."""
  gs = v1.train.get_global_step()
  with tf.control_dependencies([train]):
    read = tf.add(gs.read_value(), 0, name='global_step/add')
  v1.add_to_collection(training_util.GLOBAL_STEP_READ_KEY, read)
  assert training_util._get_or_create_global_step_read() is read  # pylint: disable=protected-access
  return read


def nan_at(k):
  """loss_fn: 1 / (1 + step), and NaN at step k only."""

  def loss_fn(step):
    value = 1.0 / (1.0 + tf.cast(step, tf.float32))
    return tf.where(tf.equal(step, k), tf.constant(np.nan, tf.float32), value)

  return loss_fn


def schedule_state(hook):
  """What a hook object holds of its schedule, as (class name, its timer's
  last triggered step, _last_global_step, _next_step, _last_step,
  _iter_count); None where the hook has no such attribute."""
  def step(value):
    return None if value is None else int(value)

  timer = getattr(hook, '_timer', None)
  return (type(hook).__name__, None if timer is None else step(timer.last_triggered_step()),
          step(getattr(hook, '_last_global_step', None)),
          step(getattr(hook, '_next_step', None)), step(getattr(hook, '_last_step', None)),
          getattr(hook, '_iter_count', None))


def events(directory, rates=True):
  """(number of event files, their records) in `directory`.

  Records, in file order: ('summary', tag, step, simple_value or the kind of
  value), ('session_log', status name, step, checkpoint file basename),
  ('run_metadata', tag, step), ('graph_def', step), ('meta_graph_def', step).
  With rates=False the values of '.../sec' summaries (timing) become None.
  """
  names = sorted(n for n in os.listdir(directory)
                 if n.startswith('events.out.tfevents.'))
  out = []
  for name in names:
    for e in v1.train.summary_iterator(os.path.join(directory, name)):
      what = e.WhichOneof('what')
      if what == 'summary':
        for v in e.summary.value:
          kind = v.WhichOneof('value')
          value = v.simple_value if kind == 'simple_value' else kind
          if not rates and v.tag.endswith('/sec'):
            value = None
          out.append(('summary', v.tag, e.step, value))
      elif what == 'session_log':
        s = e.session_log
        out.append(('session_log', SessionLog.SessionStatus.Name(s.status),
                    e.step, os.path.basename(s.checkpoint_path)))
      elif what == 'tagged_run_metadata':
        out.append(('run_metadata', e.tagged_run_metadata.tag, e.step))
      elif what in ('graph_def', 'meta_graph_def'):
        out.append((what, e.step))
  return len(names), out


class FakeClock:
  """A monotonic clock that only moves when advanced."""

  def __init__(self, start=1000.0):
    self.now = float(start)

  def __call__(self):
    return self.now

  def advance(self, secs):
    self.now += secs


@contextlib.contextmanager
def controlled_time(impl, monkeypatch):
  """Yields a FakeClock that `time.time` reads until the block exits, even
  when it raises. fastmts's native timers follow the patch by themselves,
  as TF's Python timers do."""
  del impl
  clock = FakeClock()
  with monkeypatch.context() as patch:
    patch.setattr(time, 'time', clock)
    yield clock


_ADDRESS = re.compile(r' at 0x[0-9a-fA-F]+')


# StepCounterHook's log line; the rate is timing unless on a fake clock.
STEP_RATE = re.compile(r'(global_step/sec: )[0-9.e+-]+')


def in_dir(workdir, lines):
  """Log lines with the work directory replaced by '<dir>' and object
  addresses dropped, so runs in different directories compare."""
  return [(level, _ADDRESS.sub('', msg.replace(str(workdir), '<dir>')))
          for level, msg in lines]


def read_first_graph():
  """Like hook_test_utils.step_graph, for hooks whose schedule
  depends on the "stale" global step they fetch with the train op.

  The increment waits for the global-step read tensor the stock hooks fetch
  (`_get_or_create_global_step_read`, as Estimator does) and for every value
  computed from the step, including `doubled` (= step, for summaries), so all
  of them are the step before the run's increment.  (Without this the hooks'
  read races the increment; and a value computed from `loss` outside the
  increment's dependencies can make even the fetched `step` show the
  incremented value, grappler turning the reads into aliases of the
  variable that the in-place AssignAdd then updates.)

  Returns (step, loss, train); the graph also has 'doubled:0' (see
  doubled()).
  """
  gs = v1.train.get_or_create_global_step()
  # pylint: disable-next=protected-access
  read = training_util._get_or_create_global_step_read()
  step = tf.identity(read, name='step')
  loss = tf.identity(tf.cast(step, tf.float32) * 0.5, name='loss')
  twice = tf.identity(loss * 2.0, name='doubled')
  with tf.control_dependencies([step, loss, twice]):
    train = v1.assign_add(gs, 1, name='train')
  return step, loss, train


def doubled():
  """read_first_graph's `loss * 2`, computed before the increment."""
  return v1.get_default_graph().get_tensor_by_name('doubled:0')


def flush_cached_writer(directory):
  """Flushes the FileWriterCache writer of `directory` (hooks that do not
  flush themselves: StepCounterHook, ProfilerHook)."""
  v1.summary.FileWriterCache.get(directory).flush()


# What a writer records of the graph: a FileWriterCache writer when created
# (SummarySaverHook, StepCounterHook, ProfilerHook), CheckpointSaverHook after
# the session is created.
GRAPHS = [('graph_def', 0), ('meta_graph_def', 0)]


def summary(tag, step, value):
  return ('summary', tag, step, value)


def start(step):
  return ('session_log', 'START', step, '')


def ckpt_log(step):
  return ('session_log', 'CHECKPOINT', step, 'model.ckpt')


def ckpt_names(*steps):
  return sorted('model.ckpt-%d.%s' % (s, ext) for s in steps
                for ext in ('data-00000-of-00001', 'index', 'meta'))


def run_n_times(sess, fetches, n):
  """The results of `n` plain sess.run(fetches) calls."""
  return [sess.run(fetches) for _ in range(n)]


def save_lines(steps, stop_at=(), listener_class=None):
  """CheckpointSaverHook's log lines for saves at `steps`, a listener of
  `listener_class` requesting stop at the steps in `stop_at`."""
  out = []
  for s in steps:
    out += [('INFO', 'Calling checkpoint listeners before saving checkpoint '
             '%d...' % s),
            ('INFO', 'Saving checkpoints for %d into <dir>/model.ckpt.' % s),
            ('INFO', 'Calling checkpoint listeners after saving checkpoint '
             '%d...' % s)]
    if s in stop_at:
      out.append(('INFO', 'A CheckpointSaverListener requested that training '
                  'be stopped. listener: <%s.%s object>' % (
                      listener_class.__module__, listener_class.__name__)))
  return out


TICK = 1.5


def tick_runs(impl, monkeypatch, fetches, hooks=(), new_session=None,
               n=10):
  """Under controlled_time, creates impl.MonitoredSession(hooks=hooks) (or
  new_session()) and runs `fetches` n times, the clock moving TICK before
  each run; returns the results."""
  with controlled_time(impl, monkeypatch) as clock:
    if new_session is None:
      new_session = lambda: impl.MonitoredSession(hooks=list(hooks))
    with new_session() as sess:
      results = []
      for _ in range(n):
        clock.advance(TICK)
        results.append(sess.run(fetches))
  return results
