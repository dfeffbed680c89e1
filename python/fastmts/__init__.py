"""fastmts: a C++-accelerated drop-in for tf.compat.v1.train's MonitoredSession family.

    import fastmts
    with fastmts.MonitoredTrainingSession(checkpoint_dir=d, hooks=hooks) as sess:
      while not sess.should_stop():
        sess.run(train_op)
"""
from fastmts import _quiet_start

with _quiet_start.tf_logs_hidden_for_the_demo():  # python -m fastmts, fastmts-demo only
  from fastmts import _tensorflow  # first: checks the TF release, binds to it
from fastmts import _native  # pylint: disable=g-import-not-at-top,wrong-import-position


def _register_dtypes():
  """Teaches the native core the numpy dtype of every TF dtype that has one
  (bfloat16 and the quantized types included); strings are handled natively,
  resources and variants have none."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tensorflow.python.framework import dtypes  # pylint: disable=g-import-not-at-top
  for dtype in dtypes.__dict__.values():
    # TF's DType says whether it is a ref type only in _is_ref_dtype.
    if not isinstance(dtype, dtypes.DType) or dtype._is_ref_dtype:  # pylint: disable=protected-access
      continue
    try:
      np_dtype = dtype.as_numpy_dtype
    except (KeyError, TypeError):
      continue
    if np_dtype is not object:
      _native.register_numpy_dtype(dtype.as_datatype_enum, np.dtype(np_dtype))


_register_dtypes()

# pylint: disable=g-import-not-at-top,wrong-import-position
from fastmts.agreed_stop import AgreedStop
from fastmts.agreed_stop import AgreedStopRecord
from fastmts.agreed_stop import CollectiveEngine
from fastmts.agreed_stop import HorovodEngine
from fastmts.basic_session_run_hooks import CheckpointSaverHook
from fastmts.basic_session_run_hooks import CheckpointSaverListener
from fastmts.basic_session_run_hooks import FeedFnHook
from fastmts.basic_session_run_hooks import FinalOpsHook
from fastmts.basic_session_run_hooks import GlobalStepWaiterHook
from fastmts.basic_session_run_hooks import LoggingTensorHook
from fastmts.basic_session_run_hooks import NanLossDuringTrainingError
from fastmts.basic_session_run_hooks import NanTensorHook
from fastmts.basic_session_run_hooks import ProfilerHook
from fastmts.basic_session_run_hooks import SecondOrStepTimer
from fastmts.basic_session_run_hooks import StepCounterHook
from fastmts.basic_session_run_hooks import StopAtStepHook
from fastmts.basic_session_run_hooks import SummarySaverHook
from fastmts.coordinator import Coordinator
from fastmts.hook_costs import report_hook_costs
from fastmts.monitored_session import MonitoredSession
from fastmts.monitored_session import MonitoredTrainingSession
from fastmts.monitored_session import SingularMonitoredSession
from fastmts.monitored_session import USE_DEFAULT
from fastmts.preemption import Preempted
from fastmts.preemption import Preemption
from fastmts.preemption import PreemptionHook
from fastmts.preemption import PreemptionPolicy
from fastmts.recovery import RecoveryPolicy
from fastmts.session_creators import ChiefSessionCreator
from fastmts.session_creators import Scaffold
from fastmts.session_creators import SessionCreator
from fastmts.session_creators import WorkerSessionCreator
from fastmts.session_options import SessionOptions
from fastmts.session_run_hook import SessionRunArgs
from fastmts.session_run_hook import SessionRunContext
from fastmts.session_run_hook import SessionRunHook
from fastmts.session_run_hook import SessionRunValues
from fastmts.patching import is_patched
from fastmts.patching import patch
from fastmts.patching import unpatch

from fastmts._version import __version__

__all__ = [
    'MonitoredTrainingSession', 'MonitoredSession', 'SingularMonitoredSession', 'Scaffold',
    'SessionCreator', 'ChiefSessionCreator', 'WorkerSessionCreator', 'SessionRunHook',
    'SessionRunArgs', 'SessionRunContext', 'SessionRunValues', 'Coordinator',
    'StopAtStepHook', 'NanTensorHook', 'NanLossDuringTrainingError', 'LoggingTensorHook',
    'CheckpointSaverHook', 'CheckpointSaverListener', 'StepCounterHook', 'SummarySaverHook',
    'GlobalStepWaiterHook', 'FinalOpsHook', 'FeedFnHook', 'ProfilerHook', 'SecondOrStepTimer',
    'USE_DEFAULT', 'SessionOptions', 'RecoveryPolicy', 'PreemptionPolicy', 'PreemptionHook', 'Preemption',
    'Preempted', 'AgreedStop', 'AgreedStopRecord', 'CollectiveEngine', 'HorovodEngine',
    'patch', 'unpatch', 'is_patched', 'report_hook_costs',
]
