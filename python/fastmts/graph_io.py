"""tf.io.write_graph with the text format printed natively.

`message_to_text(m)` is `text_format.MessageToString(m)`, the same text,
printed from the message's wire bytes by the native printer; messages it
does not reproduce (an Any, an extension, ...) are printed by text_format.
"""
import inspect
import os
import sys

from google.protobuf import message as _message
from google.protobuf import text_format

from fastmts import _native
from fastmts import text_format_schema
from tensorflow.python.framework import graph_io as _tf_graph_io
from tensorflow.python.framework import ops
from tensorflow.python.lib.io import file_io

# MessageToString's default as_utf8 changed between protobuf releases (False
# up to 4.x, True in recent ones): the native text follows the installed one.
_AS_UTF8 = bool(inspect.signature(text_format.MessageToString).parameters['as_utf8'].default)


def message_to_text(message):
  """text_format.MessageToString(message), with its default arguments."""
  if isinstance(message, _message.Message):
    schema = text_format_schema.native_schema(message.DESCRIPTOR)
    if schema is not None:
      try:
        # Partial: a proto2 message missing required fields prints all the same.
        serialized = message.SerializePartialToString(deterministic=True)
        return _native.text_format(schema, serialized, _AS_UTF8)
      except (ValueError, _message.EncodeError):
        pass  # what the native printer does not reproduce
  return text_format.MessageToString(message)


def write_graph(graph_or_graph_def, logdir, name, as_text=True):
  """tf.io.write_graph: the same file, the same errors at the same point."""
  if sys.byteorder == 'big':  # TF swaps tensor contents first: its own path
    return _tf_graph_io.write_graph(graph_or_graph_def, logdir, name, as_text)
  if isinstance(graph_or_graph_def, ops.Graph):
    graph_def = graph_or_graph_def.as_graph_def()
  else:
    graph_def = graph_or_graph_def

  # gcs does not have the concept of directory at the moment.
  if not logdir.startswith('gs:'):
    file_io.recursive_create_dir(logdir)
  path = os.path.join(logdir, name)
  if as_text:
    file_io.atomic_write_string_to_file(path, message_to_text(graph_def))
  else:
    file_io.atomic_write_string_to_file(
        path, graph_def.SerializeToString(deterministic=True))
  return path
