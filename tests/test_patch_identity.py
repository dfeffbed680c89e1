"""isinstance and issubclass across fastmts.patch(), both ways.

patch() binds `tf.compat.v1.train.<Name>` (and TF's internal modules) to
fastmts's classes. Code then checks objects against those names: TF's
objects made before patch() (an estimator's CheckpointSaverHook), objects
made while patched, and classes subclassed from either. Every check that
holds on stock TF must hold patched, and again after unpatch(). The
estimator-like scenario shows what a failed check costs: a second saver,
every save made twice.
"""

import pytest
import tensorflow as tf
from tensorflow.python.training import basic_session_run_hooks as tf_hooks
from tensorflow.python.training import monitored_session as tf_monitored_session

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(120)

# The public classes patch() rebinds, as TF defines them.
_TF_CLASSES = {
    'MonitoredSession': tf_monitored_session.MonitoredSession,
    'SingularMonitoredSession': tf_monitored_session.SingularMonitoredSession,
    'WorkerSessionCreator': tf_monitored_session.WorkerSessionCreator,
    'CheckpointSaverHook': tf_hooks.CheckpointSaverHook,
}


def _module_of(name):
  """TF's internal module that defines `name` (patch() reaches it too)."""
  return tf_hooks if name.endswith('Hook') else tf_monitored_session


def _bare(cls):
  """An instance of `cls` without running its constructor (which would
  create sessions): isinstance needs only its class."""
  return object.__new__(cls)


def test_every_rebound_class_is_listed(fastmts):
  """The classes below are all the rebound names whose fastmts object is
  not TF's own (the others are TF's objects, trivially the same)."""
  from fastmts import patching  # pylint: disable=g-import-not-at-top
  differing = sorted(n for n in patching._NAMES  # pylint: disable=protected-access
                     if isinstance(getattr(fastmts, n), type) and
                     getattr(fastmts, n) is not getattr(tf_monitored_session, n, None) and
                     getattr(fastmts, n) is not getattr(tf_hooks, n, None))
  assert differing == sorted(_TF_CLASSES)


@pytest.mark.parametrize('name', sorted(_TF_CLASSES))
def test_checks_hold_both_ways_before_during_and_after_patch(fastmts, name):
  tf_class = _TF_CLASSES[name]
  ours = getattr(fastmts, name)

  class TFSubclass(tf_class):  # a user's subclass of TF's, made before patch()
    pass

  class OurSubclass(ours):  # a user's subclass of fastmts's
    pass

  made_before = [_bare(tf_class), _bare(TFSubclass)]

  def checks():
    public = getattr(v1.train, name)
    made_now = _bare(public)
    return {
        'tf object is a public': all(isinstance(o, public) for o in made_before),
        'tf class subclasses public': issubclass(tf_class, public) and issubclass(TFSubclass, public),
        'public object is a tf': isinstance(made_now, tf_class),
        'public subclasses tf': issubclass(public, tf_class),
        'fastmts object is a tf': isinstance(_bare(ours), tf_class),
        'tf object is a fastmts': isinstance(_bare(tf_class), ours),
        'tf module reads agree': issubclass(tf_class, getattr(_module_of(name), name)),
    }

  everything_holds = dict.fromkeys(checks(), True)
  assert checks() == everything_holds  # unpatched
  fastmts.patch()
  try:
    assert getattr(v1.train, name) is ours
    assert checks() == everything_holds
  finally:
    fastmts.unpatch()
  assert getattr(v1.train, name) is tf_class
  assert checks() == everything_holds
  # A user's subclass keeps the plain rules: TF's objects are not its instances.
  assert not isinstance(_bare(tf_class), OurSubclass)
  assert not issubclass(tf_class, OurSubclass)
  assert issubclass(OurSubclass, tf_class)


class _Listener(tf_hooks.CheckpointSaverListener):

  def __init__(self):
    self.saved = []

  def after_save(self, session, global_step_value):
    self.saved.append(global_step_value)


def _estimator_like_training(checkpoint_dir, hooks, listener):
  """What tf.estimator does: add a saver unless the hooks have one, checked
  against the public name at call time."""
  hooks = list(hooks)
  if not any(isinstance(h, v1.train.CheckpointSaverHook) for h in hooks):
    hooks.append(v1.train.CheckpointSaverHook(checkpoint_dir, save_steps=3,
                                              listeners=[listener]))
  with v1.train.MonitoredTrainingSession(checkpoint_dir=checkpoint_dir, hooks=hooks,
                                         save_checkpoint_secs=None,
                                         save_summaries_steps=None) as sess:
    while not sess.should_stop():
      sess.run(tf.compat.v1.get_collection('train')[0])


@pytest.mark.parametrize('patch_it', [False, True], ids=['stock', 'patched'])
def test_a_hook_made_before_patch_is_not_doubled(fastmts, tmp_path, patch_it):
  """A CheckpointSaverHook made before patch() is the saver: one save per
  schedule, each listener call once (stock and patched alike)."""
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    tf.compat.v1.add_to_collection('train', v1.assign_add(gs, 1))
    listener = _Listener()
    saver_hook = tf_hooks.CheckpointSaverHook(str(tmp_path), save_steps=3,
                                              listeners=[listener])
    if patch_it:
      fastmts.patch()
    try:
      _estimator_like_training(str(tmp_path), [saver_hook, v1.train.StopAtStepHook(last_step=7)],
                               listener)
    finally:
      if patch_it:
        fastmts.unpatch()
  assert listener.saved == [0, 3, 6, 7]
