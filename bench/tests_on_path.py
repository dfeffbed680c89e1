"""Puts the repository's tests/ on sys.path, once: the cluster benches start
their servers and workers with tests/cluster_utils.py (and Horovod's with
tests/horovod_utils.py). Imported for that effect, before those imports."""
import os
import sys

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'tests')
if TESTS not in sys.path:
  sys.path.insert(0, TESTS)
