"""Per-step cost under Horovod: stock MonitoredTrainingSession vs fastmts, as a
ratio to the same step in a plain Session loop.

`horovodrun -np 2 -H localhost:2 --gloo` (tests/horovod_utils.py) runs this
file on two ranks. Each rank builds one graph per kind, a tiny model (a
linear softmax classifier of 8 features and 3 classes on one constant batch
of 4; 27 floats of gradients) trained with
``hvd.DistributedOptimizer(GradientDescentOptimizer)``, so every step is one
allreduce through Horovod's background thread, whose cycle time
(HOROVOD_CYCLE_TIME, 1 ms by default) is in every number:

  session       the floor: ``tf.compat.v1.Session.run(train_op)`` in a Python
                loop, the variables initialized and broadcast first;
  stock         tf.compat.v1.train.MonitoredTrainingSession, Horovod's recipe:
                hooks=[BroadcastGlobalVariablesHook(0), StopAtStepHook], the
                checkpoint_dir (so the default hooks: step counter and
                summaries every 100 steps, checkpoints every 600 s) on rank 0
                only; ``sess.run(train_op)`` per step;
  fastmts       the same with fastmts.MonitoredTrainingSession;
  fastmts-loop  another fastmts session, its steps by
                ``sess.run_steps(train_op, max_steps=n)`` (the native loop).

The second set of kinds (FASTMTS_BENCH_HOROVOD_KINDS=agreed) is the cost of
fastmts.AgreedStop under Horovod's engine: the floor, then fastmts's `run`
and `run_steps` sessions as above with ``agreed_stop`` off (``fastmts``,
``fastmts-loop``), the vote after every step (``...-agreed-1``) and after
every 10th (``...-agreed-10``): ``AgreedStop(HorovodEngine(name), n)``, one
more Horovod allreduce (op Max) of an int32 per vote, its name the kind's
own. Each agreed kind is also reported against its kind with the vote off
(median over rounds of the paired blocks' ratio and difference).

Both ranks run the same blocks in the same order (bench/measure.py's
``Interleaver``, serpentine, each block after a gc.collect() and a fixed
number of untimed settling steps: every rank must run the same steps, as an
allreduce waits for the other rank), and rank 0 reports the medians of the
per-step times of the blocks, each kind's ratio to the floor and
fastmts's to stock (median of the per-round ratios).

    python bench/horovod_bench.py        # prints a summary (needs Horovod: .ci/horovod's venv)
    FASTMTS_BENCH_HOROVOD_STEPS=2000 FASTMTS_BENCH_ROUNDS=9 python bench/horovod_bench.py
    FASTMTS_BENCH_HOROVOD_KINDS=agreed python bench/horovod_bench.py   # the agreed stop's cost
"""

import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
import tests_on_path  # noqa: E402,F401  (tests/ on sys.path)

DEFAULT_STEPS = 1000
DEFAULT_ROUNDS = 7
DEFAULT_WARMUP = 1
SETTLE_STEPS = 100  # untimed steps before each block (the same on every rank)
KINDS = ('session', 'stock', 'fastmts', 'fastmts-loop')
AGREED_KINDS = ('session', 'fastmts', 'fastmts-agreed-1', 'fastmts-agreed-10',
                'fastmts-loop', 'fastmts-loop-agreed-1', 'fastmts-loop-agreed-10')
KIND_SETS = {'default': KINDS, 'agreed': AGREED_KINDS}
LAST_STEP = 2 ** 62


# ---------------------------------------------------------------------------
# Parent side
# ---------------------------------------------------------------------------

def run(workdir, steps=DEFAULT_STEPS, rounds=DEFAULT_ROUNDS, warmup=DEFAULT_WARMUP,
        timeout=900, kinds=KINDS):
  """Runs the two ranks; rank 0's result (a dict: medians_us, ratios, ...)."""
  import horovod_utils  # pylint: disable=g-import-not-at-top
  options = {'steps': steps, 'rounds': rounds, 'warmup': warmup, 'workdir': workdir,
             'kinds': list(kinds)}
  horovod_utils.run(2, [os.path.abspath(__file__), '--rank', json.dumps(options)],
                    os.path.join(workdir, 'logs'), timeout)
  with open(os.path.join(workdir, 'result.json')) as f:
    result = json.load(f)
  if result.get('error'):
    raise RuntimeError('Horovod benchmark failed: %s' % (result['error'],))
  return result


def summary(result):
  lines = ['Horovod %s, 2 ranks (Gloo, loopback), HOROVOD_CYCLE_TIME %s, TF %s; '
           '%d steps x %d blocks, per step (median of blocks):' % (
               result['horovod'], result['cycle_time'], result['tf'],
               result['steps'], result['rounds'])]
  for kind in result['kinds']:
    med = result['medians_us'].get(kind)
    if med is None:
      lines.append('  %-22s %s' % (kind, result['errors'].get(kind, 'no samples')))
      continue
    lo, hi = result['spreads_us'][kind]
    lines.append('  %-22s %8.1f us  %5.2fx the floor  (blocks %.1f-%.1f us)' % (
        kind, med, result['ratios_to_floor'][kind], lo, hi))
  if 'stock' in result['kinds']:
    r = result.get('fastmts_over_stock')
    lines.append('  fastmts / stock per step (median of rounds): %s'
                 % ('%.3f' % r if r else 'n/a'))
  for kind, (r, diff) in sorted(result.get('over_vote_off', {}).items()):
    lines.append('  %-22s / %-12s per step (median of rounds): %s, %s' % (
        kind, _vote_off(kind), '%.3f' % r if r else 'n/a',
        '%+.1f us' % diff if diff is not None else 'n/a'))
  return '\n'.join(lines)


def _agreed_every(kind):
  """n of a kind '...-agreed-n', or None."""
  head, sep, n = kind.rpartition('-agreed-')
  return int(n) if sep and head else None


def _vote_off(kind):
  """The kind an agreed kind is measured against: the same loop, no vote."""
  return kind.rpartition('-agreed-')[0]


# ---------------------------------------------------------------------------
# Rank side
# ---------------------------------------------------------------------------

def _tiny_model(tf, hvd):
  """(train_op, global_step): a linear softmax classifier on a constant
  batch, its gradients averaged over the ranks."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(7 + hvd.rank())
  x = tf.constant(rng.standard_normal((4, 8)).astype(np.float32))
  y = tf.constant(rng.randint(0, 3, size=4).astype(np.int64))
  w = tf.compat.v1.get_variable('w', [8, 3], initializer=tf.compat.v1.zeros_initializer())
  b = tf.compat.v1.get_variable('b', [3], initializer=tf.compat.v1.zeros_initializer())
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=y, logits=tf.matmul(x, w) + b))
  global_step = tf.compat.v1.train.get_or_create_global_step()
  opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.01))
  return opt.minimize(loss, global_step=global_step), global_step


class _Runner:
  """A kind's graph and session; block(n) runs n steps, returns seconds
  (bench/measure.py's SessionRunner.block or MonitoredBlock.block)."""

  def __init__(self, measure, tf, hvd, kind, workdir):
    self._measure = measure
    every = _agreed_every(kind)
    # MonitoredBlock reads `kind` (run or run_steps); `name` is the kind's own.
    self.kind = _vote_off(kind) if every else kind
    self.name, self.tmpdir = kind, None
    self.graph = tf.Graph()
    with self.graph.as_default():
      with tf.compat.v1.variable_scope(kind.replace('-', '_')):
        self.model = types.SimpleNamespace(train_op=_tiny_model(tf, hvd)[0])
      if kind == 'session':
        init = tf.compat.v1.global_variables_initializer()
        bcast = hvd.broadcast_global_variables(0)
        self.sess = tf.compat.v1.Session()
        self.sess.run(init)
        self.sess.run(bcast)
        return
      factory, kwargs = tf.compat.v1.train.MonitoredTrainingSession, {}
      if kind != 'stock':
        import fastmts  # pylint: disable=g-import-not-at-top
        factory = fastmts.MonitoredTrainingSession
      if every:
        # Horovod matches the ranks' allreduces by name: one per kind.
        kwargs['agreed_stop'] = fastmts.AgreedStop(
            fastmts.HorovodEngine(name='vote_' + kind.replace('-', '_')), every_n_steps=every)
      if hvd.rank() == 0:
        self.tmpdir = tempfile.mkdtemp(prefix='%s-' % kind, dir=workdir)
      self.sess = factory(
          checkpoint_dir=self.tmpdir,
          hooks=[hvd.BroadcastGlobalVariablesHook(0),
                 tf.compat.v1.train.StopAtStepHook(last_step=LAST_STEP)], **kwargs)

  def block(self, steps):
    kind = self._measure.SessionRunner if self.kind == 'session' else self._measure.MonitoredBlock
    return kind.block(self, steps)

  def close(self):
    with self.graph.as_default():
      self.sess.close()
    if self.tmpdir:
      shutil.rmtree(self.tmpdir, ignore_errors=True)


def _measure(measure, runners, steps, rounds, warmup):
  """measure.Interleaver's rounds, each block after gc.collect() and
  SETTLE_STEPS untimed steps of its runner (a fixed number: the ranks must
  run the same steps)."""
  inter = measure.Interleaver(runners)
  for i in range(warmup + rounds):
    for name in inter.order(i):
      gc.collect()
      runners[name].block(SETTLE_STEPS)
      inter.run(name, steps, record=i >= warmup, collect=False)
  return inter


def _figures(measure, inter):
  """Rank 0's figures from the Interleaver's samples."""
  medians, samples = inter.medians_us(), inter.samples
  paired = lambda a, b: measure.paired_ratio(samples.get(a), samples.get(b))
  over_off = {}
  for kind in samples:
    if _agreed_every(kind):
      diffs = [(a - b) * 1e6 for a, b in zip(samples[kind], samples[_vote_off(kind)])]
      over_off[kind] = (paired(kind, _vote_off(kind)),
                        statistics.median(diffs) if diffs else None)
  return dict(
      medians_us=medians, spreads_us={k: inter.spread_us(k) for k in samples},
      ratios_to_floor={k: measure.ratio(v, medians['session']) for k, v in medians.items()},
      fastmts_over_stock=paired('fastmts', 'stock'),
      loop_over_stock=paired('fastmts-loop', 'stock'), over_vote_off=over_off)


def _rank_main(options):
  """One rank's whole run; rank 0 writes the result."""
  opts = json.loads(options)
  import horovod_rank  # pylint: disable=g-import-not-at-top
  horovod_rank._start_watchdog()  # pylint: disable=protected-access
  sys.path.insert(0, HERE)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import measure  # pylint: disable=g-import-not-at-top  (disables eager)
  import horovod  # pylint: disable=g-import-not-at-top
  import horovod.tensorflow as hvd  # pylint: disable=g-import-not-at-top
  hvd.init()
  kinds = opts.get('kinds', KINDS)
  result = {'error': None, 'steps': opts['steps'], 'rounds': opts['rounds'],
            'kinds': list(kinds), 'errors': {}, 'horovod': horovod.__version__,
            'tf': tf.__version__,
            'cycle_time': os.environ.get('HOROVOD_CYCLE_TIME', 'default (1 ms)')}
  runners = {}
  try:
    for kind in kinds:
      runners[kind] = _Runner(measure, tf, hvd, kind, opts['workdir'])
    inter = _measure(measure, runners, opts['steps'], opts['rounds'], opts['warmup'])
    result.update(_figures(measure, inter))
  except Exception as e:  # pylint: disable=broad-except
    result['error'] = '%s: %s' % (type(e).__name__, e)
  finally:
    for r in runners.values():
      r.close()
  if hvd.rank() == 0:
    with open(os.path.join(opts['workdir'], 'result.json'), 'w') as f:
      json.dump(result, f)
  return 1 if result['error'] else 0


def main():
  steps = int(os.environ.get('FASTMTS_BENCH_HOROVOD_STEPS', DEFAULT_STEPS))
  rounds = int(os.environ.get('FASTMTS_BENCH_ROUNDS', DEFAULT_ROUNDS))
  kinds = KIND_SETS[os.environ.get('FASTMTS_BENCH_HOROVOD_KINDS', 'default')]
  with tempfile.TemporaryDirectory(prefix='fastmts-horovod-bench-') as d:
    result = run(d, steps=steps, rounds=rounds, kinds=kinds)
    print(summary(result))
    print(json.dumps(result))


if __name__ == '__main__':
  if sys.argv[1:2] == ['--rank']:
    sys.exit(_rank_main(sys.argv[2]))
  main()
