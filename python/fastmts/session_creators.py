"""Scaffold and session creators: TF's own.

Creating a session is rare and TF's SessionManager does it well (restore the
latest checkpoint or run init_op / init_fn, local_init_op, readiness checks,
a worker's wait for the chief), so fastmts uses TF's Scaffold and creators
as they are; any SessionCreator, TF's or the user's, can be given.
"""
from tensorflow.python.training.monitored_session import ChiefSessionCreator
from tensorflow.python.training.monitored_session import Scaffold
from tensorflow.python.training.monitored_session import SessionCreator
from tensorflow.python.training.monitored_session import WorkerSessionCreator

__all__ = ['Scaffold', 'SessionCreator', 'ChiefSessionCreator', 'WorkerSessionCreator']
