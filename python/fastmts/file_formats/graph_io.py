"""tf.io.write_graph with the text format printed natively.

`message_to_text(m)` is `text_format.MessageToString(m)`, the same text,
printed from the message's wire bytes by the native printer; messages it
does not reproduce (an Any, an extension, ...) are printed by text_format.
"""
import contextlib
import inspect
import os
import sys
import warnings

from google.protobuf import message as _message
from google.protobuf import text_format

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import errors
from fastmts.file_formats import text_format_schema
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import graph_pb2
from tensorflow.core.framework import node_def_pb2
from tensorflow.core.framework import tensor_pb2
from tensorflow.python.framework import graph_io as _tf_graph_io
from tensorflow.python.framework import ops
from tensorflow.python.lib.io import file_io

# MessageToString's default as_utf8 changed between protobuf releases (False
# up to 4.x, True in recent ones): the native text follows the installed one.
_AS_UTF8 = bool(inspect.signature(text_format.MessageToString).parameters['as_utf8'].default)

# How the installed TF's write_graph prints floats.
_TF_FLOAT_FORMAT = _tensorflow.WRITE_GRAPH_FLOAT_FORMAT


def _float_format_warns():
  """Whether the installed protobuf warns about float_format (the 6.3x
  releases deprecate it, with a warning per call): TF's write_graph then
  warns too, so the text is printed by text_format, warning and all."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    try:
      text_format.MessageToString(tensor_pb2.TensorProto(float_val=[0.1]), float_format='')
    except TypeError:  # protobuf 7 has no float_format (nor a TF release that passes it)
      return True
  return bool(caught)


def _native_float_formats():
  """The float formats the native printer prints as this protobuf does:
  checked once on a probe message with every ASCII character in a string
  field and in a bytes field, non-ASCII text and awkward floats (protobuf
  releases escape and print differently; where the native printer differs,
  text_format prints)."""
  text = ''.join(map(chr, range(128))) + 'é∑'
  tensor = tensor_pb2.TensorProto(
      string_val=[text.encode('utf-8')],
      float_val=[0.1, -0.0, 1e-30, 3.4e38, float('nan'), float('inf')],
      double_val=[0.1, 1e22, -2.5e-8])
  probe = node_def_pb2.NodeDef(name=text, attr={'t': attr_value_pb2.AttrValue(tensor=tensor),
                                                'f': attr_value_pb2.AttrValue(f=0.1)})
  schema = text_format_schema.native_schema(probe.DESCRIPTOR)
  formats = []
  for float_format in ((None,) if _float_format_warns() else (None, '')):
    try:
      ours = _native.text_format(schema, probe.SerializeToString(deterministic=True), _AS_UTF8,
                                 float_format == '')
    except ValueError:
      continue
    theirs = (text_format.MessageToString(probe) if float_format is None else
              text_format.MessageToString(probe, float_format=float_format))
    if ours == theirs:
      formats.append(float_format)
  return tuple(formats)


def message_to_text(message, float_format=None):
  """text_format.MessageToString(message, float_format=float_format), its
  other arguments at their defaults."""
  if isinstance(message, _message.Message) and float_format in _NATIVE_FLOAT_FORMATS:
    schema = text_format_schema.native_schema(message.DESCRIPTOR)
    if schema is not None:
      try:
        # Partial: a proto2 message missing required fields prints all the same.
        serialized = message.SerializePartialToString(deterministic=True)
        return _native.text_format(schema, serialized, _AS_UTF8, float_format == '')
      except (ValueError, _message.EncodeError):
        pass  # what the native printer does not reproduce
  if float_format is None:
    return text_format.MessageToString(message)
  return text_format.MessageToString(message, float_format=float_format)


_NATIVE_FLOAT_FORMATS = _native_float_formats()


def write_graph(graph_or_graph_def, logdir, name, as_text=True):
  """tf.io.write_graph: the same file, the same errors at the same point."""
  if sys.byteorder == 'big':  # TF swaps tensor contents first: its own path
    return _tf_graph_io.write_graph(graph_or_graph_def, logdir, name, as_text)
  if isinstance(graph_or_graph_def, ops.Graph):
    graph_def = graph_or_graph_def.as_graph_def()
  else:
    graph_def = graph_or_graph_def

  if as_text:
    return _write(message_to_text(graph_def, _TF_FLOAT_FORMAT), logdir, name)
  return _write(_tensorflow.serialize_as_write_graph(graph_def), logdir, name)


def write_serialized_graph(serialized, logdir, name):
  """tf.io.write_graph(..., as_text=False) of the message that serialized
  to `serialized` (_tensorflow.serialize_as_write_graph; a caller that writes
  one message again and again serializes it once)."""
  return _write(serialized, logdir, name)


def _write(contents, logdir, name):
  # gcs does not have the concept of directory at the moment.
  if (not (_tensorflow.WRITE_GRAPH_CHECKS_FILE_EXISTS and file_io.file_exists(logdir)) and
      not logdir.startswith('gs:')):
    file_io.recursive_create_dir(logdir)
  path = os.path.join(logdir, name)
  file_io.atomic_write_string_to_file(path, contents)
  return path


def open_file(logdir, name):
  """The first, synchronous half of write_graph's write to logdir/name: the
  directory made as write_graph makes it (TF's error if it cannot be), and
  the file's temporary opened (a _native.AtomicFile). None when the
  temporary cannot be made: write_graph, called then, fails as TF fails (or
  writes where the native file could not)."""
  if sys.byteorder == 'big' or not _is_local(logdir):
    return None
  if not (_tensorflow.WRITE_GRAPH_CHECKS_FILE_EXISTS and file_io.file_exists(logdir)):
    file_io.recursive_create_dir(logdir)
  path = os.path.join(logdir, name)
  if os.path.isdir(path):  # the rename would fail: TF's write fails now, with its error
    return None
  try:
    return _native.AtomicFile(path)
  except OSError:
    return None


def _is_local(logdir):
  # A plain path: anything with a scheme (gs://, file://) is TF's file systems'.
  return '://' not in logdir


@contextlib.contextmanager
def _as_tf_errors(file):
  """The native file's OSError (a disk filling up meanwhile) raised as the
  error TF's own write of that file raises for its errno."""
  try:
    yield
  except OSError as error:
    raise errors.from_os_error(error, file.path) from error


def write_text(file, serialized):
  """The second half, in any thread: the text of the GraphDef whose bytes
  are `serialized` (its SerializePartialToString(deterministic=True)) as
  write_graph(as_text=True) prints it, streamed into `file` (from
  open_file) and committed."""
  with _as_tf_errors(file):
    float_format = _TF_FLOAT_FORMAT
    schema = (text_format_schema.native_schema(graph_pb2.GraphDef.DESCRIPTOR)
              if float_format in _NATIVE_FLOAT_FORMATS else None)
    if schema is not None:
      try:
        _native.text_format_to_file(schema, serialized, _AS_UTF8, float_format == '', file)
        file.commit()
        return
      except ValueError:  # what the native printer does not reproduce: text_format's text
        file.abort()
        file = _native.AtomicFile(file.path)
    text = message_to_text(graph_pb2.GraphDef.FromString(serialized), float_format)
    file.write(text.encode('utf-8'))
    file.commit()


def write_bytes(file, contents):
  """The second half of write_serialized_graph, in any thread: `contents`
  into `file` (from open_file), committed."""
  with _as_tf_errors(file):
    file.write(contents)
    file.commit()
