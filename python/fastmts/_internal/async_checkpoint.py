"""Asynchronous checkpoints: CheckpointSaverHook(async_checkpoint=True),
whose CheckpointSaver (checkpoint_saver.py) is an AsyncCheckpointSaver.

At a save, the training thread runs the listeners' `before_save` and takes a
snapshot of what the Saver's save ops read (one run, no copy for resource
variables: see cpp/core/checkpoint_writer.h); a native thread then runs the
Saver's own save op fed with that snapshot, and finishes as `Saver.save`
does (the meta graph, the `checkpoint` state file, `max_to_keep`). The files
are TF's: V2 format, the same names, readable by stock `Saver.restore` and
`tf.train.latest_checkpoint`.

Where it differs from a synchronous save, and why:

* `after_save`, the CHECKPOINT session log and the "after saving" log line
  come once the files are complete: on the training thread, before the
  first step that starts after the write ended (or at the next save, or at
  `end`), so listeners run between steps as they do in TF. A listener
  returning True stops training after that step.
* A save due while a write is in flight waits for it. Skipping it would
  change which steps get a checkpoint; waiting keeps stock TF's schedule and
  files, and only costs time when saves come faster than they can be
  written, where a synchronous save would have stalled longer anyway.
* The `.meta` file is written before the `checkpoint` state file names the
  new checkpoint (TF writes it after): whenever the state file names a
  checkpoint, all of its files exist.
* A write's error (TF's, as `Saver.save` raises it) is raised before the
  next step, at the next save, or by `end` (so at `close`).
* Memory: one snapshot at a time. Resource variables cost a copy only when
  updated while their write is in flight (TF copies the buffer before it
  updates it), so at most the size of the saved variables, and nothing for
  those left alone; ref variables are copied at the snapshot.

A save falls back to TF's synchronous one where the snapshot cannot be
taken: a Saver other than TF's exact class, the V1 format, an empty Saver,
or a session that is not a plain tf.compat.v1.Session (e.g. a debugger
wrapper), whose `run` must see every run; and where the snapshot's run
failed, so that the error raised is TF's own.
"""
import atexit
import os
import weakref

from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.framework import errors as tf_errors
from tensorflow.python.platform import gfile
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import saver as saver_lib

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import c_handles
from fastmts._internal import checkpoint_saver
from fastmts._internal import errors
from fastmts._internal import python_hooked_session

# Every writer alive, so that closing a session and leaving the interpreter
# wait for the writes that run on it.
_writers = weakref.WeakSet()


class _Pending:
  """A write in flight or ended, whose outcome is not delivered yet."""

  __slots__ = ('session', 'step', 'save_path')

  def __init__(self, session, step, save_path):
    self.session, self.step, self.save_path = session, step, save_path


class AsyncCheckpointSaver(checkpoint_saver.CheckpointSaver):
  """The CheckpointSaver of a hook made with async_checkpoint=True: its
  saves are background writes (at most one in flight), whose outcomes are
  delivered on the training thread (`deliver_write`)."""

  # pylint: disable=protected-access
  # (TF's hook keeps its save path and Saver in private attributes, and TF's
  # Saver keeps what Saver.save does after its save op in private methods:
  # a background write finishes as Saver.save does.)

  starts_in_background = False  # the start's graph files: TF's calls in place

  def __init__(self, hook):
    super().__init__(hook)
    self.writer = _native.CheckpointWriter()
    self._pending = None
    self._plans = weakref.WeakKeyDictionary()  # saver -> ((graph id, SaverDef), SavePlan or None)
    _writers.add(self)

  def session_of_pending(self):
    """The session of the write not delivered yet, or None."""
    pending = self._pending
    return None if pending is None else pending.session

  def wait(self):
    """Blocks until the write in flight, if any, has ended (its outcome is
    kept for deliver_write)."""
    self.writer.wait()

  def _write_in_background(self, session, step):
    """Starts writing `step`'s checkpoint (the caller ran before_save and
    logged). False, having written nothing, where it saves synchronously
    (see the module's docstring) or the snapshot's run failed: the caller
    then saves with TF's Saver.save, which raises TF's own error (the failed
    read named as TF's save op reads it, a ref variable's by the save op)."""
    if not python_hooked_session.runs_natively(session):
      return False
    hook = self.hook
    saver = hook._get_saver()
    plan = self._plan(saver, session.graph)
    if plan is None:
      return False
    meta_graph = (self.meta_graph_bytes(saver, session.graph)
                  if checkpoint_saver.saves_graph_def(hook) else None)
    checkpoint_file = checkpoint_saver.checkpoint_file(saver, hook._save_path, step)
    save_path_parent = os.path.dirname(hook._save_path)

    def finish():  # on the writer thread, with the GIL, once the save op ran
      if meta_graph is not None:
        checkpoint_saver.write_meta_graph(checkpoint_file, meta_graph)
      # What Saver.save does once its save op returned the prefix.
      saver._RecordLastCheckpoint(checkpoint_file)
      _tensorflow.checkpoint_management.update_checkpoint_state_internal(
          save_dir=save_path_parent, model_checkpoint_path=checkpoint_file,
          all_model_checkpoint_paths=saver.last_checkpoints, latest_filename='checkpoint',
          save_relative_paths=saver._save_relative_paths)
      saver._MaybeDeleteOldCheckpoints(meta_graph_suffix='meta')

    try:
      self.writer.write(session, plan, checkpoint_file, finish)
    except errors.StatusError:  # the snapshot's run: nothing was written
      return False
    self._pending = _Pending(session, step, hook._save_path)
    return True

  def deliver_write(self, wait):
    """The ended write's outcome, on the training thread: its error raised
    as TF's Saver.save raises it, or the CHECKPOINT session log and the
    listeners' after_save. Returns whether a listener asked to stop. With
    `wait`, waits for a write in flight first."""
    pending = self._pending
    if pending is None:
      return False
    if wait:
      self.writer.wait()
    if not self.writer.has_outcome:
      return False
    self._pending = None
    try:
      self.writer.take_outcome()
    except errors.StatusError as e:
      error = errors.from_status(e, pending.session.graph, None)
    except (tf_errors.FailedPreconditionError, tf_errors.NotFoundError) as e:
      error = e
    else:
      error = None
    if error is not None:
      raise _as_saver_error(error, pending.save_path)
    return self.after_save(pending.session, pending.step)

  def settle(self):
    """At a close that skips end() (an exception, a stop signal): waits for
    the write in flight and delivers it, since its listeners were told
    before_save. Its error, or a listener's, is logged: the close has an
    exception of its own to raise."""
    try:
      self.deliver_write(wait=True)
    except Exception:  # pylint: disable=broad-except
      logging.error('An asynchronous checkpoint write failed while its session was being '
                    'closed.', exc_info=True)

  def _plan(self, saver, graph):
    """The native SavePlan of a save of `saver` on `graph` (cached), or None
    where it saves synchronously."""
    if saver is None:
      return None
    key = (id(graph), saver.saver_def.SerializeToString())
    cached = self._plans.get(saver)
    if cached is None or cached[0] != key:
      cached = (key, _save_plan(saver, graph))
      self._plans[saver] = cached
    return cached[1]


def _as_saver_error(error, save_path):
  """As Saver.save: a missing parent directory is a ValueError."""
  if (isinstance(error, (tf_errors.FailedPreconditionError, tf_errors.NotFoundError)) and
      not gfile.IsDirectory(os.path.dirname(save_path))):
    return ValueError("Parent directory of {} doesn't exist, can't save.".format(save_path))
  return error


def _save_plan(saver, graph):
  """The native SavePlan of TF's exact Saver, or None where the snapshot
  cannot stand in for the save ops' own reads."""
  # pylint: disable=protected-access
  # (TF's Saver keeps whether it is empty and its format in private attributes.)
  if (type(saver) is not saver_lib.Saver or saver._is_empty or
      saver._write_version != saver_pb2.SaverDef.V2):
    return None
  try:
    save_tensor = graph.as_graph_element(saver.saver_def.save_tensor_name)
    filename = graph.as_graph_element(saver.saver_def.filename_tensor_name)
  except (KeyError, ValueError):
    return None
  saved, seen = [], set()
  for op in _save_v2_ops(save_tensor.op):
    for tensor in list(op.inputs)[3:]:  # prefix, tensor_names, shape_and_slices, tensors...
      if tensor.name not in seen:
        seen.add(tensor.name)
        saved.append(tensor)
  if not saved:
    return None
  return _native.SavePlan(
      [c_handles.output_of(t) for t in saved], [not _shares_copy_on_write(t) for t in saved],
      c_handles.output_of(filename), c_handles.c_op_of(save_tensor.op))


def _save_v2_ops(op):
  """The SaveV2 ops `op` depends on (through data or control inputs), by name."""
  found, stack, seen = [], [op], {op.name}
  while stack:
    op = stack.pop()
    inputs = list(op.inputs)
    if op.type == 'SaveV2':
      found.append(op)
      inputs = inputs[:3]  # what it saves is read at the snapshot
    for dep in [t.op for t in inputs] + list(op.control_inputs):
      if dep.name not in seen:
        seen.add(dep.name)
        stack.append(dep)
  return sorted(found, key=lambda o: o.name)


def _shares_copy_on_write(tensor):
  """Whether holding `tensor`'s fetched value keeps it as it is now: a read
  of a resource variable (through Identity ops), whose buffer TF copies
  before any update while it is shared. A ref variable's buffer is updated
  in place however many hold it (its Identity forwards that buffer)."""
  while tensor.op.type == 'Identity':
    tensor = tensor.op.inputs[0]
  return tensor.op.type == 'ReadVariableOp'


@atexit.register
def _wait_for_all_writes():
  # A writer thread takes the GIL to finish: it must end before the
  # interpreter does.
  for writer in list(_writers):
    writer.wait()


def settle_writes_on(session):
  """Before `session` closes (the save ops run on it): waits for the writes
  on it and delivers them (AsyncCheckpointSaver.settle)."""
  for writer in list(_writers):
    if writer.session_of_pending() is session:
      writer.settle()
