"""Schema tables for the native text-format printer (cpp/core/file_formats/text_format.h).

The native printer links no protobuf library: what it knows of a message
type is the table built here from the type's Python Descriptor -- the type
and every message type and enum it reaches, with what text_format reads of
each field (name, type, repeated, presence, map, oneof).
"""
import threading

from google.protobuf import descriptor as _descriptor

from fastmts import _native
from fastmts import _tensorflow

_FD = _descriptor.FieldDescriptor
_ANY = 'google.protobuf.Any'

_cache = {}  # Descriptor -> native schema, or None when it cannot be built
_lock = threading.Lock()


def native_schema(message_descriptor):
  """The native schema of `message_descriptor` (built once), or None when
  it cannot be built, in which case the caller prints in Python."""
  try:
    return _cache[message_descriptor]
  except KeyError:
    pass
  with _lock:
    if message_descriptor not in _cache:
      try:
        messages, enums = build_table(message_descriptor)
        _cache[message_descriptor] = _native.TextFormatSchema(messages, enums)
      except (ValueError, TypeError, AttributeError, RuntimeError):
        _cache[message_descriptor] = None
    return _cache[message_descriptor]


def build_table(root):
  """(messages, enums) for TextFormatSchema; messages[0] is `root`.

  messages: (full_name, unsupported_reason, fields, extension_ranges)
  fields:   (number, name, type, repeated, has_presence, is_map,
             message_index, enum_index, oneof_index)
  enums:    (closed, [(number, name), ...])
  """
  messages, enums = [], []
  message_index, enum_index = {}, {}
  pending = []

  def index_of_message(d):
    if d.full_name not in message_index:
      message_index[d.full_name] = len(messages)
      messages.append(None)  # filled below: types may refer to each other
      pending.append(d)
    return message_index[d.full_name]

  def index_of_enum(e):
    if e.full_name not in enum_index:
      enum_index[e.full_name] = len(enums)
      # values_by_number: the name text_format prints for a number.
      values = [(number, value.name) for number, value in e.values_by_number.items()]
      enums.append((_is_closed(e), values))
    return enum_index[e.full_name]

  index_of_message(root)
  while pending:
    d = pending.pop()
    fields = []
    for f in d.fields:
      message = index_of_message(f.message_type) if f.message_type is not None else -1
      enum = index_of_enum(f.enum_type) if f.type == _FD.TYPE_ENUM else -1
      oneof = f.containing_oneof.index if f.containing_oneof is not None else -1
      fields.append((f.number, f.name, f.type, _is_repeated(f), _has_presence(f),
                     _is_map_entry(f), message, enum, oneof))
    messages[message_index[d.full_name]] = (
        d.full_name, _unsupported(d), fields, [tuple(r) for r in d.extension_ranges])
  return messages, enums


def _unsupported(d):
  if d.full_name == _ANY:
    return 'google.protobuf.Any (text_format expands it through the descriptor pool)'
  if d.GetOptions().message_set_wire_format:
    return 'MessageSet %s' % d.full_name
  return ''


def _is_map_entry(f):  # as text_format._IsMapEntry
  return (f.type == _FD.TYPE_MESSAGE and f.message_type.has_options
          and f.message_type.GetOptions().map_entry)


# Older protobuf releases (those TF 2.12 and older run with) lack some
# descriptor properties; their values then follow from the file's syntax.

def _is_repeated(f):
  if _tensorflow.FIELD_DESCRIPTORS_KNOW_IS_REPEATED:
    return f.is_repeated
  return f.label == _FD.LABEL_REPEATED


def _has_presence(f):
  if _tensorflow.FIELD_DESCRIPTORS_KNOW_HAS_PRESENCE:
    return f.has_presence
  if _is_repeated(f):
    return False
  return (f.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP) or f.containing_oneof is not None
          or f.file.syntax == 'proto2')


def _is_closed(e):
  if _tensorflow.ENUM_DESCRIPTORS_KNOW_IS_CLOSED:
    return e.is_closed
  return e.file.syntax == 'proto2'
