"""Instructions per step in the training thread, counted by callgrind: a figure
that load does not move.

    python bench/instructions.py [--steps 2000] [--preset full] [--graph trivial]
                                 [--kinds fastmts,fastmts-loop,native] [BUILD_DIR ...]

Thread CPU time on a shared machine moves by several percent from one run to
the next; a change of a few dozen instructions a step (a lock, a copy) is
below that. Valgrind's callgrind counts the instructions themselves. For each
build (a directory an installed fastmts is in, as for compare_builds.py; none
given: the fastmts on sys.path) and each runner kind of bench/measure.py, one
process under callgrind builds the runner, runs 500 untimed steps (TF's first
runs optimise the graph), has its counters zeroed, and runs STEPS steps. Only
the calling thread's instructions inside the step's native entry are counted
(--toggle-collect): FastRun::call for `run` (so the Python loop around it is
not), HookedSession::run_loop for `run_steps`, floor_loop for the floor.

By default the instructions inside TF_SessionRun are left out too
(a second --toggle-collect, which turns counting off for the call's
length): what is left is fastmts's own work a step, the same from one run
to the next. TF's part is not: its threads' waits spin for as long as the
other threads take, which moves the count by 1-2 % between runs of one
build (--with-tf counts it, as a check; docs/performance.md, "Instructions
per step").

Prints instructions per step per build and kind, and with the floor among
the kinds, each fastmts kind's excess over the floor of the same build. Needs valgrind (Debian: `apt-get
install valgrind`); one process takes 3 to 6 minutes, mostly TensorFlow's
import under valgrind.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# kind -> the native function whose calls are counted (callgrind pattern).
TOGGLES = {
    'fastmts': '*FastRun::call*',
    'fastmts-loop': '*HookedSession::run_loop*',
    'native': '*floor_loop*',
}
WARMUP_STEPS = 500


def child(args):
    """In the process under callgrind: warm up, say so, wait, run the steps."""
    sys.path.insert(0, HERE)
    import measure  # pylint: disable=import-outside-toplevel
    runner = measure.make_runner(args.kind, args.graph, args.preset)
    try:
        runner.block(WARMUP_STEPS)
        with open(args.ready, 'w') as f:
            f.write(str(os.getpid()))
        deadline = time.time() + 600
        while not os.path.exists(args.go):
            if time.time() > deadline:
                raise SystemExit('no go from the parent')
            time.sleep(0.05)
        runner.block(args.steps)
    finally:
        sys.stdout.flush()
        # Closing the session under valgrind takes minutes and counts nothing.
        os._exit(0)  # pylint: disable=protected-access


def count(build_dir, kind, args, log):
    """Instructions per step of `kind` on `build_dir` (None: sys.path's)."""
    with tempfile.TemporaryDirectory(prefix='fastmts-instructions-') as tmp:
        ready, go = os.path.join(tmp, 'ready'), os.path.join(tmp, 'go')
        out = os.path.join(tmp, 'callgrind.out')
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
        if build_dir:
            env['PYTHONPATH'] = os.pathsep.join(
                p for p in (build_dir, env.get('PYTHONPATH')) if p)
        # The real interpreter, not a shim script, so valgrind runs Python.
        python = os.path.realpath(sys.executable)
        toggles = ['--toggle-collect=' + TOGGLES[kind]]
        if not args.with_tf:
            toggles.append('--toggle-collect=TF_SessionRun')
        cmd = ['valgrind', '--tool=callgrind', '--collect-atstart=no'] + toggles + [
               '--callgrind-out-file=' + out,
               python, os.path.abspath(__file__), '--child', '--kind', kind,
               '--graph', args.graph, '--preset', args.preset,
               '--steps', str(args.steps), '--ready', ready, '--go', go]
        log('  %s %s' % (build_dir or 'sys.path', kind))
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, universal_newlines=True)
        try:
            deadline = time.time() + 1800
            while not os.path.exists(ready):
                if proc.poll() is not None or time.time() > deadline:
                    raise SystemExit('%s %s: the process under callgrind ended before its '
                                     'steps: %s' % (build_dir, kind, proc.stderr.read()[-2000:]))
                time.sleep(0.5)
            time.sleep(0.5)  # the file is written before the wait starts
            subprocess.run(['callgrind_control', '--zero', str(proc.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
            open(go, 'w').close()
            _, err = proc.communicate(timeout=1800)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        summaries = [line.split()[1] for name in os.listdir(tmp) if name.startswith('callgrind.out')
                     for line in open(os.path.join(tmp, name)) if line.startswith('summary:')]
        if not summaries:
            raise SystemExit('%s %s: callgrind wrote no counts: %s'
                             % (build_dir, kind, err[-2000:]))
        return sum(int(s) for s in summaries) / args.steps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('builds', nargs='*', help='directories holding an installed fastmts')
    p.add_argument('--steps', type=int, default=2000)
    p.add_argument('--graph', default='trivial')
    p.add_argument('--preset', default='full')
    p.add_argument('--kinds', default='fastmts,fastmts-loop,native')
    p.add_argument('--with-tf', action='store_true',
                   help='count the instructions inside TF_SessionRun too')
    p.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--kind', help=argparse.SUPPRESS)
    p.add_argument('--ready', help=argparse.SUPPRESS)
    p.add_argument('--go', help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    kinds = args.kinds.split(',')
    unknown = [k for k in kinds if k not in TOGGLES]
    if unknown:
        p.error('unknown kinds %s (known: %s)' % (unknown, ', '.join(TOGGLES)))
    for tool in ('valgrind', 'callgrind_control'):
        if subprocess.run(['which', tool], stdout=subprocess.DEVNULL).returncode != 0:
            raise SystemExit('%s not found: install valgrind' % tool)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    builds = args.builds or [None]
    counts = {(b, k): count(b, k, args, log) for b in builds for k in kinds}
    print('instructions per step, training thread, %s/%s, %d steps after %d, %s'
          % (args.graph, args.preset, args.steps, WARMUP_STEPS,
             'TF_SessionRun included' if args.with_tf else "TF_SessionRun's left out"))
    print('| build | %s |' % ' | '.join(kinds + ['%s - native' % k for k in kinds
                                              if k != 'native' and 'native' in kinds]))
    print('|---|%s' % ('---:|' * (len(kinds) + sum(k != 'native' for k in kinds)
                                  * ('native' in kinds))))
    for b in builds:
        cells = ['%.0f' % counts[(b, k)] for k in kinds]
        if 'native' in kinds:
            cells += ['%.0f' % (counts[(b, k)] - counts[(b, 'native')])
                      for k in kinds if k != 'native']
        print('| %s | %s |' % (b or 'sys.path', ' | '.join(cells)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
