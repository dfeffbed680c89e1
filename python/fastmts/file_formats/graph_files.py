"""The graph files of a session's start, written in the background.

At a session's start TF writes files nothing reads before training:
graph.pbtxt, the graph and meta graph event records, the first checkpoint's
`.meta`. On a graph with large constants they are most of the start (TF
writes 532 MB for 64 MB of constants). fastmts does the cheap part of each
at once, in the caller, where TF would fail (the directory made, the file
opened, the record's place taken in the event file's queue, every message
built from the graph as it is then), and the rest in a thread of its own:
serializing, printing the text and writing; and, where the graph is
finalized already (the checkpoint's files, after the session's creation),
computing its GraphDef too, which is the same then as later. So:

- the files are TF's, byte for byte; each record keeps its place in the
  event file (the native writer waits at a record not filled yet, so a
  summary added meanwhile still lands after it);
- each file is written to an unnamed temporary (cpp/core/file_formats/
  atomic_file.h) and renamed, so it is on disk whole or not at all, even in
  a process killed meanwhile;
- everything is on disk before the session's `close()` returns, before a
  later checkpoint is saved, and before the interpreter exits (the thread
  is not a daemon);
- an error met in the background is raised by the next of those waits
  (`wait_and_raise`), not lost;
- the records of a writer made before the graph is finalized (a hook's
  begin()) are serialized once it is (Batch.wait_for_finalize), not while
  the session's creation runs Python beside them.

Batches and their errors belong to a graph: a session waits for its own
graph's files and raises their errors, not another session's (two sessions
of a process, each on its graph).
"""
import os
import queue
import threading
import time
import weakref

from tensorflow.python.platform import tf_logging as logging

# A GraphDef smaller than this (serialized) has its files written in place,
# as TF writes them: on a 7,000-op graph (0.6 MB) they take some 0.1 s, which a
# thread competing for the GIL with the first steps would not save. Tests
# set it to 0, so that every graph takes the background path.
MIN_BYTES = 8 << 20

_lock = threading.Lock()
_batches = []  # started and not waited for yet
_errors = []  # (the batch's graph, error) met in the background, not raised yet


class Batch:
  """Jobs run one after the other on a thread of their own. A job is a
  (run, give_up) pair: `give_up` is called instead of `run` once an earlier
  job failed, and after `run` fails (it must leave nothing half done: a
  reserved record dropped, a temporary removed). The files are `graph`'s
  (held weakly: a graph let go of needs no wait)."""

  def __init__(self, graph):
    self._graph = weakref.ref(graph)
    self._jobs = queue.SimpleQueue()
    self._hurried = threading.Event()
    with _lock:
      # One batch of a graph at a time: one GraphDef of it in memory.
      self._earlier = [batch for batch in _batches if batch.of(graph)]
      _batches.append(self)
    self._thread = threading.Thread(target=self._run, name='fastmts-graph-files')
    self._thread.start()

  def add(self, run, give_up=None):
    """Queues a job, to run after those added before."""
    self._jobs.put((run, give_up))

  def end(self):
    """No more jobs: the thread ends once those added are done."""
    self._jobs.put(None)

  def hurry(self):
    """wait_for_finalize returns now: someone waits for these files."""
    self._hurried.set()
    for batch in self._earlier:
      batch.hurry()

  def wait_for_finalize(self):
    """In a job: returns once the graph is finalized (a session's creator
    finalizes it before it creates the session), or once someone waits for
    the files (hurry), or the main thread ended, or after
    FINALIZE_WAIT_SECS. A job serializing a large GraphDef waits here so as
    not to compete for the GIL with the Python work of the session's
    creation (building the Saver and the Scaffold's ops)."""
    deadline = time.monotonic() + FINALIZE_WAIT_SECS
    main = threading.main_thread()
    while True:
      graph = self._graph()
      if (graph is None or graph.finalized or not main.is_alive() or
          time.monotonic() >= deadline):
        return
      del graph
      if self._hurried.wait(_FINALIZE_POLL_SECS):
        return

  def _run(self):
    _yield_to_training()
    for batch in self._earlier:
      batch.join()
    self._earlier = []
    failed = False
    while True:
      job = self._jobs.get()
      if job is None:
        return
      run, give_up = job
      del job
      if not failed:
        try:
          run()
          continue
        except BaseException as error:  # pylint: disable=broad-except
          failed = True
          with _lock:
            _errors.append((self._graph, error))
      if give_up is not None:
        try:
          give_up()
        except Exception:  # pylint: disable=broad-except
          logging.exception('fastmts: giving up a graph file failed')

  def join(self):
    """Returns once the thread ended (end() called, the jobs done)."""
    self._thread.join()

  def of(self, graph):
    """Whether these are graph's files."""
    return self._graph() is graph


def _yield_to_training():
  """The calling thread (Linux: a thread's own nice value) gives way to the
  training thread when both want a core: the files are not what a step waits for."""
  try:
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
  except (AttributeError, OSError):
    pass


def worth_it(graph_def):
  """Whether graph_def's files are large enough to write in the background:
  its serialized size, estimated without serializing it (upb's ByteSize
  does, 0.13 s for 64 MB of constants): 100 bytes a node, plus the bytes of
  the constants, counted until the threshold is reached."""
  size = 100 * len(graph_def.node)
  for node in graph_def.node:
    if size >= MIN_BYTES:
      break
    if 'value' in node.attr:
      tensor = node.attr['value'].tensor
      size += len(tensor.tensor_content) or tensor.ByteSize()
  return size >= MIN_BYTES


# How long a job waits for its graph to be finalized (Batch.wait_for_finalize)
# before taking it as it is, and how often it looks.
FINALIZE_WAIT_SECS = 5.0
_FINALIZE_POLL_SECS = 0.02


def hurry():
  """Every batch's wait_for_finalize returns now: an event file is flushed
  or closed, which waits for the records they fill."""
  with _lock:
    batches = list(_batches)
  for batch in batches:
    batch.hurry()


# A graph whose GraphDef may be this large (estimated) has it computed in
# the caller even where the graph's files could be written in the
# background: TF refuses a GraphDef over 2 GB (as_graph_def raises), and
# raises it at the session's creation; the estimate is rough.
MAX_BACKGROUND_BYTES = 3 << 29


def estimated_bytes(graph):
  """graph.as_graph_def()'s serialized size, estimated from the graph's
  operations without computing it (that alone costs 0.1 s for 64 MB of
  constants): 100 bytes an operation, plus the bytes of each constant of a
  known shape; counted up to MAX_BACKGROUND_BYTES."""
  operations = graph.get_operations()
  size = 100 * len(operations)
  for operation in operations:
    if size >= MAX_BACKGROUND_BYTES:
      break
    if operation.type == 'Const':
      size += _constant_bytes(operation.outputs[0])
  return size


def worth_it_estimate(size):
  """worth_it of a graph whose GraphDef is of `size` (estimated_bytes):
  False as well past MAX_BACKGROUND_BYTES."""
  return MIN_BYTES <= size < MAX_BACKGROUND_BYTES


# The bytes the start's files of a graph take on disk, at most, per byte of
# its GraphDef: graph.pbtxt (a byte of a tensor's contents is printed as up
# to 4 characters, a node's fields with their names), the graph and meta
# graph records, the first checkpoint's .meta; and a margin.
_DISK_BYTES_PER_GRAPH_BYTE = 9
_DISK_MARGIN_BYTES = 16 << 20


def room_for(directory, size):
  """Whether the file system of `directory` has room for the start's files
  of a graph whose GraphDef is of `size` (estimated_bytes). TF writes
  graph.pbtxt and the .meta before creation returns, so a full disk's error
  is raised at creation; where the files may not fit, they are written in
  place, TF's way, with TF's error."""
  try:
    stats = os.statvfs(directory)
  except (AttributeError, OSError):
    return False
  return (stats.f_bavail * stats.f_frsize >=
          _DISK_BYTES_PER_GRAPH_BYTE * size + _DISK_MARGIN_BYTES)


def _constant_bytes(tensor):
  """The bytes of a constant's values: a string's counted as none."""
  return (tensor.shape.num_elements() or 0) * tensor.dtype.size


def wait_all(graph):
  """Returns once every batch of `graph` started so far is done (their
  errors kept for raise_error)."""
  with _lock:
    batches = [batch for batch in _batches if batch.of(graph)]
  for batch in batches:
    batch.hurry()
  for batch in batches:
    batch.join()
  with _lock:
    for batch in batches:
      if batch in _batches:
        _batches.remove(batch)


def raise_error(graph):
  """Raises the first error a background write of `graph`'s files met and
  nobody was told of."""
  with _lock:
    lost = [error for graph_ref, error in _errors if graph_ref() is None]
    mine = next((error for graph_ref, error in _errors if graph_ref() is graph), None)
    _errors[:] = [(graph_ref, error) for graph_ref, error in _errors
                  if graph_ref() is not None and error is not mine]
  for error in lost:  # a graph gone before anyone waited for its files
    logging.error('fastmts: a graph file was not written: %s', error)
  if mine is not None:
    raise mine


def wait_and_raise(graph):
  """wait_all(graph), then raise_error(graph)."""
  wait_all(graph)
  raise_error(graph)
