"""What MonitoredTrainingSession itself costs per step, for the demo job.

The demo's end-to-end steps/s is mostly the model and the machine's load. This measures
what the README's speed table is about instead: the step of a stock and of a fastmts
MonitoredTrainingSession (the demo's own hooks and checkpoint settings) against a bare
``Session.run`` loop of the same model, each on its own copy of the graph, in blocks that
alternate (serpentine order, so a drift of the machine's load falls on all three alike).
The medians of the per-round differences are reported: the cost of the machinery, which
load moves far less than the steps/s.
"""

import statistics
import time

import tensorflow as tf

RUNNERS = ('Session.run', 'stock', 'fastmts')


class _Runner:
  """One copy of the demo model and a live session over it: a bare Session, or a
  MonitoredTrainingSession writing to `workdir` with the demo's hooks."""

  def __init__(self, factory, workdir, args):
    from fastmts import demo_model  # pylint: disable=import-outside-toplevel
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf.compat.v1.set_random_seed(args.seed)
      model = demo_model.build(seed=args.seed)
      self.fetches = [model.train_op, model.loss]
      if factory is None:
        init = tf.compat.v1.global_variables_initializer()
        self.sess = tf.compat.v1.Session(graph=self.graph)
        self.sess.run(init)
      else:
        hooks = [tf.compat.v1.train.StopAtStepHook(last_step=2 ** 62),
                 tf.compat.v1.train.NanTensorHook(model.loss)]
        self.sess = factory(checkpoint_dir=workdir, hooks=hooks,
                            save_summaries_steps=args.save_summaries_steps,
                            save_checkpoint_steps=args.save_checkpoint_steps)

  def block(self, steps):
    """Seconds per step over `steps` steps."""
    run, fetches = self.sess.run, self.fetches
    with self.graph.as_default():
      start = time.perf_counter()
      for _ in range(steps):
        run(fetches)
      return (time.perf_counter() - start) / steps

  def close(self):
    with self.graph.as_default():
      self.sess.close()


def measure(factories, workdir, args):
  """{runner: median us/step} and {runner: median us/step over Session.run's in the same
  round} for the runners of RUNNERS whose factories are given (None: a bare Session)."""
  runners = {}
  try:
    for name in RUNNERS:
      if name in factories:
        runners[name] = _Runner(factories[name], '%s/overhead-%s' % (workdir, name), args)
    names = list(runners)
    samples = {name: [] for name in names}
    for i in range(args.overhead_rounds + 1):  # the first round warms up
      for name in (names if i % 2 == 0 else names[::-1]):
        per_step = runners[name].block(args.overhead_steps)
        if i:
          samples[name].append(per_step)
  finally:
    for runner in runners.values():
      runner.close()
  medians = {name: statistics.median(s) * 1e6 for name, s in samples.items()}
  bare = samples['Session.run']
  added = {name: statistics.median([(a - b) * 1e6 for a, b in zip(s, bare)])
           for name, s in samples.items() if name != 'Session.run'}
  return medians, added


def report(medians, added, args):
  """The lines the demo prints."""
  lines = ['What MonitoredTrainingSession itself costs per step, over a bare Session.run '
           'loop of the same model',
           '(the hooks and checkpoint settings above; blocks of %d steps interleaved, '
           'medians of %d rounds):' % (args.overhead_steps, args.overhead_rounds),
           '  %-34s %8.1f us/step' % ('Session.run loop', medians['Session.run'])]
  for name, label in (('stock', 'stock MonitoredTrainingSession'),
                      ('fastmts', 'fastmts MonitoredTrainingSession')):
    if name in added:
      lines.append('  %-34s %8.1f us/step  %+8.1f us' % (label, medians[name], added[name]))
  if 'stock' in added and 'fastmts' in added:
    lines.append('  fastmts: %.1f us less per step than stock%s'
                 % (added['stock'] - added['fastmts'],
                    '; its native step costs less than the bare Session.run loop itself'
                    if added['fastmts'] < 0 else ''))
  return '\n'.join(lines)
