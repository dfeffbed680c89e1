"""TF's EventFileWriter with a native writer thread.

TF's `FileWriter` hands each event to an `EventFileWriter`, whose Python
thread serializes and writes it. For the writers fastmts's native hooks
write to (the `FileWriterCache` writer of the summary directory), fastmts
swaps that `EventFileWriter` for `NativeEventFileWriter`: the same methods
and behaviour (file names, records, their order, flush schedule, close and
reopen), but one native queue and thread, which the native hooks append to
directly. The `FileWriter` object itself stays TF's, so a user's
`add_summary` on it lands in order with the hooks' records. The records
fastmts's Python makes for the stock hooks (the graph and meta graph, a
save's CHECKPOINT session log) go through `add_graph_def`, `add_meta_graph`
and `add_session_log` here: TF's protobuf serializes the message, and the
Event around it is made natively, as TF's `_add_event` makes it.

The file stays TF's own: TF's EventsWriter makes each file (its name and
its release's first record); the native thread appends to it. Writers that
are not exactly TF's (a subclass, `FileWriter(session=...)`), or that write
to a URL (gs://, file://...), keep TF's Python writer.
"""
import atexit
import os
import re
import socket
import weakref

from tensorflow.core.framework import summary_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.core.util import event_pb2
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.summary.writer import event_file_writer as _tf_event_file_writer
from tensorflow.python.summary.writer import writer as _tf_writer

from fastmts import _native
from fastmts import _tensorflow
from fastmts.file_formats import graph_files

# TF's SummaryToEventTransformer keeps a value's metadata the first time its
# tag is seen because a SummaryMetadata message is always truthy in Python
# protobuf; the native stripping assumes exactly that.
_METADATA_ALWAYS_TRUTHY = bool(summary_pb2.SummaryMetadata())

# Native writers, closed at exit: their threads must not outlive the
# interpreter (TF's writer thread is a daemon, which may lose what it had
# not flushed; these write it all).
_open_writers = weakref.WeakSet()


class NativeEventFileWriter:
  """TF's EventFileWriter API over a native writer thread (see the module
  docstring). Made by `adopt`, never directly."""

  def __init__(self, logdir, native):
    self._logdir = logdir
    self.native = native  # _native.EventWriter
    _open_writers.add(self)

  def get_logdir(self):
    """Returns the directory where event file will be written."""
    return self._logdir

  def reopen(self):
    """After close(): the next events go to a new file, as in TF."""
    self.native.reopen()

  def add_event(self, event):
    """Adds an event to the event file (dropped once closed, as TF)."""
    self.native.add(event.SerializeToString())

  def flush(self):
    """Returns once every event added before is written and flushed."""
    graph_files.hurry()  # a graph record among them: filled now
    self.native.flush()

  def close(self):
    """Flushes and closes the event file."""
    graph_files.hurry()
    self.native.close()


class _SeenSummaryTags:
  """SummaryToEventTransformer's `_seen_summary_tags` set, shared with the
  native hooks writing through the same FileWriter."""

  def __init__(self, native):
    self.native = native  # _native.SeenSummaryTags

  def __contains__(self, tag):
    return tag in self.native

  def add(self, tag):
    self.native.add(tag)

  def __iter__(self):
    return iter(self.native.all())

  def __len__(self):
    return len(self.native.all())


def _is_local(logdir):
  # A plain path: the native thread opens it itself. Anything with a scheme
  # (file:// included) is TF's file systems' to open.
  return re.match(r'^[A-Za-z][A-Za-z0-9+.-]*://', logdir) is None


def _event_file_suffix(prefix, filename):
  """The filename_suffix TF's EventsWriter named `filename` with, or None
  if the name is not one it makes (prefix.out.tfevents.<secs>.<host><suffix>)."""
  match = re.match(re.escape(prefix) + r'\.out\.tfevents\.\d+\.' + re.escape(socket.gethostname()),
                   filename)
  return None if match is None else filename[match.end():]


def summary_writer_of(file_writer):
  """The native SummaryWriter behind TF `file_writer`, adopting its event
  writer first if need be; None when TF's Python must write its events."""
  if type(file_writer) is not _tf_writer.FileWriter or not _METADATA_ALWAYS_TRUTHY:
    return None
  native = getattr(file_writer, '_fastmts_summary_writer', None)
  if native is not None:
    return native if type(file_writer.event_writer) is NativeEventFileWriter else None
  tags = getattr(file_writer, '_seen_summary_tags', None)
  if type(tags) is not set:
    return None
  events = _adopt(file_writer.event_writer)
  if events is None:
    return None
  seen = _native.SeenSummaryTags()
  for tag in tags:
    seen.add(tag)
  # TF's FileWriter keeps the summary tags it has seen in _seen_summary_tags.
  file_writer._seen_summary_tags = _SeenSummaryTags(seen)  # pylint: disable=protected-access
  file_writer.event_writer = events
  native = _native.SummaryWriter(events.native, seen)
  # fastmts's own attribute, kept on TF's writer object it adopted.
  file_writer._fastmts_summary_writer = native  # pylint: disable=protected-access
  return native


# Event's fields (its oneof `what`) of the records below.
_GRAPH_DEF = event_pb2.Event.GRAPH_DEF_FIELD_NUMBER
_META_GRAPH_DEF = event_pb2.Event.META_GRAPH_DEF_FIELD_NUMBER
_SESSION_LOG = event_pb2.Event.SESSION_LOG_FIELD_NUMBER
GRAPH_DEF, META_GRAPH_DEF = _GRAPH_DEF, _META_GRAPH_DEF  # for reserve()


def _written_natively(file_writer, field, message, global_step=None):
  """Writes `message` as the Event's `field`, as TF's `_add_event` would,
  through the native writer of `file_writer` while it is adopted and open;
  False (nothing written) when TF's Python must write it: a closed writer's
  records go through TF, which warns and drops them."""
  native = summary_writer_of(file_writer)
  if native is None or native.events.closed or getattr(file_writer, '_closed', False):
    return False
  native.add_serialized(field, message.SerializeToString(),
                        0 if global_step is None else int(global_step))
  return True


def reserve(file_writer, field):
  """The place in `file_writer`'s event file of the record of the Event's
  `field` (_GRAPH_DEF or _META_GRAPH_DEF) TF's `_add_event` would add now:
  a _native.PendingEvent whose fill(payload) writes the record there (the
  Event made with this moment's wall time), or drop() none. None when TF's
  Python must write it (as _written_natively)."""
  native = summary_writer_of(file_writer)
  if native is None or native.events.closed or getattr(file_writer, '_closed', False):
    return None
  return native.reserve_serialized(field, 0)


def add_session_log(file_writer, session_log, global_step=None):
  """file_writer.add_session_log(session_log, global_step): TF's record,
  made natively when the writer is adopted."""
  if not _written_natively(file_writer, _SESSION_LOG, session_log, global_step):
    file_writer.add_session_log(session_log, global_step)


def add_meta_graph(file_writer, meta_graph_def):
  """file_writer.add_meta_graph(meta_graph_def): TF's record, made natively
  when the writer is adopted (anything but a MetaGraphDef gets TF's error)."""
  if (type(meta_graph_def) is not meta_graph_pb2.MetaGraphDef or
      not _written_natively(file_writer, _META_GRAPH_DEF, meta_graph_def)):
    file_writer.add_meta_graph(meta_graph_def)


def add_graph_def(file_writer, graph_def):
  """file_writer._add_graph_def(graph_def), the last step of TF's
  add_graph: TF's record, made natively when the writer is adopted."""
  if not _written_natively(file_writer, _GRAPH_DEF, graph_def):
    # The step of TF's FileWriter.add_graph that writes the record.
    file_writer._add_graph_def(graph_def)  # pylint: disable=protected-access


def _file_maker(writer_type, prefix, suffix):
  """The callable the native writer makes a new event file with: as TF's
  EventsWriter makes it after close() and reopen(); it returns the file's
  name, or None when it cannot make one."""

  def create_file():
    made = writer_type(prefix.encode())
    try:
      made.InitWithSuffix(suffix.encode())
    except Exception:  # pylint: disable=broad-except
      pass  # TF 2.2 on raises a file it could not make, 1.15 returns it: the file tells
    name = made.FileName()
    name = name.decode() if isinstance(name, bytes) else name
    made.Close()
    if not os.path.isfile(name):
      _log_write_failed(writer_type)
      return None
    return name

  return create_file


def _adopt(event_writer):
  """A NativeEventFileWriter carrying on from TF's open EventFileWriter
  `event_writer` (flushed and closed here), or None if it cannot."""
  if type(event_writer) is not _tf_event_file_writer.EventFileWriter:
    return None
  # TF's EventFileWriter keeps whether it is closed in _closed.
  if event_writer._closed or not _is_local(event_writer.get_logdir()):  # pylint: disable=protected-access
    return None
  worker = getattr(event_writer, '_worker', None)
  flush_secs = getattr(event_writer, '_flush_secs', None)
  if _tensorflow.EVENT_FILE_WRITER_KEEPS_MAX_QUEUE:
    max_queue = getattr(event_writer, '_max_queue', None)
  else:
    max_queue = getattr(getattr(event_writer, '_event_queue', None), 'maxsize', None)
  # TF's EventsWriter (which makes the event files) is private to its EventFileWriter.
  ev_writer = event_writer._ev_writer  # pylint: disable=protected-access
  if worker is None or flush_secs is None or max_queue is None:
    return None
  prefix = os.path.join(event_writer.get_logdir(), 'events')
  # Every event added so far is written and flushed; FileName() makes the
  # file now if no event made it yet.
  event_writer.flush()
  filename = ev_writer.FileName()
  filename = filename.decode() if isinstance(filename, bytes) else filename
  suffix = _event_file_suffix(prefix, filename)
  # A file TF's EventsWriter could not make (its directory gone, or a
  # file): TF's writer stays, and says what TF says of it.
  if suffix is None or not os.path.isfile(filename):
    return None
  next_flush_time = getattr(worker, '_next_event_flush_time', 0)
  # From TF 2.2 the EventsWriter raises what its Flush fails with, and TF's
  # writer thread logs it; before, it returns a status (its Flush returns one
  # even here, with nothing to flush) that TF's Python drops.
  failures_raised = ev_writer.Flush() is None
  writer_type = type(ev_writer)

  create_file = _file_maker(writer_type, prefix, suffix)

  try:
    # Opens the file while TF's writer still holds it: TF's writer keeps its
    # file open to the end, its directory removed or not, and so must this.
    native = _native.EventWriter(
        filename, int(max_queue), float(flush_secs), float(next_flush_time), create_file,
        raise_failures=failures_raised,
        report_failure=_log_writer_failure if failures_raised else None)
  except (OSError, RuntimeError):
    return None  # gone since TF made it: TF's writer stays
  event_writer.close()
  return NativeEventFileWriter(event_writer.get_logdir(), native)


def _log_write_failed(writer_type):
  # TF's EventsWriter, when an event finds no file it can open, logs that
  # (with TF's C++ logging, in its release's format) and drops the event.
  # A writer of a path that can never be made says it in TF's own words.
  writer_type(os.path.join(os.devnull, 'events').encode()).WriteEvent(event_pb2.Event())


def _log_writer_failure(message):
  # TF's _EventLoggerThread, as it dies of its EventsWriter's error.
  logging.error('EventFileWriter writer thread error: %s', message)


@atexit.register
def _close_at_exit():
  for writer in list(_open_writers):
    try:
      writer.native.close()
    except Exception:  # pylint: disable=broad-except
      pass  # a failed writer already raised to its user
