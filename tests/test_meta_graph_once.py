"""The .meta file of each checkpoint save, side by side with TF.

fastmts exports the MetaGraphDef once per finalized graph and writes it again
at each save while the graph's collections and the SaverDef stay the same
(checkpoint_saver.py). Each .meta must be byte for byte what TF's own
export_meta_graph (the Scaffold saver's, as Saver.save calls it) makes of the
same graph at that save; both are compared with an export made in the same
process (two graphs built alike number their cond functions apart).
"""
import os

import pytest
import tensorflow as tf

from compat_utils import ckpt_files, same_meta_graph, save_graph_def_kwargs

v1 = tf.compat.v1

# The start's files on both of graph_files' paths (conftest).
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures('graph_files_path')]


def _graph():
  gs = v1.train.get_or_create_global_step()
  w = v1.get_variable('w', [4], initializer=v1.ones_initializer())
  loss = tf.reduce_sum(w * tf.cast(gs, tf.float32))
  v1.summary.scalar('loss', loss)
  v1.add_to_collection('custom', loss)
  with tf.control_dependencies([loss]):
    return v1.assign_add(gs, 1)


def _metas(workdir):
  out = {}
  for name in sorted(os.listdir(workdir)):
    if name.endswith('.meta'):
      with open(os.path.join(workdir, name), 'rb') as f:
        out[name] = f.read()
  return out


def _export(graph):
  saver = graph.get_collection(v1.GraphKeys.SAVERS)[0]
  with graph.as_default():
    return saver.export_meta_graph()


def test_every_meta_is_the_export_of_its_save(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default() as graph:
      train = _graph()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=2,
                                         save_summaries_steps=None) as sess:
        for _ in range(5):
          sess.run(train)
      expected = _export(graph)
    metas = _metas(workdir)
    return (sorted(metas), [same_meta_graph(m, expected) for m in metas.values()],
            ckpt_files(workdir))

  names, same, _ = check(scenario)
  assert names == ['model.ckpt-0.meta', 'model.ckpt-2.meta', 'model.ckpt-4.meta',
                   'model.ckpt-5.meta']
  assert all(same)


def test_a_collection_changed_between_saves(check):
  """A listener appends to a collection after a save (add_to_collection
  refuses on a finalized graph; the list get_collection_ref gives does
  not): the next .meta has it, as TF's export would."""

  class AddLate(v1.train.CheckpointSaverListener):

    def __init__(self, graph, exports):
      self._graph = graph
      self._exports = exports

    def after_save(self, session, global_step_value):
      self._exports[global_step_value] = _export(self._graph)
      if global_step_value == 2:
        self._graph.get_collection_ref('late').append('added after the save of step 2')

  def scenario(impl, workdir):
    exports = {}
    with tf.Graph().as_default() as graph:
      train = _graph()
      hook = v1.train.CheckpointSaverHook(workdir, save_steps=2,
                                          listeners=[AddLate(graph, exports)])
      with impl.SingularMonitoredSession(hooks=[hook]) as sess:
        for _ in range(6):
          sess.run(train)
    metas = _metas(workdir)
    return {name: same_meta_graph(metas[name], exports[int(name.split('-')[1].split('.')[0])])
            for name in metas}, [b'added after' in m for m in metas.values()]

  check(scenario, expected=(
      {'model.ckpt-0.meta': True, 'model.ckpt-2.meta': True, 'model.ckpt-4.meta': True,
       'model.ckpt-6.meta': True},
      [False, False, True, True]))


def test_no_meta_without_save_graph_def(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=2,
                                         **save_graph_def_kwargs(False)) as sess:
        for _ in range(3):
          sess.run(train)
    return ckpt_files(workdir)

  check(scenario)


def test_max_to_keep_deletes_old_metas(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph()
      scaffold = v1.train.Scaffold(saver=v1.train.Saver(max_to_keep=2))
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, scaffold=scaffold,
                                         save_checkpoint_steps=1,
                                         save_summaries_steps=None) as sess:
        for _ in range(4):
          sess.run(train)
    return ckpt_files(workdir), v1.train.latest_checkpoint(workdir).replace(workdir, '<dir>')

  check(scenario, expected=(
      ['checkpoint', 'graph.pbtxt'] + sorted(
          'model.ckpt-%d.%s' % (s, e) for s in (3, 4)
          for e in ('data-00000-of-00001', 'index', 'meta')),
      '<dir>/model.ckpt-4'))
