"""Figures that pair the blocks of one round (bench/measure.py's Interleaver runs them back
to back). Imports nothing of TensorFlow, so that bench/compare_builds.py, which only reads
report.py's JSON, uses the same arithmetic as the benchmarks."""
import statistics


def paired_ratio(samples_a, samples_b):
    """Median over rounds of (a's block / b's block in the same round), or
    None when either is missing. Blocks of one round run back to back, so
    each ratio sees the same state of a noisy machine; the median of those
    moves much less between runs than the ratio of two medians taken over
    stretches the machine spent differently."""
    pairs = [a / b for a, b in zip(samples_a or [], samples_b or []) if b]
    return statistics.median(pairs) if pairs else None


def paired_difference(samples_a, samples_b):
    """Median over rounds of (a's block - b's block in the same round), for the
    same reason; None when either is missing."""
    pairs = [a - b for a, b in zip(samples_a or [], samples_b or [])]
    return statistics.median(pairs) if pairs else None
