"""FinalOpsHook run natively, compared with stock TF: the final ops' values
in each fetch form, and when end() does not run them (an error, the end
of the input)."""

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import outcome
from hook_test_utils import CREATED, STEPS_10, read_first_graph, run_n_times, tf_log

v1 = tf.compat.v1


@pytest.mark.parametrize('kind', ['tensor', 'list', 'dict', 'feed_dict'])
def test_final_ops_hook(check, kind):
  """final_ops run once in end(), on the state after training."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      step, loss, train = read_first_graph()
      gs = v1.train.get_global_step()
      final_step = tf.identity(gs.read_value(), name='final_step')
      feed_dict = None
      if kind == 'tensor':
        final_ops = final_step
      elif kind == 'list':
        final_ops = [final_step, tf.cast(final_step, tf.float32) * 0.25]
      elif kind == 'dict':
        final_ops = {'step': final_step, 'name': tf.constant('done')}
      else:
        q = v1.placeholder(tf.float32, (), name='q')
        final_ops = {'scaled': q * tf.cast(final_step, tf.float32)}
        feed_dict = {q: 10.0}
      hook = v1.train.FinalOpsHook(final_ops, final_ops_feed_dict=feed_dict)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        results = run_n_times(sess, [train, step, loss], 4)
        before_close = hook.final_ops_values
      after_close = hook.final_ops_values
    return [r[0] for r in results], before_close, after_close

  final = {
      'tensor': np.int64(4),
      'list': [np.int64(4), np.float32(1.0)],
      'dict': {'step': np.int64(4), 'name': b'done'},
      'feed_dict': {'scaled': np.float32(40.0)},
  }[kind]
  check(scenario, expected=(STEPS_10[:4], None, final))


def test_final_ops_hook_not_run_after_an_error(check):
  """When the with-block raises, MonitoredSession skips the hooks' end():
  the final ops never run."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      gs = v1.train.get_global_step()
      hook = v1.train.FinalOpsHook(tf.identity(gs.read_value()))
      err = None
      try:
        with impl.MonitoredSession(hooks=[hook]) as sess:
          sess.run(train)
          raise ValueError('user error')
      except ValueError as e:
        err = str(e)
    return err, hook.final_ops_values

  check(scenario, expected=('user error', None))


def test_final_ops_hook_out_of_range(check):
  """A final op exhausting its input: TF logs a warning and the error
  propagates out of close()."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      _, _, train = read_first_graph()
      it = v1.data.make_one_shot_iterator(tf.data.Dataset.range(0))
      hook = v1.train.FinalOpsHook(it.get_next())
      sess = impl.MonitoredSession(hooks=[hook])
      results = run_n_times(sess, train, 2)
      closed = outcome(sess.close)
    return (results, type(closed).__name__,
            getattr(closed, 'type', None), hook.final_ops_values,
            [(level, msg[:60]) for level, msg in lines])

  check(scenario, expected=(
      STEPS_10[:2], 'Raised', tf.errors.OutOfRangeError, None,
      CREATED + [('WARNING', 'An OutOfRangeError or StopIteration exception '
                  'is raised by t')]))
