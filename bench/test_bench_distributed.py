"""Distributed per-step benchmark: stock MonitoredTrainingSession vs fastmts
training against a parameter server in another process (loopback gRPC).

Run (not part of the normal test suite; testpaths only lists tests/):

    pytest bench/test_bench_distributed.py -p no:cacheprovider
    FASTMTS_BENCH_DIST_STEPS=1000 FASTMTS_BENCH_ROUNDS=9 pytest bench/test_bench_distributed.py

bench/distributed_bench.py starts one ps process and one worker process; the
worker interleaves blocks of FASTMTS_BENCH_DIST_STEPS steps (default 500) of
a stock and a fastmts session (each with its own graph and variables on the
ps) for FASTMTS_BENCH_ROUNDS recorded rounds (default 7) after one warmup
round. The numbers are in ``extra_info``: medians (us/step and steps/s),
per-block spreads and the ratio fastmts/stock of steps/s.
pytest-benchmark's own timing here is of the whole run (process start-up and
session creation included), one round: only ``extra_info`` is per step.

Nothing here asserts a timing; a runner that fails to start or to run, stock's
or fastmts's, fails the test with its reason.
"""

import os

import pytest

import distributed_bench

STEPS = int(os.environ.get('FASTMTS_BENCH_DIST_STEPS',
                           distributed_bench.DEFAULT_STEPS))
ROUNDS = int(os.environ.get('FASTMTS_BENCH_ROUNDS',
                            distributed_bench.DEFAULT_ROUNDS))

pytestmark = pytest.mark.timeout(900)


def test_distributed_steps_per_sec(benchmark, tmp_path):
  holder = {}

  def target():
    holder['result'] = distributed_bench.run(str(tmp_path), steps=STEPS,
                                             rounds=ROUNDS, timeout=800)

  benchmark.group = 'distributed (whole run; per-step numbers in extra_info)'
  benchmark.pedantic(target, rounds=1, iterations=1)
  result = holder['result']
  benchmark.extra_info.update({
      'graph': result['graph'],
      'steps_per_block': result['steps'],
      'blocks': result['rounds'],
      'per_step_us': result['medians_us'],
      'block_spread_us': result['spreads_us'],
      'steps_per_sec': result['steps_per_sec'],
      'ratio_fastmts_over_stock': result['ratio_fastmts_over_stock'],
      'errors': result['errors'],
  })
  print('\n' + distributed_bench.summary(result))
