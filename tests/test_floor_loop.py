"""fastmts.benchmarking.native_floor_loop, the speed floor the benchmarks compare with
(bench/measure.py): it must run exactly the TF work it claims, since every
ratio in the README divides by it."""

import importlib

import pytest
import tensorflow as tf

from hook_test_utils import step_graph

v1 = tf.compat.v1


def floor_loop(*args, **kwargs):
  # A benchmark instrument, kept out of fastmts's public API.
  return importlib.import_module('fastmts.benchmarking').native_floor_loop(*args, **kwargs)


def _session_with_counter():
  """A session on step_graph plus `count`, a run of which adds 1 to
  `counted` (a side effect that shows how often it ran)."""
  _, _, train = step_graph()
  counted = v1.get_variable('counted', initializer=0, dtype=tf.int32, use_resource=True)
  count = v1.assign_add(counted, 1)
  sess = v1.Session()
  sess.run(v1.global_variables_initializer())
  return sess, train, counted, count


def test_runs_the_fetches_each_step(fastmts):
  with tf.Graph().as_default():
    sess, train, counted, _ = _session_with_counter()
    with sess:
      elapsed = floor_loop(sess, train, 37)
      assert elapsed > 0
      assert sess.run(v1.train.get_global_step()) == 37
      assert sess.run(counted) == 0


@pytest.mark.parametrize('steps, period, at, rereads', [
    # After steps 0, 1, 50, 100, 101, 150, 200, 201.
    (250, 100, (0, 1, 50), 8),
    # Two hooks re-reading after one step make two runs: twice after steps
    # 0, 9, 18; once after 4, 13.
    (20, 9, (0, 0, 4), 8),
])
def test_rereads_on_the_given_steps_of_each_period(fastmts, steps, period, at, rereads):
  with tf.Graph().as_default():
    sess, train, counted, count = _session_with_counter()
    with sess:
      floor_loop(sess, [train], steps, reread=count, reread_period=period,
                                reread_at=at)
      assert sess.run(v1.train.get_global_step()) == steps
      assert sess.run(counted) == rereads


@pytest.mark.parametrize('reread_at', [(100,), (-1,)])
def test_reread_steps_outside_the_period(fastmts, reread_at):
  with tf.Graph().as_default():
    sess, train, counted, count = _session_with_counter()
    with sess:
      with pytest.raises(ValueError, match='reread_at must lie in'):
        floor_loop(sess, train, 10, reread=count, reread_period=100,
                                  reread_at=reread_at)
      assert sess.run(v1.train.get_global_step()) == 0


def test_reread_period_must_be_positive(fastmts):
  with tf.Graph().as_default():
    sess, train, _, count = _session_with_counter()
    with sess:
      with pytest.raises(ValueError, match='reread_period must be > 0'):
        floor_loop(sess, train, 10, reread=count, reread_period=0, reread_at=())
      assert sess.run(v1.train.get_global_step()) == 0
