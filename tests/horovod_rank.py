"""One Horovod rank, for tests/test_horovod.py.

    horovodrun -np N -H localhost:N --gloo python tests/horovod_rank.py SCENARIO IMPL DIR

Horovod's TF1 recipes as its examples write them (examples/tensorflow/
tensorflow_mnist.py and the estimator example, ported to tf.compat.v1, synthetic
data): `hvd.DistributedOptimizer`, `hvd.BroadcastGlobalVariablesHook(0)`,
checkpoints on rank 0 only, the learning rate scaled by the number of ranks.
On TF >= 2.16, where Horovod 0.28.1 has no BroadcastGlobalVariablesHook, a hook
of the script's own does its work (broadcast_hook; docs/distributed.md).

IMPL: 'tf' (tf.compat.v1.train), 'fastmts' (fastmts.MonitoredTrainingSession)
or 'patched' (the stock code after fastmts.patch()).
SCENARIO:
  'mts'       MonitoredTrainingSession(checkpoint_dir=DIR/model on rank 0 only)
              with BroadcastGlobalVariablesHook(0), StopAtStepHook,
              LoggingTensorHook, summaries and checkpoints every 2 steps, each
              step fed a batch (feed_dict, as the example feeds its batches).
  'resume'    'mts' to step 4, then a new graph and session to step 8: rank 0
              restores its checkpoint, the broadcast gives the other ranks
              rank 0's variables.
  'run_steps' 'mts' with its steps run by sess.run_steps(train_op, max_steps=3,
              feed_dict=<one batch per call>) (IMPL 'tf': the same steps one
              by one, the same batches).
  'estimator' tf.compat.v1.estimator.Estimator(model_dir=DIR/model on rank 0,
              None elsewhere: a temporary directory) trained with
              numpy_input_fn (queue runners) and the broadcast hook; IMPL 'tf'
              or 'patched'.

Every rank works in DIR/rank<r> (its cwd and TMPDIR: whatever it writes outside
rank 0's model directory lands there) and writes its result, JSON, to
DIR/results/rank<r>.json: the loss of every step, the variables after the
broadcast (at session creation) and at the end, the session's module.

Every rank's initial variables differ (their values depend on the rank): only
the broadcast makes them equal. Each rank's data differ too; the gradients are
averaged over the ranks by Horovod's allreduce.
"""

import json
import os
import sys
import tempfile
import threading
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

FEATURES, CLASSES, BATCH = 8, 3, 4
LAST_STEP = 6
RESUME_STEPS = (4, 8)
CHUNK = 3  # run_steps' max_steps


def _watchdog(parent_pid, max_secs):
  """Exits this rank when the test process is gone or after max_secs, so that
  no rank outlives a test that was killed."""
  deadline = time.monotonic() + max_secs
  while time.monotonic() < deadline:
    try:
      os.kill(parent_pid, 0)
    except ProcessLookupError:
      break
    time.sleep(0.5)
  os._exit(70)  # pylint: disable=protected-access


def _start_watchdog():
  parent = int(os.environ.get('FASTMTS_HOROVOD_TEST_PID', '0'))
  if parent:
    threading.Thread(target=_watchdog, daemon=True, name='horovod-rank-watchdog',
                     args=(parent, float(os.environ.get('FASTMTS_HOROVOD_MAX_SECS', '600')))
                     ).start()


def _batch(rank, index):
  """The rank's synthetic batch number `index`: (images, labels)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(1000 * rank + index)
  return (rng.standard_normal((BATCH, FEATURES)).astype(np.float32),
          rng.randint(0, CLASSES, size=BATCH).astype(np.int64))


def _initial(rank, shape, salt):
  import numpy as np  # pylint: disable=g-import-not-at-top
  return np.random.RandomState(100 + 10 * rank + salt).standard_normal(shape).astype(np.float32)


def _model(tf, hvd, image, label):
  """(loss, train_op) of the recipe: a softmax classifier, Adam with the
  learning rate times hvd.size(), wrapped in hvd.DistributedOptimizer."""
  rank = hvd.rank()
  w = tf.compat.v1.get_variable(
      'w', initializer=tf.constant(_initial(rank, (FEATURES, CLASSES), 1)))
  b = tf.compat.v1.get_variable('b', initializer=tf.constant(_initial(rank, (CLASSES,), 2)))
  logits = tf.matmul(image, w) + b
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=label, logits=logits), name='loss')
  tf.compat.v1.summary.scalar('loss', loss)
  opt = hvd.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer(0.01 * hvd.size()))
  global_step = tf.compat.v1.train.get_or_create_global_step()
  return loss, opt.minimize(loss, global_step=global_step)


def broadcast_hook(tf, hvd):
  """hvd.BroadcastGlobalVariablesHook(0), or where Horovod 0.28.1 does not
  define it (TF >= 2.16: it subclasses tf.estimator.SessionRunHook or
  tf.train.SessionRunHook, neither of which exists there) the same hook
  written on tf.compat.v1.train.SessionRunHook, as docs/distributed.md tells
  users to. (hook, 'horovod' or 'own')."""
  if hasattr(hvd, 'BroadcastGlobalVariablesHook'):
    return hvd.BroadcastGlobalVariablesHook(0), 'horovod'

  class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):

    def begin(self):
      self.bcast_op = hvd.broadcast_global_variables(0)

    def after_create_session(self, session, coord):
      session.run(self.bcast_op)

  return BroadcastGlobalVariablesHook(), 'own'


def _variables(tf, session):
  """Every global variable's value by name, lists of floats."""
  variables = tf.compat.v1.global_variables()
  return {v.op.name: value.tolist() for v, value in zip(variables, session.run(variables))}


def _recorder(tf, result, key):
  """A hook, after the broadcast hook, that records the variables the
  session starts with (after the broadcast) in result[key]."""

  class Recorder(tf.compat.v1.train.SessionRunHook):

    def after_create_session(self, session, coord):
      result[key] = _variables(tf, session)
      result['session_coordinator'] = type(coord).__module__

  return Recorder()


def _train(tf, hvd, impl, model_dir, last_step, result, key, steps_fn):
  """One MonitoredTrainingSession of the TF1 recipe to last_step; steps_fn
  (sess, train_op, loss, feeds) runs its steps."""
  with tf.Graph().as_default():
    image = tf.compat.v1.placeholder(tf.float32, [None, FEATURES], name='image')
    label = tf.compat.v1.placeholder(tf.int64, [None], name='label')
    loss, train_op = _model(tf, hvd, image, label)
    global_step = tf.compat.v1.train.get_global_step()
    broadcast, result['broadcast_hook'] = broadcast_hook(tf, hvd)
    hooks = [broadcast,
             tf.compat.v1.train.StopAtStepHook(last_step=last_step),
             tf.compat.v1.train.LoggingTensorHook(
                 tensors={'step': global_step, 'loss': loss}, every_n_iter=2),
             _recorder(tf, result, key + '_start')]
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                      inter_op_parallelism_threads=1)
    with impl.MonitoredTrainingSession(
        checkpoint_dir=model_dir if hvd.rank() == 0 else None, hooks=hooks, config=config,
        save_checkpoint_steps=2, save_summaries_steps=2, log_step_count_steps=2) as sess:
      result['session'] = type(sess).__module__
      feeds = lambda i: dict(zip((image, label), _batch(hvd.rank(), i)))
      result[key + '_returned'] = steps_fn(sess, train_op, loss, feeds)
      result[key + '_end'] = sess.run_step_fn(
          lambda step_context: _variables(tf, step_context.session))


def _step_by_step(sess, train_op, loss, feeds):
  losses = []
  while not sess.should_stop():
    losses.append(float(sess.run([train_op, loss], feed_dict=feeds(len(losses)))[1]))
  return losses


def _in_chunks(fastmts_run_steps):
  """Steps in chunks of CHUNK, one batch per chunk: sess.run_steps, or the
  same steps one by one (stock has no run_steps)."""

  def steps(sess, train_op, loss, feeds):
    returned, chunk = [], 0
    while not sess.should_stop():
      if fastmts_run_steps:
        last = sess.run_steps([train_op, loss], max_steps=CHUNK, feed_dict=feeds(chunk))
      else:
        last, n = None, 0
        while n < CHUNK and not sess.should_stop():
          last, n = sess.run([train_op, loss], feed_dict=feeds(chunk)), n + 1
      returned.append(None if last is None else float(last[1]))
      chunk += 1
    return returned

  return steps


def _mts(tf, hvd, impl, impl_name, root, result):
  _train(tf, hvd, impl, os.path.join(root, 'model'), LAST_STEP, result, 'run', _step_by_step)


def _resume(tf, hvd, impl, impl_name, root, result):
  for i, last_step in enumerate(RESUME_STEPS):
    _train(tf, hvd, impl, os.path.join(root, 'model'), last_step, result, 'run%d' % i,
           _step_by_step)


def _run_steps(tf, hvd, impl, impl_name, root, result):
  _train(tf, hvd, impl, os.path.join(root, 'model'), LAST_STEP, result, 'run',
         _in_chunks(impl_name != 'tf'))


def _estimator(tf, hvd, impl, impl_name, root, result):
  """Horovod's estimator recipe: model_dir on rank 0 only, the broadcast hook
  in train()'s hooks, the session config in the RunConfig."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  estimator = tf.compat.v1.estimator
  result['run_returned'] = losses = []

  class Recorder(tf.compat.v1.train.SessionRunHook):

    def __init__(self, loss):
      self._loss = loss

    def after_create_session(self, session, coord):
      result['run_start'] = _variables(tf, session)
      result['session_coordinator'] = type(coord).__module__

    def before_run(self, run_context):
      return tf.compat.v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
      losses.append(float(run_values.results))

  def model_fn(features, labels, mode):
    loss, train_op = _model(tf, hvd, features['x'], labels)
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                   training_hooks=[Recorder(loss)])

  batches = [_batch(hvd.rank(), i) for i in range(LAST_STEP)]
  train_input_fn = estimator.inputs.numpy_input_fn(
      x={'x': np.concatenate([x for x, _ in batches])},
      y=np.concatenate([y for _, y in batches]), batch_size=BATCH, num_epochs=None,
      shuffle=False)
  config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                    inter_op_parallelism_threads=1)
  est = estimator.Estimator(
      model_fn=model_fn, model_dir=os.path.join(root, 'model') if hvd.rank() == 0 else None,
      config=estimator.RunConfig(session_config=config, save_checkpoints_steps=2,
                                 save_summary_steps=2, log_step_count_steps=2))
  broadcast, result['broadcast_hook'] = broadcast_hook(tf, hvd)
  est.train(input_fn=train_input_fn, steps=LAST_STEP, hooks=[broadcast])
  result['run_end'] = {name: est.get_variable_value(name).tolist()
                       for name in est.get_variable_names()}
  result['session'] = result.get('session_coordinator')


SCENARIOS = {'mts': _mts, 'resume': _resume, 'run_steps': _run_steps,
             'estimator': _estimator}


def _impl(tf, impl_name):
  if impl_name == 'tf':
    return tf.compat.v1.train
  import fastmts  # pylint: disable=g-import-not-at-top
  if impl_name == 'fastmts':
    return fastmts
  fastmts.patch()
  return tf.compat.v1.train


def main():
  scenario, impl_name, root = sys.argv[1:4]
  _start_watchdog()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.compat.v1.disable_eager_execution()
  import horovod.tensorflow as hvd  # pylint: disable=g-import-not-at-top
  hvd.init()
  own = os.path.join(root, 'rank%d' % hvd.rank())
  os.makedirs(os.path.join(own, 'tmp'))
  os.chdir(own)
  os.environ['TMPDIR'] = tempfile.tempdir = os.path.join(own, 'tmp')
  result = {'rank': hvd.rank(), 'size': hvd.size(), 'impl': impl_name, 'error': None}
  try:
    SCENARIOS[scenario](tf, hvd, _impl(tf, impl_name), impl_name, root, result)
  except Exception as e:  # reported, not raised: the test reads the result
    import traceback  # pylint: disable=g-import-not-at-top
    result['error'] = {'type': type(e).__name__, 'message': str(e)[:2000]}
    traceback.print_exc()  # into horovodrun's output, which the test shows
  tf.compat.v1.summary.FileWriterCache.clear()  # every event written before the exit
  results = os.path.join(root, 'results')
  os.makedirs(results, exist_ok=True)
  with open(os.path.join(results, 'rank%d.json' % hvd.rank()), 'w') as f:
    json.dump(result, f)
  sys.exit(1 if result['error'] else 0)


if __name__ == '__main__':
  main()
