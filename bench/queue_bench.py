"""Queue-fed training: stock MonitoredTrainingSession vs fastmts.

Measuring code shared by bench/test_bench_queues.py and
``bench/report.py --queues``.

Scenario
--------
A tiny model fed by a TF1 queue pipeline, everything in-graph:

* ``tf.compat.v1.FIFOQueue(capacity=1000, [float32 features [16], int32
  label])`` filled by one ``tf.compat.v1.train.QueueRunner`` with
  ``ENQUEUE_OPS`` (4) enqueue ops, each ``enqueue_many`` of a fresh batch of
  32 random examples (``tf.random.uniform``), registered with
  ``tf.compat.v1.train.add_queue_runner`` -- so MonitoredTrainingSession
  starts its threads (stock TF: Python threads, which take the GIL around
  every ``sess.run(enqueue_op)``; fastmts: native threads that never do);
* a step dequeues ``dequeue_many(32)`` and trains a 16 -> 10 dense layer
  (softmax cross-entropy, GradientDescent, global step);
* ``impl.MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=huge),
  LossSumHook(loss)])``, ``LossSumHook`` being a user ``SessionRunHook``
  subclass that fetches the loss every step (``before_run``) and sums it
  (``after_run``); no checkpoint_dir, so no default hooks.

A ``QueueRunnerBench`` owns its graph and an already-created session;
``block(n)`` runs ``n`` steps of ``train_op`` and returns wall seconds (the
bench/measure.py runner protocol, so ``measure.Interleaver`` alternates
stock and fastmts blocks in serpentine order).  Examples/s = BATCH / median
per-step time.

Python calls per step: ``count_python_calls`` builds a *separate* session
per implementation with ``threading.setprofile`` installed before creation
(so stock TF's queue-runner threads, which are Python threads started at
session creation, inherit the profiler; it counts only while a flag is set)
and ``sys.setprofile`` in the main thread during one block of
``CALL_STEPS`` steps; 'call' events are counted, main thread and all threads
separately.  The timed runners are never profiled.
"""

import collections
import faulthandler
import gc
import sys
import threading
import time

import measure  # bench/measure.py: TF set up for graph mode, Interleaver
from measure import tf

IMPLS = ('stock', 'fastmts')
BATCH = 32           # examples per enqueue_many and per dequeue_many
FEATURES = 16
CLASSES = 10
CAPACITY = 1000
ENQUEUE_OPS = 4
DEFAULT_STEPS = 1000  # steps per timed block (the queue holds ~31 batches
                      # made between blocks; 1000 keeps that ~3% of a block)
DEFAULT_REPEATS = 7  # recorded interleaved rounds
CALL_STEPS = 50      # steps of the profiled block
CLOSE_TIMEOUT = 30   # seconds before a hanging close dumps all stacks

# feed_dict: the runner protocol's (bench/models.py); the queue feeds the step.
QueueModel = collections.namedtuple(
    'QueueModel', ['train_op', 'loss', 'global_step', 'queue', 'queue_runner', 'feed_dict'],
    defaults=[None])


def build_model():
    """Adds the queue pipeline and the model to the current default graph."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    queue = tf.compat.v1.FIFOQueue(
        CAPACITY, dtypes=[tf.float32, tf.int32],
        shapes=[[FEATURES], []], name='examples')
    enqueue_ops = []
    for i in range(ENQUEUE_OPS):
        with tf.name_scope('producer_%d' % i):
            features = tf.random.uniform([BATCH, FEATURES])
            labels = tf.random.uniform([BATCH], maxval=CLASSES, dtype=tf.int32)
            enqueue_ops.append(queue.enqueue_many([features, labels]))
    qr = tf.compat.v1.train.QueueRunner(queue, enqueue_ops)
    tf.compat.v1.train.add_queue_runner(qr)

    x, y = queue.dequeue_many(BATCH)
    w = tf.compat.v1.get_variable(
        'w', [FEATURES, CLASSES],
        initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
    b = tf.compat.v1.get_variable(
        'b', [CLASSES], initializer=tf.compat.v1.zeros_initializer())
    logits = tf.matmul(x, w) + b
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits),
        name='loss')
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=global_step, name='train_op')
    return QueueModel(train_op, loss, global_step, queue, qr)


class LossSumHook(tf.compat.v1.train.SessionRunHook):
    """A user hook in Python: fetches the loss every step, keeps a sum."""

    def __init__(self, loss):
        self._loss = loss
        self.total = 0.0
        self.steps = 0

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self.total += run_values.results
        self.steps += 1


def _factory(kind):
    if kind not in IMPLS:
        raise ValueError(kind)
    return measure.require(kind) or tf.compat.v1.train.MonitoredTrainingSession


def live_native_threads():
    """fastmts's count of its native threads alive in the process."""
    return measure.load_fastmts()._native.live_native_threads()


def _queue_python_threads():
    """Python threads (alive) that look like queue-runner threads."""
    main = threading.main_thread()
    return [t for t in threading.enumerate()
            if t is not main and t.is_alive()
            and 'QueueRunner' in repr(getattr(t, '_target', ''))]


class QueueRunnerBench(measure.MonitoredBlock):
    """A queue-fed MonitoredTrainingSession (stock or fastmts), created;
    ``block`` is bench/measure.py's (a Python loop of ``sess.run``)."""

    def __init__(self, kind):
        factory = _factory(kind)
        self.kind = kind
        self.name = kind
        self.graph = tf.Graph()
        self.sess = None
        self.close_seconds = None
        self.close_error = None
        with self.graph.as_default():
            self.model = build_model()
            self.hook = LossSumHook(self.model.loss)
            hooks = [tf.compat.v1.train.StopAtStepHook(
                         last_step=measure.LAST_STEP), self.hook]
            before = set(threading.enumerate())
            self.sess = factory(hooks=hooks)
        # This session's queue-runner threads: the Python threads its
        # creation started (stock TF) and fastmts's native ones.
        self.py_threads = [t for t in threading.enumerate()
                           if t not in before]
        self.native_threads = list(
            getattr(self.sess, 'queue_runner_threads', None) or [])

    def threads_left(self):
        """This session's queue-runner threads still alive, as text ('' if
        none)."""
        alive = [t.name for t in self.py_threads + self.native_threads
                 if t.is_alive()]
        return ('%d thread(s) alive: %s' % (len(alive), ', '.join(alive))
                if alive else '')

    def close(self):
        """Closes the session (idempotent); records how long it took and
        dumps every thread's stack if it takes over CLOSE_TIMEOUT s."""
        if self.sess is None:
            return
        sess, self.sess = self.sess, None
        faulthandler.dump_traceback_later(CLOSE_TIMEOUT, exit=False)
        t0 = time.perf_counter()
        try:
            with self.graph.as_default():
                sess.close()
        except Exception as e:
            self.close_error = '%s: %s' % (type(e).__name__, e)
            raise
        finally:
            self.close_seconds = time.perf_counter() - t0
            faulthandler.cancel_dump_traceback_later()


def make_runners(kinds=IMPLS):
    """name -> QueueRunnerBench of each kind; a runner that cannot be built
    (measure.MissingRunner, or its start's error) fails them all."""
    runners = {}
    try:
        for kind in kinds:
            runners[kind] = QueueRunnerBench(kind)
    except BaseException:
        close_all(runners)
        raise
    return runners


def close_all(runners):
    """Closes every runner (all of them, even if one fails); returns
    ``{name: problem}`` for closes that raised, were slow (> 5 s) or left
    queue-runner threads behind."""
    problems = {}
    first_error = None
    for name, r in runners.items():
        try:
            r.close()
        except Exception as e:  # keep closing the others
            problems[name] = 'close raised %s: %s' % (type(e).__name__, e)
            first_error = first_error or e
        if r.close_seconds is not None and r.close_seconds > 5:
            problems[name] = (problems.get(name, '') +
                              ' close took %.1f s' % r.close_seconds).strip()
        left = r.threads_left()
        if left:
            problems[name] = (problems.get(name, '') + ' after close: '
                              + left).strip()
    return problems


def leftover_threads():
    """A description of queue-runner threads alive in the process, or ''
    (with every session closed there should be none)."""
    parts = []
    py = _queue_python_threads()
    if py:
        parts.append('%d Python queue-runner thread(s) alive: %s'
                     % (len(py), ', '.join(t.name for t in py)))
    native = live_native_threads()
    if native:
        parts.append('%d fastmts native thread(s) alive' % native)
    return '; '.join(parts)


# --------------------------------------------------------------------------
# Throughput
# --------------------------------------------------------------------------

def examples_per_sec(per_step_seconds):
    return None if not per_step_seconds else BATCH / per_step_seconds


def measure_throughput(steps=DEFAULT_STEPS, repeats=DEFAULT_REPEATS,
                       warmup=1, log=None):
    """Interleaved blocks of stock and fastmts.  Returns a dict with
    ``ex_per_s`` (name -> median examples/s), ``spread`` (name ->
    (min, max) examples/s) and ``close`` (problems at close, see
    close_all)."""
    runners = make_runners()
    close_problems = {}
    try:
        inter = measure.Interleaver(runners)
        t0 = time.perf_counter()

        def progress(i, n):
            if log:
                log('  queues: round %d/%d (%.0f s)'
                    % (i, n, time.perf_counter() - t0))

        inter.measure(steps, repeats, warmup=warmup, progress=progress)
        ex = {}
        spread = {}
        for name in runners:
            s = inter.samples[name]
            ex[name] = examples_per_sec(inter.median_us(name) / 1e6)
            spread[name] = (BATCH / max(s), BATCH / min(s))
    finally:
        close_problems = close_all(runners)
    return {'ex_per_s': ex, 'spread': spread, 'close': close_problems,
            'steps': steps, 'repeats': repeats}


# --------------------------------------------------------------------------
# Python calls per step
# --------------------------------------------------------------------------

class _CallCounter:
    """A profile function counting 'call' events while ``active``, split
    into the main thread and the others."""

    def __init__(self):
        self.active = False
        self.main_ident = threading.main_thread().ident
        self.main = 0
        self.other = 0
        self.where = collections.Counter()  # other threads' functions
        self._lock = threading.Lock()

    def __call__(self, frame, event, arg):
        if event != 'call' or not self.active:
            return
        if threading.get_ident() == self.main_ident:
            self.main += 1
        else:
            code = frame.f_code
            with self._lock:
                self.other += 1
                self.where[code.co_name] += 1


def count_python_calls(kind, steps=CALL_STEPS, warmup_steps=20):
    """Python-level function calls per step for ``kind`` over one block of
    ``steps`` steps: ``{'main': .., 'all': .., 'other_threads': ..}``.

    A fresh session is created with the counter installed by
    ``threading.setprofile`` (so threads started at creation -- stock TF's
    queue runners -- carry it) and closed afterwards; the timed runners are
    not affected.
    """
    counter = _CallCounter()
    old_thread_profile = threading.getprofile() if hasattr(
        threading, 'getprofile') else None
    threading.setprofile(counter)
    try:
        runner = QueueRunnerBench(kind)
    finally:
        threading.setprofile(old_thread_profile)
    try:
        runner.block(warmup_steps)
        gc.collect()
        gc.disable()
        run, op = runner.sess.run, runner.model.train_op
        with runner.graph.as_default():
            counter.active = True
            sys.setprofile(counter)
            try:
                for _ in range(steps):
                    run(op)
            finally:
                sys.setprofile(None)
                counter.active = False
                gc.enable()
        # The loop itself makes no Python calls ('call' events are Python
        # frames only; run() is one of them).
        return {'main': counter.main / steps,
                'all': (counter.main + counter.other) / steps,
                'other_threads': counter.other / steps,
                'other_top': counter.where.most_common(5)}
    finally:
        runner.close()
        left = runner.threads_left()
        if left:
            _CALL_CLOSE_PROBLEMS[kind] = 'profiled session, after close: ' + left


_CALL_CLOSE_PROBLEMS = {}


def measure_calls():
    """``{name: counts}`` for each implementation."""
    return {kind: count_python_calls(kind) for kind in IMPLS}


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------

def table(throughput, calls):
    ex = throughput['ex_per_s']
    stock, fast = ex['stock'], ex['fastmts']
    cols = ['scenario', 'stock ex/s', 'fastmts ex/s', 'ratio (fastmts/stock)',
            'stock calls/step (main)', 'stock calls/step (all threads)',
            'fastmts calls/step (main)', 'fastmts calls/step (all threads)']
    c_s, c_f = calls['stock'], calls['fastmts']
    row = ['FIFOQueue + QueueRunner(%d enqueue ops), batch %d, 1 Python hook'
           % (ENQUEUE_OPS, BATCH), '%.0f' % stock, '%.0f' % fast,
           '%.2fx' % (fast / stock), '%.1f' % c_s['main'], '%.1f' % c_s['all'],
           '%.1f' % c_f['main'], '%.1f' % c_f['all']]
    return '\n'.join([
        '| ' + ' | '.join(cols) + ' |',
        '|' + '|'.join(['---'] + ['---:'] * (len(cols) - 1)) + '|',
        '| ' + ' | '.join(row) + ' |'])


def report(steps=DEFAULT_STEPS, repeats=DEFAULT_REPEATS, log=None):
    """The whole queue benchmark as Markdown text, plus the raw results."""
    t0 = time.perf_counter()
    if log:
        log('measuring queues: %d rounds x %d steps per implementation, '
            'interleaved' % (repeats, steps))
    thr = measure_throughput(steps, repeats, log=log)
    if log:
        log('  counting Python calls (%d steps)' % CALL_STEPS)
    calls = measure_calls()
    left = leftover_threads()
    elapsed = time.perf_counter() - t0
    fast_state = 'fastmts %s' % measure.load_fastmts().__version__
    lines = ['## fastmts queue-fed benchmark\n',
             'TensorFlow %s, %s; %d steps/block (%d examples/step), %d '
             'interleaved rounds (+1 warmup), medians; %.0f s total.\n'
             % (tf.__version__, fast_state, steps, BATCH, repeats, elapsed),
             table(thr, calls),
             '\nExamples/s over blocks of steps of an already-created '
             'session. Python calls = `call` profile events per step over '
             'one block of %d steps: main thread only, and all threads '
             '(stock TF\'s queue runners are Python threads; fastmts\'s are '
             'native).' % CALL_STEPS]
    problems = dict(thr['close'])
    problems.update(('%s (calls)' % k, v)
                    for k, v in _CALL_CLOSE_PROBLEMS.items())
    if left:
        problems['after all closes'] = left
    if problems:
        lines.append('\nproblems at close: ' + '; '.join(
            '%s: %s' % kv for kv in problems.items()))
    return '\n'.join(lines), {'throughput': thr, 'calls': calls, 'problems': problems}
