"""One task of a tf.distribute multi-worker run, for tests/test_tf_distribute.py.

Started by cluster_utils.Cluster.start_worker(i, impl, options, script=<this
file>) with ``--cluster <json> --task_index <i> --impl <tf|fastmts> --options
<json>``. The cluster's tasks, in the order chief, worker (each list in
order), are numbered 0, 1, ...; task ``i`` is the i-th of them. Prints one
``CLUSTER_RESULT <json>`` line (cluster_utils' protocol).

options['scenario']:
  'collective': MultiWorkerMirroredStrategy (CollectiveAllReduceStrategy in
      graph mode) through the distribute coordinator in INDEPENDENT_WORKER
      mode, whose worker_fn trains with impl.MonitoredTrainingSession (so it
      takes the worker-context path); result: the loss every step returned
      (summed over the replicas) and the module of the session's class.
  'estimator': tf.estimator.train_and_evaluate with TF_CONFIG set from the
      cluster and RunConfig(train_distribute=MultiWorkerMirroredStrategy);
      with --impl fastmts, after fastmts.patch(); result: this task's own
      replica's loss every step, and the module of the session's Coordinator
      (a hook's).
options['model_dir']: the directory every task is given (its chief writes
there, the others in their tmp directories); options['last_step'].

The model: w (2 floats) = [1, 2], task k's input x = [0.5, 1] * (k + 1),
loss = sum(w * x), SGD with learning rate 0.25: the gradients are summed over
the replicas (the estimator averages them), every value a binary fraction, so
every worker's result is exact and the same on every run.
"""

import argparse
import json
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import cluster_utils  # pylint: disable=g-import-not-at-top,wrong-import-position

cluster_utils.start_watchdog()

LEARNING_RATE = 0.25
W0 = [1.0, 2.0]


def _args():
  p = argparse.ArgumentParser()
  p.add_argument('--cluster', required=True)
  p.add_argument('--task_index', type=int, required=True)
  p.add_argument('--impl', choices=['tf', 'fastmts'], required=True)
  p.add_argument('--options', default='{}')
  return p.parse_args()


def task_of(cluster, index):
  """(task_type, task_id) of the index-th task, chiefs first."""
  tasks = [(job, i) for job in ('chief', 'worker') for i in range(len(cluster.get(job, [])))]
  return tasks[index]


def _model(tf, x):
  """(loss, train_op) of one replica, under the strategy's scope."""
  w = tf.compat.v1.get_variable('w', initializer=tf.constant(W0))
  loss = tf.reduce_sum(w * x)
  tf.compat.v1.summary.scalar('replica_loss', loss)
  opt = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE)
  return loss, opt.minimize(loss, global_step=tf.compat.v1.train.get_or_create_global_step())


def _collective(tf, impl, cluster, task_type, task_id, opts):
  """MonitoredTrainingSession in the worker_fn of the distribute coordinator."""
  from tensorflow.python.distribute import distribute_coordinator as dc  # pylint: disable=g-import-not-at-top
  result = {'steps': []}

  def worker_fn(strategy):
    with tf.Graph().as_default():
      with strategy.scope():
        tf.compat.v1.train.get_or_create_global_step()
      x = tf.constant([0.5, 1.0]) * float(task_id + 1)

      def step_fn():
        loss, train_op = _model(tf, x)
        with tf.control_dependencies([train_op]):
          return tf.identity(loss)

      run = getattr(strategy, 'run', None) or strategy.experimental_run_v2
      with strategy.scope():
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, run(step_fn), axis=None)
      hooks = [tf.compat.v1.train.StopAtStepHook(last_step=opts['last_step'])]
      with impl.MonitoredTrainingSession(
          checkpoint_dir=opts['model_dir'], hooks=hooks, save_checkpoint_steps=2,
          save_summaries_steps=2, log_step_count_steps=2) as sess:
        result['session'] = type(sess).__module__
        while not sess.should_stop():
          result['steps'].append(float(sess.run(loss)))
          # Progress, for a hang's report.
          print(cluster_utils.EVENT_PREFIX + json.dumps({'step_loss': result['steps'][-1]}),
                flush=True)

  strategy = tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy()
  dc.run_distribute_coordinator(
      worker_fn, strategy, mode=dc.CoordinatorMode.INDEPENDENT_WORKER,
      cluster_spec=cluster, task_type=task_type, task_id=task_id, rpc_layer='grpc')
  return result


def _estimator(tf, impl_name, cluster, task_type, task_id, opts):
  """train_and_evaluate with TF_CONFIG and train_distribute."""
  os.environ['TF_CONFIG'] = json.dumps(
      {'cluster': cluster, 'task': {'type': task_type, 'index': task_id}})
  if impl_name == 'fastmts':
    import fastmts  # pylint: disable=g-import-not-at-top
    fastmts.patch()
  estimator = tf.compat.v1.estimator
  index = 0 if task_type == 'chief' else task_id + 1  # the k of the model's input

  def input_fn():
    x = tf.constant([[0.5, 1.0]]) * float(index + 1)
    return tf.compat.v1.data.Dataset.from_tensors(({'x': x}, tf.constant([0.0]))).repeat()

  result = {'steps': [], 'session': None}

  class Recorder(tf.compat.v1.train.SessionRunHook):
    """This replica's loss every step; the library of the session's
    Coordinator (a fastmts session gives its hooks fastmts's)."""

    def __init__(self, loss):
      self._loss = loss

    def after_create_session(self, session, coord):
      result['session'] = type(coord).__module__

    def before_run(self, run_context):
      return tf.compat.v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
      result['steps'].append(float(run_values.results))

  def model_fn(features, labels, mode):
    del labels
    loss, train_op = _model(tf, features['x'][0])
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                   training_hooks=[Recorder(loss)])

  config = estimator.RunConfig(
      model_dir=opts['model_dir'], save_checkpoints_steps=2, save_summary_steps=2,
      log_step_count_steps=2, tf_random_seed=1,
      train_distribute=tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy())
  est = estimator.Estimator(model_fn, config=config)
  estimator.train_and_evaluate(
      est, estimator.TrainSpec(input_fn, max_steps=opts['last_step']),
      estimator.EvalSpec(input_fn, steps=1))
  return result


def main():
  args = _args()
  opts = json.loads(args.options)
  cluster = json.loads(args.cluster)
  task_type, task_id = task_of(cluster, args.task_index)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.compat.v1.disable_eager_execution()
  result = {'task': [task_type, task_id], 'impl': args.impl, 'error': None}
  try:
    if opts['scenario'] == 'collective':
      impl = tf.compat.v1.train
      if args.impl == 'fastmts':
        import fastmts as impl  # pylint: disable=g-import-not-at-top
      result.update(_collective(tf, impl, cluster, task_type, task_id, opts))
    else:
      result.update(_estimator(tf, args.impl, cluster, task_type, task_id, opts))
  except Exception as e:  # reported, not raised: the test reads the result
    result['error'] = {'type': type(e).__name__, 'message': str(e)[:2000]}
  tf.compat.v1.summary.FileWriterCache.clear()  # every event written (closed) before the exit
  print(cluster_utils.RESULT_PREFIX + json.dumps(result), flush=True)
  # The distribute coordinator's server cannot be stopped: leave at once.
  os._exit(1 if result['error'] else 0)  # pylint: disable=protected-access


if __name__ == '__main__':
  main()
