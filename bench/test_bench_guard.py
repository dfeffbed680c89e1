"""The speed guard that CI runs: fastmts's training-thread CPU per step over
the floor's, measured side by side in one process.

    python -m pytest bench/test_bench_guard.py -p no:cacheprovider

fastmts's claim is its step cost next to the hooked floor: the same TF runs
made by a C++ loop of bare TF_SessionRun calls (bench/measure.py's 'native'
runner). Here, on the trivial graph (where the step is nearly all machinery)
with the 'stop' and 'full' presets, blocks of fastmts ``run`` or
``run_steps`` and of the floor alternate (pytest-benchmark's ``pedantic``,
the floor in its untimed setup), and the median over rounds of the per-round
ratio of the training thread's CPU time per step (``time.thread_time``) is
compared with BOUND. Thread CPU leaves out the time the thread waits for a
core, and pairing each block with the floor's block just before it cancels
the machine's drift; so the ratio holds on a loaded 2-core machine, while a
lost floor (measure.MissingRunner), a step made twice (2.35x on 'stop',
2.67x on 'full', measured with `run` wrapped to run each step twice) or
Python back on the native path (stock's machinery is 12-20x) fails it.

BOUND was chosen from the spread measured on this kind of machine
(2026-12-07, docs/performance.md, "The CI guard"): quiet, the medians were
1.04-1.28x; beside two CPU-bound processes (load 3) also 1.04-1.28x, though
single rounds then ranged from 0.1x to 9.6x (TF's executor threads wait for
a core while the training thread spins on them), hence the median of
ROUNDS rounds. Each figure goes into the benchmark's ``extra_info`` like any
other benchmark's.
"""

import os

import pytest

import measure

BOUND = float(os.environ.get('FASTMTS_GUARD_BOUND', '1.8'))
STEPS = int(os.environ.get('FASTMTS_GUARD_STEPS', '1000'))
ROUNDS = int(os.environ.get('FASTMTS_GUARD_ROUNDS', '21'))
WARMUP = 1
GRAPH = 'trivial'

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope='module')
def runners():
    """Runners built once per module and closed at its end; a runner that
    cannot be built fails the benchmark that names it."""
    cache = {}

    def get(kind, hooks):
        if (kind, hooks) not in cache:
            cache[(kind, hooks)] = measure.make_runner(kind, GRAPH, hooks)
        return cache[(kind, hooks)]

    yield get
    for runner in cache.values():
        runner.close()


@pytest.mark.parametrize('impl', ['fastmts', 'fastmts-loop'])
@pytest.mark.parametrize('hooks', ['stop', 'full'])
def test_thread_cpu_per_step_over_floor(benchmark, runners, hooks, impl):
    own, floor = runners(impl, hooks), runners('native', hooks)
    benchmark.group = 'guard: %s/%s' % (GRAPH, hooks)
    inter = measure.pedantic_interleaved(benchmark, {impl: own}, {'native': floor}, STEPS,
                                         ROUNDS, WARMUP)
    cpu = inter.cpu_samples
    ratio = measure.paired_ratio(cpu[impl], cpu['native'])
    per_round = [a / b for a, b in zip(cpu[impl], cpu['native'])]
    benchmark.extra_info.update({
        'impl': impl, 'graph': GRAPH, 'hooks': hooks, 'steps_per_round': STEPS,
        'thread_cpu_us_per_step': inter.cpu_medians_us(),
        'wall_us_per_step': inter.medians_us(),
        'thread_cpu_over_floor': ratio,
        'thread_cpu_over_floor_per_round': per_round,
        'bound': BOUND,
    })
    print('\n%s/%s %s: thread CPU per step %.2fx the floor\'s (rounds %.2f-%.2f; bound %.2f)'
          % (GRAPH, hooks, impl, ratio, min(per_round), max(per_round), BOUND))
    assert ratio <= BOUND, (
        '%s on %s/%s: the training thread\'s CPU per step is %.2fx the floor\'s, over the '
        'bound %.2fx (per round: %s)' % (impl, GRAPH, hooks, ratio, BOUND,
                                         ', '.join('%.2f' % r for r in per_round)))
