"""tf.estimator with fastmts.PreemptionHook in train(hooks=...): on stock TF
(TF's MonitoredSession runs the hook) and after fastmts.patch() (fastmts's
sessions run it), a SIGTERM inside step K ends train() after that step with
the step-K checkpoint, saved once, by the estimator's own CheckpointSaverHook.
Skipped where TF ships no estimator (from 2.16).
"""
import os
import signal

import pytest
import tensorflow as tf

fastmts = pytest.importorskip('fastmts')

try:
  import tensorflow_estimator  # pylint: disable=g-import-not-at-top,unused-import
  _estimator_v1 = tf.compat.v1.estimator
  _estimator_v1.RunConfig  # pylint: disable=pointless-statement  (loads the lazy module now)
except (ImportError, AttributeError) as _e:
  pytest.skip('tf.estimator is not available (tensorflow-estimator ships with TF up to 2.15; '
              'TF %s has none): %s: %s' % (tf.__version__, type(_e).__name__, _e),
              allow_module_level=True)

K = 6


def _model_fn(features, labels, mode):
  del features, labels
  gs = tf.compat.v1.train.get_or_create_global_step()
  w = tf.compat.v1.get_variable('w', [4], initializer=tf.compat.v1.zeros_initializer())
  with tf.control_dependencies([w.assign_add(tf.ones([4]))]):
    step = gs.assign_add(1)

  def maybe_kill(value):
    if int(value) == K:
      os.kill(os.getpid(), signal.SIGTERM)
    return value

  train_op = tf.compat.v1.py_func(maybe_kill, [step], tf.int64, stateful=True)
  return _estimator_v1.EstimatorSpec(mode, loss=tf.reduce_sum(w), train_op=train_op)


def _input_fn():
  return tf.data.Dataset.from_tensors(({'x': [0.0]}, [0.0])).repeat()


def _train(model_dir):
  config = _estimator_v1.RunConfig(save_checkpoints_steps=1000, save_summary_steps=1000,
                                   log_step_count_steps=1000)
  estimator = _estimator_v1.Estimator(_model_fn, model_dir=model_dir, config=config)
  hook = fastmts.PreemptionHook(model_dir)
  calls = []
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
  try:
    estimator.train(_input_fn, steps=100, hooks=[hook])
  finally:
    signal.signal(signal.SIGTERM, previous)
  state = tf.train.get_checkpoint_state(model_dir)
  steps = [int(p.rsplit('-', 1)[1]) for p in state.all_model_checkpoint_paths]
  reader = tf.compat.v1.train.NewCheckpointReader(state.model_checkpoint_path)
  return (steps, int(reader.get_tensor('global_step')), reader.get_tensor('w').tolist(),
          hook.preemption.step, os.path.basename(hook.preemption.checkpoint_path), calls)


@pytest.mark.timeout(120)
def test_estimator_train_stops_and_checkpoints_the_signalled_step(tmp_path):
  stock = _train(str(tmp_path / 'stock'))
  fastmts.patch()
  try:
    patched = _train(str(tmp_path / 'patched'))
  finally:
    fastmts.unpatch()
  expected = ([0, K], K, [float(K)] * 4, K, 'model.ckpt-%d' % K, [signal.SIGTERM])
  assert stock == expected
  assert patched == expected
