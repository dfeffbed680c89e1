"""The SessionRunHook protocol: TF's own classes.

fastmts uses TF's SessionRunHook, SessionRunArgs, SessionRunContext and
SessionRunValues unchanged, so hooks written for tf.compat.v1.train (and
TF's stock hooks) work as they are, and a hook subclassing either package's
SessionRunHook is the same thing.
"""
from tensorflow.python.training.session_run_hook import SessionRunArgs
from tensorflow.python.training.session_run_hook import SessionRunContext
from tensorflow.python.training.session_run_hook import SessionRunHook
from tensorflow.python.training.session_run_hook import SessionRunValues

__all__ = ['SessionRunHook', 'SessionRunArgs', 'SessionRunContext', 'SessionRunValues']
