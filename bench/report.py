"""Print a Markdown table of per-step costs: floors, stock MTS, fastmts.

    python bench/report.py [--steps N] [--repeats K] [--graphs trivial,mlp]
    python bench/report.py --queues [--queue-steps N] [--repeats K]

For each graph, every runner (floor C++, Session.run, stock and fastmts for
each hooks preset) is built once, then blocks of N steps are run alternately
-- one block of each runner per round, serpentine order, 1 warmup round, K
recorded rounds -- and the median per-step time of each runner is reported.
All the measuring code lives in bench/measure.py (shared with the pytest
benchmarks).  A runner that the installed fastmts cannot provide fails the
report (exit 2, naming it) before anything is measured; nothing is n/a.
``--queues`` prints the queue-fed benchmark (bench/queue_bench.py) instead.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import measure  # noqa: E402
import pairing  # noqa: E402


def _us(x):
    return '-' if x is None else '%.1f' % x


def _x(x):
    return '-' if x is None else '%.2fx' % x


def wanted_runners(graph):
    """(kind, hooks preset) of every runner measured on `graph`, in round
    order: each preset's floors next to its implementations, so the blocks a
    ratio pairs run close in time (on a VM the step's cost moves by 20 % from
    one second to the next)."""
    wanted = [('native', None), ('session', None)]
    for h in measure.PRESETS[graph]:
        wanted.append(('native', h))
        if h in measure.REREADS:
            wanted.append(('native-reads', h))
        wanted += [(kind, h) for kind in ('fastmts-loop', 'fastmts', 'stock')]
    return wanted


def require_runners(graphs):
    """Fails (measure.MissingRunner) before anything is measured when the
    fastmts on sys.path lacks a runner that the report names."""
    for graph in graphs:
        for kind, _ in wanted_runners(graph):
            measure.require(kind)


def measure_graph(graph, steps, repeats, log):
    """Interleaved samples of every runner of `graph`: (medians us/step,
    (min, max) us/step, per-round us/step, per-round thread CPU us/step),
    each keyed by runner name. Any runner failing to start or to run fails
    the report."""
    runners = {}
    try:
        for kind, hooks in wanted_runners(graph):
            key = kind if hooks is None else '%s/%s' % (kind, hooks)
            runners[key] = measure.make_runner(kind, graph, hooks)
        inter = measure.Interleaver(runners)
        t0 = time.perf_counter()

        def progress(i, n):
            log('  %s: round %d/%d (%.0f s)'
                % (graph, i, n, time.perf_counter() - t0))

        med = inter.measure(steps, repeats, warmup=1, progress=progress)
        spread = {k: inter.spread_us(k) for k in runners}
        samples = {k: [s * 1e6 for s in v] for k, v in inter.samples.items()}
        cpu = {k: [s * 1e6 for s in v] for k, v in inter.cpu_samples.items()}
    finally:
        for r in runners.values():
            r.close()
    return med, spread, samples, cpu


def _scenarios(results):
    """(graph, hooks preset) of every row, in the report's order."""
    return [(g, h) for g in results for h in measure.PRESETS[g]]


def table(results, samples):
    """The Markdown table; ``samples[graph][runner]`` are per-round us/step,
    which the ratio columns pair round by round (measure.paired_ratio)."""
    cols = ['scenario', 'floor: train_op', 'floor: merged fetches', 'Session.run',
            'stock MTS', 'fastmts run', 'fastmts run_steps',
            'stock/floor', 'fastmts/floor', 'run_steps/floor',
            'speedup (stock/fastmts)']
    lines = ['| ' + ' | '.join(cols) + ' |',
             '|' + '|'.join(['---'] + ['---:'] * (len(cols) - 1)) + '|']
    for graph, hooks in _scenarios(results):
        med, rounds = results[graph], samples[graph]

        def paired(a, b):
            return measure.paired_ratio(rounds[a], rounds[b])

        floor, stock, fast, loop = ('%s/%s' % (kind, hooks) for kind in (
            'native', 'stock', 'fastmts', 'fastmts-loop'))
        row = ['%s / %s' % (graph, hooks), _us(med['native']), _us(med[floor]),
               _us(med['session']), _us(med[stock]), _us(med[fast]), _us(med[loop]),
               _x(paired(stock, floor)), _x(paired(fast, floor)),
               _x(paired(loop, floor)), _x(paired(stock, fast))]
        lines.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(lines)


def overhead_table(results, samples):
    """What MonitoredTrainingSession itself adds per step over a bare
    Session.run loop of the same model, stock and fastmts, in microseconds:
    the figure a model's own cost does not hide."""
    cols = ['scenario', 'Session.run', 'stock MTS', 'fastmts run',
            'stock MTS - Session.run', 'fastmts run - Session.run']
    lines = ['| ' + ' | '.join(cols) + ' |',
             '|' + '|'.join(['---'] + ['---:'] * (len(cols) - 1)) + '|']
    for graph, hooks in _scenarios(results):
        med, rounds = results[graph], samples[graph]
        stock, fast = 'stock/%s' % hooks, 'fastmts/%s' % hooks
        row = ['%s / %s' % (graph, hooks), _us(med['session']), _us(med[stock]), _us(med[fast])]
        row += ['%+.1f' % pairing.paired_difference(rounds[k], rounds['session'])
                for k in (stock, fast)]
        lines.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(lines)


def _summary_periods():
    """The summary fetch periods the floors traced from stock, per graph."""
    traced = measure.TRACED_SUMMARY_PERIODS
    if not traced:
        return 'none traced'
    return ', '.join('every %d steps on %s' % (period, graph)
                     for (graph, _), period in sorted(traced.items()))


def reread_table(results, samples):
    """The presets whose hooks re-read the global step, against the floor
    that also makes those re-reads (measure.REREADS): the hooked floor."""
    cols = ['scenario', "floor + hooks' re-reads", 'stock MTS', 'fastmts run',
            'fastmts run_steps', 'stock/it', 'fastmts/it', 'run_steps/it',
            'stock/fastmts']
    lines = ['| ' + ' | '.join(cols) + ' |',
             '|' + '|'.join(['---'] + ['---:'] * (len(cols) - 1)) + '|']
    for graph, hooks in _scenarios(results):
        if hooks not in measure.REREADS:
            continue
        med, rounds = results[graph], samples[graph]
        floor, stock, fast, loop = ('%s/%s' % (kind, hooks) for kind in (
            'native-reads', 'stock', 'fastmts', 'fastmts-loop'))
        row = ['%s / %s' % (graph, hooks)] + [
            _us(med[k]) for k in (floor, stock, fast, loop)] + [
            _x(measure.paired_ratio(rounds[k], rounds[floor]))
            for k in (stock, fast, loop)] + [
            _x(measure.paired_ratio(rounds[stock], rounds[fast]))]
        lines.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(lines)


def cpu_table(cpu):
    """Calling-thread CPU per step (``cpu[graph][runner]``: per-round
    us/step): the training thread's own work, fastmts's dispatch and its
    hooks' Python actions included, TF's executor threads excluded."""
    cols = ['scenario', 'floor', 'floor + re-reads', 'stock MTS', 'fastmts run',
            'fastmts run_steps', 'fastmts/floor', 'run_steps/floor',
            'run_steps/(floor + re-reads)']
    lines = ['| ' + ' | '.join(cols) + ' |',
             '|' + '|'.join(['---'] + ['---:'] * (len(cols) - 1)) + '|']
    for graph, hooks in _scenarios(cpu):
        rounds = cpu[graph]
        floor, reads, stock, fast, loop = ('%s/%s' % (kind, hooks) for kind in (
            'native', 'native-reads', 'stock', 'fastmts', 'fastmts-loop'))
        has_reads = hooks in measure.REREADS
        row = ['%s / %s' % (graph, hooks)] + [
            _us(statistics.median(rounds[k])) if k in rounds else _us(None)
            for k in (floor, reads, stock, fast, loop)]
        row += [_x(measure.paired_ratio(rounds[fast], rounds[floor])),
                _x(measure.paired_ratio(rounds[loop], rounds[floor])),
                _x(measure.paired_ratio(rounds[loop], rounds[reads]) if has_reads else None)]
        lines.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(lines)


_WORKLOADS = [g for g in measure.GRAPHS if g not in measure.TOY_GRAPHS]


def _block_text(steps):
    return ', '.join('%s %d' % (g, measure.models.block_steps(g, steps)) for g in _WORKLOADS) + \
        ' steps a block'


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--steps', type=int, default=measure.DEFAULT_STEPS,
                   help='steps per block (default %(default)s)')
    p.add_argument('--repeats', type=int, default=7,
                   help='recorded rounds per runner (default %(default)s)')
    p.add_argument('--graphs', default=','.join(measure.GRAPHS),
                   help='comma-separated subset of %s' % (measure.GRAPHS,))
    p.add_argument('--json', metavar='PATH',
                   help='also write medians and raw samples (us/step) here')
    p.add_argument('-q', '--quiet', action='store_true',
                   help='no progress on stderr')
    p.add_argument('--queues', action='store_true',
                   help='run the queue-fed benchmark (bench/queue_bench.py) '
                   'instead')
    p.add_argument('--queue-steps', type=int, default=None,
                   help='with --queues: steps per block (default 1000)')
    args = p.parse_args(argv)
    if args.queues:
        return _queues(args)
    graphs = [g for g in args.graphs.split(',') if g]
    for g in graphs:
        if g not in measure.GRAPHS:
            p.error('unknown graph %r' % g)

    def log(msg):
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    try:
        require_runners(graphs)
    except measure.MissingRunner as e:
        print('error: a runner of this report is missing: %s' % e, file=sys.stderr)
        return 2
    fast_state = 'fastmts %s' % measure.load_fastmts().__version__
    t0 = time.perf_counter()
    results, raw = {}, {}
    for g in graphs:
        log('measuring %s: %d rounds x %d steps per runner (%d on this graph), '
            'interleaved' % (g, args.repeats, args.steps,
                             measure.models.block_steps(g, args.steps)))
        med, spread, samples, cpu = measure_graph(g, args.steps, args.repeats, log)
        results[g] = med
        raw[g] = {'median_us': med, 'spread_us': spread, 'samples_us': samples,
                  'thread_cpu_samples_us': cpu}
    elapsed = time.perf_counter() - t0

    print('## fastmts per-step benchmark\n')
    print('TensorFlow %s, %s; %d steps/block, %d interleaved rounds '
          '(+1 warmup), medians; %.0f s total.\n'
          % (measure.tf.__version__, fast_state, args.steps, args.repeats,
             elapsed))
    samples = {g: raw[g]['samples_us'] for g in raw}
    print(table(results, samples))
    print('\nMicroseconds per step (medians). floor = the same TF_SessionRun '
          'calls in a C++ loop, outputs dropped: of train_op alone on a plain '
          "Session, and, which the ratios use, on the preset's own "
          'MonitoredTrainingSession session, of train_op with the tensors its '
          "hooks fetch every step (the global-step read tensor; 'full' also "
          "the loss; 'summaries' the merged summaries on the steps stock's "
          'SummarySaverHook fetches them, %s), the hooks themselves never '
          'running.' % _summary_periods() +
          ' Ratios are medians of per-round '
          'ratios (blocks of one round run back to back). The workloads '
          '(%s) run %s.' % (', '.join(g for g in results if g in _WORKLOADS) or 'none here',
                            _block_text(args.steps)))
    print('\nhooks: `stop` = [StopAtStepHook] only, no checkpoint_dir; '
          '`full` = checkpoint_dir + MonitoredTrainingSession defaults + '
          'StopAtStepHook, NanTensorHook(loss), '
          'LoggingTensorHook(every_n_iter=1000); `summaries` = checkpoint_dir + '
          'MonitoredTrainingSession defaults with save_summaries_steps=%d, '
          '%d scalar summaries, StopAtStepHook.'
          % (measure.SUMMARY_PERIOD, measure.SUMMARIES))
    print('\nThe presets with default hooks against the hooked floor: the floor '
          "above plus the re-reads of the global step TF's StepCounterHook and "
          'SummarySaverHook make (full: %d per %d steps; summaries: one on '
          "each summary step and StepCounterHook's %d per %d; each a run of "
          'the read tensor alone in the calling thread, as fastmts makes '
          "them): TF work those hooks require. What remains is fastmts's "
          "dispatch and the hooks' actions (TF's Python where it runs, the "
          'event records).\n'
          % (len(measure.REREAD_AT), measure.REREAD_PERIOD,
             len(measure.SUMMARY_STEP_COUNTER_AT), measure.REREAD_PERIOD))
    print(reread_table(results, samples))
    print('\nWhat MonitoredTrainingSession itself costs per step over a bare '
          '`Session.run` loop of the same model, stock and fastmts, in the same '
          'run (microseconds; medians of the per-round differences). A '
          'negative figure: fastmts\'s native step beats even the Python '
          '`Session.run` it replaces.\n')
    print(overhead_table(results, samples))
    print('\nThe training thread\'s own CPU time per step in the same blocks '
          '(time.thread_time; TF\'s executor threads and the FileWriter\'s '
          'writer thread not counted): what fastmts adds in that thread, '
          'with far less noise than wall time on a shared machine. '
          '-: the preset has no re-reads.\n')
    print(cpu_table({g: raw[g]['thread_cpu_samples_us'] for g in raw}))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'tensorflow': measure.tf.__version__,
                       'fastmts': fast_state, 'steps': args.steps,
                       'repeats': args.repeats, 'graphs': raw}, f, indent=1)
    return 0


def _queues(args):
    """``--queues``: the queue-fed table of bench/queue_bench.py."""
    import queue_bench

    def log(msg):
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    text, raw = queue_bench.report(
        steps=args.queue_steps or queue_bench.DEFAULT_STEPS,
        repeats=args.repeats, log=log)
    print(text)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(raw, f, indent=1, default=str)
    return 0


if __name__ == '__main__':
    sys.exit(main())
