"""Start and save costs on a large graph, stock TF and fastmts side by side.

    python bench/start_save_bench.py [--layers 412] [--repeats 5]

The graph: `--layers` layers, each a 3x3 variable, a matmul and a scalar
summary (412 layers: about 7,000 ops). For each implementation, interleaved
round by round, it prints medians of:

  * creation: MonitoredTrainingSession(checkpoint_dir=...) until it returns
    (graph.pbtxt, the first checkpoint and its meta graph included);
  * first step: the first sess.run(train_op);
  * save with meta graph / without: one step with a checkpoint save
    (save_checkpoint_steps=1), save_graph_def True / False, minus a step
    without a save.

Asynchronous checkpoints (issue 17, item 3) are not built yet, so there is
no stall row for them. Wall time on a shared machine: repeat, read medians.
"""
import argparse
import statistics
import sys
import tempfile
import time

import tensorflow as tf

v1 = tf.compat.v1


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


def start(impl, layers):
  """(ops, creation seconds, first-step seconds)."""
  with tf.Graph().as_default() as graph:
    train = build(layers)
    t0 = time.perf_counter()
    sess = impl.MonitoredTrainingSession(checkpoint_dir=tempfile.mkdtemp(),
                                         save_summaries_steps=None, log_step_count_steps=None)
    t1 = time.perf_counter()
    sess.run(train)
    t2 = time.perf_counter()
    sess.close()
    return len(graph.get_operations()), t1 - t0, t2 - t1


def _median_step(sess, train, steps):
  """Median seconds of `steps` runs of `train` (after one to warm up)."""
  sess.run(train)
  times = []
  for _ in range(steps):
    t = time.perf_counter()
    sess.run(train)
    times.append(time.perf_counter() - t)
  return statistics.median(times)


def save_cost(impl, layers, save_graph_def, steps=6):
  """Median seconds a checkpoint save adds to a step."""
  with tf.Graph().as_default():
    train = build(layers)
    with impl.MonitoredTrainingSession(
        checkpoint_dir=tempfile.mkdtemp(), save_checkpoint_steps=1, save_summaries_steps=None,
        log_step_count_steps=None, save_graph_def=save_graph_def) as sess:
      with_save = _median_step(sess, train, steps)
  with tf.Graph().as_default():
    train = build(layers)
    with impl.MonitoredTrainingSession(save_summaries_steps=None,
                                       log_step_count_steps=None) as sess:
      plain = _median_step(sess, train, steps)
  return with_save - plain


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--layers', type=int, default=412)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args(argv)
  v1.disable_eager_execution()
  import fastmts  # pylint: disable=g-import-not-at-top
  impls = (('stock', v1.train), ('fastmts', fastmts))
  rows = {}
  ops = None
  for _ in range(args.repeats):
    for name, impl in impls:
      ops, created, first = start(impl, args.layers)
      rows.setdefault((name, 'creation'), []).append(created)
      rows.setdefault((name, 'first step'), []).append(first)
      rows.setdefault((name, 'save with meta graph'), []).append(save_cost(impl, args.layers, True))
      rows.setdefault((name, 'save without'), []).append(save_cost(impl, args.layers, False))
  print('TensorFlow %s, %d ops, %d interleaved rounds, medians in ms\n' % (
      tf.__version__, ops, args.repeats))
  print('| what | stock | fastmts | fastmts/stock |')
  print('|---|---:|---:|---:|')
  for what in ('creation', 'first step', 'save with meta graph', 'save without'):
    stock = statistics.median(rows[('stock', what)]) * 1e3
    ours = statistics.median(rows[('fastmts', what)]) * 1e3
    print('| %s | %.1f | %.1f | %.2fx |' % (what, stock, ours, ours / stock if stock else float('nan')))
  start_stock = sum(statistics.median(rows[('stock', w)]) for w in ('creation', 'first step'))
  start_ours = sum(statistics.median(rows[('fastmts', w)]) for w in ('creation', 'first step'))
  print('| creation + first step | %.1f | %.1f | %.2fx |' % (
      start_stock * 1e3, start_ours * 1e3, start_ours / start_stock))
  return 0


if __name__ == '__main__':
  sys.exit(main())
