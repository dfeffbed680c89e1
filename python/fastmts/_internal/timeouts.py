"""Timeouts as Python's threading primitives take them.

TF's Coordinator waits on a threading.Event and joins threading.Threads;
fastmts waits natively, so it applies the same rules itself: Event.wait
does not block for a timeout that is not positive (zero, negative, NaN),
and the values a blocking wait cannot represent raise the error Python's
lock raises for them (OverflowError beyond its clock, ValueError for NaN;
their wording varies between Python releases, so it is Python's own).
"""
import threading


def check_lock_timeout(timeout):
  """Raises what a blocking `Lock.acquire(True, timeout)` raises for
  `timeout`, if anything: a fresh lock is acquired at once for any timeout
  Python accepts."""
  lock = threading.Lock()
  lock.acquire(True, timeout)
  lock.release()
