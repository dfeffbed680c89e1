"""A FileWriter's graph records, from one GraphDef of the graph.

TF computes `graph.as_graph_def(add_shapes=True)` afresh for each graph
record it writes: twice when FileWriterCache makes a writer (the graph
event, then the meta graph event) and again in each `add_graph`. On a
7,000-op graph each takes some 45 ms. Nothing changes the graph between
those calls, so fastmts computes it once and writes the same records: the
same events (each Event is built and serialized as TF builds it), in the
same order, with the same plugin assets written at the same point. (TF
serializes these GraphDefs and MetaGraphDefs non-deterministically: two
as_graph_def() of one graph give different bytes, in TF alone too; the
records are the same messages. tests/test_start_records.py compares them.)

These mirror TF's FileWriter code (writer.py, the same in the releases
fastmts runs on) and lean on two of its private methods,
`_write_plugin_assets` and `_add_graph_def`
(_tensorflow.FILE_WRITER_ADDS_GRAPH_IN_PARTS). A writer whose class overrides any of the methods
involved, or a FileWriterCache someone replaced, gets TF's own calls.
"""
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework import meta_graph
from tensorflow.python.framework import ops
from tensorflow.python.summary.writer import writer as _tf_writer
from tensorflow.python.summary.writer import writer_cache as _tf_writer_cache
from tensorflow.python.training import basic_session_run_hooks as _tf_hooks

from fastmts import _tensorflow
from fastmts.file_formats import event_file_writer
from fastmts.file_formats import graph_files

_Transformer = _tf_writer.SummaryToEventTransformer
# The methods TF's add_graph(graph) runs; a subclass overriding any of them
# (or a TF without them) is written through its own add_graph.
_ADD_GRAPH_METHODS = ('add_graph', '_write_plugin_assets', '_add_graph_def')
_TF_METHODS = ({name: getattr(_Transformer, name) for name in _ADD_GRAPH_METHODS}
               if _tensorflow.FILE_WRITER_ADDS_GRAPH_IN_PARTS else {})
_TF_CACHE_GET = _tf_writer_cache.FileWriterCache.__dict__.get('get')


def _writes_as_tf(writer):
  """Whether writer.add_graph(graph) is TF's SummaryToEventTransformer's."""
  return bool(_TF_METHODS) and all(getattr(type(writer), name, None) is method
                                   for name, method in _TF_METHODS.items())


def add_graph(writer, graph, graph_def):
  """writer.add_graph(graph), with `graph_def` being what it would compute:
  graph.as_graph_def(add_shapes=True) of the graph as it is now."""
  if not _writes_as_tf(writer):
    writer.add_graph(graph)
    return
  # The step of TF's FileWriter.add_graph that writes the plugin assets.
  writer._write_plugin_assets(graph)  # pylint: disable=protected-access
  event_file_writer.add_graph_def(writer, graph_def)


def reserve_graph(writer, graph):
  """The first half of add_graph(writer, graph, graph_def), in the caller:
  the plugin assets written and the graph record's place reserved (a
  _native.PendingEvent to fill with the GraphDef's bytes). None when the
  record cannot be reserved: add_graph then."""
  if not _writes_as_tf(writer):
    return None
  record = event_file_writer.reserve(writer, event_file_writer.GRAPH_DEF)
  if record is None:
    return None
  try:
    # The step of TF's FileWriter.add_graph that writes the plugin assets.
    writer._write_plugin_assets(graph)  # pylint: disable=protected-access
  except BaseException:
    record.drop()
    raise
  return record


def meta_graph_shell(graph, saver_def=None):
  """create_meta_graph_def(graph_def=graph.as_graph_def(add_shapes=True),
  saver_def=saver_def) of `graph`, the default graph, as it is now, without
  the two parts that come from the GraphDef: the GraphDef itself (field 2)
  and the stripped op list. The rest (the SaverDef, every collection, TF's
  version) is built now; complete_shell adds the op list later and
  meta_graph_bytes the GraphDef's bytes, so that the GraphDef need not be
  computed yet, nor copied."""
  shell = meta_graph.create_meta_graph_def(
      graph_def=graph_pb2.GraphDef(versions=graph.graph_def_versions), saver_def=saver_def)
  shell.ClearField('graph_def')
  return shell


def complete_shell(shell, graph_def):
  """Adds to `shell` (meta_graph_shell) the stripped op list of graph_def,
  as create_meta_graph_def derives it."""
  shell.meta_info_def.stripped_op_list.MergeFrom(meta_graph.stripped_op_list_for_graph(graph_def))


def meta_graph_bytes(shell, graph_def_bytes):
  """The bytes of `shell` (meta_graph_shell) with the GraphDef whose bytes
  are `graph_def_bytes` in its place, serialized as TF's write_graph
  serializes the whole (fields in number order: the GraphDef, field 2, after
  the MetaInfoDef, field 1)."""
  rest = _tensorflow.serialize_as_write_graph(shell)
  end = 0
  if rest[:1] == b'\x0a':  # meta_info_def: its tag, its length, its bytes
    length, end = _read_varint(rest, 1)
    end += length
  return b''.join((rest[:end], b'\x12', _varint(len(graph_def_bytes)), graph_def_bytes, rest[end:]))


def serialize_graph_def(graph_def):
  """graph_def.SerializePartialToString(deterministic=True), one node at a
  time: the same bytes (a repeated field's elements are each tag, length,
  bytes; field 1, the nodes, comes first), but a thread serializing a large
  graph in the background holds the GIL for one node at most, not for the
  whole graph, while the training thread wants it back after each of its own
  calls into TF."""
  pieces = []
  for node in graph_def.node:
    node_bytes = node.SerializePartialToString(deterministic=True)
    pieces.append(b'\x0a' + _varint(len(node_bytes)))
    pieces.append(node_bytes)
  rest = graph_pb2.GraphDef()
  for field, value in graph_def.ListFields():
    if field.name == 'node':
      continue
    if field.message_type is not None:
      getattr(rest, field.name).CopyFrom(value)
    else:
      setattr(rest, field.name, value)
  pieces.append(rest.SerializePartialToString(deterministic=True))
  return b''.join(pieces)


def _varint(value):
  out = bytearray()
  while value >= 0x80:
    out.append((value & 0x7f) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


def _read_varint(data, pos):
  value = shift = 0
  while True:
    byte = data[pos]
    pos += 1
    value |= (byte & 0x7f) << shift
    shift += 7
    if byte < 0x80:
      return value, pos


def _new_file_writer(logdir, graph):
  """FileWriter(logdir, graph=graph): the writer (its event file and the
  file-version record), then the graph and the meta graph records, as TF's
  constructor writes them, from one GraphDef: taken from the graph now, the
  records' places reserved; a large one serialized and written in the
  background once the graph is finalized (graph_files), so as not to compete
  for the GIL with the Python work of the session's creation."""
  writer = _tf_writer.FileWriter(logdir)
  if not _writes_as_tf(writer):  # not reached with TF's FileWriter
    writer.add_graph(graph)
    writer.add_meta_graph(meta_graph.create_meta_graph_def(
        graph_def=graph.as_graph_def(add_shapes=True)))
    return writer
  graph_def = graph.as_graph_def(add_shapes=True)
  graph_record = reserve_graph(writer, graph) if graph_files.worth_it(graph_def) else None
  if graph_record is None:
    add_graph(writer, graph, graph_def)
    event_file_writer.add_meta_graph(writer, meta_graph.create_meta_graph_def(graph_def=graph_def))
    return writer
  meta_record = None
  try:
    meta_record = event_file_writer.reserve(writer, event_file_writer.META_GRAPH_DEF)
    if meta_record is None:
      raise RuntimeError('not reached: the writer was open a moment ago')
    # The collections as they are now: built here, serialized later.
    shell = meta_graph_shell(graph)
  except BaseException:
    graph_record.drop()
    if meta_record is not None:
      meta_record.drop()
    raise
  batch = graph_files.Batch(graph)
  held = [graph_def]  # let go of as soon as serialized
  del graph_def

  def fill_both():
    batch.wait_for_finalize()
    graph_def = held.pop()
    complete_shell(shell, graph_def)
    serialized = serialize_graph_def(graph_def)
    del graph_def
    graph_record.fill(serialized)
    meta_record.fill(meta_graph_bytes(shell, serialized))

  batch.add(fill_both, lambda: (graph_record.drop(), meta_record.drop()))
  batch.end()
  return writer


def _cache_is_tf():
  """Whether the stock hooks' SummaryWriterCache.get is TF's, unpatched."""
  cache = _tf_writer_cache.FileWriterCache
  # What the hooks' module binds now (replaced or removed: TF's calls).
  return (vars(_tf_hooks).get('SummaryWriterCache') is cache and
          _TF_CACHE_GET is not None and cache.__dict__.get('get') is _TF_CACHE_GET and
          _tf_writer_cache.FileWriter is _tf_writer.FileWriter and
          isinstance(getattr(cache, '_cache', None), dict) and hasattr(cache, '_lock'))


def writer_dir_of_begin(hook):
  """The directory whose writer a stock hook's begin() first asks
  SummaryWriterCache for, or None: CheckpointSaverHook
  always, StepCounterHook and SummarySaverHook when given an output_dir and
  no summary_writer. A subclass may begin otherwise: None."""
  # pylint: disable=protected-access
  # (TF's hooks keep their directories and writer in private attributes.)
  kind = type(hook)
  if kind is _tf_hooks.CheckpointSaverHook:
    return hook._checkpoint_dir
  if kind in (_tf_hooks.StepCounterHook, _tf_hooks.SummarySaverHook):
    return hook._output_dir if hook._summary_writer is None else None
  return None


def make_cached_writer(logdir):
  """Makes the writer `FileWriterCache.get(logdir)` would make, if the cache
  has none for logdir yet: called just before a stock hook's begin() asks
  the cache, so the writer and its records are the same and come at the
  same point. Does nothing if the cache is not TF's own."""
  if not logdir or not _cache_is_tf():
    return
  cache = _tf_writer_cache.FileWriterCache
  # pylint: disable=protected-access
  # (TF's FileWriterCache keeps its writers and lock in private class attributes.)
  with cache._lock:
    if logdir not in cache._cache:
      cache._cache[logdir] = _new_file_writer(logdir, ops.get_default_graph())
