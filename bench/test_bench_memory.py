"""Memory benchmarks: does fastmts grow over many steps or many sessions?

Run (not part of the normal test suite; testpaths only lists tests/):

    pytest bench/test_bench_memory.py -p no:cacheprovider
    FASTMTS_BENCH_MEMORY_STEPS=1000000 pytest bench/test_bench_memory.py
    python bench/test_bench_memory.py --steps 1000000      # a small table

* ``test_steps_memory[fastmts-loop]`` / ``[fastmts]``: one fastmts
  MonitoredTrainingSession with checkpoint_dir (its default hooks:
  StepCounterHook, SummarySaverHook every 100 steps, CheckpointSaverHook)
  plus StopAtStepHook, NanTensorHook and LoggingTensorHook (bench/measure.py's
  'full' preset) on the trivial graph, run for FASTMTS_BENCH_MEMORY_STEPS
  steps (default 200,000; the full run is 1,000,000) by the native loop
  ``sess.run_steps(train_op, max_steps=n)`` or by ``sess.run(train_op)`` in
  a Python loop.  The resident set size (/proc/self/statm) is sampled every
  FASTMTS_BENCH_MEMORY_SAMPLE steps (default: 100,000, or a tenth of the
  steps if that is fewer), after a warm-up block.
* ``test_cycles_memory[fastmts]`` / ``[stock]`` (stock TF, for context):
  FASTMTS_BENCH_MEMORY_CYCLES (default 1,000) create / 3 steps / close cycles
  of a MonitoredTrainingSession with a queue runner, the natively run hooks
  and a Python hook: RSS, open file descriptors and threads (Python and
  fastmts's native ones) sampled every tenth of the cycles.

Nothing is asserted: the growth goes into ``extra_info`` (``rss_growth_mb``,
``within_target``: under 20 MB), with the samples; pytest-benchmark's time is
that of the whole measurement (one round).
"""

import argparse
import gc
import os
import sys
import tempfile
import threading
import time

import pytest

import measure  # bench/measure.py (bench/ is on sys.path)

tf = measure.tf
v1 = tf.compat.v1

STEPS = int(os.environ.get('FASTMTS_BENCH_MEMORY_STEPS', '200000'))
SAMPLE = os.environ.get('FASTMTS_BENCH_MEMORY_SAMPLE')
CYCLES = int(os.environ.get('FASTMTS_BENCH_MEMORY_CYCLES', '1000'))
TARGET_MB = 20.0

# pyproject.toml's 120 s default timeout is for the unit tests.
pytestmark = pytest.mark.timeout(3600)


def rss_mb():
    """Resident set size in MB, from /proc/self/statm."""
    with open('/proc/self/statm') as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf('SC_PAGE_SIZE') / 2.0 ** 20


def open_fds():
    return len(os.listdir('/proc/self/fd'))


def native_threads():
    return measure.load_fastmts()._native.live_native_threads()


def sample_every(steps, sample=None):
    if sample:
        return max(1, int(sample))
    return max(1, min(100000, steps // 10))


# --------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------

def measure_steps(kind, steps, sample=None):
    """RSS over `steps` steps of a measure.MTSRunner(kind, 'trivial', 'full')
    (kind 'fastmts-loop': run_steps; 'fastmts' or 'stock': sess.run in a
    Python loop).  Returns a dict for extra_info."""
    every = sample_every(steps, sample)
    runner = measure.make_runner(kind, 'trivial', 'full')
    try:
        runner.block(min(every, 10000))  # warm-up: plans, caches, first summaries
        gc.collect()
        start = round(rss_mb(), 2)
        samples = [(0, start)]
        done = 0
        elapsed = 0.0  # in the blocks only (not the samples' gc.collect)
        while done < steps:
            n = min(every, steps - done)
            elapsed += runner.block(n)
            done += n
            gc.collect()
            samples.append((done, round(rss_mb(), 2)))
    finally:
        runner.close()
    growth = samples[-1][1] - start
    return {
        'kind': kind,
        'steps': steps,
        'sample_every': every,
        'rss_start_mb': start,
        'rss_end_mb': samples[-1][1],
        'rss_growth_mb': round(growth, 2),
        'rss_max_growth_mb': round(max(s for _, s in samples) - start, 2),
        'within_target': growth < TARGET_MB,
        'target_mb': TARGET_MB,
        'per_step_us': round(elapsed / steps * 1e6, 2),
        'samples': samples,
    }


# --------------------------------------------------------------------------
# Create / close cycles
# --------------------------------------------------------------------------

class _LossHook(v1.train.SessionRunHook):
    """A Python hook fetching the loss every step."""

    def __init__(self, loss):
        self._loss = loss

    def before_run(self, run_context):
        return v1.train.SessionRunArgs({'loss': self._loss})


def measure_cycles(impl_name, cycles, sample=None):
    """RSS, fds and threads over `cycles` create / 3 steps / close cycles of
    a MonitoredTrainingSession (impl 'fastmts' or 'stock') on one graph with
    a queue runner.  The first tenth of the cycles is the warm-up."""
    if impl_name == 'stock':
        impl = v1.train
    else:
        impl = measure.load_fastmts()
    every = max(1, int(sample) if sample else cycles // 10)
    warmup = max(1, cycles // 10)
    threads0 = threading.active_count()
    graph = tf.Graph()
    with graph.as_default():
        model = measure.models.trivial()
        q = v1.FIFOQueue(4, [tf.float32], shapes=[[]])
        v1.train.add_queue_runner(v1.train.QueueRunner(q, [q.enqueue(1.0)]))
        x = q.dequeue()
        loss = model.loss + x
        with tf.control_dependencies([x]):
            train = tf.group(model.train_op)
        samples = []
        stray = 0
        t0 = time.perf_counter()
        for i in range(1, cycles + 1):
            hooks = [v1.train.StopAtStepHook(num_steps=3),
                     v1.train.NanTensorHook(loss),
                     v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=2),
                     _LossHook(loss)]
            with impl.MonitoredTrainingSession(hooks=hooks) as sess:
                while not sess.should_stop():
                    sess.run(train)
            del sess, hooks
            if threading.active_count() != threads0 or native_threads():
                stray += 1
            if i == warmup or i % every == 0 or i == cycles:
                gc.collect()
                samples.append((i, round(rss_mb(), 2), open_fds(),
                                threading.active_count() - threads0,
                                native_threads()))
        elapsed = time.perf_counter() - t0
    base = next(s for s in samples if s[0] == warmup)
    end = samples[-1]
    growth = end[1] - base[1]
    return {
        'impl': impl_name,
        'cycles': cycles,
        'warmup_cycles': warmup,
        'rss_start_mb': base[1],
        'rss_end_mb': end[1],
        'rss_growth_mb': round(growth, 2),
        'within_target': growth < TARGET_MB,
        'target_mb': TARGET_MB,
        'fd_growth': end[2] - base[2],
        'threads_left': end[3],
        'native_threads_left': end[4],
        'cycles_with_stray_threads': stray,
        'ms_per_cycle': round(elapsed / cycles * 1e3, 2),
        'samples (cycle, rss_mb, fds, threads, native)': samples,
    }


# --------------------------------------------------------------------------
# pytest-benchmark
# --------------------------------------------------------------------------

@pytest.mark.parametrize('kind', ['fastmts-loop', 'fastmts'])
def test_steps_memory(benchmark, kind):
    measure.require(kind)  # a missing runner fails here, with its reason
    benchmark.group = 'memory/steps'
    result = {}

    def target():
        result.update(measure_steps(kind, STEPS, SAMPLE))

    benchmark.pedantic(target, rounds=1, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update(result)


@pytest.mark.parametrize('impl', ['fastmts', 'stock'])
def test_cycles_memory(benchmark, impl):
    measure.require(impl)
    benchmark.group = 'memory/cycles'
    result = {}

    def target():
        result.update(measure_cycles(impl, CYCLES))

    benchmark.pedantic(target, rounds=1, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update(result)


# --------------------------------------------------------------------------
# Script
# --------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--steps', type=int, default=STEPS)
    parser.add_argument('--sample-every', type=int, default=None,
                        help='steps between RSS samples (default: 100,000 or '
                        'a tenth of the steps)')
    parser.add_argument('--cycles', type=int, default=CYCLES)
    parser.add_argument('--stock', action='store_true',
                        help='also stock TF: sess.run steps and cycles')
    args = parser.parse_args(argv)

    rows = []
    kinds = ['fastmts-loop', 'fastmts'] + (['stock'] if args.stock else [])
    for kind in kinds:
        measure.require(kind)
        r = measure_steps(kind, args.steps, args.sample_every)
        name = {'fastmts-loop': 'fastmts run_steps', 'fastmts': 'fastmts run loop',
                'stock': 'stock run loop'}[kind]
        rows.append((name, '%d steps' % r['steps'], r['rss_start_mb'],
                     r['rss_end_mb'], r['rss_growth_mb'], r['rss_max_growth_mb'],
                     '-', '-', '%.1f us/step' % r['per_step_us']))
        print('  %s samples (step, rss MB): %s' % (name, r['samples']), flush=True)
    for impl in ['fastmts'] + (['stock'] if args.stock else []):
        measure.require(impl)
        if args.cycles <= 0:
            continue
        r = measure_cycles(impl, args.cycles)
        rows.append(('%s create/close' % impl, '%d cycles' % r['cycles'],
                     r['rss_start_mb'], r['rss_end_mb'], r['rss_growth_mb'], '-',
                     '%+d' % r['fd_growth'],
                     '%d/%d' % (r['threads_left'], r['native_threads_left']),
                     '%.1f ms/cycle' % r['ms_per_cycle']))
    header = ('scenario', 'length', 'RSS start MB', 'RSS end MB', 'growth MB',
              'max growth MB', 'fds', 'threads py/native', 'speed')
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = '  '.join('%%-%ds' % w if i < 2 else '%%%ds' % w
                    for i, w in enumerate(widths))
    print()
    print(fmt % header)
    for row in rows:
        print(fmt % tuple(str(c) for c in row))
    print('(growth measured after a warm-up; target < %.0f MB)' % TARGET_MB)


if __name__ == '__main__':
    main()
