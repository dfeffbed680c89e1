"""CheckpointSaverHook run natively, compared with stock TF: the files saved
and the log lines, CheckpointSaverListeners' calls and stop requests,
restoring, max_to_keep through the Scaffold's saver, saves on a seconds
schedule, and a listener raising."""

import os

import numpy as np
import tensorflow as tf

from compat_utils import Raised, SessionInterface, ckpt_files, outcome
from hook_test_utils import (CREATED, STEPS_10, ckpt_names, in_dir, read_first_graph,
                             run_n_times, save_lines, tf_log, tick_runs)

v1 = tf.compat.v1


class _Listener(v1.train.CheckpointSaverListener):
  """Records its calls; after_save returns `stop(step)`."""

  def __init__(self, name, calls, stop=lambda step: None):
    self.name = name
    self.calls = calls
    self.stop = stop

  def begin(self):
    self.calls.append((self.name, 'begin'))

  def before_save(self, session, global_step_value):
    self.calls.append((self.name, 'before_save', int(global_step_value),
                       isinstance(session, SessionInterface)))

  def after_save(self, session, global_step_value):
    self.calls.append((self.name, 'after_save', int(global_step_value),
                       isinstance(session, SessionInterface)))
    return self.stop(global_step_value)

  def end(self, session, global_step_value):
    self.calls.append((self.name, 'end', int(global_step_value),
                       isinstance(session, SessionInterface)))


def _saver_every_3_steps(workdir, *listeners):
  """A CheckpointSaverHook saving into `workdir` every 3 steps."""
  return v1.train.CheckpointSaverHook(workdir, save_steps=3,
                                      listeners=list(listeners))


def _saves(name, *steps):
  out = []
  for s in steps:
    out += [(name, 'before_save', s, True), (name, 'after_save', s, True)]
  return out


def test_checkpoint_listeners_call_order(check):

  def scenario(impl, workdir):
    calls = []
    with tf.Graph().as_default(), tf_log() as lines:
      _, _, train = read_first_graph()
      hook = _saver_every_3_steps(workdir, _Listener('a', calls),
                                  _Listener('b', calls))
      with impl.MonitoredSession(hooks=[hook]) as sess:
        results = run_n_times(sess, train, 7)
        calls.append(('user', 'last run'))
    return results, calls, in_dir(workdir, lines), ckpt_files(workdir)

  def saves(s):  # every listener's before_save, then every after_save
    a, b = _saves('a', s), _saves('b', s)
    return [a[0], b[0], a[1], b[1]]

  check(scenario, expected=(
      STEPS_10[:7],
      [('a', 'begin'), ('b', 'begin')] + saves(0) + saves(3) + saves(6) +
      [('user', 'last run')] + saves(7) +
      [('a', 'end', 7, True), ('b', 'end', 7, True)],
      [('INFO', 'Create CheckpointSaverHook.')] + CREATED +
      save_lines([0, 3, 6, 7]),
      ['checkpoint', 'graph.pbtxt'] + ckpt_names(0, 3, 6, 7)))


def test_checkpoint_listener_after_save_stops_training(check):
  """after_save returning True stops training at the first save after
  session creation: the True returned for the save made in
  after_create_session (step 0) is ignored by TF."""

  def scenario(impl, workdir):
    calls = []
    with tf.Graph().as_default(), tf_log() as lines:
      _, _, train = read_first_graph()
      hook = _saver_every_3_steps(workdir,
                                  _Listener('a', calls, stop=lambda s: True))
      with impl.MonitoredSession(hooks=[hook]) as sess:
        results = []
        while not sess.should_stop() and len(results) < 10:
          results.append(sess.run(train))
        after = outcome(sess.run, train)
    return (results, after, calls, in_dir(workdir, lines),
            ckpt_files(workdir))

  check(scenario, expected=(
      STEPS_10[:3],
      Raised(RuntimeError, 'Run called even after should_stop requested.'),
      [('a', 'begin')] + _saves('a', 0, 3) + [('a', 'end', 3, True)],
      [('INFO', 'Create CheckpointSaverHook.')] + CREATED +
      save_lines([0, 3], stop_at=(0, 3), listener_class=_Listener),
      ['checkpoint', 'graph.pbtxt'] + ckpt_names(0, 3)))


def test_checkpoint_saver_restore_resumes_global_step(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      hook = v1.train.CheckpointSaverHook(workdir, save_steps=3)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        first = run_n_times(sess, train, 5)
    latest = os.path.basename(v1.train.latest_checkpoint(workdir))
    with tf.Graph().as_default():
      step, _, train = read_first_graph()
      saver = v1.train.Saver()
      with v1.Session() as plain:
        saver.restore(plain, v1.train.latest_checkpoint(workdir))
        restored = plain.run(step)
      hook = v1.train.CheckpointSaverHook(workdir, save_steps=3)
      creator = impl.ChiefSessionCreator(checkpoint_dir=workdir)
      with impl.MonitoredSession(session_creator=creator, hooks=[hook]) as sess:
        second = run_n_times(sess, train, 2)
    return (first, latest, restored, second,
            os.path.basename(v1.train.latest_checkpoint(workdir)),
            ckpt_files(workdir))

  check(scenario, expected=(
      STEPS_10[:5], 'model.ckpt-5', np.int64(5), STEPS_10[5:7],
      'model.ckpt-7', ['checkpoint', 'graph.pbtxt'] + ckpt_names(0, 3, 5, 7)))


def test_checkpoint_saver_max_to_keep_via_scaffold_saver(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      scaffold = impl.Scaffold(saver=v1.train.Saver(max_to_keep=2))
      hook = v1.train.CheckpointSaverHook(workdir, save_steps=2,
                                          scaffold=scaffold)
      creator = impl.ChiefSessionCreator(scaffold=scaffold)
      with impl.MonitoredSession(session_creator=creator, hooks=[hook]) as sess:
        results = run_n_times(sess, train, 7)
    state = v1.train.get_checkpoint_state(workdir)
    return (results, ckpt_files(workdir),
            [os.path.basename(p) for p in state.all_model_checkpoint_paths])

  check(scenario, expected=(
      STEPS_10[:7], ['checkpoint', 'graph.pbtxt'] + ckpt_names(6, 7),
      ['model.ckpt-6', 'model.ckpt-7']))


def test_checkpoint_saver_save_secs_controlled_time(check, monkeypatch):

  def scenario(impl, workdir):
    calls = []
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      hook = v1.train.CheckpointSaverHook(
          workdir, save_secs=5, listeners=[_Listener('a', calls)])
      results = tick_runs(impl, monkeypatch, train, hooks=[hook])
    return results, calls, ckpt_files(workdir)

  # Saved at creation (step 0, t=0), then at t=6 (step 4), t=12 (step 8),
  # and at the end (step 10).
  check(scenario, expected=(
      STEPS_10,
      [('a', 'begin')] + _saves('a', 0, 4, 8, 10) + [('a', 'end', 10, True)],
      ['checkpoint', 'graph.pbtxt'] + ckpt_names(0, 4, 8, 10)))


def test_checkpoint_saver_listener_raising_keeps_the_save_schedule(check):
  """TF moves the saver's timer before a listener raises; the native gate must
  follow TF's timer, so later saves fall on the same steps."""

  class RaisingOnce(v1.train.CheckpointSaverListener):

    def __init__(self):
      self.saves = []

    def after_save(self, session, global_step_value):
      self.saves.append(int(global_step_value))
      if global_step_value == 4 and self.saves.count(4) == 1:
        raise ValueError('listener failed at 4')

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      step = v1.train.get_or_create_global_step()
      train = v1.assign_add(step, 1)
      listener = RaisingOnce()
      hook = v1.train.CheckpointSaverHook(str(workdir), save_steps=2, listeners=[listener])
      errors = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(9):
          try:
            sess.run(train)
          except ValueError as e:
            errors.append(str(e))
      return listener.saves, errors

  check(scenario, expected=([0, 2, 4, 6, 8, 9], ['listener failed at 4']))
