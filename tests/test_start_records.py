"""What a session writes at its start, side by side with TF, record by record.

fastmts computes the graph's GraphDef once where TF computes it again for
each record (file_formats/graph_events.py, checkpoint_saver.after_create_session): the
writer FileWriterCache makes at a stock hook's begin(), graph.pbtxt, the
graph and meta graph events of after_create_session, and the first save's
.meta. Each scenario runs under TF and fastmts in one process, and the
event files must hold the same records in the same order.

Two things keep the comparison from being one of raw bytes. TF serializes
the GraphDef and MetaGraphDef of its events non-deterministically: two
as_graph_def() of one graph serialize to different bytes (map order), so
TF's own event files differ from run to run; the graph and meta graph
records are compared as the messages they hold. And two graphs built alike
in one process number their cond functions apart (the global step's
initializer has one), so function names are numbered in order of
appearance before comparing. Within each run, graph.pbtxt and every .meta
must also be byte for byte what TF's write_graph and the saver's
export_meta_graph make of that run's graph (deterministic files).
"""
import os
import re

from google.protobuf import text_format
import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.python.summary import plugin_asset

from compat_utils import (ckpt_files, same_meta_graph, save_graph_def_kwargs,
                          with_contexts_reserialized, without_random_file_names)
from hook_test_utils import tf_log

v1 = tf.compat.v1

# The start's files on both of graph_files' paths (conftest).
pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures('graph_files_path')]


class _Asset(plugin_asset.PluginAsset):
  """A plugin asset: add_graph writes it to <logdir>/plugins/fastmts_test/."""
  plugin_name = 'fastmts_test'

  def assets(self):
    return {'notes.txt': 'written with the graph event'}


def _graph(summaries=True, collections=True, asset=False):
  gs = v1.train.get_or_create_global_step()
  x = tf.constant([[0.5, -1.0, 2.0]], name='x')
  h = x
  for i in range(4):
    w = v1.get_variable('w%d' % i, [3, 3], initializer=v1.ones_initializer())
    h = tf.nn.relu(tf.matmul(h, w))
    if summaries:
      v1.summary.scalar('layer_%d' % i, tf.reduce_sum(h))
  v1.get_variable('local', [2], collections=[v1.GraphKeys.LOCAL_VARIABLES])
  if collections:
    v1.add_to_collection('custom_tensors', x)
    v1.add_to_collection('custom_strings', 'a string')
    v1.add_to_collection('custom_numbers', 3)
    queue = v1.FIFOQueue(4, tf.float32, shapes=[])
    v1.train.add_queue_runner(v1.train.QueueRunner(queue, [queue.enqueue(1.0)]))
  if asset:
    plugin_asset.get_plugin_asset(_Asset)
  with tf.control_dependencies([h]):
    return v1.assign_add(gs, 1)


def _flush_writers(workdir):
  for logdir, writer in list(v1.summary.FileWriterCache._cache.items()):  # pylint: disable=protected-access
    if logdir.startswith(workdir):
      writer.flush()


_FUNCTION_NAME = re.compile(r'\b([A-Za-z0-9_]*_(?:true|false|cond|body))_(\d+)\b')


def _numbered_functions(text):
  """`text` with function names like global_step_cond_true_67 numbered in
  order of first appearance (..._true_#0)."""
  seen = {}

  def number(match):
    return '%s_#%d' % (match.group(1), seen.setdefault(match.group(0), len(seen)))

  return _FUNCTION_NAME.sub(number, text)


def _message_text(message):
  """A GraphDef or MetaGraphDef as text, its function names numbered and
  its functions in order of name (TF lists them in hash order of name),
  its control-flow contexts serialized deterministically (TF 1.15 to 2.3 do
  not) and TF 1.15's random name of a Saver's temporary files masked."""
  if hasattr(message, 'collection_def'):
    message = with_contexts_reserialized(message)
  else:
    message = type(message).FromString(message.SerializeToString())
  graph_def = message.graph_def if hasattr(message, 'graph_def') else message
  functions = list(graph_def.library.function)
  graph_def.library.ClearField('function')
  parts = _numbered_functions('\f'.join(
      [text_format.MessageToString(message)] +
      [text_format.MessageToString(f) for f in functions])).split('\f')
  return without_random_file_names('\n'.join(parts[:1] + sorted(parts[1:])))


def _event_records(directory, workdir):
  """Each event file's records, in order: (kind, step, what it holds): the
  graph or meta graph as text, a summary's values (None for the timing of
  '.../sec' values), a session log (its checkpoint path without workdir)."""
  files = []
  for name in sorted(os.listdir(directory)):
    if not name.startswith('events.out.tfevents.'):
      continue
    records = []
    for event in v1.train.summary_iterator(os.path.join(directory, name)):
      kind = event.WhichOneof('what')
      if kind == 'graph_def':
        held = _message_text(graph_pb2.GraphDef.FromString(event.graph_def))
      elif kind == 'meta_graph_def':
        held = _message_text(meta_graph_pb2.MetaGraphDef.FromString(event.meta_graph_def))
      elif kind == 'summary':
        held = [(v.tag, None if v.tag.endswith('/sec') else v.SerializeToString())
                for v in event.summary.value]
      elif kind == 'session_log':
        log = event.session_log
        held = (log.status, log.checkpoint_path.replace(workdir, 'DIR'), log.msg)
      else:
        held = getattr(event, kind)
      records.append((kind, event.step, held))
    files.append(records)
  return files


def _files(directory, graph):
  """{name: text} of graph.pbtxt, the .meta files (as text) and the plugin
  assets; and whether graph.pbtxt and each .meta are the bytes TF's
  write_graph and the saver's export make of `graph` now."""
  out, as_tf = {}, {}
  saver = (graph.get_collection(v1.GraphKeys.SAVERS) or [None])[0]
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      relpath = os.path.relpath(path, directory)
      if name == 'graph.pbtxt':
        with open(path, 'rb') as f:
          written = f.read()
        reference = tf.io.write_graph(graph.as_graph_def(add_shapes=True),
                                      os.path.dirname(directory), 'reference.pbtxt')
        with open(reference, 'rb') as f:
          as_tf[relpath] = written == f.read()
        out[relpath] = _message_text(text_format.Parse(written, graph_pb2.GraphDef()))
      elif name.endswith('.meta'):
        with open(path, 'rb') as f:
          written = f.read()
        if saver is not None:
          with graph.as_default():
            as_tf[relpath] = same_meta_graph(written, saver.export_meta_graph())
        out[relpath] = _message_text(meta_graph_pb2.MetaGraphDef.FromString(written))
      elif '/plugins/' in path:
        with open(path, 'rb') as f:
          out[relpath] = f.read()
  return dict(sorted(out.items())), dict(sorted(as_tf.items()))


def _written(workdir, graph, directory=None):
  """(event records, {file: text}, {file: is TF's bytes}, checkpoint files)."""
  directory = directory or workdir
  _flush_writers(workdir)
  files, as_tf = _files(directory, graph)
  return _event_records(directory, workdir), files, as_tf, ckpt_files(directory)


def _kinds(records):
  return [[kind for kind, _, _ in events] for events in records]


START = ['file_version', 'graph_def', 'meta_graph_def',  # FileWriterCache's writer
         'graph_def', 'meta_graph_def', 'session_log']   # after_create_session

# Logged once per process by fastmts's first checkpoint save (its save path
# reads a deprecated TF module alias); not a creation record, left out here.
_DEPRECATED_IMPORT = 'Please fix your imports. Module tensorflow.python.training.checkpoint_management'


_RATE = re.compile(r'(global_step/sec: )[0-9.e+-]+')


# StepCounterHook's warning when the global step it read in a step equals
# the last one: the read and the increment of _graph's train op are not
# ordered, so whether it comes is a race, in TF as in fastmts.
_NOT_INCREASED = 'It seems that global step (tf.train.get_global_step) has not been increased.'


def _lines(log):
  return [(level, _RATE.sub(r'\1<rate>', message)) for level, message in log
          if not message.startswith((_DEPRECATED_IMPORT, _NOT_INCREASED))]


@pytest.mark.parametrize('summaries,collections', [(True, True), (False, False)])
@pytest.mark.parametrize('save_graph_def', [True, False])
def test_records_at_start_and_end(check, summaries, collections, save_graph_def):
  """MonitoredTrainingSession with checkpoints, summaries and step counts,
  all writing to checkpoint_dir: one event file, TF's records."""

  def scenario(impl, workdir):
    with tf.Graph().as_default() as graph:
      train = _graph(summaries, collections)
      with tf_log(workdir) as log:
        with impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_checkpoint_steps=2,
                                           **save_graph_def_kwargs(save_graph_def),
                                           log_step_count_steps=2) as sess:
          for _ in range(3):
            sess.run(train)
      return _written(workdir, graph) + (_lines(log),)

  records, files, as_tf, names, _ = check(scenario)
  assert len(records) == 1 and _kinds(records)[0][:6] == START
  assert ('graph.pbtxt' in files) == save_graph_def
  assert ('model.ckpt-0.meta' in files) == save_graph_def
  assert all(as_tf.values()) and len(as_tf) == (4 if save_graph_def else 0)
  assert 'model.ckpt-3.index' in names


def test_records_of_the_bench_options(check):
  """The options of bench/start_save_bench.py: checkpoints only."""

  def scenario(impl, workdir):
    with tf.Graph().as_default() as graph:
      train = _graph()
      with tf_log(workdir) as log:
        sess = impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_summaries_steps=None,
                                             log_step_count_steps=None)
        sess.run(train)
        sess.close()
      return _written(workdir, graph) + (_lines(log),)

  records, _, as_tf, _, _ = check(scenario)
  assert _kinds(records) == [START + ['session_log']]
  assert list(as_tf) == ['graph.pbtxt', 'model.ckpt-0.meta', 'model.ckpt-1.meta']
  assert all(as_tf.values())


def test_plugin_assets_written_with_the_graph(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default() as graph:
      train = _graph(asset=True)
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir,
                                         save_summaries_steps=None) as sess:
        sess.run(train)
      return _written(workdir, graph)

  files = check(scenario)[1]
  assert files['plugins/fastmts_test/notes.txt'] == b'written with the graph event'


@pytest.mark.parametrize('saver_kind', ['Saver', 'subclass'])
def test_custom_scaffold_saver(check, saver_kind):
  """A Scaffold saver of the user's: TF's exact Saver (the .meta of the
  first save is the meta graph record's) or a subclass (saved by its own
  save)."""

  def scenario(impl, workdir):

    class MySaver(v1.train.Saver):
      pass

    with tf.Graph().as_default() as graph:
      train = _graph()
      cls = v1.train.Saver if saver_kind == 'Saver' else MySaver
      scaffold = impl.Scaffold(saver=cls(max_to_keep=2, sharded=False))
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, scaffold=scaffold,
                                         save_checkpoint_steps=1,
                                         save_summaries_steps=None) as sess:
        for _ in range(3):
          sess.run(train)
      return _written(workdir, graph)

  _, files, as_tf, names = check(scenario)
  assert sorted(n for n in files if n.endswith('.meta')) == [
      'model.ckpt-2.meta', 'model.ckpt-3.meta']
  assert all(as_tf.values())
  assert 'model.ckpt-0.index' not in names  # max_to_keep


def test_summary_dir_apart_from_checkpoint_dir(check):
  """Summaries and step counts in summary_dir, checkpoints in checkpoint_dir:
  a writer (and its graph records) in each."""

  def scenario(impl, workdir):
    summary_dir = os.path.join(workdir, 'summaries')
    with tf.Graph().as_default() as graph:
      train = _graph()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, summary_dir=summary_dir,
                                         save_summaries_steps=1,
                                         log_step_count_steps=1) as sess:
        for _ in range(2):
          sess.run(train)
      return _written(workdir, graph)[0], _written(workdir, graph, summary_dir)[0]

  checkpoint_records, summary_records = check(scenario)
  assert _kinds(checkpoint_records)[0][:6] == START
  assert _kinds(summary_records)[0][:3] == START[:3]


def test_hooks_given_their_own_writer_and_dirs(check):
  """StepCounterHook given a summary_writer (it takes none from the cache),
  SummarySaverHook with an output_dir, CheckpointSaverHook with a listener,
  all passed as hooks to a MonitoredSession."""

  def scenario(impl, workdir):
    step_dir = os.path.join(workdir, 'steps')
    summary_dir = os.path.join(workdir, 'summaries')
    with tf.Graph().as_default() as graph:
      train = _graph()
      writer = v1.summary.FileWriter(step_dir)
      hooks = [
          impl.StepCounterHook(every_n_steps=1, summary_writer=writer),
          impl.SummarySaverHook(save_steps=1, output_dir=summary_dir,
                                summary_op=v1.summary.merge_all()),
          impl.CheckpointSaverHook(workdir, save_steps=2,
                                   listeners=[impl.CheckpointSaverListener()]),
      ]
      with impl.MonitoredSession(hooks=hooks) as sess:
        for _ in range(3):
          sess.run(train)
      writer.close()
      return tuple(_written(workdir, graph, d)[0] for d in (workdir, step_dir, summary_dir))

  ckpt, steps, summaries = check(scenario)
  assert _kinds(ckpt)[0][:6] == START
  assert 'graph_def' not in _kinds(steps)[0]
  assert _kinds(summaries)[0][:3] == START[:3]


def test_session_creator_without_finalize(check):
  """A SessionCreator of the user's that leaves the graph unfinalized: TF's
  own sequence of GraphDefs (nothing shared)."""

  def scenario(impl, workdir):

    class Creator(impl.SessionCreator):

      def create_session(self):
        sess = v1.Session()
        sess.run(v1.global_variables_initializer())
        return sess

    with tf.Graph().as_default() as graph:
      train = _graph()
      hook = impl.CheckpointSaverHook(workdir, save_steps=1, saver=v1.train.Saver())
      with impl.MonitoredSession(session_creator=Creator(), hooks=[hook]) as sess:
        finalized = graph.finalized
        sess.run(train)
      return _written(workdir, graph) + (finalized,)

  records, _, as_tf, _, finalized = check(scenario)
  assert _kinds(records)[0][:6] == START
  assert all(as_tf.values()) and finalized is False


def test_collection_that_does_not_serialize_warns_as_in_tf(check):
  """A collection create_meta_graph_def cannot serialize: TF warns at each
  meta graph it builds, the writer's, the meta graph record's and each
  save's; so does fastmts at the start (the first save's .meta is exported,
  not taken from the record)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default() as graph:
      train = _graph()
      v1.add_to_collection('odd', object())
      with tf_log(workdir) as log:
        sess = impl.MonitoredTrainingSession(checkpoint_dir=workdir, save_summaries_steps=None)
        at_start = [line[0] for line in log if 'serializing odd' in line[1]]
        sess.run(train)
        sess.close()
      return _written(workdir, graph), at_start

  assert check(scenario)[1] == ['WARNING'] * 3  # the writer's, the record's, the first save's


def _graph_with_unknown_dim():
  """_graph() and a tensor of shape [?] whose dimension user code may set."""
  train = _graph()
  loose = v1.placeholder_with_default(tf.zeros([2]), shape=[None], name='loose')
  return train, loose


@pytest.mark.parametrize('where', ['init_fn', 'chief_only_hook'])
def test_user_code_sets_a_shape_before_the_checkpoint_hook(check, where):
  """User code between the Scaffold's finalize and the CheckpointSaverHook's
  after_create_session refines a shape (allowed on a finalized graph): the
  records and graph.pbtxt have the new shape, as in TF. (So the GraphDef
  cannot be computed ahead, while the session initializes, unless no user
  code runs in between.)"""

  def scenario(impl, workdir):

    class SetShape(impl.SessionRunHook):

      def __init__(self, tensor):
        self._tensor = tensor

      def after_create_session(self, session, coord):
        self._tensor.set_shape([2])

    with tf.Graph().as_default() as graph:
      train, loose = _graph_with_unknown_dim()
      if where == 'init_fn':
        scaffold = impl.Scaffold(init_fn=lambda scaffold, sess: loose.set_shape([2]))
        hooks = []
      else:
        scaffold, hooks = None, [SetShape(loose)]
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, scaffold=scaffold,
                                         chief_only_hooks=hooks,
                                         save_summaries_steps=None) as sess:
        sess.run(train)
      return _written(workdir, graph)

  records, files, as_tf, _ = check(scenario)
  assert all(as_tf.values()) and 'graph.pbtxt' in as_tf
  pbtxt = files['graph.pbtxt']
  loose = pbtxt[pbtxt.index('name: "loose"'):]
  assert 'size: 2' in loose[:loose.index('node {')]  # its _output_shapes, refined
  assert records[0][3][2] == pbtxt  # the after_create_session graph record

