"""What fastmts.AgreedStop costs per step, against the floor.

Two worker processes on loopback gRPC (tests/cluster_utils.py), each running
the same interleaved blocks (serpentine order, medians of the blocks, as
bench/measure.py's Interleaver) of four runners, at its
own server. The step is a data-parallel step at its smallest (a variable
updated by the all_reduce of every rank's 1.0, and the global step), so the
ranks run in lockstep as in training, and the figures are what the vote adds
to a step that already waits for the slowest rank:

  floor       the step's TF_SessionRun in a C++ loop (fastmts.benchmarking)
  off         fastmts.MonitoredTrainingSession, no agreed_stop, run_steps
  every_step  the same with agreed_stop=AgreedStop(CollectiveEngine(2))
  every_10    the same with every_n_steps=10

The vote is a collective: both ranks run the same blocks with the same step
counts (fixed untimed settling blocks, not timed ones), in lockstep for the
runners that vote. Rank 0's figures are reported.

    python bench/agreed_stop_bench.py                   # prints a summary
    FASTMTS_BENCH_AGREED_STEPS=200 FASTMTS_BENCH_ROUNDS=3 python bench/agreed_stop_bench.py

As a script with ``--cluster ...`` it is one rank.
"""

import gc
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import tests_on_path  # noqa: E402,F401  (tests/ on sys.path)

import cluster_utils  # noqa: E402  (tests/cluster_utils.py)

DEFAULT_STEPS = 1000
DEFAULT_ROUNDS = 7
SETTLE_STEPS = 100
RUNNERS = ('floor', 'off', 'every_step', 'every_10')


def run(workdir, steps=DEFAULT_STEPS, rounds=DEFAULT_ROUNDS, ranks=2, timeout=900):
  """Starts the ranks and returns rank 0's result (medians_us, ...)."""
  options = {'steps': steps, 'rounds': rounds}
  names = ['worker%d' % i for i in range(ranks)]
  with cluster_utils.Cluster(workdir, num_ps=0, num_workers=ranks,
                             max_lifetime_secs=timeout + 60) as c:
    for i in range(ranks):
      c.start_worker(i, options=options, script=os.path.abspath(__file__), timeout=timeout)
    results = c.wait_results(names)
  for name in names:
    if results[name].get('error'):
      raise RuntimeError('%s failed: %s' % (name, results[name]['error']))
  return results['worker0']


def summary(result):
  m = result['medians_us']
  lines = ['per-step median (us), %d ranks, %d steps x %d rounds:' % (
      result['ranks'], result['steps'], result['rounds'])]
  for name in RUNNERS:
    lines.append('  %-10s %8.1f  (%+.1f over off, x%.2f the floor)' % (
        name, m[name], m[name] - m['off'], m[name] / m['floor']))
  return '\n'.join(lines)


def _rank_main(argv):
  args = cluster_utils.worker_args(argv)
  opts = args.options
  cluster_utils.start_watchdog()
  sys.path.insert(0, HERE)
  result = {'error': None, 'steps': opts['steps'], 'rounds': opts['rounds']}
  try:
    result.update(_measure(json.loads(args.cluster), args.task_index, opts['steps'],
                           opts['rounds']))
  except Exception as e:  # pylint: disable=broad-except
    result['error'] = '%s: %s' % (type(e).__name__, e)
  print(cluster_utils.RESULT_PREFIX + json.dumps(result), flush=True)
  return 1 if result['error'] else 0


def _runners(spec, idx):
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import fastmts  # pylint: disable=g-import-not-at-top
  from fastmts import benchmarking  # pylint: disable=g-import-not-at-top
  import measure  # pylint: disable=g-import-not-at-top  (disables eager)
  tf1 = tf.compat.v1
  ranks = len(spec['worker'])
  config = tf1.ConfigProto()
  config.experimental.collective_group_leader = '/job:worker/replica:0/task:0'
  server = tf.distribute.Server(tf.train.ClusterSpec(spec), job_name='worker',
                                task_index=idx, config=config)
  device = '/job:worker/task:%d/device:CPU:0' % idx
  runners, sessions = {}, []
  for i, name in enumerate(RUNNERS):
    with tf.Graph().as_default():
      with tf1.device(device):
        model = _lockstep_step(tf, ranks, 2000 + i)
      if name == 'floor':
        init = tf1.global_variables_initializer()
        sess = tf1.Session(server.target, config=config)
        sess.run(init)
        runners[name] = (lambda s, op: lambda n: float(
            benchmarking.native_floor_loop(s, op, n)))(sess, model.train_op)
      else:
        agreed = None if name == 'off' else fastmts.AgreedStop(
            fastmts.CollectiveEngine(ranks, instance_key=1000 + i, device=device),
            every_n_steps=1 if name == 'every_step' else 10)
        sess = fastmts.MonitoredTrainingSession(
            master=server.target, config=config, agreed_stop=agreed,
            hooks=[tf1.train.StopAtStepHook(last_step=measure.LAST_STEP)])
        runners[name] = (lambda s, op: lambda n: _timed_loop(s, op, n))(sess, model.train_op)
      sessions.append(sess)
  return runners, sessions


def _lockstep_step(tf, ranks, instance_key):
  """A data-parallel step at its smallest: the global step's increment and
  one variable's update by the all_reduce (sum) of every rank's 1.0, which
  keeps the ranks in lockstep as a gradient all_reduce does."""
  from tensorflow.python.ops import collective_ops  # pylint: disable=g-import-not-at-top
  tf1 = tf.compat.v1
  global_step = tf1.train.get_or_create_global_step()
  v = tf1.get_variable('v', [], tf.float32, tf1.zeros_initializer())
  update = collective_ops.all_reduce(tf.constant(1.0), ranks, 1, instance_key, 'Add', 'Id')
  train_op = tf.group(v.assign_add(update), global_step.assign_add(1))
  return type('Model', (), {'train_op': train_op})


def _timed_loop(sess, op, steps):
  t0 = time.perf_counter()
  sess.run_steps(op, max_steps=steps)
  return time.perf_counter() - t0


def _measure(spec, idx, steps, rounds):
  runners, sessions = _runners(spec, idx)
  samples = {name: [] for name in RUNNERS}
  t0 = time.time()
  try:
    for r in range(rounds + 1):  # round 0: warmup
      order = list(RUNNERS) if r % 2 == 0 else list(RUNNERS)[::-1]
      for name in order:
        print('round %d %s' % (r, name), file=sys.stderr, flush=True)
        gc.collect()
        runners[name](SETTLE_STEPS)  # the same count on every rank: votes pair up
        elapsed = runners[name](steps)
        if r:
          samples[name].append(elapsed / steps)
  finally:
    for sess in sessions:
      sess.close()
  return {'ranks': len(spec['worker']), 'measure_secs': time.time() - t0,
          'medians_us': {n: statistics.median(s) * 1e6 for n, s in samples.items()},
          'spreads_us': {n: (min(s) * 1e6, max(s) * 1e6) for n, s in samples.items()}}


def main():
  import tempfile  # pylint: disable=g-import-not-at-top
  steps = int(os.environ.get('FASTMTS_BENCH_AGREED_STEPS', DEFAULT_STEPS))
  rounds = int(os.environ.get('FASTMTS_BENCH_ROUNDS', DEFAULT_ROUNDS))
  with tempfile.TemporaryDirectory(prefix='fastmts-agreed-bench-') as d:
    result = run(d, steps=steps, rounds=rounds)
    print(summary(result))
    print(json.dumps(result))


if __name__ == '__main__':
  if '--cluster' in sys.argv[1:]:
    sys.exit(_rank_main(sys.argv[1:]))
  main()
