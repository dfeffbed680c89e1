"""FeedFnHook run natively, compared with stock TF: feeds every step, feed_fn
read from the hook each step, a conflict with the caller's feed, a feed_fn
returning no mapping."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import Raised, outcome
from hook_test_utils import doubled, read_first_graph

v1 = tf.compat.v1


def test_feed_fn_hook_feeds_every_step(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      step, _, train = read_first_graph()
      x = v1.placeholder(tf.float32, (), name='x')
      y = v1.placeholder_with_default(tf.constant(-1, tf.int32), (), name='y')
      model = tf.identity(x * 2.0, name='model')
      counter = itertools.count(1)
      calls = []

      def feed_fn():
        value = next(counter)
        calls.append(value)
        return {x: float(value)}

      hook = v1.train.FeedFnHook(feed_fn)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        # The caller feeds another tensor; both feeds reach the run.
        results = [sess.run([train, step, model, y]) for _ in range(3)]
        results.append(sess.run([model, y], feed_dict={y: 7}))
    return results, calls

  check(scenario, expected=(
      [[np.int64(s + 1), np.int64(s), np.float32(2.0 * (s + 1)),
        np.int32(-1)] for s in range(3)] +
      # A fetched fed tensor comes back as the fed value as an array.
      [[np.float32(8.0), np.array(7, np.int32)]],
      [1, 2, 3, 4]))


def test_feed_fn_hook_reads_feed_fn_each_step(check):
  """TF calls `hook.feed_fn` as found on the hook at each run: replacing it
  takes effect at the next run; a raising feed_fn fails that run only."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      x = v1.placeholder(tf.float32, (), name='x')
      model = tf.identity(x * 2.0, name='model')
      hook = v1.train.FeedFnHook(lambda: {x: 1.0})
      out = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        out.append(outcome(sess.run, [train, model]))
        hook.feed_fn = lambda: {x: 5.0}
        out.append(outcome(sess.run, [train, model]))

        def failing():
          raise KeyError('no more data')

        hook.feed_fn = failing
        out.append(outcome(sess.run, [train, model]))
        hook.feed_fn = lambda: {x: 7.0}
        out.append(outcome(sess.run, [train, model]))
    return out

  check(scenario, expected=[
      [np.int64(1), np.float32(2.0)], [np.int64(2), np.float32(10.0)],
      Raised(KeyError, "'no more data'"), [np.int64(3), np.float32(14.0)]])


@pytest.mark.parametrize('key', ['tensor', 'name'])
def test_feed_fn_hook_conflicts_with_caller_feed(check, key):
  """Feeding the tensor the caller feeds: TF's RuntimeError.  A feed_fn
  keyed by the tensor's *name* is not detected as a conflict by TF (the dict
  keys differ); both feeds reach Session.run."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      read_first_graph()
      x = v1.placeholder(tf.float32, (), name='x')
      model = tf.identity(x * 2.0, name='model')
      hook_key = x if key == 'tensor' else 'x:0'
      hook = v1.train.FeedFnHook(lambda: {hook_key: 1.0})
      with impl.MonitoredSession(hooks=[hook]) as sess:
        return (outcome(sess.run, model, feed_dict={x: 5.0}),
                outcome(sess.run, model), sess.should_stop())

  first = {
      'tensor': Raised(RuntimeError, 'Same tensor is fed by a SessionRunHook '
                       "and user. Conflict(s): [<tf.Tensor 'x:0' shape=() "
                       'dtype=float32>]'),
      'name': np.float32(10.0),
  }[key]
  check(scenario, expected=(first, np.float32(2.0), False))


def test_feed_fn_hook_returning_no_mapping(check):
  """TF merges a hook's feeds as a mapping: a feed_fn returning pairs fails
  there, as any hook's feed_dict without keys() does."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = v1.placeholder(tf.float32, [], name='x')
      doubled = x * 2.0
      hook = v1.train.FeedFnHook(lambda: [(x, 1.0)])
      with impl.MonitoredSession(hooks=[hook]) as sess:
        return outcome(sess.run, doubled)

  check(scenario, expected=Raised(AttributeError, "'list' object has no attribute 'keys'"))
