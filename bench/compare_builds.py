"""Per-step figures of two fastmts builds, side by side in one run.

    python bench/compare_builds.py BEFORE_DIR AFTER_DIR [--runs 4] [-- report.py args]

Each DIR holds an installed fastmts package (``pip install --no-deps
--target DIR fastmts-*.whl``). bench/report.py runs alternately with each
build first on ``sys.path`` (before, after, after, before, ...), so drifts of
a shared machine's load fall on both alike. Per runner, the table gives each
build's median over its runs of report.py's median us/step, and of its ratio
to stock TF measured in the same report.py run, and of the training thread's
own CPU time per step (time.thread_time), and of that CPU time divided by
its floor's (the same TF runs in a C++ loop, bench/measure.py) in the same
rounds: the figure that cancels a machine's drift, since both builds' floors
are the same code. A runner missing from either build fails the comparison.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import pairing  # bench/pairing.py (this script's folder is on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))


def run_report(build_dir, report_args, log):
    """One bench/report.py run on `build_dir`'s fastmts; its JSON. A failed
    run (a runner missing from that build, say) ends the comparison with
    report.py's own reason."""
    with tempfile.TemporaryDirectory(prefix='fastmts-compare-') as tmp:
        out = os.path.join(tmp, 'report.json')
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(
            p for p in (build_dir, env.get('PYTHONPATH')) if p)
        cmd = [sys.executable, os.path.join(HERE, 'report.py'), '--quiet',
               '--json', out] + report_args
        log('  %s' % build_dir)
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=3600)
        if done.returncode != 0:
            lines = [l for l in done.stderr.splitlines() if l.strip()]
            raise SystemExit('report.py failed on %s (exit %d): %s'
                             % (build_dir, done.returncode, ' / '.join(lines[-3:])))
        with open(out) as f:
            return json.load(f)


def floor_of(runner):
    """The floor a runner's CPU per step is divided by: its preset's merged
    fetches in the C++ loop ('native/<preset>'), or the bare one ('native')
    for the runners of no preset."""
    return 'native/%s' % runner.split('/', 1)[1] if '/' in runner else 'native'


def per_runner(report):
    """(graph, runner) -> (us/step, ratio to stock of the same hooks, the
    training thread's CPU us/step, that CPU over its floor's in the same
    rounds)."""
    rows = {}
    for graph, raw in report['graphs'].items():
        med = raw['median_us']
        cpu = raw['thread_cpu_samples_us']
        for runner, us in med.items():
            hooks = runner.split('/', 1)[1] if '/' in runner else None
            stock = med['stock/%s' % hooks] if hooks else None
            rows[(graph, runner)] = (
                us, us / stock if stock else None, statistics.median(cpu[runner]),
                pairing.paired_ratio(cpu[runner], cpu[floor_of(runner)]))
    return rows


def table(before_runs, after_runs):
    """The Markdown table; fails when a runner is in one build's runs and not
    the other's."""
    keys = sorted(set().union(*[r.keys() for r in before_runs + after_runs]))
    for runs, name in ((before_runs, 'before'), (after_runs, 'after')):
        for run in runs:
            missing = [k for k in keys if k not in run]
            if missing:
                raise SystemExit('the %s build has no runner %s' % (
                    name, ', '.join('%s %s' % k for k in missing)))

    def median(runs, key, i):
        vals = [r[key][i] for r in runs if r[key][i] is not None]
        return statistics.median(vals) if vals else None

    def fmt(x, spec):
        return '-' if x is None else spec % x

    def change(a, b):
        return a / b if a is not None and b else None

    lines = ['| graph | runner | before us | after us | after/before '
             '| before x stock | after x stock | before CPU us | after CPU us '
             '| after/before CPU | before CPU / floor | after CPU / floor '
             '| after/before of CPU / floor |',
             '|---|---|' + '---:|' * 11]
    for key in keys:
        b = [median(before_runs, key, i) for i in range(4)]
        a = [median(after_runs, key, i) for i in range(4)]
        lines.append('| %s | %s | %s |' % (key[0], key[1], ' | '.join([
            fmt(b[0], '%.1f'), fmt(a[0], '%.1f'), fmt(change(a[0], b[0]), '%.2f'),
            fmt(b[1], '%.3f'), fmt(a[1], '%.3f'), fmt(b[2], '%.1f'), fmt(a[2], '%.1f'),
            fmt(change(a[2], b[2]), '%.2f'), fmt(b[3], '%.3f'), fmt(a[3], '%.3f'),
            fmt(change(a[3], b[3]), '%.3f')])))
    return '\n'.join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    report_args = []
    if '--' in argv:
        i = argv.index('--')
        argv, report_args = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('before', help='directory holding the "before" fastmts')
    p.add_argument('after', help='directory holding the "after" fastmts')
    p.add_argument('--runs', type=int, default=4,
                   help='report.py runs per build (default %(default)s)')
    args = p.parse_args(argv)
    for d in (args.before, args.after):
        if not os.path.isdir(os.path.join(d, 'fastmts')):
            p.error('%s holds no fastmts package' % d)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    before, after = [], []
    for i in range(args.runs):
        # before, after, after, before, ...: each build goes first as often.
        order = [(args.before, before), (args.after, after)]
        for build_dir, runs in (order if i % 2 == 0 else order[::-1]):
            log('run %d/%d:' % (i + 1, args.runs))
            runs.append(per_runner(run_report(build_dir, report_args, log)))
    print('## Two fastmts builds, per-step figures of bench/report.py\n')
    print('before: %s; after: %s; %d report.py runs each, alternated; '
          'medians over runs. CPU = the training thread\'s (time.thread_time) '
          'per step; / floor = over the floor\'s in the same rounds '
          '(native/<preset>; the bare native for runners of no preset).\n'
          % (args.before, args.after, args.runs))
    print(table(before, after))
    return 0


if __name__ == '__main__':
    sys.exit(main())
