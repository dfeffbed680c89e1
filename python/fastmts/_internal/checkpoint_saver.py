"""CheckpointSaverHook's session-side methods, as fastmts runs the stock hook.

TF's own `after_create_session`, `_save` and `end` (as the release in use
has them, where releases differ: _tensorflow's facts), with three costs
taken off them, the files unchanged:

* graph.pbtxt is printed natively (graph_io: the bytes of TF's write_graph);
* after_create_session computes the GraphDef once for graph.pbtxt, the
  graph and meta graph records and the first save's .meta, where TF
  computes it four times;
* the meta graph of each save is exported once per finalized graph. TF's
  `Saver.save(write_meta_graph=True)` rebuilds the whole MetaGraphDef at
  every save, which costs 5-12x the save itself on a large graph. Once the
  graph is finalized the only things that can change it are its
  collections and the saver's SaverDef, so the MetaGraphDef is kept with a
  fingerprint of both (add_to_collection refuses on a finalized graph, but
  the list get_collection_ref gives can still be changed) and written again
  (as TF writes it: serialized deterministically, atomically) while they
  stay the same.

Only TF's exact `Saver` class is saved this way; any other saver (a
subclass may override save or export) gets TF's `save` call unchanged.

With fastmts's `CheckpointSaverHook(async_checkpoint=True)` a save starts a
background write instead (async_checkpoint.py) and the end of `_save`
(`after_save`) runs once the files are complete.

All of it is one object per hook, its `CheckpointSaver` (`saver_of(hook)`):
the save, synchronous (this class) or asynchronous (its subclass
async_checkpoint.AsyncCheckpointSaver, which fastmts's hook chooses when
made), the start's graph files and the meta graph kept between saves. The
native runner of the hook and fastmts's hook class (when TF's Python
dispatch runs it) call the same object.
"""
import os
import weakref

from tensorflow.core.util.event_pb2 import SessionLog
from tensorflow.python.framework import meta_graph
from tensorflow.python.framework import ops
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import basic_session_run_hooks as _tf_hooks
from tensorflow.python.training import saver as saver_lib

from fastmts import _tensorflow
from fastmts.file_formats import event_file_writer
from fastmts.file_formats import graph_events
from fastmts.file_formats import graph_files
from fastmts.file_formats import graph_io
from fastmts._internal.tf_call_sites import TFSite

# The log lines of TF's CheckpointSaverHook._save, logged from its lines.
# TF's private method: the source lines its log calls are made from.
_SAVE = _tf_hooks.CheckpointSaverHook._save  # pylint: disable=protected-access
_LOG_BEFORE_LISTENERS = TFSite(_SAVE, 'Calling checkpoint listeners before')
_LOG_SAVING = TFSite(_SAVE, 'Saving checkpoints for')
_LOG_AFTER_LISTENERS = TFSite(_SAVE, 'Calling checkpoint listeners after')
_LOG_LISTENER_STOPS = TFSite(_SAVE, 'A CheckpointSaverListener requested')

# TF's CheckpointSaverHook -> its CheckpointSaver. The saver holds its hook
# weakly, so that the entry lives as long as the hook.
_savers = weakref.WeakKeyDictionary()


def saver_of(hook):
  """The CheckpointSaver of a CheckpointSaverHook: the one set for it
  (set_saver_of, by fastmts's form of the hook), else a synchronous one,
  made at its first use."""
  saver = _savers.get(hook)
  if saver is None:
    saver = _savers[hook] = CheckpointSaver(hook)
  return saver


def set_saver_of(hook, saver):
  """`saver` (a CheckpointSaver of `hook`) saves for `hook` from now on."""
  _savers[hook] = saver


class CheckpointSaver:
  """The saving of one CheckpointSaverHook: TF's after_create_session,
  _save and end with the costs above taken off, and what they keep between
  calls (the meta graph of the last save, the start's .meta in the
  background). Saves synchronously; its subclass AsyncCheckpointSaver
  (async_checkpoint.py) writes in the background, and overrides the hooks
  below for it (`writer`, `starts_in_background`, `deliver_write`,
  `_write_in_background`)."""

  # pylint: disable=protected-access
  # (This is TF's CheckpointSaverHook's code, run beside the hook: it reads
  # what TF's hook keeps in private attributes (_timer, _listeners,
  # _save_path, _summary_writer, _get_saver()) as TF's methods do.)

  # The native CheckpointWriter of background writes, which the native hook
  # polls before each step for an ended one (None: none).
  writer = None
  # Whether the start's graph files may be written in the background (an
  # asynchronous save gets TF's calls in place).
  starts_in_background = True

  def __init__(self, hook):
    self._hook_ref = weakref.ref(hook)
    self._meta_graph = None  # (fingerprint, serialized MetaGraphDef) of the last export
    self._first_meta = None  # writes the start's .meta in the background, given the checkpoint

  @property
  def hook(self):
    """TF's hook object this saver saves for."""
    return self._hook_ref()

  def after_create_session(self, session):
    """TF's CheckpointSaverHook.after_create_session, with one GraphDef.

    TF computes graph.as_graph_def(add_shapes=True) four times here: for
    graph.pbtxt, for the meta graph record, in the writer's add_graph and in
    the first save's export_meta_graph. A finalized graph cannot change in
    between (no op nor function can be added), so here it is computed once
    and the meta graph record's MetaGraphDef is also the first save's .meta:
    both are create_meta_graph_def of that GraphDef, the saver's SaverDef and
    every collection, which is what Saver.export_meta_graph() builds in each
    supported release (tests/test_meta_graph_once.py); the save checks the
    collections and SaverDef again before reusing it. A graph that is not
    finalized gets TF's calls as they are."""
    hook = self.hook
    global_step = session.run(hook._global_step_tensor)
    graph = ops.get_default_graph()
    once = graph.finalized
    started = self._start_in_background(session, graph)
    if started is True:
      try:
        self.save(session, global_step, first=True)
      finally:
        unsaved, self._first_meta = self._first_meta, None
        if unsaved is not None:  # the save failed: no .meta, as in TF
          unsaved(None)
      hook._timer.update_last_triggered_step(global_step)
      return
    graph_def = graph.as_graph_def(add_shapes=True)
    if saves_graph_def(hook):
      graph_io.write_graph(graph_def, hook._checkpoint_dir, 'graph.pbtxt')
      if not once:
        graph_def = graph.as_graph_def(add_shapes=True)
    saver = hook._get_saver()
    saver_def = saver.saver_def if saver else None
    if started is False:
      meta_graph_def = meta_graph.create_meta_graph_def(graph_def=graph_def, saver_def=saver_def)
    else:  # built already (its warnings logged): the shell, completed
      meta_graph_def = started
      graph_events.complete_shell(meta_graph_def, graph_def)
      meta_graph_def.graph_def.CopyFrom(graph_def)
    if once:
      graph_events.add_graph(hook._summary_writer, graph, graph_def)
    else:
      hook._summary_writer.add_graph(graph)
    event_file_writer.add_meta_graph(hook._summary_writer, meta_graph_def)
    if (once and saves_graph_def(hook) and session.graph is graph and
        type(saver) is saver_lib.Saver and _built_quietly(graph, meta_graph_def)):
      # What _saver_save would export at this first save (it exports under
      # session.graph, the default graph here).
      self._meta_graph = (_fingerprint(graph, saver),
                          _tensorflow.serialize_as_write_graph(meta_graph_def))
    self.save(session, global_step)
    hook._timer.update_last_triggered_step(global_step)

  def _in_background_as_tf(self, session, graph):
    """Whether the start's graph files of this hook can be written in the
    background exactly as TF writes them in place."""
    hook = self.hook
    return (graph.finalized and saves_graph_def(hook) and session.graph is graph and
            type(hook._get_saver()) is saver_lib.Saver and
            not _tensorflow.SAVER_SAVE_LOGS_CHECKPOINT_FILES and self.starts_in_background)

  def _start_in_background(self, session, graph):
    """TF's after_create_session up to its save, the files written in the
    background (graph_files): the files opened, the records' places reserved
    and the meta graph's collections built here, where TF would fail or they
    could still change; the GraphDef computed (the graph is finalized: it is
    the same later), serialized, printed and written by a graph_files.Batch.
    The first save's .meta follows in the same batch (`_first_meta`). False,
    with nothing done, where that cannot be exactly TF's; or, when the meta
    graph record was built but cannot be reused, that record without what
    comes from the GraphDef (graph_events.meta_graph_shell)."""
    hook = self.hook
    if not self._in_background_as_tf(session, graph):
      return False
    size = graph_files.estimated_bytes(graph)
    if not graph_files.worth_it_estimate(size):
      return False
    saver = hook._get_saver()
    shell = graph_events.meta_graph_shell(graph, saver_def=saver.saver_def)
    if not _built_quietly(graph, shell):
      return shell
    pbtxt = graph_io.open_file(hook._checkpoint_dir, 'graph.pbtxt')
    if pbtxt is None:
      return False
    if not graph_files.room_for(hook._checkpoint_dir, size):  # TF's writes, its full disk's error
      pbtxt.abort()
      return False
    graph_record = graph_events.reserve_graph(hook._summary_writer, graph)
    meta_record = None if graph_record is None else event_file_writer.reserve(
        hook._summary_writer, event_file_writer.META_GRAPH_DEF)
    if meta_record is None:
      pbtxt.abort()
      if graph_record is not None:
        graph_record.drop()
      return False
    fingerprint = _fingerprint(graph, saver)
    batch = graph_files.Batch(graph)

    def graph_files_job():
      # One GraphDef, one serialization of it (deterministic: one of the
      # serializations TF's may give, the same messages) for graph.pbtxt and
      # both records, its text streamed to the file after the records.
      graph_def = graph.as_graph_def(add_shapes=True)
      graph_events.complete_shell(shell, graph_def)
      serialized = graph_events.serialize_graph_def(graph_def)
      del graph_def
      graph_record.fill(serialized)
      meta = graph_events.meta_graph_bytes(shell, serialized)
      meta_record.fill(meta)
      self._meta_graph = (fingerprint, meta)
      del meta
      graph_io.write_text(pbtxt, serialized)

    batch.add(graph_files_job, lambda: (graph_record.drop(), meta_record.drop(), pbtxt.abort()))
    self._first_meta = lambda checkpoint_file: self._first_meta_file(batch, graph,
                                                                     checkpoint_file)
    return True

  def _first_meta_file(self, batch, graph, checkpoint_file):
    """The first save's .meta, after its checkpoint: opened now, written by
    `batch` once the meta graph is serialized; the batch ends with it."""
    if checkpoint_file is None:
      batch.end()
      return
    try:
      filename = _tensorflow.checkpoint_management.meta_graph_filename(
          checkpoint_file, meta_graph_suffix='meta')
      meta_file = graph_io.open_file(os.path.dirname(filename), os.path.basename(filename))
    except BaseException:
      batch.end()
      raise
    if meta_file is None:  # written in place, as TF writes it (its error, if any)
      batch.end()
      graph_files.wait_and_raise(graph)
      write_meta_graph(checkpoint_file, self._meta_graph[1])
      return
    batch.add(lambda: graph_io.write_bytes(meta_file, self._meta_graph[1]), meta_file.abort)
    batch.end()

  def end(self, session):
    """TF's CheckpointSaverHook.end (with any background write delivered)."""
    hook = self.hook
    graph_files.wait_and_raise(session.graph)
    self.deliver_write(wait=True)
    last_step = session.run(hook._global_step_tensor)
    if last_step != hook._timer.last_triggered_step():
      self.save(session, last_step)
      self.deliver_write(wait=True)
    for listener in hook._listeners:
      listener.end(session, last_step)

  def deliver_write(self, wait):
    """The outcome of a background write that ended (with `wait`, once the
    one in flight has), on the training thread: returns whether a listener
    asked to stop. A synchronous saver has none."""
    del wait
    return False

  def save(self, session, step, first=False):
    """TF's CheckpointSaverHook._save: saves, returns should_stop. A
    background write (AsyncCheckpointSaver) delivers the previous write's
    after_save first and this one's once it is written. A save but the
    `first` of a session's start waits for the start's graph files
    (graph_files), so that no checkpoint names a file not on disk yet."""
    hook = self.hook
    if not first:
      graph_files.wait_and_raise(session.graph)
    should_stop = self.deliver_write(wait=True)
    if _tensorflow.SAVER_HOOK_LOGS_LISTENER_CALLS:  # TF 2.4 and later
      _LOG_BEFORE_LISTENERS.call(
          logging.info, 'Calling checkpoint listeners before saving checkpoint %d...', step)
    else:  # TF 1.15 to 2.1 log the save before the listeners, and no listener lines
      _LOG_SAVING.call(logging.info, 'Saving checkpoints for %d into %s.', step, hook._save_path)
    for listener in hook._listeners:
      listener.before_save(session, step)

    if _tensorflow.SAVER_HOOK_LOGS_LISTENER_CALLS:
      _LOG_SAVING.call(logging.info, 'Saving checkpoints for %d into %s.', step, hook._save_path)
    if self._write_in_background(session, step):
      return should_stop
    self._saver_save(session, step)
    return self.after_save(session, step) or should_stop

  def _write_in_background(self, session, step):
    """Starts writing `step`'s checkpoint in the background; False where it
    is saved in place (always, for a synchronous saver)."""
    del session, step
    return False

  def after_save(self, session, step):
    """The end of TF's CheckpointSaverHook._save, once the files are written."""
    hook = self.hook
    event_file_writer.add_session_log(
        hook._summary_writer,
        SessionLog(status=SessionLog.CHECKPOINT, checkpoint_path=hook._save_path), step)
    if _tensorflow.SAVER_HOOK_LOGS_LISTENER_CALLS:
      _LOG_AFTER_LISTENERS.call(
          logging.info, 'Calling checkpoint listeners after saving checkpoint %d...', step)
    should_stop = False
    for listener in hook._listeners:
      if listener.after_save(session, step):
        _LOG_LISTENER_STOPS.call(
            logging.info, 'A CheckpointSaverListener requested that training be stopped. '
            'listener: {}'.format(listener))
        should_stop = True
    return should_stop

  def _saver_save(self, session, step):
    """hook._get_saver().save(session, hook._save_path, global_step=step,
    write_meta_graph=hook._save_graph_def), with the meta graph reused."""
    hook = self.hook
    saver = hook._get_saver()
    graph = session.graph
    if (not saves_graph_def(hook) or type(saver) is not saver_lib.Saver or not graph.finalized
        # TF 2.9's Saver.save logs the checkpoint's files after writing the .meta
        # itself; only its own export puts the .meta among them, so TF exports.
        or _tensorflow.SAVER_SAVE_LOGS_CHECKPOINT_FILES):
      saver.save(session, hook._save_path, global_step=step,
                 write_meta_graph=saves_graph_def(hook))
      return
    saver.save(session, hook._save_path, global_step=step, write_meta_graph=False)
    first_meta, self._first_meta = self._first_meta, None
    if first_meta is not None:  # the start's: written in the background
      first_meta(checkpoint_file(saver, hook._save_path, step))
      return
    # Saver.save's own meta graph step, after the checkpoint and its state file.
    write_meta_graph(checkpoint_file(saver, hook._save_path, step),
                     self.meta_graph_bytes(saver, graph))

  def meta_graph_bytes(self, saver, graph):
    """saver.export_meta_graph() of `graph` as it is now, serialized as TF
    writes it; exported again only when what a finalized graph's
    MetaGraphDef can change with changed."""
    if not graph.finalized:
      with graph.as_default():
        return _tensorflow.serialize_as_write_graph(saver.export_meta_graph())
    fingerprint = _fingerprint(graph, saver)
    cached = self._meta_graph
    if cached is None or cached[0] != fingerprint:
      with graph.as_default():
        cached = (fingerprint, _tensorflow.serialize_as_write_graph(saver.export_meta_graph()))
      self._meta_graph = cached
    return cached[1]


def _built_quietly(graph, meta_graph_def):
  """Whether building meta_graph_def logged nothing: create_meta_graph_def
  warns of (and leaves out) a collection under a key that is not a string
  or whose items it cannot serialize. TF's first save warns again as it
  exports; such a graph gets that export rather than the record's."""
  for key in graph.get_all_collection_keys():
    if not isinstance(key, str):
      return False
    if key not in meta_graph_def.collection_def and graph.get_collection(key):
      return False
  return True


def write_meta_graph(checkpoint_file, serialized):
  """The .meta file of `checkpoint_file`, as Saver.save writes it."""
  filename = _tensorflow.checkpoint_management.meta_graph_filename(checkpoint_file, meta_graph_suffix='meta')
  graph_io.write_serialized_graph(serialized, os.path.dirname(filename),
                                  os.path.basename(filename))


def saves_graph_def(hook):
  """hook._save_graph_def; a hook of a release without that option always
  writes the graph and the .meta."""
  if not _tensorflow.SAVER_HOOK_TAKES_SAVE_GRAPH_DEF:
    return True
  return getattr(hook, '_save_graph_def', True)



def checkpoint_file(saver, save_path, step):
  """The checkpoint prefix Saver.save names from save_path and global_step."""
  # TF's Saver keeps its pad_step_number option in a private attribute.
  if saver._pad_step_number:  # pylint: disable=protected-access
    return '%s-%s' % (save_path, '{:08d}'.format(step))
  return '%s-%d' % (save_path, step)


def _fingerprint(graph, saver):
  """What a finalized graph's MetaGraphDef can still change with: the
  collections (keys and the objects in them) and the SaverDef."""
  collections = tuple((key, tuple(id(item) for item in graph.get_collection_ref(key)))
                      for key in graph.get_all_collection_keys())
  saver_def = saver.saver_def.SerializeToString(deterministic=True)
  return id(graph), graph.version, collections, saver_def
