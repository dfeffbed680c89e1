"""The fastmts demo job: ``python -m fastmts`` or ``fastmts-demo``.

Trains the small built-in model (fastmts/demo_model.py) with
``tf.compat.v1.train.MonitoredTrainingSession`` and then with
``fastmts.MonitoredTrainingSession`` -- same graph, same seeds, same hooks,
same checkpoint/summary settings, each in a fresh graph and its own
subdirectory -- printing progress as it goes, then a side-by-side table.

    python -m fastmts [--steps 3000] [--dir DIR] [--impl both|fastmts|tf]

Without ``--dir`` a temporary directory is used and deleted at the end.
With ``--dir`` the runs write to DIR/tf and DIR/fastmts and keep them; running
again resumes from the checkpoints there and trains ``--steps`` more steps.
"""

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time

# TF's C++ log lines are kept out of the demo's output as the package, and with it
# TensorFlow, is imported (fastmts/_quiet_start.py): that happens before this module runs.
import tensorflow as tf  # noqa: E402

from fastmts import demo_overhead  # noqa: E402

# "final loss" = mean minibatch loss over the last this-many steps (a single
# minibatch loss is noisy); progress lines show the mean since the last line.
FINAL_LOSS_WINDOW = 100

IMPL_LABELS = {
    'tf': 'tf.compat.v1.train.MonitoredTrainingSession',
    'fastmts': 'fastmts.MonitoredTrainingSession',
}


def _prog():
    base = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ''
    return 'python -m fastmts' if base in ('__main__.py', '-m', '') \
        else base or 'fastmts-demo'


def parse_args(argv=None):
    """The demo job's options (`argv`: None for sys.argv)."""
    p = argparse.ArgumentParser(
        prog=_prog(),
        description='Train a small MLP with stock TF MonitoredTrainingSession '
                    'and with fastmts, and compare their speed.')
    p.add_argument('--steps', type=int, default=3000,
                   help='training steps per implementation (default '
                        '%(default)s)')
    p.add_argument('--dir', default=None,
                   help='checkpoint/summary directory (runs go to DIR/tf and '
                        'DIR/fastmts, kept); default: a temporary directory, '
                        'deleted at the end')
    p.add_argument('--impl', choices=('both', 'fastmts', 'tf'),
                   default='both',
                   help='which implementation(s) to run (default '
                        '%(default)s; "both" runs tf first)')
    p.add_argument('--log-every', type=int, default=500, metavar='N',
                   help='print a progress line every N steps (default '
                        '%(default)s)')
    p.add_argument('--save-summaries-steps', type=int, default=100,
                   metavar='N', help='default %(default)s')
    p.add_argument('--save-checkpoint-steps', type=int, default=1000,
                   metavar='N', help='default %(default)s')
    p.add_argument('--seed', type=int, default=0,
                   help='data/initialisation seed (default %(default)s)')
    p.add_argument('--overhead-rounds', type=int, default=9, metavar='N',
                   help='rounds of the per-step cost of MonitoredTrainingSession '
                        'over a bare Session.run loop, measured after training '
                        '(0: not measured; default %(default)s)')
    p.add_argument('--overhead-steps', type=int, default=200, metavar='N',
                   help='steps per block of that measurement (default '
                        '%(default)s)')
    args = p.parse_args(argv)
    if args.overhead_rounds < 0:
        p.error('--overhead-rounds must not be negative')
    for name in ('steps', 'log_every', 'save_summaries_steps',
                 'save_checkpoint_steps', 'overhead_steps'):
        if getattr(args, name) <= 0:
            p.error('--%s must be positive' % name.replace('_', '-'))
    return args


def _fastmts_mts():
    """``fastmts.MonitoredTrainingSession`` or raise RuntimeError."""
    try:
        import fastmts
    except Exception as e:  # pragma: no cover - only when broken
        raise RuntimeError('cannot import fastmts: %s: %s'
                           % (type(e).__name__, e))
    mts = getattr(fastmts, 'MonitoredTrainingSession', None)
    if not callable(mts):
        raise RuntimeError('fastmts.MonitoredTrainingSession is not available '
                           '(is the package fully built and installed?)')
    return mts


def _start_step(ckpt_dir):
    """Global step of the latest checkpoint in ``ckpt_dir`` (0 if none)."""
    latest = tf.train.latest_checkpoint(ckpt_dir)
    if not latest:
        return 0
    try:
        return int(tf.train.load_variable(latest, 'global_step'))
    except Exception:  # no global_step in it: let TF restore and see
        return 0


def _dir_summary(path):
    latest = tf.train.latest_checkpoint(path)
    events = [f for f in os.listdir(path) if 'tfevents' in f]
    size = sum(os.path.getsize(os.path.join(path, f)) for f in events)
    return '%s, %d event file(s) (%.0f KB)' % (
        'checkpoint %s' % os.path.basename(latest) if latest
        else 'no checkpoint', len(events), size / 1024.0)


def train(impl, mts_factory, workdir, args):
    """One training run in a fresh graph; returns a result dict."""
    from fastmts import demo_model

    tag = '[%s]' % impl
    os.makedirs(workdir, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(args.seed)
        model = demo_model.build(seed=args.seed)
        tf.compat.v1.summary.scalar('loss', model.loss)
        tf.compat.v1.summary.scalar('accuracy', model.accuracy)
        start = _start_step(workdir)
        last_step = start + args.steps
        hooks = [tf.compat.v1.train.StopAtStepHook(last_step=last_step),
                 tf.compat.v1.train.NanTensorHook(model.loss)]
        print('%s training %s\n%s with %s -> %s'
              % (tag, model.description, tag, IMPL_LABELS[impl], workdir))
        if start:
            print('%s resuming from checkpoint at step %d' % (tag, start))
        sys.stdout.flush()

        t_setup = time.perf_counter()
        sess = mts_factory(
            checkpoint_dir=workdir, hooks=hooks,
            save_summaries_steps=args.save_summaries_steps,
            save_checkpoint_steps=args.save_checkpoint_steps)
        setup_s = time.perf_counter() - t_setup
        step = start
        fetches = [model.train_op, model.loss]
        recent = collections.deque(maxlen=FINAL_LOSS_WINDOW)
        interval_loss = 0.0
        try:
            t0 = t_mark = time.perf_counter()
            step_mark = step
            while not sess.should_stop():
                _, loss = sess.run(fetches)
                recent.append(loss)
                interval_loss += loss
                step += 1
                if step % args.log_every == 0:
                    now = time.perf_counter()
                    n = step - step_mark
                    print('%s step %7d  %8.0f steps/s  loss %.4f'
                          % (tag, step, n / (now - t_mark),
                             interval_loss / n), flush=True)
                    t_mark, step_mark, interval_loss = now, step, 0.0
            train_s = time.perf_counter() - t0
        finally:
            t_close = time.perf_counter()
            sess.close()  # runs the hooks' end(): final checkpoint, summaries
            close_s = time.perf_counter() - t_close
    steps = step - start
    print('%s done: %d steps in %.2f s (session setup %.2f s, close %.2f s); '
          '%s' % (tag, steps, train_s, setup_s, close_s,
                  _dir_summary(workdir)), flush=True)
    return {'impl': impl, 'start': start, 'steps': steps, 'seconds': train_s,
            'steps_per_s': steps / train_s if train_s > 0 else float('nan'),
            'loss': float(sum(recent) / len(recent)) if recent
            else float('nan'), 'setup_s': setup_s, 'close_s': close_s}


def _table(results):
    head = ['impl', 'steps', 'seconds', 'steps/s', 'final loss']
    rows = [[r['impl'], '%d' % r['steps'], '%.2f' % r['seconds'],
             '%.0f' % r['steps_per_s'], '%.4f' % r['loss']] for r in results]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]

    def fmt(cells):
        return '  '.join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    sep = '  '.join('-' * w for w in widths)
    return '\n'.join([fmt(head), sep] + [fmt(r) for r in rows])


def _print_comparison(results):
    """Stock against fastmts, when both ran: the speed ratio and whether the
    final losses match."""
    by = {r['impl']: r for r in results}
    if 'tf' in by and 'fastmts' in by:
        tf_r, fm_r = by['tf'], by['fastmts']
        ratio = fm_r['steps_per_s'] / tf_r['steps_per_s']
        print('\nfastmts/stock steps/s: %.2fx  (per step: %.1f us stock, '
              '%.1f us fastmts)'
              % (ratio, 1e6 / tf_r['steps_per_s'],
                 1e6 / fm_r['steps_per_s']))
        if (tf_r['start'], tf_r['steps']) == (fm_r['start'], fm_r['steps']):
            same = abs(tf_r['loss'] - fm_r['loss']) <= \
                1e-4 * max(1.0, abs(tf_r['loss']))
            print('final losses %s (same seeds, same steps)'
                  % ('match' if same else
                     'DIFFER: %.6f vs %.6f' % (tf_r['loss'], fm_r['loss'])))


def main(argv=None):
    """Trains the demo model with stock TF, then with fastmts, and prints
    their speeds side by side; returns the process exit status."""
    args = parse_args(argv)
    tf.compat.v1.disable_eager_execution()
    tf.get_logger().setLevel('ERROR')  # hide compat.v1 deprecation chatter

    impls = ['tf', 'fastmts'] if args.impl == 'both' else [args.impl]
    factories = {'tf': tf.compat.v1.train.MonitoredTrainingSession}
    if 'fastmts' in impls:
        try:
            factories['fastmts'] = _fastmts_mts()
        except RuntimeError as e:
            print('error: %s' % e, file=sys.stderr)
            return 2

    temporary = args.dir is None
    base = tempfile.mkdtemp(prefix='fastmts-demo-') if temporary \
        else os.path.abspath(args.dir)
    print('fastmts demo: TensorFlow %s, %d steps per implementation (%s)'
          % (tf.__version__, args.steps, ', '.join(impls)))
    print('checkpoints and summaries in %s%s; summaries every %d steps, '
          'checkpoints every %d steps'
          % (base, ' (temporary)' if temporary else '',
             args.save_summaries_steps, args.save_checkpoint_steps))
    print(flush=True)
    t_total = time.perf_counter()
    results = []
    overhead = None
    try:
        for impl in impls:
            try:
                results.append(train(impl, factories[impl],
                                     os.path.join(base, impl), args))
            except tf.compat.v1.train.NanLossDuringTrainingError as e:
                print('error: [%s] %s' % (impl, e), file=sys.stderr)
                return 1
            print(flush=True)
        if args.overhead_rounds:
            print('measuring what MonitoredTrainingSession costs per step '
                  '(%d rounds)...' % args.overhead_rounds, flush=True)
            overhead = demo_overhead.measure(
                {'Session.run': None, **{('stock' if k == 'tf' else k): f
                                         for k, f in factories.items()}},
                tempfile.mkdtemp(prefix='overhead-', dir=base), args)
    finally:
        if temporary:
            shutil.rmtree(base, ignore_errors=True)

    print(_table(results))
    _print_comparison(results)
    print('seconds = training loop only (session setup/close excluded); '
          'final loss = mean over the last %d steps; ' % FINAL_LOSS_WINDOW +
          'total wall time %.1f s' % (time.perf_counter() - t_total))
    if overhead:
        print()
        print(demo_overhead.report(*overhead, args))
    if temporary:
        print('(temporary directory %s removed)' % base)
    return 0


if __name__ == '__main__':
    sys.exit(main())
