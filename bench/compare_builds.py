"""Per-step figures of two fastmts builds, side by side in one run.

    python bench/compare_builds.py BEFORE_DIR AFTER_DIR [--runs 4] [-- report.py args]

Each DIR holds an installed fastmts package (``pip install --no-deps
--target DIR fastmts-*.whl``). bench/report.py runs alternately with each
build first on ``sys.path`` (before, after, after, before, ...), so drifts of
a shared machine's load fall on both alike. Per runner, the table gives each
build's median over its runs of report.py's median us/step, and of its ratio
to stock TF measured in the same report.py run, and of the training thread's
own CPU time per step (time.thread_time), the figure load moves least.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_report(build_dir, report_args, log):
    """One bench/report.py run on `build_dir`'s fastmts; its JSON."""
    with tempfile.TemporaryDirectory(prefix='fastmts-compare-') as tmp:
        out = os.path.join(tmp, 'report.json')
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(
            p for p in (build_dir, env.get('PYTHONPATH')) if p)
        cmd = [sys.executable, os.path.join(HERE, 'report.py'), '--quiet',
               '--json', out] + report_args
        log('  %s' % build_dir)
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                       timeout=3600)
        with open(out) as f:
            return json.load(f)


def per_runner(report):
    """(graph, runner) -> (us/step, ratio to stock of the same hooks, the
    training thread's CPU us/step)."""
    rows = {}
    for graph, raw in report['graphs'].items():
        med = raw['median_us']
        cpu = raw.get('thread_cpu_samples_us', {})
        for runner, us in med.items():
            if us is None:
                continue
            hooks = runner.split('/', 1)[1] if '/' in runner else None
            stock = med.get('stock/%s' % hooks) if hooks else None
            thread_cpu = (statistics.median(cpu[runner])
                          if cpu.get(runner) else None)
            rows[(graph, runner)] = (us, us / stock if stock else None,
                                     thread_cpu)
    return rows


def table(before_runs, after_runs):
    keys = sorted(set().union(*[r.keys() for r in before_runs + after_runs]))

    def median(runs, key, i):
        vals = [r[key][i] for r in runs if key in r and r[key][i] is not None]
        return statistics.median(vals) if vals else None

    def fmt(x, spec):
        return 'n/a' if x is None else spec % x

    def change(a, b):
        return a / b if a is not None and b else None

    lines = ['| graph | runner | before us | after us | after/before '
             '| before x stock | after x stock | before CPU us | after CPU us '
             '| after/before CPU |', '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|']
    for key in keys:
        b_us, a_us = median(before_runs, key, 0), median(after_runs, key, 0)
        b_x, a_x = median(before_runs, key, 1), median(after_runs, key, 1)
        b_cpu, a_cpu = median(before_runs, key, 2), median(after_runs, key, 2)
        lines.append('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |' % (
            key[0], key[1], fmt(b_us, '%.1f'), fmt(a_us, '%.1f'),
            fmt(change(a_us, b_us), '%.2f'), fmt(b_x, '%.3f'),
            fmt(a_x, '%.3f'), fmt(b_cpu, '%.1f'), fmt(a_cpu, '%.1f'),
            fmt(change(a_cpu, b_cpu), '%.2f')))
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
          'medians over runs.\n' % (args.before, args.after, args.runs))
    print(table(before, after))
    return 0


if __name__ == '__main__':
    sys.exit(main())
