"""fastmts exports TF's own stock hook classes (CheckpointSaverHook is TF's
class or its fastmts form, which takes async_checkpoint)."""

import tempfile

import tensorflow as tf

v1 = tf.compat.v1


# TF's hook classes that fastmts re-exports under the same names.
_STOCK_HOOK_NAMES = [
    'SummarySaverHook', 'FinalOpsHook', 'FeedFnHook', 'GlobalStepWaiterHook',
    'ProfilerHook', 'CheckpointSaverListener',
    'StepCounterHook', 'StopAtStepHook', 'NanTensorHook', 'LoggingTensorHook',
    'SecondOrStepTimer', 'NanLossDuringTrainingError',
]


def test_stock_hook_classes_reexported(check):

  def scenario(impl, workdir):
    del workdir
    return [(name, getattr(impl, name, None) is getattr(v1.train, name))
            for name in _STOCK_HOOK_NAMES]

  check(scenario, expected=[(name, True) for name in _STOCK_HOOK_NAMES])


def test_checkpoint_saver_hook_is_tfs_class_or_its_fastmts_form(check):
  """fastmts's CheckpointSaverHook subclasses TF's (it adds async_checkpoint)."""

  def scenario(impl, workdir):
    del workdir
    cls = impl.CheckpointSaverHook
    return issubclass(cls, v1.train.CheckpointSaverHook), isinstance(
        cls(tempfile.mkdtemp(), save_steps=1), v1.train.CheckpointSaverHook)

  check(scenario, expected=(True, True))
