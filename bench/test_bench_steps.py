"""Per-step benchmarks: stock MonitoredTrainingSession vs fastmts, and floors.

Run (not part of the normal test suite; testpaths only lists tests/):

    pytest bench/test_bench_steps.py
    pytest bench/test_bench_steps.py --benchmark-json=bench.json
    FASTMTS_BENCH_STEPS=2000 FASTMTS_BENCH_ROUNDS=7 pytest bench/...

Each benchmark round is one block of FASTMTS_BENCH_STEPS steps (default 2000;
on the workloads, whose step is long, that share of it which
bench/models.py's BLOCK_SHARE gives: ``extra_info['steps_per_round']``)
run inside an already-created session (creation is excluded), so
pytest-benchmark's per-round times divide by that to give per-step time;
``extra_info['per_step_us']`` has the median per-step microseconds directly.

Interleaving (the machine is noisy): every benchmark has a *partner* runner
for the same scenario -- stock <-> fastmts for a graph x hooks scenario,
Session.run <-> native_floor_loop for a graph's floors.  pedantic's ``setup``
(untimed by pytest-benchmark) runs one block of the partner before every
timed block of the benchmark's own runner, so the two are measured
alternately over the same stretch of time: A B A B ... rather than all of A
then all of B a minute later.  Both are timed by bench/measure.py, and the
medians of both, plus the stock/fastmts speedup measured in that one
interleaved run, go into ``extra_info``.  Thus a benchmark's extra_info alone
pairs stock and fastmts fairly; pytest-benchmark's own stats stay per
implementation, grouped by scenario (``group = '<graph>/<hooks>'``), so its
table and ``--benchmark-compare`` are meaningful too.  The price is that each
block runs twice (once as "own", once as "partner").

Every runner a benchmark names must be there: a fastmts that lacks one (its
floor included) fails the benchmark with measure.MissingRunner's reason, never
a skip.
"""

import os

import pytest

import measure

STEPS = int(os.environ.get('FASTMTS_BENCH_STEPS', measure.DEFAULT_STEPS))
ROUNDS = int(os.environ.get('FASTMTS_BENCH_ROUNDS', '5'))
WARMUP = 1

# pyproject.toml's 120 s default timeout is for the unit tests.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope='module')
def runners():
    """Runners built once per module, keyed by (kind, graph, hooks), so the
    two benchmarks of a pair share them: stock's partner is the same runner
    that the fastmts benchmark times, and vice versa."""
    cache = {}

    def get(kind, graph, hooks=None):
        """The Runner; raises measure.MissingRunner (or the error of its
        start) when it cannot be built."""
        key = (kind, graph, hooks)
        if key not in cache:
            cache[key] = measure.make_runner(kind, graph, hooks)
        return cache[key]

    yield get
    for r in cache.values():
        r.close()


def _own_and_partners(runners, own_kind, other_kind, graph, hooks=None):
    """The runner timed and its partner, as a dict of one."""
    return runners(own_kind, graph, hooks), {other_kind: runners(other_kind, graph, hooks)}


def _interleaved(benchmark, group, own, partners, info):
    """Benchmark ``own`` (name -> Runner) with ``partners`` run in setup;
    returns the Interleaver holding the per-round samples of all of them."""
    (own_name, _), = own.items()
    benchmark.group = group
    inter = measure.pedantic_interleaved(benchmark, own, partners, STEPS,
                                         ROUNDS, WARMUP)
    med = inter.medians_us()
    benchmark.extra_info.update(info)
    benchmark.extra_info.update({
        'impl': own_name,
        'steps_per_round': measure.block_steps(own[own_name], STEPS),
        'per_step_us': med[own_name],
        'interleaved_per_step_us': med,
        'interleaved_thread_cpu_per_step_us': inter.cpu_medians_us(),
    })
    return inter


SCENARIOS = [(graph, hooks) for graph in measure.GRAPHS for hooks in measure.PRESETS[graph]]


@pytest.mark.parametrize('impl', measure.IMPLS)
@pytest.mark.parametrize('graph, hooks', SCENARIOS)
def test_mts_steps(benchmark, runners, graph, hooks, impl):
    other = 'fastmts' if impl == 'stock' else 'stock'
    own, partners = _own_and_partners(runners, impl, other, graph, hooks)
    # The floor of this preset (the same merged TF runs in a C++ loop) runs
    # interleaved too, so every ratio comes from one run.
    partners['native'] = runners('native', graph, hooks)
    # And in the presets with default hooks, the hooked floor: the floor
    # that also makes TF's hooks' re-reads of the global step
    # (measure.REREADS).
    if hooks in measure.REREADS:
        partners['native-reads'] = runners('native-reads', graph, hooks)
    inter = _interleaved(benchmark, '%s/%s' % (graph, hooks), {impl: own},
                         partners, dict(graph=graph, hooks=hooks))
    # Ratios pair the blocks of each round (measure.paired_ratio).
    rounds, cpu = inter.samples, inter.cpu_samples
    fast = impl if impl != 'stock' else 'fastmts'
    benchmark.extra_info['speedup_stock_over_%s' % fast] = measure.paired_ratio(
        rounds.get('stock'), rounds.get(fast))
    benchmark.extra_info['%s_over_floor' % impl] = measure.paired_ratio(
        rounds.get(impl), rounds.get('native'))
    # The training thread's own CPU per step against the floor's: what the
    # implementation adds in that thread, measured with far less noise.
    benchmark.extra_info['%s_thread_cpu_over_floor' % impl] = measure.paired_ratio(
        cpu.get(impl), cpu.get('native'))
    if 'native-reads' in rounds:
        benchmark.extra_info['%s_over_floor_with_rereads' % impl] = measure.paired_ratio(
            rounds.get(impl), rounds.get('native-reads'))
        benchmark.extra_info['%s_thread_cpu_over_floor_with_rereads' % impl] = (
            measure.paired_ratio(cpu.get(impl), cpu.get('native-reads')))


@pytest.mark.parametrize('impl', measure.FLOORS)
@pytest.mark.parametrize('graph', measure.GRAPHS)
def test_floor_steps(benchmark, runners, graph, impl):
    other = 'native' if impl == 'session' else 'session'
    own, partners = _own_and_partners(runners, impl, other, graph)
    rounds = _interleaved(benchmark, '%s/floor' % graph, {impl: own}, partners,
                          dict(graph=graph, hooks='none')).samples
    benchmark.extra_info['session_over_native'] = measure.paired_ratio(
        rounds.get('session'), rounds.get('native'))
