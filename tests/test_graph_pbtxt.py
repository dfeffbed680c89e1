"""graph.pbtxt as MonitoredTrainingSession writes it, side by side with TF.

fastmts prints it natively (graph_io, tests/test_text_format.py for the
printer itself); here the file a session writes at its start must be TF's
byte for byte, and a directory that cannot be written fails as in TF.
"""
import os

import pytest
import tensorflow as tf

from compat_utils import outcome, save_graph_def_kwargs, without_random_file_names

v1 = tf.compat.v1

# The start's files on both of graph_files' paths (conftest).
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures('graph_files_path')]


def _graph_with_summaries_and_queue():
  gs = v1.train.get_or_create_global_step()
  x = tf.constant([[0.5, -1.0, 2.0]], name='x')
  h = x
  for i in range(5):
    w = v1.get_variable('w%d' % i, [3, 3], initializer=v1.ones_initializer())
    h = tf.nn.relu(tf.matmul(h, w))
    v1.summary.scalar('layer_%d' % i, tf.reduce_sum(h))
  tf.constant('odd "bytes"\n\t\\ \x01 é', name='text')
  queue = v1.FIFOQueue(4, tf.float32, shapes=[])
  v1.train.add_queue_runner(v1.train.QueueRunner(queue, [queue.enqueue(1.0)]))
  v1.add_to_collection('custom', x)
  with tf.control_dependencies([h]):
    return v1.assign_add(gs, 1)


@pytest.mark.parametrize('save_graph_def', [True, False])
def test_graph_pbtxt_bytes(check, save_graph_def):
  """The file is TF's write_graph of the session's graph, byte for byte.
  (It is compared with TF's write_graph of the same graph: two graphs built
  alike in one process number their cond functions apart.)"""

  def scenario(impl, workdir):
    with tf.Graph().as_default() as graph:
      train = _graph_with_summaries_and_queue()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir,
                                         **save_graph_def_kwargs(save_graph_def)) as sess:
        sess.run(train)
      path = os.path.join(workdir, 'graph.pbtxt')
      if not os.path.exists(path):
        return None
      with open(path, 'rb') as f:
        written = f.read()
      reference = tf.io.write_graph(graph.as_graph_def(add_shapes=True), workdir, 'tf.pbtxt')
      with open(reference, 'rb') as f:
        expected = f.read()
    return (written == expected, len(written) > 10000,
            b'string_val: "odd' in written)

  check(scenario, expected=(True, True, True) if save_graph_def else None)


def test_graph_pbtxt_into_a_directory_that_is_a_file(check):
  """checkpoint_dir names a regular file: TF's error, from the same call."""

  def scenario(impl, workdir):
    target = os.path.join(workdir, 'not_a_dir')
    with open(target, 'w') as f:
      f.write('x')
    with tf.Graph().as_default():
      train = _graph_with_summaries_and_queue()
      result = outcome(lambda: impl.MonitoredTrainingSession(checkpoint_dir=target))
    if not isinstance(result, tuple):
      result.close()
      return 'created'
    return result.type, without_random_file_names(result.message.replace(workdir, '<dir>'))

  check(scenario)
