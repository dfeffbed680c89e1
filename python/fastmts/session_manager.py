"""TF's SessionManager, with a worker that notices the chief promptly.

A worker waiting for the chief to initialize the model checks, and if it is
not ready, sleeps `recovery_wait_secs` (30 s) before it checks again; a
worker that starts just before the chief idles 30 s. Here it checks again
after a short interval that doubles up to 1 s (never beyond
`recovery_wait_secs`, which keeps its meaning as the longest pause), so it
starts within about a second of the chief being ready. `max_wait_secs`
bounds the whole wait with TF's error; a stop the monitored session being
created was told to watch (its StopPolicy, session_layers) ends it with that
policy's error.
Everything else (initialization, restore, readiness checks) is TF's.
"""
import time

from tensorflow.python.client import session
from tensorflow.python.framework import errors
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import session_manager as _tf_session_manager

from fastmts import session_layers

# The first pause between readiness checks; each next one doubles, up to
# MAX_POLL_SECS (and never beyond recovery_wait_secs), so a worker starts
# within about a second of the chief being ready however long it waited.
FIRST_POLL_SECS = 0.05
MAX_POLL_SECS = 1.0


class SessionManager(_tf_session_manager.SessionManager):
  """`tf.compat.v1.train.SessionManager`; see the module docstring."""

  def wait_for_session(self, master, config=None, max_wait_secs=float('Inf')):
    """Creates a session once the model is ready (see TF's); polls with a
    growing interval capped at recovery_wait_secs."""
    self._target = master
    if max_wait_secs is None:
      max_wait_secs = float('Inf')
    start = time.time()
    pause = FIRST_POLL_SECS
    while True:
      sess = session.Session(self._target, graph=self._graph, config=config)
      not_ready_msg = None
      local_init_success, not_ready_local_msg = self._try_run_local_init_op(sess)
      if local_init_success:
        is_ready, not_ready_msg = self._model_ready(sess)
        if is_ready:
          return sess
      self._safe_close(sess)
      session_layers.raise_if_stopped('Waiting for the model to be ready')
      pause = min(pause, MAX_POLL_SECS, self._recovery_wait_secs)
      # TF's count-down: what remains is never below 0, so a NaN
      # max_wait_secs ends the wait (with TF's error) instead of never.
      remaining = max(0, max_wait_secs - (time.time() - start))
      if remaining - pause < 0:
        raise errors.DeadlineExceededError(
            None, None, 'Session was not ready after waiting %d secs.' % (max_wait_secs,))
      logging.info('Waiting for model to be ready.  Ready_for_local_init_op:  %s, ready: %s',
                   not_ready_local_msg, not_ready_msg)
      time.sleep(pause)  # a signal's handler runs in it, then it sleeps on
      session_layers.raise_if_stopped('Waiting for the model to be ready')
      pause *= 2
