"""Scaffold and session creators: TF's own, but a worker polls promptly.

Creating a session is rare and TF's SessionManager does it well (restore the
latest checkpoint or run init_op / init_fn, local_init_op, readiness checks),
so fastmts uses TF's Scaffold and ChiefSessionCreator as they are; any
SessionCreator, TF's or the user's, can be given. fastmts's
WorkerSessionCreator is TF's with the session manager of
fastmts.session_manager, which notices the chief being ready within about a
second instead of up to recovery_wait_secs (30 s).
"""
from tensorflow.python.framework import ops
from tensorflow.python.training import monitored_session as _tf_monitored_session

from fastmts import _tensorflow
from fastmts._internal import class_identity
from fastmts import session_manager

ChiefSessionCreator = _tf_monitored_session.ChiefSessionCreator
Scaffold = _tf_monitored_session.Scaffold
SessionCreator = _tf_monitored_session.SessionCreator


class WorkerSessionCreator(_tf_monitored_session.WorkerSessionCreator,
                           metaclass=class_identity.AbstractStandsFor,
                           stands_for=_tf_monitored_session.WorkerSessionCreator):
  """`tf.compat.v1.train.WorkerSessionCreator` (same arguments and behaviour),
  waiting for the chief with a short, growing poll interval."""

  def _get_session_manager(self):
    if self._session_manager:
      return self._session_manager
    feed = ({'local_init_feed_dict': self._scaffold.local_init_feed_dict}
            if _tensorflow.SCAFFOLD_TAKES_LOCAL_INIT_FEED_DICT else {})
    self._session_manager = session_manager.SessionManager(
        local_init_op=self._scaffold.local_init_op, **feed,
        ready_op=self._scaffold.ready_op,
        ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
        graph=ops.get_default_graph())
    return self._session_manager


__all__ = ['Scaffold', 'SessionCreator', 'ChiefSessionCreator', 'WorkerSessionCreator']
