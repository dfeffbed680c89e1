"""Queue-fed training benchmark: stock MonitoredTrainingSession vs fastmts.

Run (not part of the normal test suite; testpaths only lists tests/):

    pytest bench/test_bench_queues.py -p no:cacheprovider --benchmark-disable-gc
    FASTMTS_BENCH_QUEUE_STEPS=1000 FASTMTS_BENCH_ROUNDS=7 pytest bench/test_bench_queues.py

The scenario (bench/queue_bench.py): a FIFOQueue filled by a QueueRunner of
4 ``enqueue_many`` ops of in-graph random batches, a step dequeues 32
examples and trains a tiny dense layer, under
``MonitoredTrainingSession(hooks=[StopAtStepHook, <Python hook fetching the
loss>])``.  Each benchmark round is one block of FASTMTS_BENCH_QUEUE_STEPS
steps (default 1000) in an already-created session; as in
bench/test_bench_steps.py the partner implementation runs one block in
pedantic's (untimed) ``setup`` before every timed block, so the two
alternate, and ``extra_info`` holds both medians (examples/s) and the ratio
fastmts/stock from that one interleaved run.  ``extra_info`` also has the
Python calls per step of both implementations (main thread; all threads),
measured once per module on separate, profiled sessions.

``test_queue_close`` times closing a session whose queue is full (its
enqueue threads blocked in TF) and records whether queue-runner threads
(Python ones, or fastmts's native ones) outlive it.

Nothing here asserts a timing or fails on a close problem: problems at close
(an exception, a close over 5 s, threads left alive) are recorded in
``extra_info`` where there is one, and raised as warnings.
"""

import gc
import os
import warnings

import pytest

import measure
import queue_bench

STEPS = int(os.environ.get('FASTMTS_BENCH_QUEUE_STEPS',
                           queue_bench.DEFAULT_STEPS))
ROUNDS = int(os.environ.get('FASTMTS_BENCH_ROUNDS',
                            queue_bench.DEFAULT_REPEATS))
WARMUP = 1

# pyproject.toml's 120 s default timeout is for the unit tests.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope='module')
def queue_runners():
    """Both runners, built once; closed (and checked) at module end."""
    runners = queue_bench.make_runners()
    state = {'runners': runners, 'close': None}
    try:
        yield state
    finally:
        problems = queue_bench.close_all(runners)
        left = queue_bench.leftover_threads()
        if left:
            problems['after all closes'] = left
        state['close'] = problems
        if problems:
            warnings.warn('queue benchmark: problems at close: %s'
                          % '; '.join('%s: %s' % kv for kv in problems.items()))


@pytest.fixture(scope='module')
def call_counts():
    """Python calls per step of each implementation (separate sessions)."""
    queue_bench._CALL_CLOSE_PROBLEMS.clear()
    counts = queue_bench.measure_calls()
    left = '; '.join('%s: %s' % kv
                     for kv in queue_bench._CALL_CLOSE_PROBLEMS.items())
    if left:
        warnings.warn('queue benchmark: ' + left)
    return counts, left


def _calls_info(call_counts):
    counts, left = call_counts
    info = {}
    for kind, c in counts.items():
        info['%s_python_calls_per_step_main' % kind] = c['main']
        info['%s_python_calls_per_step_all_threads' % kind] = c['all']
    if left:
        info['threads_left_after_profiled_sessions'] = left
    return info


@pytest.mark.parametrize('impl', queue_bench.IMPLS)
def test_queue_examples_per_sec(benchmark, queue_runners, call_counts, impl):
    runners = queue_runners['runners']
    other = 'fastmts' if impl == 'stock' else 'stock'
    partners = {other: runners[other]}

    benchmark.group = 'queues'
    inter = measure.pedantic_interleaved(benchmark, {impl: runners[impl]},
                                         partners, STEPS, ROUNDS, WARMUP)
    ex = {name: queue_bench.examples_per_sec(inter.median_us(name) / 1e6)
          for name in inter.samples}
    benchmark.extra_info.update(_calls_info(call_counts))
    benchmark.extra_info.update({
        'impl': impl,
        'steps_per_round': STEPS,
        'examples_per_step': queue_bench.BATCH,
        'examples_per_sec': ex[impl],
        'interleaved_examples_per_sec': ex,
        'ratio_fastmts_over_stock': ex['fastmts'] / ex['stock'],
    })


@pytest.mark.parametrize('impl', queue_bench.IMPLS)
def test_queue_close(benchmark, impl):
    measure.require(impl)  # a missing runner fails here, with its reason
    state = {'runner': None, 'close_s': [], 'left': [], 'errors': []}

    def setup():
        r = queue_bench.QueueRunnerBench(impl)
        state['runner'] = r
        r.block(100)
        # Let the producers fill the queue and block in enqueue.
        gc.collect()

    def target():
        r, state['runner'] = state['runner'], None
        try:
            r.close()
        except Exception as e:  # recorded, not raised: a bug to report
            state['errors'].append('%s: %s' % (type(e).__name__, e))
        state['close_s'].append(r.close_seconds)
        state['left'].append(r.threads_left())

    benchmark.group = 'queues-close'
    try:
        benchmark.pedantic(target, setup=setup, rounds=3, iterations=1)
    finally:
        if state['runner'] is not None:
            state['runner'].close()
    left = [x for x in state['left'] if x]
    benchmark.extra_info.update({
        'impl': impl,
        'close_seconds': state['close_s'],
        'threads_left_after_close': left,
        'close_errors': state['errors'],
    })
    if left or state['errors'] or any(s > 5 for s in state['close_s']):
        warnings.warn('%s close: %s' % (impl, benchmark.extra_info))
