"""Graph builders shared by the step benchmarks (bench/) and bench/report.py.

Every builder adds its ops to the *current default graph* and returns a
``Model`` with ``train_op``, ``loss`` and ``global_step``.  Nothing is fed:
the data are constants baked into the graph, so one ``run(train_op)`` measures
only the cost of a step (Python/session/hook overhead + the ops themselves).

Call a builder inside ``with tf.Graph().as_default():`` -- each benchmark
runner owns its own graph.
"""

import collections
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()

Model = collections.namedtuple('Model', ['train_op', 'loss', 'global_step'])


def trivial():
    """A near-empty step: ``assign_add`` on one variable + the global step."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    v = tf.compat.v1.get_variable(
        'v', shape=[], dtype=tf.float32,
        initializer=tf.compat.v1.zeros_initializer())
    bump = tf.compat.v1.assign_add(v, 1.0)
    step = tf.compat.v1.assign_add(global_step,
                                   tf.constant(1, dtype=global_step.dtype))
    train_op = tf.group(bump, step, name='train_op')
    # A "loss" for the hooks that want one (NanTensorHook, LoggingTensorHook):
    # a cheap read of the variable.
    loss = tf.identity(v, name='loss')
    return Model(train_op, loss, global_step)


def mlp(batch=32, n_in=64, n_hidden=128, n_out=10, learning_rate=0.01,
        seed=1234):
    """Small MLP on one fixed synthetic batch baked into the graph.

    batch 32, 64 inputs -> 128 hidden (relu) -> 10 logits, softmax
    cross-entropy, GradientDescent ``minimize(loss, global_step=...)``.
    """
    rng = np.random.RandomState(seed)
    x = tf.constant(rng.standard_normal((batch, n_in)).astype(np.float32),
                    name='x')
    y = tf.constant(rng.randint(0, n_out, size=batch).astype(np.int64),
                    name='y')
    global_step = tf.compat.v1.train.get_or_create_global_step()
    init = tf.compat.v1.glorot_uniform_initializer(seed=seed)
    zeros = tf.compat.v1.zeros_initializer()
    w1 = tf.compat.v1.get_variable('w1', [n_in, n_hidden], initializer=init)
    b1 = tf.compat.v1.get_variable('b1', [n_hidden], initializer=zeros)
    w2 = tf.compat.v1.get_variable('w2', [n_hidden, n_out], initializer=init)
    b2 = tf.compat.v1.get_variable('b2', [n_out], initializer=zeros)
    hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.matmul(hidden, w2) + b2
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                       logits=logits),
        name='loss')
    train_op = tf.compat.v1.train.GradientDescentOptimizer(
        learning_rate).minimize(loss, global_step=global_step,
                                name='train_op')
    return Model(train_op, loss, global_step)


BUILDERS = {
    'trivial': trivial,
    'mlp': mlp,
}
