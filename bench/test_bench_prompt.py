"""Prompt close and start-up benchmark: stock MonitoredTrainingSession vs
fastmts (bench/prompt_bench.py: the three cases, how they are measured).

Run (not part of the normal test suite; testpaths only lists tests/):

    pytest bench/test_bench_prompt.py -p no:cacheprovider -s      # ~2.5 min
    FASTMTS_BENCH_PROMPT_QUICK=1 pytest bench/test_bench_prompt.py  # ~1 min
    pytest bench/test_bench_prompt.py --benchmark-json=prompt.json

One run of prompt_bench.run (all cases, stock and fastmts, stock's in the
background meanwhile); pytest-benchmark's own timing is of that whole run,
one round. The figures are in ``extra_info``: ``<case>_stock_secs``,
``<case>_fastmts_secs`` (seconds; None if the case failed), the errors, the
per-case details and whether fastmts met each target (close < 5 s, first
step < 2 s). FASTMTS_BENCH_PROMPT_QUICK=1 gives stock TF a 10 s grace period
instead of the default 120 s (its close figures then measure that).

Nothing here asserts a timing; a fastmts failure is a warning (the stock
numbers are still recorded), a stock failure fails the test, and so does a
process left alive.
"""

import os
import warnings

import pytest

import prompt_bench

QUICK = os.environ.get('FASTMTS_BENCH_PROMPT_QUICK', '') not in ('', '0')

pytestmark = pytest.mark.timeout(600)


def test_prompt_close_and_start(benchmark, tmp_path):
  holder = {}

  def target():
    holder['out'] = prompt_bench.run(str(tmp_path), quick=QUICK)

  benchmark.group = 'prompt close/start (whole run; latencies in extra_info)'
  benchmark.pedantic(target, rounds=1, iterations=1)
  out = holder['out']
  info = {'quick': out['quick'],
          'stock_grace_secs': out['stock_grace_secs'],
          'fastmts_grace_secs': out['fastmts_grace_secs'],
          'chief_delay_secs': out['chief_delay_secs'],
          'total_secs': out['total_secs'],
          'processes_left': out['processes_left']}
  errors = {}
  for case, per_impl in out['results'].items():
    for impl, r in per_impl.items():
      name = 'stock' if impl == 'tf' else impl
      r = r or {'secs': None, 'error': 'not run', 'info': {}}
      info['%s_%s_secs' % (case, name)] = r['secs']
      info['%s_%s_details' % (case, name)] = r['info']
      if r['error']:
        errors['%s/%s' % (case, name)] = r['error']
    info['%s_fastmts_meets_target' % case] = prompt_bench.met(
        case, (per_impl.get('fastmts') or {}).get('secs'))
  info['errors'] = errors
  benchmark.extra_info.update(info)
  print('\n' + prompt_bench.table(out))
  assert not out['processes_left'], out['processes_left']
  stock_errors = {k: v for k, v in errors.items() if k.endswith('/stock')}
  assert not stock_errors, stock_errors
  fastmts_errors = {k: v for k, v in errors.items() if k.endswith('/fastmts')}
  if fastmts_errors:
    warnings.warn('fastmts: %s' % fastmts_errors)
