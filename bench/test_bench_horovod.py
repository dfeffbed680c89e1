"""Per-step benchmark under Horovod (2 ranks, Gloo on loopback): a plain
Session loop (the floor, Horovod's allreduce cycle included), stock
MonitoredTrainingSession, fastmts (run and run_steps), Horovod's recipe;
and fastmts.AgreedStop's cost there (HorovodEngine, a vote every step and
every 10 steps, against the same loops with the vote off).

Run (not part of the normal test suite; testpaths only lists tests/), in a
venv with Horovod (.ci/horovod makes one):

    pytest bench/test_bench_horovod.py -p no:cacheprovider
    pytest bench/test_bench_horovod.py -k agreed      # the agreed stop's cost only
    FASTMTS_BENCH_HOROVOD_STEPS=2000 FASTMTS_BENCH_ROUNDS=9 pytest bench/test_bench_horovod.py

bench/horovod_bench.py runs the two ranks; the numbers are in ``extra_info``
(medians per step, spreads, ratios to the floor, fastmts/stock).
pytest-benchmark's own timing is of the whole run (process start-up and
session creation included), one round. Nothing here asserts a timing.
"""

import os

import pytest

pytest.importorskip('horovod.tensorflow', reason='Horovod is not installed (.ci/horovod)')

import horovod_bench  # pylint: disable=g-import-not-at-top,wrong-import-position

STEPS = int(os.environ.get('FASTMTS_BENCH_HOROVOD_STEPS', horovod_bench.DEFAULT_STEPS))
ROUNDS = int(os.environ.get('FASTMTS_BENCH_ROUNDS', horovod_bench.DEFAULT_ROUNDS))

pytestmark = pytest.mark.timeout(1200)


def _run(benchmark, tmp_path, kinds, group):
  """One horovodrun of the bench over `kinds`; its result, numbers in extra_info."""
  holder = {}

  def target():
    holder['result'] = horovod_bench.run(str(tmp_path), steps=STEPS, rounds=ROUNDS,
                                         timeout=1100, kinds=kinds)

  benchmark.group = '%s (whole run; per-step numbers in extra_info)' % group
  benchmark.pedantic(target, rounds=1, iterations=1)
  result = holder['result']
  benchmark.extra_info.update({key: result[key] for key in (
      'horovod', 'tf', 'cycle_time', 'steps', 'rounds', 'medians_us', 'spreads_us',
      'ratios_to_floor', 'fastmts_over_stock', 'loop_over_stock', 'over_vote_off',
      'errors')})
  print('\n' + horovod_bench.summary(result))
  assert result['medians_us'].get('session') is not None, result['errors']
  return result


def test_horovod_per_step(benchmark, tmp_path):
  _run(benchmark, tmp_path, horovod_bench.KINDS, 'horovod')


def test_horovod_agreed_stop_per_step(benchmark, tmp_path):
  _run(benchmark, tmp_path, horovod_bench.AGREED_KINDS, 'horovod agreed stop')
