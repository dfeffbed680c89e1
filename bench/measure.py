"""Measuring code shared by bench/test_bench_steps.py and bench/report.py.

Vocabulary
----------
graph     'trivial' | 'mlp' (toy graphs, all presets) | 'fed_mlp' |
          'large_batch' | 'dataset' | 'cnn' (workloads, 'full' only: PRESETS;
          see bench/models.py; a fed model's feed_dict goes to every step of
          every runner, the floor's included)
hooks     'stop'  -> hooks=[StopAtStepHook], no checkpoint_dir (so
                     MonitoredTrainingSession adds no default hooks)
          'full'  -> checkpoint_dir=<tmp> with all MonitoredTrainingSession
                     defaults (StepCounterHook, SummarySaverHook every 100
                     steps, CheckpointSaverHook every 600 s) plus
                     [StopAtStepHook, NanTensorHook(loss),
                      LoggingTensorHook({'loss': loss}, every_n_iter=1000)]
          'summaries' -> checkpoint_dir=<tmp> with MonitoredTrainingSession's
                     defaults but save_summaries_steps=10, the graph with
                     SUMMARIES (300) scalar summaries, plus [StopAtStepHook]
kind      'stock'   tf.compat.v1.train.MonitoredTrainingSession
          'fastmts' fastmts.MonitoredTrainingSession, sess.run(train_op) per step
          'fastmts-loop'  the same session, steps by sess.run_steps(train_op,
                    max_steps=n): the native loop
          'session' plain tf.compat.v1.Session.run(train_op) in a Python loop
          'native'  fastmts.benchmarking.native_floor_loop(session, fetches, steps): the
                    same TF_SessionRun calls in a C++ loop (the speed floor).
                    Without a preset: train_op on a plain Session. With a
                    hooks preset: on the session of a stock
                    MonitoredTrainingSession built with that preset (same
                    graph, same session setup), the fetches its hooks add to
                    every step merged as one run does: train_op + the
                    global-step read tensor that StopAtStepHook and TF's
                    default hooks fetch (not the variable: the read tensor is
                    a cond on the variable being initialized, a different
                    and dearer run), for 'full' + loss, and for 'summaries'
                    the merged summary op on the steps stock's
                    SummarySaverHook fetches it (traced_summary_period:
                    every SUMMARY_PERIOD - 1 steps on the trivial graph
                    here), in the same run. So the floor is the TF work any
                    implementation of that step must do, and nothing else:
                    the hooks themselves never run.
          'native-reads'  (presets 'full' and 'summaries') 'native' plus the
                    re-reads of the global step that TF's StepCounterHook and
                    SummarySaverHook make on the steps where their timers may
                    fire (REREADS): TF work those hooks require, made as
                    fastmts makes it (a run of the read tensor alone, in the
                    calling thread). What is left between this floor and
                    fastmts is fastmts's own dispatch and the hooks' Python
                    actions (TF's _log_and_record and its FileWriter).

A *runner* owns its own graph and an already-created session; ``block(n)``
runs ``n`` steps of ``train_op`` and returns the wall time in seconds, so
session creation is never measured.  An ``Interleaver`` runs blocks of several
runners alternately (serpentine order: A B C, C B A, A B C, ...) so that slow
drifts of a noisy machine hit every runner alike; medians of the per-block
per-step times are the reported numbers.
"""

import gc
import importlib
import math
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # noqa: E402
from tensorflow.python.training import training_util  # noqa: E402

tf.compat.v1.disable_eager_execution()
# The compat.v1 APIs log deprecation warnings; keep benchmark output readable.
tf.get_logger().setLevel('ERROR')

import models  # noqa: E402  (bench/models.py; bench/ is on sys.path)
from pairing import paired_ratio  # noqa: E402,F401  (the benchmarks' pairing, here too)

GRAPHS = ('trivial', 'mlp', 'fed_mlp', 'large_batch', 'dataset', 'cnn')
HOOKS = ('stop', 'full', 'summaries')
# The hooks presets measured on each graph: every one on the toy graphs, where
# the step is nearly all machinery; on the workloads, what a training job
# runs (checkpoint_dir with TF's default hooks).
TOY_GRAPHS = ('trivial', 'mlp')
PRESETS = {graph: HOOKS if graph in TOY_GRAPHS else ('full',) for graph in GRAPHS}
IMPLS = ('stock', 'fastmts', 'fastmts-loop')
FLOORS = ('session', 'native')

# Where TF's hooks re-read the global step with MonitoredTrainingSession's
# defaults (StepCounterHook and SummarySaverHook, both every 100 steps): the
# step fetched with train_op is already incremented on this machine, so
# StepCounterHook re-reads on two steps per 100 (the first re-read finds
# its timer not yet due) and SummarySaverHook on one (traced on the trivial
# graph: re-reads after global steps 100, 101, 100 | 200, 201, 199 | ...).
REREAD_PERIOD, REREAD_AT = 100, (0, 1, 50)
# The 'summaries' preset: save_summaries_steps=SUMMARY_PERIOD. Its
# SummarySaverHook fetches the merged summaries and re-reads the step on the
# steps its timer fires for, which are not every SUMMARY_PERIOD steps: the
# hook takes the step read with train_op as stale and asks on the step after
# stale + 2, so where the read already sees the increment it asks every
# SUMMARY_PERIOD - 1 steps (stock's events: steps 1, 10, 19, 28, ...). The
# floor takes that period from a short stock run (traced_summary_period);
# StepCounterHook re-reads on two steps per 100 as above.
SUMMARIES, SUMMARY_PERIOD = 300, 10
SUMMARY_STEP_COUNTER_AT = (0, 1)
# The presets whose hooks re-read the global step (the hooked floor);
# 'summaries' is scheduled by NativeFloorRunner from its traced period.
REREADS = {
    'full': REREAD_AT,
    'summaries': None,
}
# (graph, preset) -> the summary fetch period traced by a floor runner, for
# the report's text.
TRACED_SUMMARY_PERIODS = {}


def traced_summary_period(sess, train_op, logdir):
    """The steps between two summary fetches of stock's SummarySaverHook in
    a MonitoredTrainingSession `sess` (stock, hooks live) writing to
    `logdir`: runs a few steps through it and reads the summary records'
    steps from its event file. Where the step read races with its
    increment (the MLP: 9 or 10 from one run to the next) a trace may mix
    two gaps; the more frequent one is taken, the shorter on a tie."""
    for _ in range(3 * SUMMARY_PERIOD + 2):
        sess.run(train_op)
    tf.compat.v1.summary.FileWriterCache.get(logdir).flush()
    steps = []
    for path in tf.io.gfile.glob(os.path.join(logdir, 'events.out.tfevents.*')):
        for event in tf.compat.v1.train.summary_iterator(path):
            values = event.summary.value
            if values and values[0].tag != 'global_step/sec':
                steps.append(event.step)
    steps.sort()
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    if not gaps:
        raise RuntimeError('too few summary records in stock\'s events: steps %r'
                           % steps)
    return max(sorted(set(gaps)), key=gaps.count)


def summary_reread_schedule(period):
    """(schedule length, steps within it) of the 'summaries' preset's
    re-reads: one on every summary step, StepCounterHook's two per 100. A
    step listed twice re-reads twice, as two hooks would."""
    length = period * REREAD_PERIOD // math.gcd(period, REREAD_PERIOD)
    at = list(range(0, length, period))
    at += [i for i in range(length) if i % REREAD_PERIOD in SUMMARY_STEP_COUNTER_AT]
    return length, sorted(at)

# StopAtStepHook must never fire during a benchmark: blocks keep advancing the
# same global step for the lifetime of the session.
LAST_STEP = 2 ** 62

DEFAULT_STEPS = 2000

class MissingRunner(RuntimeError):
    """A runner that a benchmark names cannot be built from the fastmts on
    ``sys.path``. The benchmark fails with this reason: a ratio whose runner
    is gone is a check that cannot fail, so none is ever printed as n/a or
    skipped."""


_fastmts_cache = []


def load_fastmts():
    """The ``fastmts`` package; raises MissingRunner when it does not
    import (a broken build), with the import's error as the reason."""
    if not _fastmts_cache:
        try:
            import fastmts
        except Exception as e:  # ImportError, OSError from the extension...
            raise MissingRunner('fastmts not importable (%s: %s)'
                                % (type(e).__name__, e)) from e
        _fastmts_cache.append(fastmts)
    return _fastmts_cache[0]


# kind -> (module, attribute) that its runners call.
_RUNNER_ENTRIES = {
    'fastmts': ('fastmts', 'MonitoredTrainingSession'),
    'fastmts-loop': ('fastmts', 'MonitoredTrainingSession'),
    'native': ('fastmts.benchmarking', 'native_floor_loop'),
    'native-reads': ('fastmts.benchmarking', 'native_floor_loop'),
}


def require(kind):
    """What runners of ``kind`` call (None for stock TF's own); raises
    MissingRunner, naming what is missing, when fastmts lacks it."""
    if kind in ('stock', 'session'):
        return None
    if kind not in _RUNNER_ENTRIES:
        raise ValueError('unknown runner kind %r' % (kind,))
    load_fastmts()
    module_name, attr = _RUNNER_ENTRIES[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise MissingRunner('%s missing (%s)' % (module_name, e)) from e
    entry = getattr(module, attr, None)
    if not callable(entry):
        raise MissingRunner('%s.%s missing' % (module_name, attr))
    return entry


# --------------------------------------------------------------------------
# Runners
# --------------------------------------------------------------------------

class Runner:
    """Owns a graph built by ``models.BUILDERS[graph]`` and a live session."""

    kind = None

    def __init__(self, graph):
        self.graph_name = graph
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.model = models.BUILDERS[graph]()
        self.sess = None

    @property
    def name(self):
        return self.kind

    def block(self, steps):
        """Run ``steps`` steps; return elapsed wall seconds."""
        raise NotImplementedError

    def close(self):
        if self.sess is not None:
            with self.graph.as_default():
                self.sess.close()
            self.sess = None


class SessionRunner(Runner):
    """Plain ``tf.compat.v1.Session.run(train_op)`` in a Python loop."""

    kind = 'session'

    def __init__(self, graph):
        super().__init__(graph)
        with self.graph.as_default():
            init = tf.compat.v1.global_variables_initializer()
        self.graph.finalize()
        self.sess = tf.compat.v1.Session(graph=self.graph)
        self.sess.run(init)

    def block(self, steps):
        run, op, feed = self.sess.run, self.model.train_op, self.model.feed_dict
        t0 = time.perf_counter()
        for _ in range(steps):
            run(op, feed)
        return time.perf_counter() - t0


class NativeFloorRunner(Runner):
    """``fastmts.benchmarking.native_floor_loop``: TF_SessionRun in a C++ loop, no GIL."""

    kind = 'native'

    def __init__(self, graph, hooks=None, rereads=False):
        # A benchmark instrument, not public API: fastmts.benchmarking.
        self._loop = require('native')
        if rereads and hooks not in REREADS:
            raise ValueError('no re-reads of the global step in preset %r' % hooks)
        self.hooks_name = hooks
        self._reread = None
        self._periodic = None
        if rereads:
            self.kind = 'native-reads'
        self._mts = None
        if hooks is None:
            self._plain = SessionRunner(graph)
            self.graph, self.model = self._plain.graph, self._plain.model
            self._session = self._plain.sess
            self._fetches = self.model.train_op
            return
        # The preset's own session; its hooks are built (and their tensors
        # exist) but never run: the loop below calls TF directly.
        self._mts = MTSRunner('stock', graph, hooks)
        self.graph, self.model = self._mts.graph, self._mts.model
        self._session = self._mts.sess._tf_sess()  # pylint: disable=protected-access
        m = self.model
        # The hooks fetch this tensor (created by their begin()), not the
        # variable.
        fetches = [m.train_op,
                   training_util._get_or_create_global_step_read(self.graph)]  # pylint: disable=protected-access
        if hooks == 'full':
            fetches.append(m.loss)
        self._reread_period, self._reread_at = REREAD_PERIOD, REREADS.get(hooks)
        self._periodic_period = None
        if hooks == 'summaries':
            self._periodic = self.graph.get_collection(
                tf.compat.v1.GraphKeys.SUMMARY_OP)
            with self.graph.as_default():
                self._periodic_period = traced_summary_period(
                    self._mts.sess, m.train_op, self._mts.tmpdir)
            TRACED_SUMMARY_PERIODS[(graph, hooks)] = self._periodic_period
            self._reread_period, self._reread_at = summary_reread_schedule(
                self._periodic_period)
        if rereads:
            self._reread = fetches[1]
        self._fetches = fetches

    @property
    def name(self):
        return self.kind if self.hooks_name is None else '%s/%s' % (self.kind, self.hooks_name)

    def block(self, steps):
        # The extension times its own loop (excludes the Python call).
        kwargs = {}
        if self.model.feed_dict:
            kwargs['feed_dict'] = self.model.feed_dict
        if self._reread is not None:
            kwargs.update(reread=self._reread, reread_period=self._reread_period,
                          reread_at=self._reread_at)
        if self._periodic:
            kwargs.update(periodic=self._periodic,
                          periodic_period=self._periodic_period)
        return float(self._loop(self._session, self._fetches, steps, **kwargs))

    def close(self):
        if self._mts is not None:
            self._mts.close()
            self._mts = None
        else:
            self._plain.close()


class MonitoredBlock:
    """``block`` of a runner owning a MonitoredSession: uses its ``sess``,
    ``graph``, ``model.train_op``, ``kind`` and ``name``."""

    def block(self, steps):
        run, op, feed = self.sess.run, self.model.train_op, self.model.feed_dict
        # Hooks may look at the default graph (e.g. when saving); entering it
        # once per block costs nothing per step.
        with self.graph.as_default():
            t0 = time.perf_counter()
            if self.kind == 'fastmts-loop':
                self.sess.run_steps(op, max_steps=steps, feed_dict=feed)
            else:
                for _ in range(steps):
                    run(op, feed)
            elapsed = time.perf_counter() - t0
        if self.sess.should_stop():
            raise RuntimeError('%s stopped during a benchmark block'
                               % self.name)
        return elapsed


class MTSRunner(MonitoredBlock, Runner):
    """A MonitoredTrainingSession (stock or fastmts) with a hooks preset."""

    def __init__(self, kind, graph, hooks):
        if kind not in IMPLS:
            raise ValueError(kind)
        factory = require(kind) or tf.compat.v1.train.MonitoredTrainingSession
        if hooks not in PRESETS[graph]:
            raise ValueError('no preset %r for graph %r' % (hooks, graph))
        self.kind = kind
        self.hooks_name = hooks
        self.tmpdir = None
        super().__init__(graph)
        if hooks == 'summaries':
            with self.graph.as_default():
                for i in range(SUMMARIES):
                    tf.compat.v1.summary.scalar('summary_%03d' % i,
                                                self.model.loss + i)
        loss = self.model.loss
        with self.graph.as_default():
            hook_list = [tf.compat.v1.train.StopAtStepHook(last_step=LAST_STEP)]
            kwargs = {}
            if hooks == 'full':
                self.tmpdir = tempfile.mkdtemp(
                    prefix='fastmts-bench-%s-%s-' % (kind, graph))
                kwargs['checkpoint_dir'] = self.tmpdir
                hook_list += [
                    tf.compat.v1.train.NanTensorHook(loss),
                    tf.compat.v1.train.LoggingTensorHook(
                        {'loss': loss}, every_n_iter=1000),
                ]
            if hooks == 'summaries':
                self.tmpdir = tempfile.mkdtemp(
                    prefix='fastmts-bench-%s-%s-' % (kind, graph))
                kwargs.update(checkpoint_dir=self.tmpdir,
                              save_summaries_steps=SUMMARY_PERIOD)
            self.sess = factory(hooks=hook_list, **kwargs)

    @property
    def name(self):
        return '%s/%s' % (self.kind, self.hooks_name)

    def close(self):
        try:
            super().close()
        finally:
            if self.tmpdir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
                self.tmpdir = None


def make_runner(kind, graph, hooks=None):
    """Build a runner; raises ``MissingRunner`` if fastmts lacks ``kind``."""
    if kind == 'session':
        return SessionRunner(graph)
    if kind in ('native', 'native-reads'):
        return NativeFloorRunner(graph, hooks, rereads=kind == 'native-reads')
    return MTSRunner(kind, graph, hooks)


# --------------------------------------------------------------------------
# Interleaved measurement
# --------------------------------------------------------------------------

# A full gc.collect() keeps the training thread alone for ~0.1 s; TF's
# executor threads park meanwhile, and the steps that follow run slower
# until the machine is back in step: traced on the trivial graph
# (bench/settle_trace.py), the first 100-400 steps after a collection cost
# 1.2-1.6x the steady ones, a large part of a 1,000-step block (~25 ms).
# Each timed block therefore follows SETTLE_SECONDS of untimed steps of its
# own runner.
SETTLE_SECONDS = 0.1
SETTLE_CHUNK = 50  # steps per untimed block while settling


def block_steps(runner, steps):
    """The steps of one block of ``runner`` in a benchmark of ``steps``
    steps per block: fewer on the workloads whose step is long
    (models.BLOCK_SHARE)."""
    graph = getattr(runner, 'graph_name', None)
    return models.block_steps(graph, steps) if graph in models.BLOCK_SHARE else steps


def settle(runner, seconds=SETTLE_SECONDS):
    """Runs untimed blocks of ``runner`` for about ``seconds``."""
    deadline = time.perf_counter() + seconds
    chunk = block_steps(runner, SETTLE_CHUNK)
    while time.perf_counter() < deadline:
        runner.block(chunk)


class Interleaver:
    """Alternates blocks of several runners and keeps per-step samples.

    ``samples[name]`` holds one per-step time (seconds) per recorded block,
    and ``cpu_samples[name]`` the calling thread's CPU time per step in that
    block (``time.thread_time``): the work the training thread itself does,
    which other threads' scheduling on a shared machine disturbs far less
    than wall time.  TF's executor threads and the FileWriter's writer
    thread are not counted in it.
    """

    def __init__(self, runners):
        """A runner whose block raises fails the measurement: a benchmark
        never goes on without a runner it names."""
        self.runners = dict(runners)
        self.samples = {name: [] for name in self.runners}
        self.cpu_samples = {name: [] for name in self.runners}

    def run(self, name, steps, record=True, collect=True):
        """One block of ``steps`` steps of runner ``name``; returns seconds.

        ``collect``: first run a full ``gc.collect()`` and let the runner
        settle (``settle``), both outside the block's own timing, so every
        block starts from the same GC state and in step.  With TensorFlow
        loaded the collection takes ~0.1 s, so callers that time ``run``
        from outside (pytest-benchmark) pass False and do both beforehand.
        """
        runner = self.runners[name]
        steps = block_steps(runner, steps)
        if collect:
            gc.collect()
            settle(runner)
        cpu_start = time.thread_time()
        elapsed = runner.block(steps)
        cpu = time.thread_time() - cpu_start
        if record:
            self.samples[name].append(elapsed / steps)
            self.cpu_samples[name].append(cpu / steps)
        return elapsed

    def order(self, index, names=None):
        """Serpentine order for round ``index``: forward, then reversed."""
        names = list(self.runners if names is None else names)
        return names if index % 2 == 0 else names[::-1]

    def round(self, steps, index=0, record=True, names=None):
        for name in self.order(index, names):
            self.run(name, steps, record)

    def measure(self, steps, repeats, warmup=1, progress=None):
        """``warmup`` unrecorded rounds then ``repeats`` recorded ones."""
        for i in range(warmup):
            self.round(steps, i, record=False)
        for i in range(repeats):
            self.round(steps, warmup + i, record=True)
            if progress:
                progress(i + 1, repeats)
        return self.medians_us()

    def median_us(self, name):
        s = self.samples.get(name)
        return statistics.median(s) * 1e6 if s else None

    def medians_us(self):
        return {name: self.median_us(name) for name in self.samples}

    def cpu_medians_us(self):
        """Median calling-thread CPU microseconds per step, per runner."""
        return {name: statistics.median(s) * 1e6 if s else None
                for name, s in self.cpu_samples.items()}

    def spread_us(self, name):
        """(min, max) per-step microseconds over the recorded blocks."""
        s = self.samples.get(name)
        return (min(s) * 1e6, max(s) * 1e6) if s else None


def pedantic_interleaved(benchmark, own, partners, steps, rounds, warmup):
    """Times ``own`` (name -> runner) with pytest-benchmark's ``pedantic``,
    one block of ``steps`` steps per round, the ``partners`` (name -> runner)
    each running one block in its (untimed) ``setup`` before every timed
    block; returns the ``Interleaver`` holding the samples of all of them."""
    (own_name, _), = own.items()
    inter = Interleaver({**own, **partners})
    # With --benchmark-disable pedantic does a single setup+target call and
    # no warmup, so record that one.
    record_after = 0 if benchmark.disabled else warmup
    state = {'round': 0}

    def setup():
        state['round'] += 1
        record = state['round'] > record_after
        for name in inter.order(state['round'], partners):
            inter.run(name, steps, record)
        gc.collect()  # here, not inside the timed target (it takes ~0.1 s)
        settle(own[own_name])

    def target():
        inter.run(own_name, steps, state['round'] > record_after,
                  collect=False)

    benchmark.pedantic(target, setup=setup, rounds=rounds,
                       warmup_rounds=warmup, iterations=1)
    return inter


def ratio(a, b):
    """``a / b`` or None when either is missing."""
    if a is None or b is None or b == 0:
        return None
    return a / b
