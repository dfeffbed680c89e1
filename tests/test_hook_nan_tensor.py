"""NanTensorHook run natively (on a static float scalar loss), compared with
stock TF: failing or stopping on NaN, the loss kinds, and a loss given as a
name or a variable."""

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import Raised, outcome
from hook_test_utils import (CREATED, DIVERGED_ERROR, DIVERGED_WARNING, NAN_LOSS, nan_at,
                             step_graph, tf_log)

v1 = tf.compat.v1


STOPPED = Raised(RuntimeError, 'Run called even after should_stop requested.')


def run_until_stop(sess, fetches, max_runs):
  """Runs until should_stop(), recording (outcome, should_stop) per run; then
  one more run (which must be refused once stopped)."""
  record = []
  for _ in range(max_runs):
    if sess.should_stop():
      break
    record.append((outcome(sess.run, fetches), sess.should_stop()))
  record.append(('after stop', outcome(sess.run, fetches)))
  return record


def _nan_variable_graph(k):
  """The loss is a variable assigned (via tf.cond) NaN at step k."""
  gs = v1.train.get_or_create_global_step()
  step = tf.identity(gs.read_value(), name='step')
  loss_var = tf.Variable(0.0, name='loss_var')
  with tf.control_dependencies([step]):
    new = tf.cond(tf.equal(step, k), lambda: tf.constant(np.nan),
                  lambda: 1.0 / (1.0 + tf.cast(step, tf.float32)))
    assign = loss_var.assign(new)
  with tf.control_dependencies([assign]):
    loss = tf.identity(loss_var.read_value(), name='loss')
  with tf.control_dependencies([loss]):
    train = v1.assign_add(gs, 1, name='train')
  return step, loss, train


def _nan_graph(kind, nan_step):
  """A step graph whose loss turns NaN at `nan_step`, by tf.where or by a
  variable assigned NaN."""
  if kind == 'where':
    return step_graph(nan_at(nan_step))
  return _nan_variable_graph(nan_step)


# (dtype, static shape of the placeholder, value shape): the float scalars run
# natively, the others through Python.
_NAN_CASES = {
    'float64_scalar': (tf.float64, (), ()),
    'float16_scalar': (tf.float16, (), ()),
    'bfloat16_scalar': (tf.bfloat16, (), ()),
    'float32_shape_1': (tf.float32, (1,), (1,)),
    'float32_unknown_shape': (tf.float32, None, ()),
    'float32_shape_2': (tf.float32, (2,), (2,)),
    'int32_scalar': (tf.int32, (), ()),
}


@pytest.mark.parametrize('graph', ['where', 'variable'])
def test_nan_tensor_hook_fail(check, graph):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = _nan_graph(graph, 3)
      hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=True)
      runs = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(6):
          runs.append((outcome(sess.run, [train, step]), sess.should_stop()))
    return runs, lines

  ok = lambda s: ([np.int64(s + 1), np.int64(s)], False)
  check(scenario, expected=(
      [ok(0), ok(1), ok(2), (NAN_LOSS, False), ok(4), ok(5)],
      CREATED + [DIVERGED_ERROR]))


def test_nan_tensor_hook_fail_skips_later_hooks(check):
  """A raising NanTensorHook ends the step: later hooks' after_run are not
  called (the LoggingTensorHook after it does not count that iteration)."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = step_graph(nan_at(3))
      hooks = [v1.train.LoggingTensorHook({'step': step}, every_n_iter=2),
               v1.train.NanTensorHook(loss),
               v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=2)]
      runs = []
      with impl.MonitoredSession(hooks=hooks) as sess:
        for _ in range(7):
          runs.append(outcome(sess.run, train))
    return runs, lines

  check(scenario, expected=(
      [np.int64(1), np.int64(2), np.int64(3), NAN_LOSS, np.int64(5),
       np.int64(6), np.int64(7)],
      CREATED + [
          ('INFO', 'step = 0'), ('INFO', 'loss = 1.0'),
          ('INFO', 'step = 2 (x.xxx sec)'),
          ('INFO', 'loss = 0.33333334 (x.xxx sec)'),
          DIVERGED_ERROR,
          ('INFO', 'step = 4 (x.xxx sec)'),
          # The second logging hook missed step 3's after_run: its 4th
          # iteration is step 5.
          ('INFO', 'loss = 0.16666667 (x.xxx sec)'),
          ('INFO', 'step = 6 (x.xxx sec)'),
      ]))


@pytest.mark.parametrize('graph', ['where', 'variable'])
def test_nan_tensor_hook_stop(check, graph):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      step, loss, train = _nan_graph(graph, 3)
      hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=False)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        runs = run_until_stop(sess, [train, step], 8)
    return runs, lines

  ok = lambda s, stop=False: ([np.int64(s + 1), np.int64(s)], stop)
  check(scenario, expected=(
      [ok(0), ok(1), ok(2), ok(3, stop=True), ('after stop', STOPPED)],
      CREATED + [DIVERGED_WARNING]))


@pytest.mark.parametrize('case', sorted(_NAN_CASES))
def test_nan_tensor_hook_loss_kinds(check, case):
  dtype, static_shape, shape = _NAN_CASES[case]

  def scenario(impl, workdir):
    del workdir
    out = []
    with tf.Graph().as_default(), tf_log() as lines:
      p = v1.placeholder(dtype, static_shape, name='p')
      loss = tf.identity(p, name='loss')
      nan = np.nan if dtype.is_floating else 0
      for fail in (True, False):
        hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=fail)
        with impl.MonitoredSession(hooks=[hook]) as sess:
          for value in (1.0, nan, 2.0):
            feed = np.full(shape, value, dtype.as_numpy_dtype)
            out.append((fail, outcome(sess.run, loss, feed_dict={p: feed}),
                        sess.should_stop()))
            if sess.should_stop():
              break
    return out, lines

  np_type = dtype.as_numpy_dtype
  if case == 'float32_shape_2':
    # TF's `if np.isnan(results)` on a 2-element array.
    ambiguous = Raised(ValueError, 'The truth value of an array with more '
                       'than one element is ambiguous. Use a.any() or a.all()')
    expected = ([(True, ambiguous, False)] * 3 + [(False, ambiguous, False)] * 3,
                CREATED * 2)
  elif case == 'int32_scalar':
    expected = ([(fail, np.int32(v), False) for fail in (True, False)
                 for v in (1, 0, 2)], CREATED * 2)
  else:
    val = lambda v: np.full(shape, v, np_type) if shape else np_type(v)
    expected = ([(True, val(1.0), False), (True, NAN_LOSS, False),
                 (True, val(2.0), False),
                 (False, val(1.0), False), (False, val(np.nan), True)],
                CREATED + [DIVERGED_ERROR] + CREATED + [DIVERGED_WARNING])
  check(scenario, expected=expected)


@pytest.mark.parametrize('loss_kind', ['tensor_name', 'resource_variable',
                                       'ref_variable'])
def test_nan_tensor_hook_loss_given_as_name_or_variable(check, loss_kind):
  """TF's hook just fetches `loss_tensor`, so a tensor name or a Variable work
  as well as a Tensor."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      p = v1.placeholder(tf.float32, (), name='p')
      var = v1.Variable(1.0, name='v',
                        use_resource=loss_kind != 'ref_variable')
      assign = v1.assign(var, p)
      read = tf.identity(var.read_value(), name='loss_read')
      c = tf.constant(0, name='c')
      loss = read.name if loss_kind == 'tensor_name' else var
      hook = v1.train.NanTensorHook(loss, fail_on_nan_loss=True)
      out = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for value in (2.0, np.nan, 3.0):
          # Set the loss outside the hooks, then run a step.
          feed = {p: value}
          sess.run_step_fn(lambda step_context: step_context.session.run(  # pylint: disable=cell-var-from-loop
              assign, feed_dict=feed))
          out.append(outcome(sess.run, c))
    return out, lines

  check(scenario, expected=([np.int32(0), NAN_LOSS, np.int32(0)],
                            CREATED + [DIVERGED_ERROR]))
