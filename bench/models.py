"""Graph builders shared by the step benchmarks (bench/) and bench/report.py.

Every builder adds its ops to the *current default graph* and returns a
``Model`` with ``train_op``, ``loss``, ``global_step`` and ``feed_dict``.

The toy graphs ('trivial', 'mlp') feed nothing: their data are constants baked
into the graph, so one ``run(train_op)`` measures only the cost of a step
(Python/session/hook overhead + the ops themselves). The workloads are the
loops TF1 code runs: numpy batches through ``feed_dict`` ('fed_mlp', a
'large_batch' of images, a small 'cnn') and a ``tf.data`` pipeline read
through an iterator ('dataset'). A fed model's ``feed_dict`` holds one batch,
made once and fed on every step by every runner alike (a loop that feeds a
new array each step pays the same conversion).

Call a builder inside ``with tf.Graph().as_default():`` -- each benchmark
runner owns its own graph.
"""

import collections
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()

Model = collections.namedtuple('Model', ['train_op', 'loss', 'global_step', 'feed_dict'],
                               defaults=[None])


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


def _dense(x, n_out, name, seed):
    init = tf.compat.v1.glorot_uniform_initializer(seed=seed)
    w = tf.compat.v1.get_variable(name + '/w', [int(x.shape[-1]), n_out], initializer=init)
    b = tf.compat.v1.get_variable(name + '/b', [n_out],
                                  initializer=tf.compat.v1.zeros_initializer())
    return tf.matmul(x, w) + b


def _classifier_step(logits, labels, learning_rate=0.01):
    global_step = tf.compat.v1.train.get_or_create_global_step()
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
        name='loss')
    train_op = tf.compat.v1.train.GradientDescentOptimizer(learning_rate).minimize(
        loss, global_step=global_step, name='train_op')
    return train_op, loss, global_step


def _fed_batch(shape, n_classes, seed):
    """Placeholders for one batch of float `shape` and its int64 labels, and a
    feed_dict of random values for them."""
    rng = np.random.RandomState(seed)
    x = tf.compat.v1.placeholder(tf.float32, shape, name='x')
    y = tf.compat.v1.placeholder(tf.int64, shape[:1], name='y')
    feed = {x: rng.standard_normal(shape).astype(np.float32),
            y: rng.randint(0, n_classes, size=shape[:1]).astype(np.int64)}
    return x, y, feed


def fed_mlp(batch=128, n_in=784, n_hidden=256, n_out=10, seed=1234):
    """The commonest TF1 loop: an MLP 784-256-10 fed batches of 128 x 784
    floats and their labels through feed_dict."""
    x, y, feed = _fed_batch([batch, n_in], n_out, seed)
    hidden = tf.nn.relu(_dense(x, n_hidden, 'hidden', seed))
    train_op, loss, global_step = _classifier_step(_dense(hidden, n_out, 'logits', seed), y)
    return Model(train_op, loss, global_step, feed)


def large_batch(batch=64, side=224, channels=3, n_out=10, seed=1234):
    """A large fed batch: 64 images of 224 x 224 x 3 floats (38.5 MB) a step,
    pooled to their channel means and classified; the step's cost is mostly
    moving the batch in."""
    x, y, feed = _fed_batch([batch, side, side, channels], n_out, seed)
    pooled = tf.reduce_mean(x, axis=[1, 2])
    train_op, loss, global_step = _classifier_step(_dense(pooled, n_out, 'logits', seed), y)
    return Model(train_op, loss, global_step, feed)


def cnn(batch=32, side=28, n_out=10, seed=1234):
    """A small CNN on fed 28 x 28 x 1 images: two 5x5 convolutions (16, 32
    filters) with 2x2 max pooling, then a dense layer."""
    x, y, feed = _fed_batch([batch, side, side, 1], n_out, seed)
    h = x
    for i, filters in enumerate((16, 32)):
        kernel = tf.compat.v1.get_variable(
            'conv%d/kernel' % i, [5, 5, int(h.shape[-1]), filters],
            initializer=tf.compat.v1.glorot_uniform_initializer(seed=seed + i))
        h = tf.nn.relu(tf.nn.conv2d(h, kernel, strides=[1, 1, 1, 1], padding='SAME'))
        h = tf.nn.max_pool2d(h, ksize=2, strides=2, padding='SAME')
    flat = tf.reshape(h, [batch, -1])
    train_op, loss, global_step = _classifier_step(_dense(flat, n_out, 'logits', seed), y)
    return Model(train_op, loss, global_step, feed)


def dataset(batch=128, n_in=784, n_hidden=256, n_out=10, seed=1234):
    """A tf.data pipeline read through an iterator: examples made by a map
    (stateless random features, labels from the index), batched and
    prefetched, into the MLP of fed_mlp. Nothing is fed."""
    def example(i):
        features = tf.random.stateless_normal([n_in], seed=tf.stack([i, seed]))
        return features, i % n_out

    data = (tf.data.Dataset.range(2 ** 62).map(example).batch(batch, drop_remainder=True)
            .prefetch(2))
    x, y = tf.compat.v1.data.make_one_shot_iterator(data).get_next()
    hidden = tf.nn.relu(_dense(x, n_hidden, 'hidden', seed))
    train_op, loss, global_step = _classifier_step(_dense(hidden, n_out, 'logits', seed), y)
    return Model(train_op, loss, global_step)


BUILDERS = {
    'trivial': trivial,
    'mlp': mlp,
    'fed_mlp': fed_mlp,
    'large_batch': large_batch,
    'dataset': dataset,
    'cnn': cnn,
}

# The share of a benchmark's steps per block that each graph runs, so that a
# block of every graph lasts a similar time (--steps 1000: about 20-200 ms).
BLOCK_SHARE = {
    'trivial': 1.0,
    'mlp': 1.0,
    'fed_mlp': 0.1,
    'large_batch': 0.01,
    'dataset': 0.03,
    'cnn': 0.02,
}


def block_steps(graph, steps):
    """Steps per block of `graph` for a benchmark of `steps` steps per block."""
    return max(3, int(round(steps * BLOCK_SHARE[graph])))
