"""What fastmts.patch() reaches: every place TensorFlow binds the public names.

Libraries build their sessions from TF's internal modules at call time
(tf_slim's training.train and evaluation.evaluate_once, TF's own
training.evaluation), so patch() must reach those modules too, unpatch()
must restore them all, and TF's own classes must keep working for code that
holds them from before. tf_slim is a test extra; its scenarios run once
stock and once patched and compare final step, checkpoints and summaries.
"""

import os
import sys
import types

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import coordinator as tf_coordinator
from tensorflow.python.training import evaluation as tf_evaluation
from tensorflow.python.training import monitored_session as tf_monitored_session
from tensorflow.python.training import training as tf_training
from tensorflow.python.training import training_util

from compat_utils import ckpt_files
from hook_test_utils import events

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(180)

_REPLACED = ('MonitoredTrainingSession', 'MonitoredSession', 'SingularMonitoredSession',
             'WorkerSessionCreator')


@pytest.fixture
def patched(fastmts):
  """fastmts.patch() for the test's length, undone even when it fails."""
  fastmts.patch()
  try:
    yield fastmts
  finally:
    fastmts.unpatch()


def _stock():
  return {name: getattr(tf_monitored_session, name) for name in _REPLACED}


def test_patch_reaches_tfs_internal_modules(fastmts):
  stock = _stock()
  assert stock['MonitoredSession'].__module__ == 'tensorflow.python.training.monitored_session'
  fastmts.patch()
  try:
    for name in _REPLACED:
      ours = getattr(fastmts, name)
      assert getattr(tf_monitored_session, name) is ours, name
      assert getattr(tf_training, name) is ours, name
      assert getattr(v1.train, name) is ours, name
      # `from ... import` reads the module attribute too.
      namespace = {}
      exec(f'from tensorflow.python.training.monitored_session import {name}', namespace)  # pylint: disable=exec-used
      assert namespace[name] is ours
    # TF's evaluation module reaches it through its monitored_session.
    assert tf_evaluation.monitored_session.MonitoredSession is fastmts.MonitoredSession
  finally:
    fastmts.unpatch()
  assert _stock() == stock
  for name in _REPLACED:
    assert getattr(tf_training, name) is stock[name]
    assert getattr(v1.train, name) is stock[name]
  assert type(tf_monitored_session) is types.ModuleType  # a plain module again


def test_tfs_classes_held_from_before_still_work_while_patched(patched):
  """A reference taken before patch() (the one exception: it stays TF's)
  builds TF's own session, whose code still finds TF's classes."""
  del patched
  stock_session = _stock()['MonitoredSession']
  stock_training_session = tf_monitored_session.__dict__['MonitoredTrainingSession']
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    train = v1.assign_add(gs, 1)
    with stock_session(hooks=[v1.train.StopAtStepHook(last_step=2)]) as sess:
      assert type(sess) is stock_session
      while not sess.should_stop():
        sess.run(train)
    with stock_training_session() as sess:
      assert type(sess).__module__ == 'tensorflow.python.training.monitored_session'


def test_unpatch_restores_modules_imported_while_patched(fastmts):
  """A TF module bound the patched name while patched (an import after
  patch()); unpatch() puts TF's class back there too."""
  fastmts.patch()
  late = types.ModuleType('tensorflow.python.fastmts_test_late_import')
  sys.modules[late.__name__] = late
  try:
    exec('from tensorflow.python.training.monitored_session import MonitoredSession',  # pylint: disable=exec-used
         late.__dict__)
    assert late.MonitoredSession is fastmts.MonitoredSession
  finally:
    fastmts.unpatch()
    del sys.modules[late.__name__]
  assert late.MonitoredSession is _stock()['MonitoredSession']


def test_unpatch_without_patch_is_a_no_op(fastmts):
  """unpatch() when nothing is patched (never, or undone already) changes
  nothing and raises nothing, as its docstring says."""
  before = _stock()
  fastmts.unpatch()
  fastmts.patch()
  fastmts.unpatch()
  fastmts.unpatch()
  assert not fastmts.is_patched()
  assert _stock() == before
  assert tf.compat.v1.train.MonitoredSession is before['MonitoredSession']


# ---------------------------------------------------------------------------
# tf_slim: training.train, then evaluation.evaluate_once, stock and patched
# ---------------------------------------------------------------------------


class _CoordinatorKinds(tf.compat.v1.train.SessionRunHook):
  """Records which Coordinator class each session it runs in has: fastmts's
  sessions give hooks fastmts's."""

  def __init__(self, kinds):
    self._kinds = kinds

  def after_create_session(self, session, coord):
    del session
    self._kinds.append(type(coord).__module__.split('.')[0])


def _slim_model():
  """A linear regression on fixed data; (loss, prediction, labels)."""
  x = tf.constant(np.linspace(-1, 1, 32, dtype=np.float32).reshape(32, 1))
  labels = 3.0 * x + 1.0
  w = v1.get_variable('w', [1, 1], initializer=v1.zeros_initializer())
  b = v1.get_variable('b', [1], initializer=v1.zeros_initializer())
  prediction = tf.matmul(x, w) + b
  loss = v1.losses.mean_squared_error(labels, prediction)
  return loss, prediction, labels


def _slim_train_and_evaluate(workdir, kinds):
  from tf_slim.training import training as slim_training  # pylint: disable=g-import-not-at-top
  import tf_slim.evaluation as slim_evaluation  # pylint: disable=g-import-not-at-top
  train_dir = os.path.join(workdir, 'train')
  eval_dir = os.path.join(workdir, 'eval')
  with tf.Graph().as_default():
    v1.set_random_seed(0)
    loss, _, _ = _slim_model()
    v1.summary.scalar('loss', loss)
    gs = v1.train.get_or_create_global_step()
    # The increment waits for the stock hooks' global-step read, so that
    # what they read does not race it (in TF as in fastmts).
    read = training_util._get_or_create_global_step_read()  # pylint: disable=protected-access
    update = slim_training.create_train_op(loss, v1.train.GradientDescentOptimizer(0.1),
                                           global_step=None)
    with tf.control_dependencies([read, update]):
      increment = v1.assign_add(gs, 1)
    with tf.control_dependencies([increment]):
      train_op = tf.identity(update)
    final_loss = slim_training.train(
        train_op, train_dir, save_summaries_steps=5,
        hooks=[v1.train.StopAtStepHook(num_steps=12), _CoordinatorKinds(kinds)])
  with tf.Graph().as_default():
    v1.train.get_or_create_global_step()
    _, prediction, labels = _slim_model()
    error, update = v1.metrics.mean_absolute_error(labels, prediction)
    v1.summary.scalar('eval_error', error)
    final = slim_evaluation.evaluate_once(
        '', v1.train.latest_checkpoint(train_dir), eval_dir, num_evals=3, eval_op=update,
        final_op=error, hooks=[_CoordinatorKinds(kinds)])
  return (float(final_loss), float(final), ckpt_files(train_dir),
          events(train_dir, rates=False), events(eval_dir))


def test_tf_slim_train_and_evaluate_once_run_on_fastmts_when_patched(fastmts, tmp_path):
  pytest.importorskip('tf_slim')
  stock_kinds, patched_kinds = [], []
  stock = _slim_train_and_evaluate(str(tmp_path / 'stock'), stock_kinds)
  fastmts.patch()
  try:
    ours = _slim_train_and_evaluate(str(tmp_path / 'patched'), patched_kinds)
  finally:
    fastmts.unpatch()
  assert stock_kinds == ['tensorflow', 'tensorflow']
  assert patched_kinds == ['fastmts', 'fastmts']  # both sessions were fastmts's
  assert ours == stock
  final_loss, final_error, checkpoints, _, _ = stock
  assert 'model.ckpt-12.index' in checkpoints
  assert 0 < final_loss < 5 and 0 < final_error < 3
