"""Start and save costs, stock TF and fastmts side by side.

    python bench/start_save_bench.py [--only start|saves|stall]
        [--graphs layers,const64,const512,var512] [--layers 412] [--repeats 5]
        [--stall-mb 512] [--stall-secs 14] [--save-secs 4]

The start (`--only start`), on each graph of `--graphs`:

  * layers: `--layers` layers, each a 3x3 variable, a matmul and a scalar
    summary (412 layers: about 7,000 ops);
  * const64 / const512: 8 float32 constants of 8 / 64 MB (64 / 512 MB in
    the GraphDef) and one variable (the global step);
  * var512: 512 MB of variables (8 square float32 matrices).

Each measurement in a fresh process (what a user's first run costs: no
allocator or cache kept from an earlier run), implementations interleaved
round by round, medians of creation, first step and their sum, and the
peak RSS of the process (ru_maxrss), for:

  * stock: TF's MonitoredTrainingSession(checkpoint_dir=...) (graph.pbtxt,
    the graph and meta graph event records, the first checkpoint and its
    .meta written before it returns);
  * fastmts: fastmts's, the same arguments;
  * floor: TF's session without checkpoint_dir, plus one synchronous
    Saver.save(sess, path, write_meta_graph=False) of the variables (the
    one write a chief must make before training for stock's durability),
    counted in its creation. The Saver is the one that session's Scaffold
    builds (as every MonitoredSession's does, with checkpoint_dir or not),
    so its building is counted too.

Then close: the close() that follows (for fastmts, what the graph files
written in the background still need).

The saves (`--only saves`), in one process on the layered graph: one step
with a checkpoint save (save_checkpoint_steps=1), save_graph_def True /
False, minus a step without a save.

The training stall (`--only stall`) of checkpoint saves on a model of `--stall-mb` MB of
variables (8 square float32 matrices; 512 MB: 8 x 4096x4096), `--stall-secs`
of training with a CheckpointSaverHook save every `--save-secs`, twice: the big variables read only (a small head
trained on top), then trained by SGD (every step updates every byte). For
stock TF's synchronous saves, fastmts's synchronous ones and fastmts's
asynchronous ones (async_checkpoint=True), per save:

  * save step: the step that saved, minus the run's median step (what the
    save blocks the training thread for);
  * cost: the run's time over its median step times its steps, per save
    (what the saves cost training in all, steps slowed by a write in flight
    included);
  * the step rate of the steps between saves against a run without saves;
  * and, in a fresh process per configuration (10 steps, a save every 2),
    the peak resident memory: what the snapshot costs.

Wall time on a shared machine: repeat, read medians.
"""
import argparse
import gc
import inspect
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import tensorflow as tf

v1 = tf.compat.v1


_scratch = tempfile.TemporaryDirectory(prefix='fastmts-start-save-bench-')


def _scratch_dir():
  """A fresh checkpoint directory; the last one is removed first (a 512 MB
  model keeps 5 checkpoints of 512 MB each), all of them at exit."""
  for name in os.listdir(_scratch.name):
    shutil.rmtree(os.path.join(_scratch.name, name), ignore_errors=True)
  return tempfile.mkdtemp(dir=_scratch.name)


def build(layers):
  x = tf.constant([[1.0, 2.0, 3.0]])
  h = x
  for i in range(layers):
    w = v1.get_variable('w%d' % i, [3, 3], initializer=v1.ones_initializer())
    h = tf.matmul(h, w) * 0.1
    v1.summary.scalar('s%d' % i, tf.reduce_sum(h))
  gs = v1.train.get_or_create_global_step()
  with tf.control_dependencies([h]):
    return v1.assign_add(gs, 1)


def _constants(mb):
  """8 float32 constants of `mb` MB in all (random bytes: the text format
  escapes them as it would trained weights) and the global step."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(0)
  values = [tf.constant(rng.rand(mb * 2 ** 20 // 8 // 4).astype(np.float32)) for _ in range(8)]
  total = tf.add_n([tf.reduce_sum(v[:4]) for v in values])
  gs = v1.train.get_or_create_global_step()
  with tf.control_dependencies([total]):
    return v1.assign_add(gs, 1)


def _variables(mb):
  """8 square float32 variables of `mb` MB in all, and the global step."""
  side = int((mb * 2 ** 20 / 8 / 4) ** 0.5)
  for i in range(8):
    v1.get_variable('big%d' % i, [side, side], initializer=v1.zeros_initializer())
  return v1.assign_add(v1.train.get_or_create_global_step(), 1)


def build_graph(name, layers):
  """The train op of graph `name` (see the module docstring), in the default graph."""
  if name == 'layers':
    return build(layers)
  if name.startswith('const'):
    return _constants(int(name[len('const'):]))
  if name.startswith('var'):
    return _variables(int(name[len('var'):]))
  raise ValueError('unknown graph %r' % name)


START_IMPLS = ('stock', 'fastmts', 'floor')


def _start_child(impl_name, graph_name, layers):
  """In a fresh process: (ops, creation, first step, close seconds, peak
  RSS bytes) of `impl_name`'s session on `graph_name`."""
  import fastmts  # pylint: disable=g-import-not-at-top
  directory = _scratch_dir()
  with tf.Graph().as_default() as graph:
    train = build_graph(graph_name, layers)
    kwargs = dict(save_summaries_steps=None, log_step_count_steps=None)
    gc.collect()
    t0 = time.perf_counter()
    if impl_name == 'floor':
      sess = v1.train.MonitoredTrainingSession(**kwargs)
      saver, = v1.get_collection(v1.GraphKeys.SAVERS)  # built by the session's Scaffold
      saver.save(sess._tf_sess(), os.path.join(directory, 'model.ckpt'), global_step=0,  # pylint: disable=protected-access
                 write_meta_graph=False)
    else:
      impl = fastmts if impl_name == 'fastmts' else v1.train
      sess = impl.MonitoredTrainingSession(checkpoint_dir=directory, **kwargs)
    t1 = time.perf_counter()
    sess.run(train)
    t2 = time.perf_counter()
    sess.close()
    t3 = time.perf_counter()
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
  return len(graph.get_operations()), t1 - t0, t2 - t1, t3 - t2, rss


def start_rows(graph_name, layers, repeats):
  """{(impl, what): [value per round]}: each measurement in a fresh
  process, the implementations interleaved round by round."""
  rows = {}
  ops = None
  for _ in range(repeats):
    for impl_name in START_IMPLS:
      out = subprocess.run(
          [sys.executable, os.path.abspath(__file__), '--start-child', impl_name,
           '--graphs', graph_name, '--layers', str(layers)],
          capture_output=True, text=True, check=False)
      if out.returncode:
        raise RuntimeError('%s on %s failed:\n%s' % (impl_name, graph_name, out.stderr[-3000:]))
      values = out.stdout.split()[-5:]
      ops = int(values[0])
      for what, value in zip(('creation', 'first step', 'close', 'rss'), values[1:]):
        rows.setdefault((impl_name, what), []).append(float(value))
  return ops, rows


def print_start(graph_name, layers, repeats):
  ops, rows = start_rows(graph_name, layers, repeats)
  med = {key: statistics.median(values) for key, values in rows.items()}
  for impl_name in START_IMPLS:
    med[(impl_name, 'start')] = statistics.median(
        [c + f for c, f in zip(rows[(impl_name, 'creation')], rows[(impl_name, 'first step')])])
  print('%s: TensorFlow %s, %d ops, %d interleaved rounds (a fresh process each), medians; '
        'load average %.1f\n' % (graph_name, tf.__version__, ops, repeats, os.getloadavg()[0]))
  print('| what | stock | fastmts | floor | fastmts/floor | fastmts/stock |')
  print('|---|---:|---:|---:|---:|---:|')
  for what in ('creation', 'first step', 'start', 'close', 'rss'):
    stock, ours, floor = (med[(impl_name, what)] for impl_name in START_IMPLS)
    label = 'creation + first step' if what == 'start' else what
    if what == 'rss':
      print('| peak RSS (MB) | %.0f | %.0f | %.0f | %.2fx | %.2fx |' % (
          stock / 2 ** 20, ours / 2 ** 20, floor / 2 ** 20, ours / floor, ours / stock))
    else:
      print('| %s (s) | %.2f | %.2f | %.2f | %.2fx | %.2fx |' % (
          label, stock, ours, floor, ours / floor if floor else float('nan'), ours / stock))
  print()


def _median_step(sess, train, steps):
  """Median seconds of `steps` runs of `train` (after one to warm up)."""
  sess.run(train)
  times = []
  for _ in range(steps):
    t = time.perf_counter()
    sess.run(train)
    times.append(time.perf_counter() - t)
  return statistics.median(times)


# MonitoredTrainingSession's save_graph_def (TF 2.1 on; 1.15 and 2.0 always
# save the meta graph, and have no "save without" row).
_HAS_SAVE_GRAPH_DEF = 'save_graph_def' in inspect.signature(
    v1.train.MonitoredTrainingSession).parameters


def save_cost(impl, layers, save_graph_def, steps=6):
  """Median seconds a checkpoint save adds to a step."""
  with tf.Graph().as_default():
    train = build(layers)
    with impl.MonitoredTrainingSession(
        checkpoint_dir=_scratch_dir(), save_checkpoint_steps=1, save_summaries_steps=None,
        log_step_count_steps=None, **({} if save_graph_def else {'save_graph_def': False})) as sess:
      with_save = _median_step(sess, train, steps)
  with tf.Graph().as_default():
    train = build(layers)
    with impl.MonitoredTrainingSession(save_summaries_steps=None,
                                       log_step_count_steps=None) as sess:
      plain = _median_step(sess, train, steps)
  return with_save - plain


def _stall_model(mb, train_all):
  """8 square float32 variables of `mb` MB in all, through which a vector
  goes forward. `train_all`: SGD on all of them (a rank-1 gradient per
  matrix: every step updates every byte); otherwise they are read only and
  the step trains a small head on top (a frozen backbone)."""
  side = int((mb * 2 ** 20 / 8 / 4) ** 0.5)
  x = tf.ones([1, side]) * 1e-3
  h = x
  for i in range(8):
    w = v1.get_variable('big%d' % i, [side, side], initializer=v1.zeros_initializer(),
                        trainable=train_all)
    h = tf.matmul(h, w) + x
  if not train_all:
    head = v1.get_variable('head', [side, 16], initializer=v1.zeros_initializer())
    h = tf.matmul(h, head)
  loss = tf.reduce_sum(h)
  return v1.train.GradientDescentOptimizer(1e-6).minimize(
      loss, global_step=v1.train.get_or_create_global_step())


class _SavedSteps(v1.train.CheckpointSaverListener):
  """The global steps saved."""

  def __init__(self):
    self.steps = []

  def before_save(self, session, global_step_value):
    self.steps.append(int(global_step_value))


def stall(impl, hook_class, mb, train_all, seconds, save_secs, **kwargs):
  """Seconds of each step of `seconds` of training (after 2 warm-up steps)
  in `impl`'s MonitoredTrainingSession, with a `hook_class` save every
  `save_secs` (none when None); the indexes of the steps that saved."""
  with tf.Graph().as_default():
    train = _stall_model(mb, train_all)
    saved = _SavedSteps()
    checkpoint_dir = _scratch_dir()
    hooks = []
    if save_secs is not None:
      hooks.append(hook_class(checkpoint_dir, save_secs=save_secs, listeners=[saved], **kwargs))
    with impl.MonitoredTrainingSession(
        checkpoint_dir=checkpoint_dir, save_checkpoint_steps=None, save_checkpoint_secs=None,
        save_summaries_steps=None, log_step_count_steps=None, chief_only_hooks=hooks) as sess:
      for _ in range(2):
        sess.run(train)
      # The checkpoint of session creation may still be written (async):
      # its cost belongs to the start, not to the saves measured here.
      while hooks and tf.train.latest_checkpoint(checkpoint_dir) is None:
        time.sleep(0.01)
      times = []
      gc.collect()
      end = time.perf_counter() + seconds
      while time.perf_counter() < end:
        t = time.perf_counter()
        sess.run(train)
        times.append(time.perf_counter() - t)
  # The timed step with index i made the global step i + 3.
  saves = [step - 3 for step in saved.steps if 0 <= step - 3 < len(times)]
  return times, saves


def stall_rows(mb, train_all, seconds, save_secs, repeats):
  """{(config, what): [value per round]}, rounds interleaved.

  A run's own median step is its baseline (most of its steps are far from
  any save), so the per-save figures do not ride on drift between runs;
  the step rate is against the run without saves of the same round."""
  import fastmts  # pylint: disable=g-import-not-at-top
  configs = (('no saves', v1.train, None, None, {}),
             ('stock, synchronous', v1.train, v1.train.CheckpointSaverHook, save_secs, {}),
             ('fastmts, synchronous', fastmts, v1.train.CheckpointSaverHook, save_secs, {}),
             ('fastmts, asynchronous', fastmts, fastmts.CheckpointSaverHook, save_secs,
              {'async_checkpoint': True}))
  rows = {}
  for _ in range(repeats):
    plain_rate = None
    for name, impl, hook_class, every, kwargs in configs:
      times, saves = stall(impl, hook_class, mb, train_all, seconds, every, **kwargs)
      rows.setdefault((name, 'step'), []).append(statistics.median(times))
      if every is None:
        plain_rate = len(times) / sum(times)
        continue
      base = statistics.median(times)
      others = [t for i, t in enumerate(times) if i not in saves]
      rows.setdefault((name, 'saves'), []).append(len(saves))
      rows.setdefault((name, 'save step'), []).append(
          statistics.median([times[i] for i in saves]) - base)
      rows.setdefault((name, 'cost'), []).append((sum(times) - len(times) * base) / len(saves))
      rows.setdefault((name, 'rate'), []).append((len(others) / sum(others)) / plain_rate)
  return rows


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--layers', type=int, default=412)
  parser.add_argument('--graphs', default='layers,const64,const512,var512')
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--stall-mb', type=int, default=512)
  parser.add_argument('--stall-secs', type=float, default=14)
  parser.add_argument('--save-secs', type=float, default=4)
  parser.add_argument('--only', choices=('start', 'saves', 'stall'), default=None)
  parser.add_argument('--memory-child', help=argparse.SUPPRESS)
  parser.add_argument('--start-child', help=argparse.SUPPRESS)
  parser.add_argument('--train-all', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  v1.disable_eager_execution()
  if args.memory_child:
    _memory_child(args)
    return 0
  if args.start_child:
    print(*_start_child(args.start_child, args.graphs, args.layers))
    return 0
  if args.only in (None, 'start'):
    for graph_name in args.graphs.split(','):
      print_start(graph_name, args.layers, args.repeats)
  if args.only in (None, 'saves'):
    print_saves(args)
  if args.only in (None, 'stall'):
    print_stall(args)
  return 0


def print_saves(args):
  import fastmts  # pylint: disable=g-import-not-at-top
  impls = (('stock', v1.train), ('fastmts', fastmts))
  rows = {}
  for _ in range(args.repeats):
    for name, impl in impls:
      rows.setdefault((name, 'save with meta graph'), []).append(save_cost(impl, args.layers, True))
      if _HAS_SAVE_GRAPH_DEF:
        rows.setdefault((name, 'save without'), []).append(save_cost(impl, args.layers, False))
  print('TensorFlow %s, %d layers, %d interleaved rounds, medians in ms\n' % (
      tf.__version__, args.layers, args.repeats))
  print('| what | stock | fastmts | fastmts/stock |')
  print('|---|---:|---:|---:|')
  for what in ('save with meta graph', 'save without'):
    if ('stock', what) not in rows:
      continue
    stock = statistics.median(rows[('stock', what)]) * 1e3
    ours = statistics.median(rows[('fastmts', what)]) * 1e3
    print('| %s | %.1f | %.1f | %.2fx |' % (what, stock, ours, ours / stock if stock else float('nan')))
  print()


def print_stall(args):
  for train_all in (False, True):
    rows = stall_rows(args.stall_mb, train_all, args.stall_secs, args.save_secs, args.repeats)
    print('TensorFlow %s, %d MB of variables, %s, a save every %g s, %g s a run, %d '
          'interleaved rounds, medians; a step without saves: %.0f ms\n' % (
              tf.__version__, args.stall_mb,
              'every byte updated every step' if train_all else 'read only (a head trained)',
              args.save_secs, args.stall_secs, args.repeats,
              statistics.median(rows[('no saves', 'step')]) * 1e3))
    print('| saves | save step, over the median step (ms) | cost per save, all steps (ms) | '
          'step rate between saves, vs no saves | peak RSS of a process, 10 steps (MB) |')
    print('|---|---:|---:|---:|---:|')
    for name in ('no saves', 'stock, synchronous', 'fastmts, synchronous',
                 'fastmts, asynchronous'):
      if name == 'no saves':
        cells = ('-', '-', '-')
      else:
        cells = ('%.0f' % (statistics.median(rows[(name, 'save step')]) * 1e3),
                 '%.0f' % (statistics.median(rows[(name, 'cost')]) * 1e3),
                 '%.2fx' % statistics.median(rows[(name, 'rate')]))
      print('| %s | %s | %s | %s | %.0f |' % ((name,) + cells + (
          _peak_rss_of_child(name, args.stall_mb, train_all) / 2 ** 20,)))
    print()


def _peak_rss_of_child(config, mb, train_all):
  """The peak RSS (ru_maxrss) of a fresh process training 10 steps with a
  save every 2 steps under `config` (in-process figures would count what
  the allocator kept from earlier runs)."""
  out = subprocess.run(
      [sys.executable, os.path.abspath(__file__), '--memory-child', config, '--stall-mb', str(mb)]
      + (['--train-all'] if train_all else []), capture_output=True, text=True, check=True)
  return int(out.stdout.split()[-1]) * 1024


def _memory_child(args):
  import fastmts  # pylint: disable=g-import-not-at-top
  impl, hook_class, kwargs = {
      'no saves': (v1.train, None, {}),
      'stock, synchronous': (v1.train, v1.train.CheckpointSaverHook, {}),
      'fastmts, synchronous': (fastmts, v1.train.CheckpointSaverHook, {}),
      'fastmts, asynchronous': (fastmts, fastmts.CheckpointSaverHook, {'async_checkpoint': True}),
  }[args.memory_child]
  with tf.Graph().as_default():
    train = _stall_model(args.stall_mb, args.train_all)
    directory = _scratch_dir()
    hooks = [] if hook_class is None else [hook_class(directory, save_steps=2, **kwargs)]
    with impl.MonitoredTrainingSession(
        checkpoint_dir=directory, save_checkpoint_steps=None, save_checkpoint_secs=None,
        save_summaries_steps=None, log_step_count_steps=None, chief_only_hooks=hooks) as sess:
      for _ in range(10):
        sess.run(train)
  print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


if __name__ == '__main__':
  sys.exit(main())
