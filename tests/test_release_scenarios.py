"""What a user of any supported TF release runs first, side by side with that
release's own tf.compat.v1.train: the README's example, a 1,000-step
checkpoint_dir run with TF's stock hooks (in a `run` loop and in
`run_steps`), and a queue-fed run. Whatever TF is installed is the reference,
so on each release (CI runs the suite on the oldest, a middle and the newest)
fastmts must give that release's values, files, records and log lines."""

import os

import numpy as np
import tensorflow as tf
from tensorflow.python.training import training_util

from compat_utils import ckpt_files, run_steps_or_tf_loop
from hook_test_utils import events, tf_log

v1 = tf.compat.v1


def _regression(seed=7):
  """The README's model: a linear fit of random inputs, seeded. Returns the
  global step as read before this step's increment, the weights, the loss and
  the train op. The increment waits for every read of the step (the hooks'
  read tensor too), as under Estimator; otherwise which value a run fetches is
  a race, in TF as in fastmts."""
  v1.set_random_seed(seed)
  v1.train.get_or_create_global_step()
  step = tf.identity(training_util._get_or_create_global_step_read(), name='step')  # pylint: disable=protected-access
  x = tf.random.normal([32, 8], seed=1)
  w = v1.get_variable('w', [8, 1], initializer=v1.glorot_uniform_initializer(seed=2))
  loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0), name='loss')
  with tf.control_dependencies([step]):
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=v1.train.get_global_step())
  return step, w, loss, train_op


def test_readme_example(check):
  def scenario(impl, workdir):
    with tf.Graph().as_default():
      global_step, w, loss, train_op = _regression()
      hooks = [v1.train.StopAtStepHook(last_step=1000), v1.train.NanTensorHook(loss)]
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, hooks=hooks) as sess:
        while not sess.should_stop():
          sess.run(train_op)
      reader = v1.train.NewCheckpointReader(v1.train.latest_checkpoint(workdir))
      return (reader.get_tensor('global_step'), reader.get_tensor('w'), ckpt_files(workdir))

  step, w, files = check(scenario)
  assert step == 1000 and w.shape == (8, 1) and 'model.ckpt-1000.index' in files


def _stock_hooks_run(impl, workdir, loop):
  with tf.Graph().as_default():
    global_step, _, loss, train_op = _regression()
    v1.summary.scalar('loss', loss)
    hooks = [
        v1.train.StopAtStepHook(num_steps=1000),
        v1.train.NanTensorHook(loss),
        v1.train.LoggingTensorHook({'loss': loss, 'step': global_step}, every_n_iter=250),
        v1.train.CheckpointSaverHook(os.path.join(workdir, 'saver'), save_steps=300),
    ]
    with tf_log(workdir=workdir) as lines:
      with impl.MonitoredTrainingSession(
          checkpoint_dir=workdir, hooks=hooks, save_summaries_steps=200,
          log_step_count_steps=400, save_checkpoint_steps=500) as sess:
        last = loop(impl, sess, [global_step, loss, train_op])
    reader = v1.train.NewCheckpointReader(v1.train.latest_checkpoint(workdir))
    return (last[0], last[1], reader.get_tensor('w'), ckpt_files(workdir),
            ckpt_files(os.path.join(workdir, 'saver')), events(workdir, rates=False),
            [l for l in lines if 'sec' not in l[1]])


def _run_loop(impl, sess, fetches):
  del impl
  result = None
  while not sess.should_stop():
    result = sess.run(fetches)
  return result


def test_stock_hooks_run_loop(check):
  result = check(lambda impl, workdir: _stock_hooks_run(impl, workdir, _run_loop))
  assert result[0] == 999  # the step read before the 1,000th increment


def test_stock_hooks_run_steps(check):
  result = check(lambda impl, workdir: _stock_hooks_run(impl, workdir, run_steps_or_tf_loop))
  assert result[0] == 999


def test_queue_fed_run(check):
  """A FIFOQueue filled by one QueueRunner thread (one thread, so the order
  of the examples, and so every value, is fixed) feeding a small model."""
  def scenario(impl, workdir):
    with tf.Graph().as_default():
      global_step = v1.train.get_or_create_global_step()
      counter = v1.get_variable('counter', [], tf.float32, v1.zeros_initializer(),
                                use_resource=True)
      queue = v1.FIFOQueue(64, [tf.float32], shapes=[[4]])
      example = tf.stack([counter.assign_add(1.0)] * 4)
      v1.train.add_queue_runner(v1.train.QueueRunner(queue, [queue.enqueue(example)]))
      batch = queue.dequeue_many(8)
      w = v1.get_variable('w', [4, 1], initializer=v1.ones_initializer())
      loss = tf.reduce_mean(tf.square(tf.matmul(batch * 1e-3, w) - 1.0))
      train_op = v1.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
      hooks = [v1.train.StopAtStepHook(last_step=300)]
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, hooks=hooks,
                                         save_summaries_steps=None) as sess:
        batches = []
        while not sess.should_stop():
          batches.append(sess.run([batch, train_op])[0])
      reader = v1.train.NewCheckpointReader(v1.train.latest_checkpoint(workdir))
      return np.stack(batches), reader.get_tensor('w'), reader.get_tensor('global_step')

  batches, _, step = check(scenario)
  assert step == 300 and batches.shape == (300, 8, 4)
  assert (batches[:, :, 0].ravel() == np.arange(1, 2401)).all()  # every example once, in order
