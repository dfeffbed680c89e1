"""fastmts's own options as one value (fastmts.SessionOptions): given as
`options=` or as keywords, checked once, passed on by MonitoredTrainingSession
to MonitoredSession, and taken by SingularMonitoredSession too."""

import dataclasses
import os

import pytest
import tensorflow as tf

v1 = tf.compat.v1


def _train_until_interrupted(make_session, workdir):
  """Steps a counter until the 3rd step raises KeyboardInterrupt inside the
  `with` block; (the global step, the FinalOpsHook's value, the steps of
  the checkpoints in `workdir`)."""
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    train = v1.assign_add(gs, 1)
    final = v1.train.FinalOpsHook(gs)
    try:
      with make_session([final]) as sess:
        for _ in range(5):
          if sess.run(train) == 3:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
      pass
    state = v1.train.get_checkpoint_state(workdir) if workdir else None
    saved = sorted(int(p.rsplit('-', 1)[1]) for p in state.all_model_checkpoint_paths) if (
        state) else []
    return final.final_ops_values, saved


def test_keywords_and_options_are_one_value(fastmts, tmp_path):
  """end_on_interrupt, as a keyword and inside options=, on each class:
  Ctrl-C in the block still runs the hooks' end() (the final checkpoint,
  FinalOpsHook); without it (TF's behaviour) end() is skipped."""
  made = {
      'MonitoredTrainingSession': lambda d, **o: lambda hooks: fastmts.MonitoredTrainingSession(
          checkpoint_dir=d, hooks=hooks, save_checkpoint_steps=100, **o),
      'MonitoredSession': lambda d, **o: lambda hooks: fastmts.MonitoredSession(
          session_creator=fastmts.ChiefSessionCreator(checkpoint_dir=d), hooks=hooks + [
              v1.train.CheckpointSaverHook(d, save_steps=100)], **o),
      'SingularMonitoredSession': lambda d, **o: lambda hooks: fastmts.SingularMonitoredSession(
          hooks=hooks + [v1.train.CheckpointSaverHook(d, save_steps=100)], checkpoint_dir=d, **o),
  }
  for kind, make in made.items():
    ways = {
        'keyword': make(str(tmp_path / kind / 'keyword'), end_on_interrupt=True),
        'options': make(str(tmp_path / kind / 'options'),
                        options=fastmts.SessionOptions(end_on_interrupt=True)),
        'off': make(str(tmp_path / kind / 'off')),
    }
    got = {way: _train_until_interrupted(m, str(tmp_path / kind / way))
           for way, m in ways.items()}
    # The first checkpoint is the start's (step 0); end() saves step 3.
    assert got['keyword'] == got['options'] == (3, [0, 3]), (kind, got)
    assert got['off'] == (None, [0]), (kind, got)


def test_the_value_is_checked_once_with_tfs_error_types(fastmts):
  options = fastmts.SessionOptions
  with pytest.raises(TypeError, match=r'recovery must be a fastmts.RecoveryPolicy or None, '
                     r'got 3'):
    options(recovery=3)
  with pytest.raises(TypeError, match=r"end_on_interrupt must be a bool, got 'yes'"):
    options(end_on_interrupt='yes')
  with pytest.raises(TypeError, match=r'async_checkpoint must be a bool, got 1'):
    options(async_checkpoint=1)
  with pytest.raises(TypeError, match=r'preemption must be a bool, None or a '
                     r'fastmts.PreemptionPolicy, got 7'):
    options(preemption=7)
  with pytest.raises(TypeError, match=r'agreed_stop must be a fastmts.AgreedStop or None'):
    options(agreed_stop='horovod')
  value = options(preemption=True)
  assert isinstance(value.preemption, fastmts.PreemptionPolicy)
  assert options(preemption=False).preemption is None
  with pytest.raises(dataclasses.FrozenInstanceError):
    value.end_on_interrupt = True  # pylint: disable=assigning-non-slot
  assert options() == options(recovery=None, end_on_interrupt=False)


def test_each_class_refuses_what_it_cannot_take(fastmts):
  with tf.Graph().as_default():
    v1.train.get_or_create_global_step()
    # As Python's own error for an unknown keyword.
    with pytest.raises(TypeError, match=r"MonitoredTrainingSession\(\) got an unexpected "
                       r"keyword argument 'bogus'"):
      fastmts.MonitoredTrainingSession(bogus=1)
    # MonitoredTrainingSession's hook choices are not MonitoredSession's.
    with pytest.raises(TypeError, match=r"MonitoredSession\(\) got an unexpected keyword "
                       r"argument 'preemption'"):
      fastmts.MonitoredSession(preemption=True)
    with pytest.raises(TypeError, match=r"SingularMonitoredSession\(\) got an unexpected "
                       r"keyword argument 'async_checkpoint'"):
      fastmts.SingularMonitoredSession(async_checkpoint=True)
    with pytest.raises(TypeError, match=r'both as options= and as keywords \(recovery\)'):
      fastmts.MonitoredSession(options=fastmts.SessionOptions(),
                               recovery=fastmts.RecoveryPolicy())
    with pytest.raises(TypeError, match=r'options must be a fastmts.SessionOptions or None'):
      fastmts.MonitoredSession(options={'recovery': None})
    with pytest.raises(ValueError, match=r'never re-creates its session'):
      fastmts.SingularMonitoredSession(recovery=fastmts.RecoveryPolicy())


def test_training_session_passes_its_options_on(fastmts, tmp_path):
  """The value MonitoredTrainingSession made is the one its MonitoredSession
  runs with: async checkpoints choose fastmts's CheckpointSaverHook, and
  preemption adds its hook, last."""
  with tf.Graph().as_default():
    v1.train.get_or_create_global_step()
    with fastmts.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path), options=fastmts.SessionOptions(
            async_checkpoint=True, preemption=True)) as sess:
      kinds = [type(h).__name__ for h in sess._hooks]  # pylint: disable=protected-access
      savers = [h for h in sess._hooks if type(h).__name__ == 'CheckpointSaverHook']  # pylint: disable=protected-access
  assert kinds[-1] == 'PreemptionHook'
  assert len(savers) == 1 and type(savers[0]).__module__.startswith('fastmts')
  assert os.path.exists(os.path.join(str(tmp_path), 'checkpoint'))
