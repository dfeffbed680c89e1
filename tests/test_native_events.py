"""Event files written natively, compared record by record with stock TF.

fastmts swaps the event writer of the FileWriterCache's TF FileWriter for a
native one (file_formats/event_file_writer.py) and its StepCounterHook and
SummarySaverHook then write their records (global_step/sec, SessionLog
START, the fetched summaries with repeated metadata stripped as TF's
SummaryToEventTransformer does) without calling Python. Nothing of that may
show in the files: each scenario here runs one script under
``tf.compat.v1.train.MonitoredTrainingSession`` and under
``fastmts.MonitoredTrainingSession``, each in a fresh directory and graph,
and the event files must hold the same records.

The comparison is strict: :func:`normalized_records` keeps each record's
bytes, re-serialized after only what differs between two runs of TF itself
is set aside: the wall time, the value of a '.../sec' rate, the map order
of a GraphDef or MetaGraphDef (serialized again deterministically), and the
run's own directory in a checkpoint path. The number of event files and
their names (``events.out.tfevents.<secs>.<host>``) are checked too, and
that fastmts did adopt the writer (else the comparison proves nothing).

Graphs here compute their summaries from values read before the step's
updates, and the hooks' global step read comes before the increment, so
two runs write the same values at the same steps. TensorBoard's
EventAccumulator, where installed, reads both directories alike too.

Last, the native stripping alone against TF's SummaryToEventTransformer,
bytes in, bytes out: random summaries, malformed bytes, and bytes protobuf
would not write so (a summary tensor can hold any bytes; TF parses and
serializes them again, or fails to parse them).
"""
import contextlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import message as protobuf_message
from tensorflow.core.framework import graph_pb2
from tensorflow.core.framework import summary_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.core.util import event_pb2
from tensorflow.python.summary.writer import event_file_writer as tf_event_file_writer
from tensorflow.python.summary.writer import writer as tf_writer
from tensorflow.python.training import training_util

from compat_utils import TF_IMPL, Raised, outcome, run_steps_or_tf_loop
from hook_test_utils import tf_log

try:
  from tensorboard.backend.event_processing import event_accumulator
  _TENSORBOARD_MISSING = None
except ImportError as _e:
  event_accumulator = None
  _TENSORBOARD_MISSING = 'tensorboard is not installed (%s): no EventAccumulator to read with' % _e

v1 = tf.compat.v1
Summary = summary_pb2.Summary
SessionLog = event_pb2.SessionLog

pytestmark = pytest.mark.timeout(60)

_EVENT_FILE = re.compile(r'events\.out\.tfevents\.\d{10}\.%s' % re.escape(socket.gethostname()))
# The type of the FileWriterCache writer's event_writer, per run.
ADOPTED = {'tf': 'EventFileWriter', 'fastmts': 'NativeEventFileWriter'}
PLUGIN = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name='fastmts_test',
                                                       content=b'\x01\x02'),
    display_name='shown', summary_description='what it is')


# ---- Reading and comparing event files ----------------------------------------------


def event_file_names(directory):
  """The event files of `directory`, in name order."""
  return sorted(n for n in os.listdir(directory) if n.startswith('events.out.tfevents.'))


_RANDOM_SAVER_SUFFIX = re.compile(rb'_temp_[0-9a-f]{32}/part')


def normalized_records(directory):
  """Per event file (in name order), its records' bytes: each Event parsed
  and serialized again with its wall_time 0, the values of '.../sec' tags 0,
  graph_def and meta_graph_def serialized again deterministically, and a
  checkpoint path under `directory` made relative to it. A record that is
  not an Event as protobuf serializes it (one that does not parse, or
  parses and serializes to other bytes) is kept as it is: TF's Python
  writes none such, so it differs from TF's."""
  directory = os.path.normpath(directory)
  files = []
  for name in event_file_names(directory):
    records = []
    for record in v1.io.tf_record_iterator(os.path.join(directory, name)):
      try:
        event = event_pb2.Event.FromString(record)
      except protobuf_message.DecodeError:
        event = None
      if event is None or event.SerializeToString() != record:
        records.append(record)
        continue
      event.wall_time = 0
      # TF 2.0 and older name a Saver's temporary files with a random
      # uuid, a string constant in the graph.
      if event.HasField('graph_def'):
        event.graph_def = _RANDOM_SAVER_SUFFIX.sub(
            b'_temp_<uuid>/part', graph_pb2.GraphDef.FromString(
                event.graph_def).SerializeToString(deterministic=True))
      if event.HasField('meta_graph_def'):
        event.meta_graph_def = _RANDOM_SAVER_SUFFIX.sub(
            b'_temp_<uuid>/part', meta_graph_pb2.MetaGraphDef.FromString(
                event.meta_graph_def).SerializeToString(deterministic=True))
      for value in event.summary.value:
        if value.tag.endswith('/sec'):
          value.simple_value = 0
      path = event.session_log.checkpoint_path
      if path.startswith(directory + os.sep):
        event.session_log.checkpoint_path = os.path.relpath(path, directory)
      records.append(event.SerializeToString())
    files.append(records)
  return files


def _describe(record):
  """One record as text, the graphs shortened to their sizes."""
  try:
    event = event_pb2.Event.FromString(record)
  except protobuf_message.DecodeError:
    return 'unparseable record %r' % record
  if event.SerializeToString() != record:
    return 'record not as protobuf writes it: %r' % record
  for field in ('graph_def', 'meta_graph_def'):
    if event.HasField(field):
      setattr(event, field, b'<%d bytes>' % len(getattr(event, field)))
  return str(event).strip().replace('\n', ' ')


def assert_same_event_files(got_dir, want_dir):
  """`got_dir` holds as many event files as `want_dir`, named as TF names
  them, with the same normalized records; a difference is shown as the
  first records that differ."""
  names = event_file_names(got_dir), event_file_names(want_dir)
  for name in names[0] + names[1]:
    assert _EVENT_FILE.fullmatch(name), name
  assert len(names[0]) == len(names[1]), names
  got, want = normalized_records(got_dir), normalized_records(want_dir)
  for i, (g, w) in enumerate(zip(got, want)):
    if g == w:
      continue
    k = next((k for k, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
    pytest.fail('event file %d: %d records, TF %d; record %d:\n  fastmts: %s\n  TF:      %s' % (
        i, len(g), len(w), k, _describe(g[k]) if k < len(g) else '(none)',
        _describe(w[k]) if k < len(w) else '(none)'))
  assert got == want


def _kinds_on_disk(directory):
  """The kinds of the records complete on disk now ('summary:<first tag>'
  for a summary): a record still being written ends the file's list."""
  kinds = []
  for name in event_file_names(directory):
    try:
      for event in v1.train.summary_iterator(os.path.join(directory, name)):
        kind = event.WhichOneof('what')
        if kind == 'summary' and event.summary.value:
          kind += ':' + event.summary.value[0].tag
        kinds.append(kind)
    except (tf.errors.DataLossError, protobuf_message.DecodeError):
      pass
  return kinds


# ---- Running a script twice ----------------------------------------------------------


def _close_writers(workdir):
  """Closes (so flushes) the FileWriterCache writers under `workdir`."""
  for logdir, writer in list(v1.summary.FileWriterCache._cache.items()):  # pylint: disable=protected-access
    if logdir.startswith(workdir):
      writer.close()


def run_both(scenario, tmp_path, fastmts):
  """{'tf': ..., 'fastmts': ...}: each (what `scenario(impl, workdir)`
  returned, workdir), in a fresh directory, the cache's writers closed."""
  out = {}
  for name, impl in (('tf', TF_IMPL), ('fastmts', fastmts)):
    workdir = str(tmp_path / name)
    os.mkdir(workdir)
    try:
      out[name] = scenario(impl, workdir), workdir
    finally:
      _close_writers(workdir)
  return out


def _writer_kind(logdir):
  return type(v1.summary.FileWriterCache.get(logdir).event_writer).__name__


def _train_to_stop(impl, sess, train, workdir, loop='run'):
  """One step (by then the hooks took the cache writer over, or not), then
  steps until the session stops: first by run_steps when `loop` says so,
  then by sess.run. Returns the cache writer's kind after the first step."""
  sess.run(train)
  kind = _writer_kind(workdir)
  if loop == 'run_steps':
    run_steps_or_tf_loop(impl, sess, train)
  while not sess.should_stop():
    sess.run(train)
  return kind


def _graph(metadata_summaries=False):
  """A couple of variables updated each step after their summaries read
  them: scalars 'loss' and 'bias', histogram 'weights' (and with
  `metadata_summaries`, text 'note' and tensor 'plugged' carrying
  metadata). The hooks' global step read is made first, and the step waits
  for it, so every run reads the step before its increment and a fresh read
  runs no step. Returns (train op, that read)."""
  # A resource variable on every release (TF 1.15's default global step is
  # a reference variable, whose identity may alias the incremented value).
  gs = v1.get_variable('global_step', [], tf.int64, initializer=v1.zeros_initializer(),
                       trainable=False, use_resource=True,
                       collections=[v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.GLOBAL_STEP])
  step = tf.identity(gs.read_value(), name='step')
  v1.add_to_collection(training_util.GLOBAL_STEP_READ_KEY, step)
  assert training_util._get_or_create_global_step_read() is step  # pylint: disable=protected-access
  w = v1.get_variable('w', [3], initializer=v1.ones_initializer(), use_resource=True)
  b = v1.get_variable('b', [], initializer=v1.zeros_initializer(), use_resource=True)
  w_now = tf.identity(w.read_value(), name='w_now')
  b_now = tf.identity(b.read_value(), name='b_now')
  loss = tf.add(tf.reduce_sum(w_now * tf.cast(step, tf.float32)), b_now, name='total')
  v1.summary.scalar('loss', loss)
  v1.summary.scalar('bias', b_now)
  v1.summary.histogram('weights', w_now)
  if metadata_summaries:
    v1.summary.text('note', tf.strings.as_string(step))
    v1.summary.tensor_summary('plugged', w_now, summary_metadata=PLUGIN)
  with tf.control_dependencies([step, loss, w_now, b_now]):
    train = tf.group(w.assign_add([0.1, 0.2, 0.3]), b.assign_sub(0.5), gs.assign_add(1),
                     name='train')
  return train, step


def _mts(impl, workdir, last_step, hooks=(), **kwargs):
  """MonitoredTrainingSession on `workdir`: summaries every 10 steps, rates
  every 50, checkpoints only at the start and the end, stop at last_step."""
  options = dict(checkpoint_dir=workdir, save_summaries_steps=10, log_step_count_steps=50,
                 save_checkpoint_secs=3600)
  options.update(kwargs)
  return impl.MonitoredTrainingSession(
      hooks=[v1.train.StopAtStepHook(last_step=last_step)] + list(hooks), **options)


def _summary(tag, value, metadata=None):
  """A Summary of one simple value, with `metadata` if given."""
  v = Summary.Value(tag=tag, simple_value=value)
  if metadata is not None:
    v.metadata.CopyFrom(metadata)
  return Summary(value=[v])


def _assert_adopted(results):
  """The first thing each run returned is the type of the cache writer's
  event_writer: TF's in TF's run, the native one in fastmts's."""
  for name, ((kind, *_), _) in results.items():
    assert kind == ADOPTED[name], (name, kind)


# ---- Scenarios -----------------------------------------------------------------------


@pytest.mark.parametrize('loop', ['run', 'run_steps'])
def test_default_hooks_write_tfs_records(tmp_path, fastmts, loop):
  """StepCounterHook, SummarySaverHook, CheckpointSaverHook of MTS: TF's records
  (fastmts's run_steps loop against TF's sess.run loop)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, _ = _graph()
      with _mts(impl, workdir, 300) as sess:
        kind = _train_to_stop(impl, sess, train, workdir, loop)
      return (kind,)

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert_same_event_files(results['fastmts'][1], results['tf'][1])
  records = normalized_records(results['tf'][1])
  assert len(records) == 1 and len(records[0]) > 35  # 30 summaries, 5 rates at least


def test_default_hooks_records_never_reach_python_writer(tmp_path, fastmts, monkeypatch):
  """Every record of MonitoredTrainingSession's default hooks (the graph and
  meta graph, START, the summaries, the rates, a CHECKPOINT after each of
  four saves) is made natively: not one passes through the Python
  add_event of the native writer, which TF's FileWriter methods end in.
  The files are TF's."""
  added = []
  real_add_event = fastmts.file_formats.event_file_writer.NativeEventFileWriter.add_event

  def counted_add_event(self, event):
    added.append(event.WhichOneof('what'))
    real_add_event(self, event)

  monkeypatch.setattr(fastmts.file_formats.event_file_writer.NativeEventFileWriter, 'add_event',
                      counted_add_event)

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, _ = _graph()
      with _mts(impl, workdir, 120, save_checkpoint_secs=None,
                save_checkpoint_steps=40) as sess:
        kind = _train_to_stop(impl, sess, train, workdir)
      return (kind,)

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert_same_event_files(results['fastmts'][1], results['tf'][1])
  assert added == []
  kinds = _kinds_on_disk(results['fastmts'][1])
  assert kinds[:3] == ['file_version', 'graph_def', 'meta_graph_def'], kinds
  assert kinds.count('session_log') == 5  # START, and a CHECKPOINT at 0, 40, 80, 120
  assert kinds.count('summary:global_step/sec') == 2 and kinds.count('summary:loss') == 12


def test_metadata_stripped_as_tf_does(tmp_path, fastmts):
  """Text and plugin summaries keep their metadata only at a tag's first
  value, across two SummarySaverHooks and within one summary."""
  dup = Summary(value=[Summary.Value(tag='dup', metadata=PLUGIN, simple_value=1.0),
                       Summary.Value(tag='dup', metadata=PLUGIN, simple_value=2.0)])

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, _ = _graph(metadata_summaries=True)
      plugged_again = tf.raw_ops.TensorSummaryV2(
          tag='plugged', tensor=tf.constant([1.0, 2.0]),
          serialized_summary_metadata=PLUGIN.SerializeToString())
      other = v1.train.SummarySaverHook(
          save_steps=7, output_dir=workdir,
          summary_op=[tf.constant(dup.SerializeToString()), plugged_again])
      with _mts(impl, workdir, 60, hooks=[other]) as sess:
        kind = _train_to_stop(impl, sess, train, workdir)
      return (kind,)

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert_same_event_files(results['fastmts'][1], results['tf'][1])
  with_metadata = [v.tag for e in v1.train.summary_iterator(os.path.join(
      results['tf'][1], event_file_names(results['tf'][1])[0])) for v in e.summary.value
                   if v.HasField('metadata')]
  assert sorted(with_metadata) == ['dup', 'note', 'plugged']  # once each


def test_user_summaries_between_the_hooks_records(tmp_path, fastmts):
  """add_summary (proto and bytes) and add_session_log on the cache's writer
  during training: in order with the hooks' records, stripped as in TF."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, read = _graph(metadata_summaries=True)
      with _mts(impl, workdir, 100) as sess:
        writer = v1.summary.FileWriterCache.get(workdir)
        # Before the hooks write 'plugged': theirs lose the metadata.
        writer.add_summary(_summary('plugged', -1.0, PLUGIN).SerializeToString(), 0)
        kind = _writer_kind(workdir)
        while not sess.should_stop():
          _, step = sess.run([train, read])
          if step % 15 == 0:
            writer.add_summary(_summary('user/x', float(step), PLUGIN), step)
          if step == 45:  # 'note' the hooks wrote at step 1: stripped
            writer.add_summary(_summary('note', 4.5, PLUGIN).SerializeToString(), step)
          if step == 60:
            writer.add_session_log(
                SessionLog(status=SessionLog.CHECKPOINT, checkpoint_path='user/path'), step)
      return (kind,)

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert_same_event_files(results['fastmts'][1], results['tf'][1])


@pytest.mark.parametrize('when', ['after_training', 'during_training'])
def test_close_and_reopen_start_a_new_file(tmp_path, fastmts, when):
  """close() then reopen() on the cache's writer: the next records go to a
  second file, as in TF (the seen tags carry over)."""

  def reopen(writer):
    writer.close()
    time.sleep(1.1)  # the new file's name has the time in seconds
    writer.reopen()

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, read = _graph(metadata_summaries=True)
      writer = None
      with _mts(impl, workdir, 150) as sess:
        writer = v1.summary.FileWriterCache.get(workdir)
        kind = _writer_kind(workdir)
        while not sess.should_stop():
          _, step = sess.run([train, read])
          if when == 'during_training' and step == 95:
            reopen(writer)
      if when == 'after_training':
        reopen(writer)
      writer.add_summary(_summary('note', 1.0, PLUGIN), 500)
      writer.add_summary(_summary('after', 2.0, PLUGIN).SerializeToString(), 500)
      writer.flush()
      return kind, len(event_file_names(workdir))

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert results['tf'][0][1] == results['fastmts'][0][1] == 2
  assert_same_event_files(results['fastmts'][1], results['tf'][1])


def test_file_writer_subclass_is_not_adopted(tmp_path, fastmts):
  """A FileWriter subclass given to a SummarySaverHook keeps TF's
  EventFileWriter; its files and the cache writer's are TF's."""

  class MyWriter(v1.summary.FileWriter):
    pass

  def scenario(impl, workdir):
    own_dir = os.path.join(workdir, 'own')
    with tf.Graph().as_default():
      train, _ = _graph()
      own = MyWriter(own_dir)
      hook = v1.train.SummarySaverHook(save_steps=5, summary_writer=own,
                                       summary_op=v1.summary.merge_all())
      with _mts(impl, workdir, 60, hooks=[hook]) as sess:
        sess.run(train)
        kinds = _writer_kind(workdir), type(own.event_writer).__name__
        while not sess.should_stop():
          sess.run(train)
      own.close()
      return kinds

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert results['fastmts'][0][1] == results['tf'][0][1] == 'EventFileWriter'
  for sub in ('', 'own'):
    assert_same_event_files(os.path.join(results['fastmts'][1], sub),
                            os.path.join(results['tf'][1], sub))


def test_url_directory_keeps_tfs_writer(tmp_path, fastmts):
  """A summary directory given as a file:// URL is TF's file systems' to
  open: its writer keeps TF's EventFileWriter, and the records are TF's."""

  def scenario(impl, workdir):
    url = 'file://' + os.path.join(workdir, 'url')
    with tf.Graph().as_default():
      train, _ = _graph()
      hook = v1.train.SummarySaverHook(save_steps=5, output_dir=url,
                                       summary_op=v1.summary.merge_all())
      with _mts(impl, workdir, 30, hooks=[hook]) as sess:
        while not sess.should_stop():
          sess.run(train)
      kinds = _writer_kind(workdir), _writer_kind(url)
      v1.summary.FileWriterCache.get(url).close()
      return kinds

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert results['fastmts'][0][1] == results['tf'][0][1] == 'EventFileWriter'
  for sub in ('', 'url'):
    assert_same_event_files(os.path.join(results['fastmts'][1], sub),
                            os.path.join(results['tf'][1], sub))


@contextlib.contextmanager
def _info_logged():
  """TF's logger at INFO (as a user sets it) meanwhile; yields its lines."""
  old = v1.logging.get_verbosity()
  v1.logging.set_verbosity(v1.logging.INFO)
  try:
    with tf_log() as lines:
      yield lines
  finally:
    v1.logging.set_verbosity(old)


def test_rates_logged_at_info_and_recorded(tmp_path, fastmts):
  """With INFO printed, the global_step/sec lines are TF's, as many, and the
  records the same."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, _ = _graph()
      with _info_logged() as lines:
        with _mts(impl, workdir, 300) as sess:
          kind = _train_to_stop(impl, sess, train, workdir)
      rates = [level for level, message in lines if message.startswith('global_step/sec: ')]
      return kind, rates

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert results['fastmts'][0][1] == results['tf'][0][1] == ['INFO'] * 5
  assert_same_event_files(results['fastmts'][1], results['tf'][1])


def test_first_record_flushed_at_once(tmp_path, fastmts):
  """During training, with no flush asked: the graph record of the cache's
  writer and the first rate of a StepCounterHook's own fresh writer are on
  disk, as TF's writer thread flushes its first event at once."""

  def scenario(impl, workdir):
    rates_dir = os.path.join(workdir, 'rates')
    seen = {}

    class Probe(v1.train.SessionRunHook):

      def __init__(self):
        self.runs = 0

      def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs != 5:
          return
        deadline = time.time() + 10
        while time.time() < deadline:
          seen['graph'] = 'graph_def' in _kinds_on_disk(workdir)
          seen['rate'] = 'summary:global_step/sec' in _kinds_on_disk(rates_dir)
          if seen['graph'] and seen['rate']:
            break
          time.sleep(0.02)

    with tf.Graph().as_default():
      train, _ = _graph()
      rates_writer = v1.summary.FileWriter(rates_dir)
      counter = v1.train.StepCounterHook(every_n_steps=2, summary_writer=rates_writer)
      with _mts(impl, workdir, 20, hooks=[counter, Probe()]) as sess:
        sess.run(train)
        kinds = _writer_kind(workdir), type(rates_writer.event_writer).__name__
        while not sess.should_stop():
          sess.run(train)
      rates_writer.close()
      return kinds + (seen,)

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert results['fastmts'][0][1] == ADOPTED['fastmts']
  assert results['fastmts'][0][2] == results['tf'][0][2] == {'graph': True, 'rate': True}
  for sub in ('', 'rates'):
    assert_same_event_files(os.path.join(results['fastmts'][1], sub),
                            os.path.join(results['tf'][1], sub))


@pytest.mark.parametrize('summary', [
    pytest.param(b'\n\x07\n\x00\x15\x00\x00\x80?', id='explicit_empty_tag'),
    pytest.param(b'\n\r\n\x01oJ\x08\x12\x01d\n\x03\n\x01p', id='metadata_fields_out_of_order'),
    pytest.param(b'\n\x08\n\x01g*\x03\xff\xff\xff', id='malformed_histo'),
    pytest.param(b'\n\x0b\n\x01a:\x01n\x15\x00\x00\x00\x00', id='value_fields_out_of_order'),
])
def test_hand_made_summary_bytes(tmp_path, fastmts, summary):
  """A summary tensor whose bytes protobuf would not write so (TF parses and
  serializes it again, or fails to parse it): the same records, or the same
  error, as TF."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, _ = _graph()
      hook = v1.train.SummarySaverHook(save_steps=2, output_dir=workdir,
                                       summary_op=[tf.constant(summary)])

      def train_a_bit():
        with _mts(impl, workdir, 5, hooks=[hook], save_summaries_steps=None) as sess:
          while not sess.should_stop():
            sess.run(train)

      result = outcome(train_a_bit)
      return _writer_kind(workdir), result.type if isinstance(result, Raised) else None

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  assert results['fastmts'][0][1] == results['tf'][0][1]
  assert_same_event_files(results['fastmts'][1], results['tf'][1])


def _or_none(fn):
  """fn(), or None if it raises KeyError (EventAccumulator's "not found")."""
  try:
    return fn()
  except KeyError:
    return None


@pytest.mark.skipif(event_accumulator is None, reason=_TENSORBOARD_MISSING or '')
def test_tensorboard_reads_the_same(tmp_path, fastmts):
  """TensorBoard's EventAccumulator: the same tags, scalars (rates aside),
  histogram and tensor steps, tensor metadata and plugin contents, and a
  graph, in both directories."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train, _ = _graph(metadata_summaries=True)
      with _mts(impl, workdir, 120, log_step_count_steps=20) as sess:
        kind = _train_to_stop(impl, sess, train, workdir)
      return (kind,)

  results = run_both(scenario, tmp_path, fastmts)
  _assert_adopted(results)
  read = {}
  for name, (_, workdir) in results.items():
    acc = event_accumulator.EventAccumulator(workdir, size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0,
        event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    read[name] = {
        'tags': tags,
        'scalars': {t: [(e.step, None if t.endswith('/sec') else e.value)
                        for e in acc.Scalars(t)] for t in tags['scalars']},
        'histograms': {t: [e.step for e in acc.Histograms(t)] for t in tags['histograms']},
        'tensors': {t: [e.step for e in acc.Tensors(t)] for t in tags['tensors']},
        'graph': acc.Graph() is not None,
        'metadata': {t: _or_none(lambda: acc.SummaryMetadata(t).SerializeToString())
                     for t in tags['tensors']},
        'plugins': {p: _or_none(lambda: acc.PluginTagToContent(p))
                    for p in ('text', PLUGIN.plugin_data.plugin_name)},
    }
  assert read['fastmts'] == read['tf']
  assert read['tf']['graph'] and read['tf']['tags']['graph']
  assert sorted(read['tf']['scalars']) == ['bias', 'global_step/sec', 'loss']
  assert len(read['tf']['scalars']['global_step/sec']) == 5
  assert read['tf']['histograms']['weights'] == list(range(1, 120, 10))
  assert sorted(read['tf']['tensors']) == ['note', 'plugged']
  assert read['tf']['plugins']['fastmts_test'] == {'plugged': b'\x01\x02'}


# ---- The native stripping alone ------------------------------------------------------


class _Recorded:
  """An event writer that keeps what it is given (for TF's own
  SummaryToEventTransformer to write to)."""

  def __init__(self):
    self.events = []

  def add_event(self, event):
    self.events.append(event)


def _tf_stripped(transformer, data):
  """What TF's add_summary makes of the bytes `data`: the Summary's bytes in
  the event, or the Raised record of its error."""
  sink = transformer.event_writer
  result = outcome(transformer.add_summary, data, 1)
  return result if isinstance(result, Raised) else sink.events[-1].summary.SerializeToString()


_TAGS = ['loss', 'acc/top1', '', 'ünïcödé/标签', 'plugged', 'h']


def _random_value(rng):
  """A Summary.Value of a random tag of _TAGS, kind and metadata (or none)."""
  value = Summary.Value(tag=rng.choice(_TAGS))
  kind = rng.choice(['simple_value', 'histo', 'tensor', 'image', None])
  if kind == 'simple_value':
    value.simple_value = rng.choice([0.0, -0.0, 1.5, rng.uniform(-1e6, 1e6)])
  elif kind == 'histo':
    n = rng.randint(0, 4)
    value.histo.CopyFrom(summary_pb2.HistogramProto(
        min=-1.0, max=rng.random(), num=n, sum=rng.random(), sum_squares=2.0,
        bucket_limit=[rng.random() for _ in range(n)], bucket=[float(i) for i in range(n)]))
  elif kind == 'tensor':
    value.tensor.CopyFrom(tf.make_tensor_proto(
        np.array([rng.random() for _ in range(rng.randint(0, 3))], np.float32)))
  elif kind == 'image':
    value.image.CopyFrom(Summary.Image(height=1, width=2, colorspace=3,
                                       encoded_image_string=bytes(rng.randrange(256)
                                                                  for _ in range(5))))
  if rng.random() < 0.1:
    value.node_name = 'node/é'
  choice = rng.random()
  if choice < 0.4:
    value.metadata.CopyFrom(PLUGIN)
  elif choice < 0.5:
    value.metadata.SetInParent()  # present, empty: TF keeps it as well
  elif choice < 0.6:
    value.metadata.display_name = rng.choice(['', 'd'])
  return value


def test_native_stripping_matches_tf(fastmts):
  """300 random summaries through SeenSummaryTags and through TF's
  SummaryToEventTransformer: the same bytes, the same tags marked seen."""
  rng = random.Random(27)
  tags = fastmts._native.SeenSummaryTags()  # pylint: disable=protected-access
  transformer = tf_writer.SummaryToEventTransformer(_Recorded())
  seen_by_tf = transformer._seen_summary_tags  # pylint: disable=protected-access
  stripped_some = False
  for i in range(300):
    summary = Summary(value=[_random_value(rng) for _ in range(rng.randint(0, 4))])
    data = summary.SerializeToString()
    want = _tf_stripped(transformer, data)
    got = tags.strip_repeated_metadata(data)
    assert got == want, (i, summary)
    stripped_some |= got != data
    for tag in _TAGS:
      assert (tag in tags) == (tag in seen_by_tf), (i, tag)
  assert stripped_some and sorted(tags.all()) == sorted(_TAGS)


_VALID_VALUE = b'\n\x03\n\x01a'  # value {tag: "a"}


@pytest.mark.parametrize('data', [
    pytest.param(b'\x0a\x05ab', id='truncated_value'),
    pytest.param(b'\x0a\x80', id='truncated_varint'),
    pytest.param(b'\x0b', id='wire_type_3'),
    pytest.param(_VALID_VALUE + b'\x0a\x05ab', id='valid_then_truncated'),
    pytest.param(_VALID_VALUE + b'\x0a\x01\x0b', id='valid_then_wire_type_3'),
    pytest.param(b'\n\x03\n\x01\xff', id='tag_not_utf8'),
])
def test_native_stripping_refuses_malformed_bytes(fastmts, data):
  """Bytes TF's add_summary cannot parse: None, and no tag marked seen."""
  tags = fastmts._native.SeenSummaryTags()  # pylint: disable=protected-access
  want = _tf_stripped(tf_writer.SummaryToEventTransformer(_Recorded()), data)
  assert isinstance(want, Raised) and want.type is protobuf_message.DecodeError
  assert tags.strip_repeated_metadata(data) is None
  assert tags.all() == []


@pytest.mark.parametrize('data', [
    pytest.param(b'\n\x07\n\x00\x15\x00\x00\x80?', id='explicit_empty_tag'),
    pytest.param(b'\n\n\n\x01a\x15\x00\x00\x80?:\x00', id='explicit_empty_node_name'),
    pytest.param(b'\n\x0b\n\x01a:\x01n\x15\x00\x00\x00\x00', id='value_fields_out_of_order'),
    pytest.param(b'\n\x06\n\x01a\n\x01b', id='tag_twice'),
    pytest.param(b'\n\n\n\x01a\x15\x00\x00\x80?*\x00', id='two_values_of_the_oneof'),
    pytest.param(b'\x10\x01', id='unknown_summary_field'),
    pytest.param(b'\n\x83\x80\x00\n\x01a', id='long_length_varint'),
])
def test_native_stripping_of_bytes_protobuf_would_write_otherwise(fastmts, data):
  """Bytes that are not as protobuf serializes them (TF parses and writes
  them again, or fails to parse them): TF's bytes, or None (TF's Python
  then does it), never these bytes as they are."""
  tags = fastmts._native.SeenSummaryTags()  # pylint: disable=protected-access
  want = _tf_stripped(tf_writer.SummaryToEventTransformer(_Recorded()), data)
  got = tags.strip_repeated_metadata(data)
  if isinstance(want, Raised):
    assert got is None, 'TF raises %s; native gives %r' % (want.type.__name__, got)
  else:
    assert got in (None, want), 'TF writes %r; native %r' % (want, got)
  if got is None:
    assert tags.all() == []


# ---- The native writer's failures ------------------------------------------------------


def _event(step):
  return event_pb2.Event(step=step, file_version='x').SerializeToString()


def test_writer_that_cannot_make_its_file_fails_once_then_is_closed(tmp_path, fastmts):
  """A file that cannot be made (TF's EventsWriter raising) fails the
  writer: the flush waiting for it raises; the writer is closed from then
  on, as TF's EventFileWriter closes itself when it raises its thread's
  failure."""

  def create_file():
    raise OSError('no room for ' + str(tmp_path))

  writer = fastmts._native.EventWriter('', 10, 120.0, 0.0, create_file)  # pylint: disable=protected-access
  assert writer.add(_event(1))
  with pytest.raises(RuntimeError, match='no room for'):
    writer.flush()
  assert writer.closed
  assert not writer.add(_event(2))  # closed: dropped, as TF's closed writer drops it
  writer.flush()
  writer.close()


def test_writer_whose_file_cannot_be_opened_fails(tmp_path, fastmts):
  """A file name in a directory that is gone: the writer opens the file it
  is given at once, so making it raises, with the name."""
  missing = str(tmp_path / 'gone' / 'events.out.tfevents.0000000000.host')
  with pytest.raises(RuntimeError, match='Could not open events file .*gone'):
    fastmts._native.EventWriter(missing, 10, 120.0, 0.0, lambda: missing)  # pylint: disable=protected-access


# Bounds on a hang, not on slowness, sized for a loaded 2-core machine: beside two
# CPU-bound processes one child of _run_script took up to 37 s, and a test of two of them
# 70 s (past the module's 60 s). Each child has _SCRIPT_HANG_BOUND_SECS; a test running
# children has a bound above two of them and the tmpfs probe, so that a child's bound
# fires first.
_SCRIPT_HANG_BOUND_SECS = 240
_SCRIPT_TEST_BOUND_SECS = 2 * _SCRIPT_HANG_BOUND_SECS + 120


def _run_script(script, impl, logdir, *more, prefix=(), **env):
  """Runs `script` with arguments impl, logdir and `more` in a process of
  its own, started through the command `prefix` if given (with `env` added
  to the environment); the JSON its last line printed, and its stderr."""
  done = subprocess.run([*prefix, sys.executable, '-c', script, impl, logdir, *more],
                        capture_output=True, text=True, timeout=_SCRIPT_HANG_BOUND_SECS,
                        check=False, env=dict(os.environ, **env))
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


# One writer's life on a disk that takes no more bytes, once TF made the
# file: with "fsize", RLIMIT_FSIZE stops the file 10 bytes past its size
# (EFBIG); with "nospace", a file fills the rest of the file system the
# directory lies on, a small tmpfs (ENOSPC), once the file ends just short
# of a page. The next record then cannot be written out. Prints what each
# call did and TF's log lines.
_FULL_DISK = r"""
import glob, json, logging, os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
import tensorflow as tf
from tensorflow.core.util import event_pb2
from tensorflow.python.summary.writer import event_file_writer

impl, logdir, limit = sys.argv[1], sys.argv[2], sys.argv[3]
lines = []

class Recorder(logging.Handler):
  def emit(self, record):
    lines.append([record.levelname, record.getMessage().replace(logdir, 'DIR')])

logging.getLogger('tensorflow').addHandler(Recorder())
writer = event_file_writer.EventFileWriter(logdir)
writer.add_event(event_pb2.Event(step=1))
writer.flush()
if impl == 'fastmts':
  from fastmts.file_formats import event_file_writer as native
  writer = native._adopt(writer)
(name,) = glob.glob(os.path.join(logdir, 'events.*'))
size = os.path.getsize(name)
if limit == 'fsize':
  resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, resource.RLIM_INFINITY))
else:
  # A record that ends the file 20 bytes short of a page: the next one is
  # buffered (as TF's writer buffers a small record) and needs a page more.
  pad_to = -(-(size + 200) // 4096) * 4096 - 20
  want = pad_to - size - 16  # TFRecord: 12 bytes before, 4 after
  pad = next(event for event in (event_pb2.Event(step=1, file_version='x' * n)
                                 for n in range(want)) if event.ByteSize() == want)
  writer.add_event(pad)
  writer.flush()
  filler = os.open(os.path.join(logdir, 'filler'), os.O_WRONLY | os.O_CREAT)
  try:
    while os.write(filler, bytes(4096)):
      pass
  except OSError:  # ENOSPC: the file system is full
    pass
  os.close(filler)
big = event_pb2.Event(step=2, file_version='x' * 100)
calls = []
for what, call in [('add', lambda: writer.add_event(big)), ('flush', writer.flush),
                   ('add', lambda: writer.add_event(big)), ('flush', writer.flush),
                   ('close', writer.close)]:
  try:
    call()
    calls.append([what, 'ok'])
  except Exception as e:  # pylint: disable=broad-except
    calls.append([what, type(e).__name__, str(e).replace(name, 'FILE')])
print(json.dumps([calls, [[level, message.replace(name.replace(logdir, 'DIR'), 'FILE')]
                          for level, message in lines]]))
"""


@pytest.mark.timeout(_SCRIPT_TEST_BOUND_SECS)
def test_failing_disk_as_tf(tmp_path, fastmts):
  """A flush the disk refuses, on TF's writer and on the native one, each
  in its own process. TF from 2.2 (whose EventsWriter binding raises)
  raises the file system's error once, as the exception its status code
  maps to (EFBIG: IndexError), with TF's message, logs it from the writer
  thread and closes the writer; TF 1.15 to 2.1 say nothing and go on. The
  native writer does what the TF release does."""
  del fastmts

  def outcome(impl):
    logdir = str(tmp_path / impl)
    os.makedirs(logdir)
    return _run_script(_FULL_DISK, impl, logdir, 'fsize')[0]

  want = outcome('tf')
  assert outcome('fastmts') == want
  _assert_first_flush_failed(want, 'IndexError', 'File too large')


def _assert_first_flush_failed(outcome, exception, os_message):
  """`outcome` of _FULL_DISK: from TF 2.2 the first flush raised
  `exception` with TF's message; TF 1.15 to 2.1 said nothing."""
  if tuple(int(part) for part in tf.__version__.split('.')[:2]) >= (2, 2):
    assert outcome[0][1] == [
        'flush', exception, 'FILE; %s\n\tFailed to flush 1 events to FILE' % os_message], outcome
  else:
    assert all(result == 'ok' for _, result in outcome[0]), outcome


# Mounts a 256 KB tmpfs on its first argument, in a user and mount namespace
# of its own, then runs the rest: a full file system without root or a
# real disk.
_ON_SMALL_TMPFS = ('unshare', '--user', '--map-root-user', '--mount', 'sh', '-c',
                   'mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@"')


@pytest.mark.timeout(_SCRIPT_TEST_BOUND_SECS)
def test_full_file_system_as_tf(tmp_path, fastmts):
  """As test_failing_disk_as_tf, on a file system with no space left: the
  error is ENOSPC, whose status code TF's binding maps to no exception of
  its own (RuntimeError), where EFBIG's is IndexError."""
  del fastmts
  probe = tmp_path / 'probe'
  probe.mkdir()
  try:
    mounted = subprocess.run([*_ON_SMALL_TMPFS, str(probe), 'true'], capture_output=True,
                             timeout=60, check=False).returncode == 0
  except OSError:  # no unshare
    mounted = False
  if not mounted:
    pytest.skip('no tmpfs can be mounted here (unshare --user --mount)')

  def outcome(impl):
    mount = tmp_path / impl
    mount.mkdir()
    return _run_script(_FULL_DISK, impl, str(mount / 'logs'), 'nospace',
                       prefix=_ON_SMALL_TMPFS + (str(mount),))[0]

  want = outcome('tf')
  assert outcome('fastmts') == want
  _assert_first_flush_failed(want, 'RuntimeError', 'No space left on device')


def test_deleted_file_is_not_reported_and_writing_goes_on(tmp_path, fastmts, capfd):
  """The file deleted under the writer: TF's writer (its Python thread and
  EventsWriter) and the native one both go on writing to the deleted file,
  and neither says nor raises anything."""

  def deleted_under(writer_of, directory):
    os.makedirs(directory)
    writer = writer_of(directory)
    writer.add_event(event_pb2.Event(step=1))
    writer.flush()
    for name in os.listdir(directory):
      os.remove(os.path.join(directory, name))
    writer.add_event(event_pb2.Event(step=2))
    writer.flush()
    writer.close()
    return os.listdir(directory), capfd.readouterr().err

  tf_dir, native_dir = str(tmp_path / 'tf'), str(tmp_path / 'native')
  tf_outcome = deleted_under(tf_event_file_writer.EventFileWriter, tf_dir)
  native_outcome = deleted_under(
      lambda d: fastmts.file_formats.event_file_writer._adopt(tf_event_file_writer.EventFileWriter(d)),  # pylint: disable=protected-access
      native_dir)
  assert tf_outcome == ([], '')
  assert native_outcome == tf_outcome


def test_writer_without_its_file_is_not_adopted(tmp_path, fastmts):
  """TF's EventsWriter makes its file at the first event: when it cannot
  (the directory removed after the writer was made), the writer is not
  adopted and stays TF's, open, doing what TF's does (here: writing once
  the directory is back)."""
  logdir = str(tmp_path / 'gone')
  writer = tf_event_file_writer.EventFileWriter(logdir)
  os.rmdir(logdir)
  assert fastmts.file_formats.event_file_writer._adopt(writer) is None  # pylint: disable=protected-access
  os.makedirs(logdir)
  writer.add_event(event_pb2.Event(step=7))
  writer.close()
  (name,) = event_file_names(logdir)
  steps = [e.step for e in v1.train.summary_iterator(os.path.join(logdir, name))]
  assert steps[-1] == 7


# One writer closed, its directory removed, reopened: the events added then
# find no file. Prints what each call did and the records of the files left.
_REOPENED_WITHOUT_DIRECTORY = r"""
import glob, json, os, shutil, sys
import tensorflow as tf
from tensorflow.core.util import event_pb2
from tensorflow.python.summary.writer import event_file_writer

impl, logdir = sys.argv[1], sys.argv[2]
writer = event_file_writer.EventFileWriter(logdir)
if impl == 'fastmts':
  from fastmts.file_formats import event_file_writer as native
  writer = native._adopt(writer)
calls = []
def call(what, fn):
  try:
    fn()
    calls.append([what, 'ok'])
  except Exception as e:  # pylint: disable=broad-except
    calls.append([what, type(e).__name__, str(e)])
call('add', lambda: writer.add_event(event_pb2.Event(step=1)))
call('close', writer.close)
shutil.rmtree(logdir)
call('reopen', writer.reopen)
for step in (2, 3):
  call('add', lambda: writer.add_event(event_pb2.Event(step=step)))
call('flush', writer.flush)
call('close', writer.close)
os.makedirs(logdir)
call('reopen', writer.reopen)
call('add', lambda: writer.add_event(event_pb2.Event(step=4)))
call('close', writer.close)
files = [[event.step for event in tf.compat.v1.train.summary_iterator(name)]
         for name in sorted(glob.glob(os.path.join(logdir, 'events.*')))]
print(json.dumps([calls, files]))
"""


@pytest.mark.timeout(_SCRIPT_TEST_BOUND_SECS)
def test_reopen_without_its_directory_as_tf(tmp_path, fastmts):
  """Reopened after its directory was removed, a writer finds no file for
  its events. TF's EventsWriter then logs 'Write failed because file could
  not be opened.' (its C++ logging) for each event and drops it, with no
  exception; once the directory is back the next event makes a new file.
  The native writer does the same, each in its own process."""
  del fastmts

  def outcome(impl):
    printed, stderr = _run_script(_REOPENED_WITHOUT_DIRECTORY, impl, str(tmp_path / impl),
                                  TF_CPP_MIN_LOG_LEVEL='0')
    failed = [line for line in stderr.splitlines() if 'events_writer' in line]
    return printed, [line.split('] ', 1)[-1] for line in failed]

  want = outcome('tf')
  assert want == ([[[what, 'ok'] for what in
                    ('add', 'close', 'reopen', 'add', 'add', 'flush', 'close', 'reopen', 'add',
                     'close')], [[0, 4]]],
                  ['Write failed because file could not be opened.'] * 2)
  assert outcome('fastmts') == want


# A writer of FileWriterCache adopted, then its directory removed before the
# next event (a test's tearDown, a cleanup job): "direct" adds an event and
# flushes; "hook" drives a CheckpointSaverHook for one saving step first.
# Then FileWriterCache.clear(). Repeated, since the native thread's first
# write races the removal. Prints each round's outcome and the writers' kind.
_DIRECTORY_REMOVED_UNDER_WRITER = r"""
import json, os, shutil, sys, tempfile
import tensorflow as tf
from tensorflow.core.util import event_pb2
from tensorflow.python.summary.writer import writer_cache
v1 = tf.compat.v1
v1.disable_eager_execution()
impl, root, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
if impl == 'fastmts':
  import fastmts as train
  from fastmts.file_formats import event_file_writer
else:
  train = v1.train
outcomes, kinds = [], set()

def remove(logdir):
  # A writer thread that writes a queued event after its file was unlinked
  # makes the file again (TF's EventsWriter: "Event log file was lost"), so
  # rmtree can meet a directory that is not empty: stock TF does it too.
  # Removal is the cleanup job's business, not the writer's: try again.
  for _ in range(50):
    try:
      shutil.rmtree(logdir)
      return
    except OSError:
      if not os.path.isdir(logdir):
        return
  shutil.rmtree(logdir)

def direct(logdir):
  writer = writer_cache.FileWriterCache.get(logdir)
  if impl == 'fastmts':
    event_file_writer.summary_writer_of(writer)
  kinds.add(type(writer.event_writer).__name__)
  remove(logdir)
  writer.add_event(event_pb2.Event(step=1))
  writer.flush()

def hook(logdir):
  with tf.Graph().as_default():
    step = v1.train.get_or_create_global_step()
    train_op = v1.assign_add(step, 1)
    saver = train.CheckpointSaverHook(logdir, save_steps=1)
    with train.MonitoredSession(hooks=[saver]) as sess:
      sess.run(train_op)
  kinds.add(type(writer_cache.FileWriterCache.get(logdir).event_writer).__name__)
  remove(logdir)

for i in range(rounds):
  for scenario in (direct, hook):
    try:
      scenario(tempfile.mkdtemp(dir=root))
      writer_cache.FileWriterCache.clear()
      outcomes.append('ok')
    except Exception as e:  # pylint: disable=broad-except
      outcomes.append('%s: %s' % (type(e).__name__, e))
print(json.dumps([outcomes, sorted(kinds)]))
"""


@pytest.mark.timeout(_SCRIPT_TEST_BOUND_SECS)
def test_directory_removed_under_adopted_writer_as_tf(tmp_path, fastmts):
  """TF's writer holds the file it made open to the end, so writing, flushing
  and FileWriterCache.clear() succeed with its directory removed. The native
  writer opens that file at adoption, while TF's writer still holds it, and
  does the same: 20 rounds each way, each in its own process."""
  del fastmts

  def outcome(impl):
    workdir = tmp_path / impl
    workdir.mkdir()
    printed, _ = _run_script(_DIRECTORY_REMOVED_UNDER_WRITER, impl, str(workdir), '20')
    return printed

  outcomes, kinds = outcome('tf')
  assert outcomes == ['ok'] * 40 and kinds == [ADOPTED['tf']]
  outcomes, kinds = outcome('fastmts')
  assert outcomes == ['ok'] * 40 and kinds == [ADOPTED['fastmts']]
