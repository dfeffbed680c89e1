"""The graph files of a session's start, written in the background
(file_formats/graph_files.py), side by side with TF, which writes them before
MonitoredTrainingSession returns.

After close() the files are TF's; a summary written right after creation
lands after the graph records; an error TF raises at creation is raised at
creation; a process killed just after creation leaves no partial file; and
TensorBoard's EventAccumulator reads the same graph. The byte comparisons of
every file are those of test_start_records.py and test_graph_pbtxt.py, which
run the same path.
"""
import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

from google.protobuf import text_format
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import meta_graph_pb2

from compat_utils import Raised, child_env, outcome
from test_start_records import _event_records, _message_text

v1 = tf.compat.v1

pytestmark = pytest.mark.timeout(180)

_KWARGS = dict(save_summaries_steps=None, log_step_count_steps=None)


def _graph(constant_mb=1):
  """A few layers, a constant of `constant_mb` MB (random bytes: its text
  is long) and the global step."""
  gs = v1.train.get_or_create_global_step()
  values = np.random.RandomState(0).rand(constant_mb * 2 ** 18).astype(np.float32)
  h = tf.reshape(tf.reduce_sum(tf.constant(values, name='big')), [1, 1])
  for i in range(3):
    w = v1.get_variable('w%d' % i, [1, 1], initializer=v1.ones_initializer())
    h = tf.matmul(h, w)
    v1.summary.scalar('s%d' % i, tf.reduce_sum(h))
  with tf.control_dependencies([h]):
    return v1.assign_add(gs, 1)


def _files(workdir):
  return sorted(name for name in os.listdir(workdir) if not name.startswith('events.'))


def _flush(workdir):
  writer = v1.summary.FileWriterCache._cache.get(workdir)  # pylint: disable=protected-access
  if writer is not None:
    writer.flush()


def test_files_on_disk_when_close_returns(check):
  """Right after close() (nothing flushed nor waited for), the directory
  holds TF's files, graph.pbtxt and the .meta files whole."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph()
      sess = impl.MonitoredTrainingSession(checkpoint_dir=workdir, **_KWARGS)
      sess.run(train)
      sess.close()
      names = _files(workdir)
      pbtxt = text_format.Parse(open(os.path.join(workdir, 'graph.pbtxt')).read(),
                                graph_pb2.GraphDef())
      meta = meta_graph_pb2.MetaGraphDef.FromString(
          open(os.path.join(workdir, 'model.ckpt-0.meta'), 'rb').read())
      return names, _message_text(pbtxt), _message_text(meta)

  names = check(scenario)[0]
  assert 'graph.pbtxt' in names and 'model.ckpt-0.meta' in names


def test_summary_right_after_creation_lands_after_the_graph_records(check):
  """A summary added to the hooks' writer as soon as the session exists
  comes after the graph and meta graph records in the event file, as in TF
  (fastmts reserved their places at creation)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph(constant_mb=4)
      sess = impl.MonitoredTrainingSession(checkpoint_dir=workdir, **_KWARGS)
      summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag='now',
                                                                       simple_value=1.0)])
      v1.summary.FileWriterCache.get(workdir).add_summary(summary, 0)
      sess.run(train)
      sess.close()
      _flush(workdir)
      records = _event_records(workdir, workdir)
      return [[(kind, step) for kind, step, _ in events] for events in records], records

  kinds, _ = check(scenario)
  flat = [kind for kind, _ in kinds[0]]
  assert flat.index('summary') > max(i for i, k in enumerate(flat) if k == 'meta_graph_def')


def test_event_accumulator_reads_the_same_graph(check):
  """TensorBoard's EventAccumulator finds the same graph and meta graph."""
  event_accumulator = pytest.importorskip(
      'tensorboard.backend.event_processing.event_accumulator')

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph()
      with impl.MonitoredTrainingSession(checkpoint_dir=workdir, **_KWARGS) as sess:
        sess.run(train)
      _flush(workdir)
    accumulator = event_accumulator.EventAccumulator(workdir)
    accumulator.Reload()
    return _message_text(accumulator.Graph()), _message_text(accumulator.MetaGraph())

  check(scenario)


def test_graph_def_serialized_in_pieces_is_protobufs_serialization():
  """The background serializes a GraphDef one node at a time: the bytes are
  protobuf's own deterministic serialization of the whole (nodes, a function
  library, the versions and the deprecated version field all set)."""
  from fastmts.file_formats import graph_events  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default() as graph:
    _graph()
    graph_def = graph.as_graph_def(add_shapes=True)
  graph_def.library.function.add().signature.name = 'f'
  graph_def.version = 3
  assert len(graph_def.node) > 10 and graph_def.versions.producer
  assert (graph_events.serialize_graph_def(graph_def) ==
          graph_def.SerializePartialToString(deterministic=True))


def test_background_path_chosen_from_the_graph(monkeypatch):
  """graph_files.worth_it_estimate decides from the graph's operations
  (estimated_bytes), without computing the GraphDef, what worth_it decides
  from the GraphDef: 9 MB of
  constants go to the background, 1 MB does not; a graph estimated past
  MAX_BACKGROUND_BYTES (TF refuses a GraphDef over 2 GB, at creation) has
  its GraphDef computed in place."""
  from fastmts.file_formats import graph_files  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(graph_files, 'MIN_BYTES', 8 << 20)
  for constant_mb, expected in ((9, True), (1, False)):
    with tf.Graph().as_default() as graph:
      _graph(constant_mb)
      assert graph_files.worth_it_estimate(graph_files.estimated_bytes(graph)) is expected
      assert graph_files.worth_it(graph.as_graph_def()) is expected
  monkeypatch.setattr(graph_files, 'MAX_BACKGROUND_BYTES', 4 << 20)
  with tf.Graph().as_default() as graph:
    _graph(9)
    assert graph_files.worth_it_estimate(graph_files.estimated_bytes(graph)) is False


@pytest.mark.parametrize('where', ['under_a_file', 'pbtxt_is_a_directory'])
def test_unwritable_directory_raises_at_creation(check, where):
  """Where TF raises at creation, fastmts raises the same error there."""

  def scenario(impl, workdir):
    if where == 'under_a_file':
      open(os.path.join(workdir, 'file'), 'w').close()
      directory = os.path.join(workdir, 'file', 'ckpt')
    else:
      directory = workdir
      os.makedirs(os.path.join(workdir, 'graph.pbtxt', 'x'))
    with tf.Graph().as_default():
      _graph()
      made = outcome(impl.MonitoredTrainingSession, checkpoint_dir=directory, **_KWARGS)
      if not isinstance(made, Raised):
        made.close()
        return 'created'
      # An event file's name holds the second it was made: only its kind is compared.
      return made.type, sorted(re.sub(r'^events\.out\.tfevents\..*', 'events.out.tfevents.*', name)
                               for name in os.listdir(workdir))

  assert check(scenario) != 'created'


class _FailsAtCreation(v1.train.SessionRunHook):

  def after_create_session(self, session, coord):
    raise ValueError('the hook fails')


@pytest.mark.parametrize('what_fails', ['a_later_hook', 'the_first_save'])
def test_files_on_disk_when_a_failed_creation_raises(check, monkeypatch, what_fails):
  """TF writes the start's graph files before the first save and before
  any hook after the saver's: when creation then fails, they are on disk
  as the error reaches the caller (the background's writing made slow here,
  so that a creation not waiting for it would be seen)."""
  from fastmts.file_formats import graph_io  # pylint: disable=import-outside-toplevel
  write_text = graph_io.write_text

  def slow_write_text(*args):
    time.sleep(1)
    return write_text(*args)

  monkeypatch.setattr(graph_io, 'write_text', slow_write_text)

  def scenario(impl, workdir):
    hooks = []
    if what_fails == 'a_later_hook':
      hooks = [_FailsAtCreation()]
    else:  # the checkpoint state file cannot be written
      os.makedirs(os.path.join(workdir, 'checkpoint', 'x'))
    with tf.Graph().as_default():
      _graph()
      made = outcome(impl.MonitoredTrainingSession, checkpoint_dir=workdir, hooks=hooks,
                     **_KWARGS)
      names = _files(workdir)
      text = open(os.path.join(workdir, 'graph.pbtxt')).read()
      return type(made), names, _message_text(text_format.Parse(text, graph_pb2.GraphDef()))

  made, names, _ = check(scenario)
  assert made is Raised and 'graph.pbtxt' in names


class _FailsAtBegin(tf.compat.v1.train.SessionRunHook):

  def begin(self):
    raise ValueError('the hook fails')


def test_graph_records_of_a_creation_failing_before_finalize(check, monkeypatch):
  """A hook's begin() failing after CheckpointSaverHook's made the writer:
  the graph is never finalized, nothing waits for the writer's graph
  records (fastmts serializes them once the graph is finalized); flushing
  the writer writes TF's records (its wait for finalize cut short, not its
  FINALIZE_WAIT_SECS: made longer than the test's timeout here)."""
  from fastmts.file_formats import graph_files  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(graph_files, 'FINALIZE_WAIT_SECS', 3600)

  def scenario(impl, workdir):
    try:
      with tf.Graph().as_default() as graph:
        _graph()
        made = outcome(impl.MonitoredTrainingSession, checkpoint_dir=workdir,
                       hooks=[_FailsAtBegin()], **_KWARGS)
        finalized = graph.finalized
        _flush(workdir)
        return made, finalized, _event_records(workdir, workdir)
    finally:
      v1.summary.FileWriterCache.clear()

  made, finalized, records = check(scenario)
  assert made == Raised(ValueError, 'the hook fails') and not finalized
  assert [kind for kind, _, _ in records[0]] == ['file_version', 'graph_def', 'meta_graph_def']


_EXITS_UNFLUSHED = textwrap.dedent('''
    import sys
    import numpy as np
    import tensorflow as tf
    import fastmts
    from fastmts.file_formats import graph_files
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    graph_files.MIN_BYTES = 0
    graph_files.FINALIZE_WAIT_SECS = 3600

    class FailsAtBegin(v1.train.SessionRunHook):
      def begin(self):
        raise ValueError('the hook fails')

    v1.train.get_or_create_global_step()
    tf.constant(np.zeros(1000, np.float32))
    try:
      fastmts.MonitoredTrainingSession(checkpoint_dir=sys.argv[1], hooks=[FailsAtBegin()])
    except ValueError:
      print('raised', flush=True)
''')


def test_graph_records_written_when_the_interpreter_exits(tmp_path, fastmts):
  """The same failure, and the script ends without a flush nor a close:
  the interpreter exits (the writer's records wait for the graph's
  finalize no longer once the main thread ended) and its event file holds
  the graph and meta graph records."""
  del fastmts
  done = subprocess.run([sys.executable, '-c', _EXITS_UNFLUSHED, str(tmp_path)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
                        text=True, timeout=120, check=False)
  assert (done.returncode, done.stdout) == (0, 'raised\n'), done.stderr[-3000:]
  records = _event_records(str(tmp_path), str(tmp_path))
  assert [kind for kind, _, _ in records[0]] == ['file_version', 'graph_def', 'meta_graph_def']


@contextlib.contextmanager
def _small_disk(path, size='1m'):
  """A file system of `size` at `path` (a tmpfs: root only; skips where it
  cannot be mounted), unmounted after."""
  os.makedirs(path)
  mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=' + size, 'tmpfs', path],
                           capture_output=True, text=True, check=False, timeout=60)
  if mounted.returncode != 0:
    pytest.skip('a %s tmpfs cannot be mounted here: %s' % (size, mounted.stderr.strip()))
  try:
    yield path
  finally:
    subprocess.run(['umount', '-l', path], check=False, timeout=60)


def _fill(directory, leave):
  """A file in `directory` taking all the room of its file system but `leave` bytes."""
  stats = os.statvfs(directory)
  with open(os.path.join(directory, 'filler'), 'wb') as filler:
    filler.truncate(0)
    filler.write(b'\0' * max(0, stats.f_bavail * stats.f_frsize - leave))


def test_disk_full_raises_tf_error_at_creation(check):
  """A disk without room for graph.pbtxt: TF raises its
  ResourceExhaustedError ('<its temporary>; No space left on device') at
  creation, leaving the temporary; so does fastmts, whose files are written
  in place, TF's way, where the disk may not hold them (graph_files.room_for)."""

  def scenario(impl, workdir):
    with _small_disk(os.path.join(workdir, 'disk')) as disk, tf.Graph().as_default():
      _graph(constant_mb=2)  # some 6 MB of text on a 1 MB disk
      try:
        made = outcome(impl.MonitoredTrainingSession, checkpoint_dir=disk, **_KWARGS)
      finally:
        v1.summary.FileWriterCache.clear()  # no writer left open on the disk unmounted
      if not isinstance(made, Raised):
        made.close()
        return 'created'
      return (made.type, re.sub(r'tmp[0-9a-f]{32}', 'tmpX', made.message.replace(disk, 'DISK')),
              sorted(re.sub(r'tmp[0-9a-f]{32}', 'tmpX', name) for name in os.listdir(disk)
                     if not name.startswith('events.')))

  assert check(scenario) == (tf.errors.ResourceExhaustedError,
                             'DISK/graph.pbtxt.tmpX; No space left on device', ['graph.pbtxt.tmpX'])


def test_a_session_raises_its_own_graph_files_error(tmp_path, fastmts, monkeypatch):
  """Two sessions, each on its graph: the error of the first one's graph
  files (a disk filled by another file after its creation) is TF's error
  for it, raised by its own close, not by the other's."""
  from fastmts.file_formats import graph_io  # pylint: disable=import-outside-toplevel
  write_text = graph_io.write_text
  created = threading.Event()

  def write_text_once_created(*args):  # the first save done before the disk fills
    created.wait(timeout=60)
    return write_text(*args)

  monkeypatch.setattr(graph_io, 'write_text', write_text_once_created)
  with _small_disk(str(tmp_path / 'disk'), size='64m') as disk:
    try:
      with tf.Graph().as_default():
        _graph(constant_mb=2)  # room for its files at creation; then another file takes it
        full = fastmts.MonitoredTrainingSession(checkpoint_dir=disk, **_KWARGS)
        _fill(disk, leave=5 << 20)  # the records fit (4 MB), graph.pbtxt's text not
        created.set()
      with tf.Graph().as_default():
        train = _graph()
        with fastmts.MonitoredTrainingSession(checkpoint_dir=str(tmp_path / 'other'),
                                              **_KWARGS) as other:
          other.run(train)
      with pytest.raises(tf.errors.ResourceExhaustedError, match='No space left on device'):
        full.close()
    finally:
      v1.summary.FileWriterCache.clear()


_CHILD = textwrap.dedent('''
    import os, sys, time
    import numpy as np
    import tensorflow as tf
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    impl = v1.train
    if sys.argv[1] == 'fastmts':
      import fastmts as impl
    values = np.random.RandomState(0).rand(16 * 2 ** 18).astype(np.float32)
    total = tf.reduce_sum(tf.constant(values))
    gs = v1.train.get_or_create_global_step()
    with tf.control_dependencies([total]):
      train = v1.assign_add(gs, 1)
    sess = impl.MonitoredTrainingSession(checkpoint_dir=sys.argv[2], save_summaries_steps=None,
                                         log_step_count_steps=None)
    print('created', flush=True)
    while True:
      sess.run(train)
      time.sleep(0.01)
''')


def _killed_after_creation(impl_name, workdir):
  """The files a child leaves when killed (SIGKILL) 0.5 s after its
  session's creation returned, each checked whole: the names."""
  child = subprocess.Popen([sys.executable, '-c', _CHILD, impl_name, workdir],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(),
                           text=True)
  try:
    assert child.stdout.readline().strip() == 'created'
    time.sleep(0.5)
  finally:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()
  names = sorted(os.listdir(workdir))
  if 'graph.pbtxt' in names:
    text_format.Parse(open(os.path.join(workdir, 'graph.pbtxt')).read(), graph_pb2.GraphDef())
  for name in names:
    if name.endswith('.meta'):
      meta_graph_pb2.MetaGraphDef.FromString(open(os.path.join(workdir, name), 'rb').read())
  return names


def test_killed_just_after_creation_leaves_no_partial_file(tmp_path, fastmts):
  """A process killed 0.5 s after creation: each graph file is whole or
  absent (no temporary either: TF's own, killed there, leaves none, its
  files written before creation returned), the checkpoint of step 0 whole."""
  del fastmts
  for impl_name in ('tf', 'fastmts'):
    workdir = str(tmp_path / impl_name)
    os.makedirs(workdir)
    names = _killed_after_creation(impl_name, workdir)
    assert not [name for name in names if '.tmp' in name], (impl_name, names)
    assert {'checkpoint', 'model.ckpt-0.index'} <= set(names), (impl_name, names)
    v1.train.NewCheckpointReader(os.path.join(workdir, 'model.ckpt-0'))
