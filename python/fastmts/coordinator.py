"""tf.compat.v1.train.Coordinator, with its state in native code.

Same API and semantics as TF's Coordinator: the first exception wins and is
re-raised by join(); clean-stop exceptions (OutOfRangeError by default) stop
without error; join() waits out a grace period and names the stragglers.
The stop flag, the first-error slot and waiting for stop are native
(_native.Coordinator), so native queue-runner threads and the native step
loop stop and report errors without the GIL; Python exceptions stay Python
objects here, and an error a native thread reported becomes the tf.errors
class TF would have raised.
"""
import contextlib
import sys
import threading
import time

from tensorflow.python.framework import errors
from tensorflow.python.framework import errors_impl
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import coordinator as _tf_coordinator
from tensorflow.python.util import compat

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import errors as fastmts_errors
from fastmts._internal import timeouts


def error_codes_of(exception_types):
  """The TF error codes whose exception classes are among `exception_types`.

  Entries that are not classes are skipped: TF's Coordinator accepts them
  and only fails (with Python's TypeError) when an error is filtered."""
  classes = tuple(t for t in exception_types if isinstance(t, type))
  # TF's table of error codes and their exception classes is private.
  return sorted(code for code, cls in errors_impl._CODE_TO_EXCEPTION_CLASS.items()  # pylint: disable=protected-access
                if issubclass(cls, classes))


class Coordinator(_tf_coordinator.Coordinator):
  """A coordinator for threads (see `tf.compat.v1.train.Coordinator`).

  A subclass of TF's only so that TF's and users' isinstance checks accept
  it: every method of TF's is defined here (a test checks), none of TF's
  code runs on it.
  """

  def __init__(self, clean_stop_exception_types=None):
    if clean_stop_exception_types is None:
      clean_stop_exception_types = (errors.OutOfRangeError,)
    self._clean_stop_exception_types = tuple(clean_stop_exception_types)
    self._lock = threading.Lock()
    self.native = _native.Coordinator()
    self.native.set_clean_stop_codes(error_codes_of(self._clean_stop_exception_types))
    self._exc_info_to_raise = None  # a Python exception's exc_info
    self._native_exception = None   # a native thread's error, as raised
    self._joined = False
    self._registered_threads = set()

  def _filter_exception(self, ex):
    ex2 = ex[1] if isinstance(ex, tuple) else ex
    if isinstance(ex2, self._clean_stop_exception_types):
      return None
    return ex

  def request_stop(self, ex=None):
    """Requests that the threads stop; `ex` (an exception or exc_info tuple)
    is kept if it is the first and not a clean-stop type."""
    with self._lock:
      ex = self._filter_exception(ex)
      # After join, nobody would see it: raise it here instead.
      if self._joined:
        if isinstance(ex, tuple):
          _tensorflow.coordinator_reraise(ex)
        elif ex is not None:
          _tensorflow.coordinator_reraise(sys.exc_info())
      if not self.native.should_stop():
        if ex and self.native.claim_error():
          if isinstance(ex, tuple):
            logging.info('Error reported to Coordinator: %s', compat.as_str_any(ex[1]),
                         exc_info=ex)
            self._exc_info_to_raise = ex
          else:
            logging.info('Error reported to Coordinator: %s, %s', type(ex),
                         compat.as_str_any(ex))
            self._exc_info_to_raise = sys.exc_info()
          if (len(self._exc_info_to_raise) != 3 or not self._exc_info_to_raise[0] or
              not self._exc_info_to_raise[1]):
            # TF means to record this misuse as a ValueError, but formats the
            # exc_info tuple with '%', which raises TypeError out of
            # request_stop before stop is set; fastmts does what TF does.
            try:
              raise ValueError('ex must be a tuple or sys.exc_info must return the current '
                               'exception: %s' % self._exc_info_to_raise)
            except ValueError:
              self._exc_info_to_raise = sys.exc_info()
        self.native.request_stop()

  def clear_stop(self):
    """Clears the stop flag (and the recorded exception)."""
    with self._lock:
      self._joined = False
      self._exc_info_to_raise = None
      self._native_exception = None
      self.native.clear_stop()

  def should_stop(self):
    """Whether stop was requested (a native read, no lock)."""
    return self.native.should_stop()

  @contextlib.contextmanager
  def stop_on_exception(self):
    """Context manager: an exception raised inside it requests stop with it."""
    try:
      yield
    except:  # pylint: disable=bare-except
      self.request_stop(ex=sys.exc_info())

  def wait_for_stop(self, timeout=None):
    """Waits (without the GIL) until stop is requested; False on timeout.

    `timeout` as TF's, which is threading.Event.wait's: None waits for
    stop, a timeout that is not positive (negative, zero, NaN) returns at
    once (TF's LooperThread passes negative ones when it runs behind), and
    one Python's lock cannot wait for raises its error."""
    if timeout is None:
      return self.native.wait_for_stop(None)
    if self.native.should_stop():
      return True  # Event.wait looks at the flag before the timeout
    if not timeout > 0:  # a non-number raises Python's TypeError here, as TF
      return self.native.should_stop()
    timeouts.check_lock_timeout(timeout)
    return self.native.wait_for_stop(float(timeout))

  def register_thread(self, thread):
    """Registers a Python thread for join(), as TF's Coordinator."""
    with self._lock:
      self._registered_threads.add(thread)

  def registered_threads(self):
    """The threads join() would wait for (a copy)."""
    with self._lock:
      return list(self._registered_threads)

  def _raise_first_exception(self):
    """Raises the first exception reported, if any (called with the lock)."""
    if self._exc_info_to_raise:
      _tensorflow.coordinator_reraise(self._exc_info_to_raise)  # as TF, even a None
    if self._native_exception is None:
      native = self.native.native_error()
      if native is None:
        return
      # As TF's queue runners see it (a callable's error): the bare message.
      # TF logs it from the failing thread; a native thread cannot take the
      # GIL, so the line is logged here, the first time it is seen.
      ex = fastmts_errors.from_status(fastmts_errors.StatusError(*native), None)
      logging.info('Error reported to Coordinator: %s, %s', type(ex), compat.as_str_any(ex))
      self._native_exception = ex
    raise self._native_exception

  def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
    """Waits for the threads to stop (see TF's Coordinator.join): raises the
    first exception reported, else RuntimeError naming threads still alive
    after the grace period (only logged with ignore_live_threads)."""
    with self._lock:
      if threads is None:
        threads = self._registered_threads
      else:
        threads = self._registered_threads.union(set(threads))
      threads = list(threads)
    while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
      pass
    # Growing sleeps within the grace period, as TF.
    stop_wait_secs = 0.001
    while any(t.is_alive() for t in threads) and stop_grace_period_secs >= 0.0:
      time.sleep(stop_wait_secs)
      stop_grace_period_secs -= stop_wait_secs
      stop_wait_secs = 2 * stop_wait_secs
      stop_wait_secs = max(min(stop_wait_secs, stop_grace_period_secs), 0.001)
    stragglers = [t.name for t in threads if t.is_alive()]
    with self._lock:
      self._joined = True
      self._registered_threads = set()
      self._raise_first_exception()
      if stragglers:
        if ignore_live_threads:
          logging.info('Coordinator stopped with threads still running: %s', ' '.join(stragglers))
        else:
          raise RuntimeError('Coordinator stopped with threads still running: %s' %
                             ' '.join(stragglers))

  @property
  def joined(self):
    """Whether join() has completed, as TF's Coordinator."""
    return self._joined

  def raise_requested_exception(self):
    """Raises the exception request_stop() recorded, if any."""
    with self._lock:
      self._raise_first_exception()
