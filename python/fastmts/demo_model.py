"""The small built-in model trained by ``python -m fastmts`` (fastmts-demo).

An MLP classifier on synthetic data: ``n_classes`` Gaussian blobs in
``n_features`` dimensions, overlapping enough that the loss settles well above
zero.  Only the class centers are stored in the graph (a small constant);
every step draws a fresh minibatch in-graph (random labels, center + unit
Gaussian noise), so nothing is fed, the graph stays small, and the training
loop is just ``run([train_op, loss])``.

All random ops have explicit seeds: two graphs built by :func:`build` with the
same arguments train identically, so the stock-TF and fastmts runs of the demo
should end at the same loss.

Build it inside a fresh graph (``with tf.Graph().as_default():``), with graph
(non-eager) mode on: ``tf.compat.v1.disable_eager_execution()``.
"""

import collections

import numpy as np
import tensorflow as tf

DemoModel = collections.namedtuple(
    'DemoModel', ['train_op', 'loss', 'accuracy', 'global_step', 'description'])


def make_centers(n_features=32, n_classes=4, spread=0.35, seed=0):
    """Class centers of the synthetic blobs, float32 ``[n_classes, d]``."""
    rng = np.random.RandomState(seed)
    return (rng.standard_normal((n_classes, n_features)) *
            spread).astype(np.float32)


def build(batch_size=64, hidden=(64, 64), learning_rate=0.001, momentum=0.9,
          n_features=32, n_classes=4, spread=0.35, seed=0):
    """Add the model to the default graph; return a :class:`DemoModel`."""
    global_step = tf.compat.v1.train.get_or_create_global_step()

    with tf.name_scope('data'):
        centers = tf.constant(make_centers(n_features, n_classes, spread,
                                           seed), name='centers')
        y = tf.random.uniform([batch_size], 0, n_classes, dtype=tf.int64,
                              seed=seed + 1, name='labels')
        x = tf.add(tf.gather(centers, y),
                   tf.random.normal([batch_size, n_features], seed=seed + 2),
                   name='features')

    h = x
    sizes = (n_features,) + tuple(hidden)
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = tf.compat.v1.get_variable(
            'dense%d/kernel' % i, [n_in, n_out],
            initializer=tf.compat.v1.glorot_uniform_initializer(
                seed=seed + 10 + i))
        b = tf.compat.v1.get_variable(
            'dense%d/bias' % i, [n_out],
            initializer=tf.compat.v1.zeros_initializer())
        h = tf.nn.relu(tf.matmul(h, w) + b)
    w = tf.compat.v1.get_variable(
        'logits/kernel', [sizes[-1], n_classes],
        initializer=tf.compat.v1.glorot_uniform_initializer(seed=seed + 99))
    b = tf.compat.v1.get_variable(
        'logits/bias', [n_classes], initializer=tf.compat.v1.zeros_initializer())
    logits = tf.matmul(h, w) + b

    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                       logits=logits),
        name='loss')
    accuracy = tf.reduce_mean(
        tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32),
        name='accuracy')
    optimizer = tf.compat.v1.train.MomentumOptimizer(learning_rate, momentum)
    train_op = optimizer.minimize(loss, global_step=global_step,
                                  name='train_op')
    description = (
        'MLP %s-%d on synthetic Gaussian blobs, batch %d, '
        'Momentum(lr=%g, momentum=%g)'
        % ('-'.join(str(s) for s in sizes), n_classes, batch_size,
           learning_rate, momentum))
    return DemoModel(train_op, loss, accuracy, global_step, description)
