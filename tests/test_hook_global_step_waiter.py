"""GlobalStepWaiterHook run natively, compared with stock TF: starting at
once, and waiting for another session to move the global step."""

import itertools
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from hook_test_utils import CREATED, run_n_times, tf_log

v1 = tf.compat.v1


_unique = itertools.count()


def _global_step_from(start_value, name='global_step'):
  """A resource int64 global step initialized to `start_value`; returns
  (global step variable, step read before the increment, train op)."""
  gs = v1.get_variable(
      name, shape=[], dtype=tf.int64,
      initializer=v1.constant_initializer(start_value), trainable=False,
      use_resource=True,
      collections=[v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.GLOBAL_STEP])
  step = tf.identity(gs.read_value(), name='step')
  with tf.control_dependencies([step]):
    train = v1.assign_add(gs, 1, name='train')
  return gs, step, train


@pytest.mark.parametrize('start_step,wait_until', [(0, 0), (5, 3), (5, 5),
                                                   (0, -2)])
def test_global_step_waiter_starts_immediately(check, start_step, wait_until):
  """wait_until_step <= 0 starts without a word; a global step already at or
  past it starts after logging the wait once."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default(), tf_log() as lines:
      _, step, train = _global_step_from(start_step)
      hook = v1.train.GlobalStepWaiterHook(wait_until_step=wait_until)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        began = time.monotonic()
        results = run_n_times(sess, [train, step], 3)
        quick = time.monotonic() - began < 0.45  # TF polls every 0.5 s
    return results, lines, quick

  waiting = ([('INFO', 'Waiting for global step %d before starting training.'
               % wait_until)] if wait_until > 0 else [])
  check(scenario, expected=(
      [[np.int64(start_step + i + 1), np.int64(start_step + i)]
       for i in range(3)], CREATED + waiting, True))


@pytest.mark.timeout(20)
def test_global_step_waiter_waits_for_another_session(check, local_server):
  """Training blocks in the first run until a plain Session on the same
  server (another thread) moves the global step to wait_until_step: the
  first train run then sees step 3."""
  target = local_server.target

  def scenario(impl, workdir):
    del workdir
    name = 'waiter_gs_%d' % next(_unique)  # variables outlive sessions
    with tf.Graph().as_default() as graph, tf_log() as lines:
      gs, step, train = _global_step_from(0, name=name)
      value = v1.placeholder(tf.int64, (), name='value')
      set_step = v1.assign(gs, value)
      hook = v1.train.GlobalStepWaiterHook(wait_until_step=3)
      running, stop = threading.Event(), threading.Event()
      set_steps, errors = [], []

      def advance():
        try:
          running.wait(10)
          with v1.Session(target, graph=graph) as other:
            for v in (1, 2, 3):
              if stop.wait(0.15):
                return
              other.run(set_step, feed_dict={value: v})
              set_steps.append(v)
        except Exception as e:  # pylint: disable=broad-except
          errors.append(repr(e))

      thread = threading.Thread(target=advance, daemon=True)
      try:
        with impl.MonitoredSession(
            session_creator=impl.ChiefSessionCreator(master=target),
            hooks=[hook]) as sess:
          thread.start()
          running.set()
          first = sess.run([train, step])
          rest = run_n_times(sess, [train, step], 2)
      finally:
        stop.set()
        running.set()
        thread.join(10)
    return first, rest, set_steps, errors, thread.is_alive(), lines

  check(scenario, expected=(
      [np.int64(4), np.int64(3)],
      [[np.int64(5), np.int64(4)], [np.int64(6), np.int64(5)]],
      [1, 2, 3], [], False,
      CREATED + [('INFO', 'Waiting for global step 3 before starting '
                  'training.')]))
