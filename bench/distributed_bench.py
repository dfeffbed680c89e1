"""Per-step throughput against a parameter server on loopback gRPC.

One ps process and one worker process (tests/cluster_utils.py). The worker
builds one graph per implementation (bench/models.py, variables on the ps by
``replica_device_setter``, each under its own variable scope so the two
never share a variable on the ps), creates a chief
``MonitoredTrainingSession(master=<its server>, hooks=[StopAtStepHook])`` of
stock TF and one of fastmts, and runs blocks of steps of the two alternately
(bench/measure.py's ``Interleaver``: serpentine order, medians of the
blocks). Session creation is never timed. Each step is one ``run(train_op)``
whose variables live in the ps process: the gRPC round trips are in every
number, which is the point (how much of fastmts's gain survives them).

    python bench/distributed_bench.py                   # prints a summary
    FASTMTS_BENCH_DIST_STEPS=500 FASTMTS_BENCH_ROUNDS=7 python bench/distributed_bench.py

As a script with ``--cluster ...`` it is the worker (cluster_utils passes
``--cluster --task_index --impl --options``); it prints one
``CLUSTER_RESULT <json>`` line.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import tests_on_path  # noqa: E402,F401  (tests/ on sys.path)

import cluster_utils  # noqa: E402  (tests/cluster_utils.py)

DEFAULT_STEPS = 500
DEFAULT_ROUNDS = 7
DEFAULT_WARMUP = 1
KINDS = ('stock', 'fastmts')


# ---------------------------------------------------------------------------
# Parent side
# ---------------------------------------------------------------------------

def run(workdir, steps=DEFAULT_STEPS, rounds=DEFAULT_ROUNDS,
        warmup=DEFAULT_WARMUP, graph='mlp', kinds=KINDS, timeout=600):
  """Starts the ps and the worker, waits for the worker's result (a dict:
  medians_us, steps_per_sec, ratio_fastmts_over_stock, errors, ...). Every
  process is killed on the way out."""
  options = {'steps': steps, 'rounds': rounds, 'warmup': warmup,
             'graph': graph, 'kinds': list(kinds)}
  with cluster_utils.Cluster(workdir, num_workers=1,
                             max_lifetime_secs=timeout + 60) as c:
    c.start_ps()
    c.start_worker(0, impl='fastmts', options=options,
                   script=os.path.abspath(__file__), timeout=timeout)
    result = c.wait_results(['worker0'])['worker0']
  if result.get('error'):
    raise RuntimeError('distributed benchmark failed: %s' % (result['error'],))
  return result


def summary(result):
  lines = ['distributed (1 ps + 1 worker, loopback gRPC), graph %s, %d steps '
           'x %d blocks:' % (result['graph'], result['steps'], result['rounds'])]
  for kind in result['kinds']:
    med = result['medians_us'][kind]
    lo, hi = result['spreads_us'][kind]
    lines.append('  %-8s  %8.1f us/step  %8.1f steps/s  (blocks %.1f-%.1f us)'
                 % (kind, med, result['steps_per_sec'][kind], lo, hi))
  r = result.get('ratio_fastmts_over_stock')
  if r is not None:
    lines.append('  fastmts/stock steps/s: %.2fx' % r)
  return '\n'.join(lines)


# ---------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------

def _worker_main(argv):
  args = cluster_utils.worker_args(argv)
  opts = args.options
  cluster_utils.start_watchdog()

  sys.path.insert(0, HERE)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import measure  # pylint: disable=g-import-not-at-top  (disables eager)
  import models  # pylint: disable=g-import-not-at-top

  cluster = tf.train.ClusterSpec(json.loads(args.cluster))
  idx = args.task_index
  server = tf.distribute.Server(cluster, job_name='worker', task_index=idx,
                                start=True)
  config = tf.compat.v1.ConfigProto(
      device_filters=['/job:ps', '/job:worker/task:%d' % idx])

  class DistributedRunner(measure.MTSRunner):
    """measure.MTSRunner's block()/close() on a graph whose variables live
    on the ps, in a chief MonitoredTrainingSession at the worker's server."""

    def __init__(self, kind, graph):  # pylint: disable=super-init-not-called
      factory = measure.require(kind) or tf.compat.v1.train.MonitoredTrainingSession
      self.kind, self.hooks_name, self.tmpdir = kind, 'stop', None
      self.graph_name = graph
      self.graph = tf.Graph()
      with self.graph.as_default():
        with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
            cluster=cluster, worker_device='/job:worker/task:%d' % idx)):
          with tf.compat.v1.variable_scope(kind):
            self.model = models.BUILDERS[graph]()
        self.sess = factory(
            master=server.target, is_chief=True, config=config,
            hooks=[tf.compat.v1.train.StopAtStepHook(
                last_step=measure.LAST_STEP)])
      self.variables = [v.name for v in self.graph.get_collection(
          tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)]

  steps, rounds = opts.get('steps', DEFAULT_STEPS), opts.get('rounds', DEFAULT_ROUNDS)
  graph = opts.get('graph', 'mlp')
  kinds = opts.get('kinds', list(KINDS))
  result = {'error': None, 'steps': steps, 'rounds': rounds, 'graph': graph,
            'kinds': kinds, 'errors': {}, 'variables': {}}
  runners = {}
  try:
    # A runner that fails to start or to run fails the benchmark (run()
    # raises result['error']): no figure is left out.
    for kind in kinds:
      runners[kind] = DistributedRunner(kind, graph)
      result['variables'][kind] = runners[kind].variables
    inter = measure.Interleaver(runners)
    t0 = time.time()
    medians = inter.measure(steps, rounds, warmup=opts.get('warmup', DEFAULT_WARMUP))
    result['measure_secs'] = time.time() - t0
    result['medians_us'] = medians
    result['spreads_us'] = {k: inter.spread_us(k) for k in runners}
    result['steps_per_sec'] = {k: 1e6 / v for k, v in medians.items()}
    if {'fastmts', 'stock'} <= set(runners):
      result['ratio_fastmts_over_stock'] = (result['steps_per_sec']['fastmts'] /
                                            result['steps_per_sec']['stock'])
  except Exception as e:  # pylint: disable=broad-except
    result['error'] = '%s: %s' % (type(e).__name__, e)
  finally:
    for kind, r in runners.items():
      try:
        r.close()
      except Exception as e:  # pylint: disable=broad-except
        result['errors'].setdefault(kind, 'close: %s: %s' % (type(e).__name__, e))
  print(cluster_utils.RESULT_PREFIX + json.dumps(result), flush=True)
  return 1 if result['error'] else 0


def main():
  import tempfile  # pylint: disable=g-import-not-at-top
  steps = int(os.environ.get('FASTMTS_BENCH_DIST_STEPS', DEFAULT_STEPS))
  rounds = int(os.environ.get('FASTMTS_BENCH_ROUNDS', DEFAULT_ROUNDS))
  with tempfile.TemporaryDirectory(prefix='fastmts-dist-bench-') as d:
    print(summary(run(d, steps=steps, rounds=rounds)))


if __name__ == '__main__':
  if '--cluster' in sys.argv[1:]:
    sys.exit(_worker_main(sys.argv[1:]))
  main()
