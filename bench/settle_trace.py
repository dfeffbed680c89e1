"""The per-step cost of the steps that follow a full gc.collect(), stretch by
stretch: why bench/measure.py settles each runner before timing a block.

For the hooked floor ('native-reads', preset 'full') and fastmts's native
loop on the same preset, on the trivial graph: rounds of gc.collect(), then
optionally SETTLE_SECONDS of untimed steps, then consecutive timed stretches
of --stretch steps. Prints the median microseconds per step of each stretch,
runners alternated round by round.

    python bench/settle_trace.py --rounds 16 --stretches 12
"""
import argparse
import gc
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402

KINDS = ('native-reads', 'fastmts-loop')


def trace(runners, rounds, stretches, stretch, settle_seconds):
    """{kind: [median us/step of stretch j after the collection]}."""
    samples = {kind: [[] for _ in range(stretches)] for kind in runners}
    inter = measure.Interleaver(runners)  # for its serpentine order only
    for i in range(rounds):
        for kind in inter.order(i):
            runner = runners[kind]
            gc.collect()
            if settle_seconds:
                measure.settle(runner, settle_seconds)
            for j in range(stretches):
                samples[kind][j].append(runner.block(stretch) / stretch * 1e6)
    return {kind: [statistics.median(s) for s in per] for kind, per in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rounds', type=int, default=16)
    parser.add_argument('--stretches', type=int, default=12)
    parser.add_argument('--stretch', type=int, default=100, help='steps per timed stretch')
    args = parser.parse_args()
    runners = {kind: measure.make_runner(kind, 'trivial', 'full') for kind in KINDS}
    try:
        for runner in runners.values():
            runner.block(1000)
        for settle_seconds in (0.0, measure.SETTLE_SECONDS):
            medians = trace(runners, args.rounds, args.stretches, args.stretch, settle_seconds)
            print('after gc.collect(), settled %.2f s; us/step per stretch of %d steps:'
                  % (settle_seconds, args.stretch))
            for kind, row in medians.items():
                print('  %-13s %s' % (kind, ' '.join('%5.1f' % v for v in row)))
    finally:
        for runner in runners.values():
            runner.close()


if __name__ == '__main__':
    main()
