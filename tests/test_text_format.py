"""The native text format (cpp/core/file_formats/text_format.h): byte for byte what
google.protobuf.text_format.MessageToString prints, on TF's graphs and on
messages of every field type; and fastmts.file_formats.graph_io.write_graph writing the
file tf.io.write_graph writes, with its errors."""

import math
import warnings
import pathlib
import random
import re
import struct

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import __version__ as protobuf_version
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message as message_lib
from google.protobuf import message_factory
from google.protobuf import text_format
from google.protobuf.internal import api_implementation
from tensorflow.core.framework import attr_value_pb2
from tensorflow.core.framework import graph_pb2
from tensorflow.core.framework import node_def_pb2
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import config_pb2

from compat_utils import WRITE_GRAPH_IS_DETERMINISTIC  # pylint: disable=g-import-not-at-top,wrong-import-position

graph_io = pytest.importorskip('fastmts.file_formats.graph_io')
from fastmts import _native  # pylint: disable=g-import-not-at-top,wrong-import-position
from fastmts.file_formats import text_format_schema  # pylint: disable=g-import-not-at-top,wrong-import-position

pytestmark = pytest.mark.timeout(120)
# A bound on a hang, not on slowness, sized for a loaded 2-core machine: beside two
# CPU-bound processes test_every_field_type (100 random messages, each printed by Python
# and natively) took up to 63 s.
_EVERY_FIELD_TYPE_HANG_BOUND_SECS = 300
v1 = tf.compat.v1
NAN, INF = float('nan'), float('inf')


# MessageToString's default in the installed protobuf.
AS_UTF8 = graph_io._AS_UTF8  # pylint: disable=protected-access
_PROTOBUF_MAJOR = int(protobuf_version.split('.')[0])

# The native printer reads wire bytes as upb, Python's parser from protobuf
# 4.21 on (every TF from 2.12 pins one), reads them. The protobuf 3 parsers
# that TF 2.11 and older pin read some non-canonical bytes apart (a map entry
# with an unknown field stays in the map, and more). fastmts prints only the
# canonical bytes of a message, which both read alike; the tests of what
# non-canonical bytes read as run where the parser is upb.
_PARSER_IS_UPB = api_implementation.Type() == 'upb'
_UPB_PARSER = pytest.mark.skipif(
    not _PARSER_IS_UPB, reason='non-canonical wire bytes are read as upb reads them; '
    'this protobuf %s parser (%s) reads some apart' % (protobuf_version, api_implementation.Type()))


def native_raw(descriptor, data, as_utf8=AS_UTF8):
  """The native printer's text for wire bytes (ValueError when it cannot)."""
  schema = text_format_schema.native_schema(descriptor)
  assert schema is not None
  return _native.text_format(schema, data, as_utf8)


def native(message, as_utf8=AS_UTF8):
  return native_raw(message.DESCRIPTOR, message.SerializeToString(deterministic=True), as_utf8)


def assert_native_same(message):
  """The native printer itself (no fallback) prints text_format's text, for
  both as_utf8; message_to_text prints it with MessageToString's default."""
  expected = text_format.MessageToString(message)
  assert native(message) == expected
  assert graph_io.message_to_text(message) == expected
  if _PROTOBUF_MAJOR >= 5:  # 4.x escapes differently with as_utf8=True, which it never uses
    assert native(message, not AS_UTF8) == text_format.MessageToString(message,
                                                                        as_utf8=not AS_UTF8)
  return expected


# ---- TF graphs -------------------------------------------------------------

def test_variables_summaries_and_training():
  with tf.Graph().as_default() as g:
    x = v1.placeholder(tf.float32, [None, 8], name='x')
    w = v1.get_variable('w', [8, 8])
    b = v1.get_variable('b', [8], initializer=v1.zeros_initializer())
    v1.get_variable('legacy', [2], use_resource=False)
    y = tf.nn.relu(tf.matmul(x, w) + b)
    loss = tf.reduce_mean(y)
    v1.summary.scalar('loss', loss)
    v1.summary.histogram('y', y)
    v1.summary.merge_all()
    step = v1.train.get_or_create_global_step()
    v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    v1.train.Saver()
  assert_native_same(g.as_graph_def())
  assert 'output_shapes' in assert_native_same(g.as_graph_def(add_shapes=True))


def test_while_loop_cond_and_functions():
  with tf.Graph().as_default() as g:
    x = v1.placeholder(tf.float32, [], name='x')
    tf.while_loop(lambda i, a: i < 10, lambda i, a: (i + 1, a * x),
                  [tf.constant(0), tf.constant(1.0)])
    tf.cond(x > 0, lambda: x * 2.0, lambda: -x)

    @tf.function
    def f(a):
      return tf.sin(a) + 1.0

    f(x)
  graph_def = g.as_graph_def()
  assert graph_def.library.function
  assert_native_same(graph_def)
  assert_native_same(graph_def.library)


def test_odd_strings_and_unicode_names():
  with tf.Graph().as_default() as g:
    tf.constant(b'\x00\xff"\'\\\n\r\t\x7f\x80 ok', name='odd')
    tf.constant(['h\xe9llo', '\u65e5\u672c\u8a9e \U0001f600', ''], name='texts')
    tf.constant(bytes(range(256)), name='all_bytes')
  graph_def = g.as_graph_def()
  node = graph_def.node.add(name='\xf1ode/\u65e5\u672c', op='NoOp', device='/job:w\xf6rker')
  node.input.append('^odd')
  node.attr['\u00e9t\u00e9'].s = '\u2603 "q" \\'.encode('utf-8')
  text = assert_native_same(graph_def)
  assert '\\377' in text  # a bytes field escapes every byte
  if AS_UTF8:  # string fields keep their characters
    assert 'name: "\xf1ode/\u65e5\u672c"' in text


def test_float_and_int_constants():
  values = [NAN, INF, -INF, -0.0, 0.0, 1e-30, 3.4e38, 0.1, 1 / 3, 1e16, 1e-5, 123456.789,
            1.5, 3.0, 2.0 ** -149, 16777217.0]
  ints = {tf.int64: [-2 ** 63, 2 ** 63 - 1, -1], tf.int32: [-2 ** 31, 2 ** 31 - 1, -1],
          tf.uint64: [2 ** 64 - 1], tf.uint32: [2 ** 32 - 1], tf.int8: [-128], tf.uint8: [255],
          tf.int16: [-32768], tf.bool: [True, False]}
  with tf.Graph().as_default() as g:
    for i, v in enumerate(values):
      tf.constant(v, tf.float32, name='f%d' % i)
      tf.constant(v, tf.float64, name='d%d' % i)
      if not abs(v) < 65504:  # float16 range
        continue
      tf.constant(v, tf.float16, name='h%d' % i)
    tf.constant(values, name='packed_floats')  # tensor_content
    tf.fill([7], 0.1, name='filled')
    for dtype, numbers in ints.items():
      for i, n in enumerate(numbers):
        tf.constant(n, dtype, name='%s_%d' % (dtype.name, i))
      tf.constant(numbers, dtype, name='%s_list' % dtype.name)
  text = assert_native_same(g.as_graph_def())
  assert 'int64_val: -9223372036854775808' in text and 'float_val: nan' in text


def test_large_tensor_contents():
  rng = np.random.RandomState(0)
  with tf.Graph().as_default() as g:
    tf.constant(rng.standard_normal((256, 256)).astype(np.float32), name='big')
    tf.constant(rng.randint(-128, 128, size=100000).astype(np.int8), name='bytes')
  assert_native_same(g.as_graph_def())


def test_empty_messages():
  assert native(graph_pb2.GraphDef()) == ''
  assert graph_io.message_to_text(graph_pb2.GraphDef()) == ''
  assert_native_same(node_def_pb2.NodeDef())


def test_node_def_and_attr_values():
  shape = tf.TensorShape([None, 3, 0]).as_proto()
  tensor = tf.make_tensor_proto(np.arange(6, dtype=np.float32).reshape(2, 3))
  attrs = {
      's': attr_value_pb2.AttrValue(s=b'\x01text\xfe'),
      'i': attr_value_pb2.AttrValue(i=-7),
      'zero': attr_value_pb2.AttrValue(i=0),  # a oneof member: printed though 0
      'f': attr_value_pb2.AttrValue(f=0.1),
      'b': attr_value_pb2.AttrValue(b=False),
      'type': attr_value_pb2.AttrValue(type=types_pb2.DT_RESOURCE),
      'bad_type': attr_value_pb2.AttrValue(type=12345),  # open enum: printed as a number
      'shape': attr_value_pb2.AttrValue(shape=shape),
      'tensor': attr_value_pb2.AttrValue(tensor=tensor),
      'func': attr_value_pb2.AttrValue(func=attr_value_pb2.NameAttrList(
          name='fn', attr={'T': attr_value_pb2.AttrValue(type=types_pb2.DT_FLOAT)})),
      'placeholder': attr_value_pb2.AttrValue(placeholder='T'),
      'empty': attr_value_pb2.AttrValue(),
      'list': attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(
          s=[b'a', b''], i=[0, -1, 2 ** 62], f=[0.0, -0.0, NAN, 1e-7], b=[True, False],
          type=[types_pb2.DT_INT32, types_pb2.DT_STRING], shape=[shape, shape],
          tensor=[tensor])),
      'empty_list': attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue()),
  }
  node = node_def_pb2.NodeDef(name='n', op='Op', input=['a', 'b:1', '^c'], device='/cpu:0',
                              attr=attrs)
  node.experimental_debug_info.original_node_names.append('orig')
  assert_native_same(node)
  for value in attrs.values():
    assert_native_same(value)


def test_map_entries_print_as_python_builds_them():
  config = config_pb2.ConfigProto()
  config.device_count[''] = 0
  config.device_count['b'] = 0
  config.device_count['a'] = 5
  text = assert_native_same(config)
  assert text.startswith('device_count {\n}\ndevice_count {\n  key: "a"\n  value: 5\n}\n')
  node = node_def_pb2.NodeDef()
  node.attr[''].CopyFrom(attr_value_pb2.AttrValue())
  assert assert_native_same(node) == 'attr {\n  value {\n  }\n}\n'


def test_meta_graph_def_prints_or_falls_back():
  with tf.Graph().as_default() as g:
    v1.get_variable('w', [3])
    v1.train.get_or_create_global_step()
    v1.train.Saver()
    meta = v1.train.export_meta_graph(graph=g)
  expected = text_format.MessageToString(meta)
  assert graph_io.message_to_text(meta) == expected
  if not meta.meta_info_def.HasField('any_info'):
    assert native(meta) == expected
  meta.meta_info_def.any_info.Pack(attr_value_pb2.AttrValue(i=3))
  expected = text_format.MessageToString(meta)
  assert '[type.googleapis.com/tensorflow.AttrValue]' in expected
  with pytest.raises(ValueError, match='unsupported.*Any'):
    native(meta)
  assert graph_io.message_to_text(meta) == expected


# ---- Floating point --------------------------------------------------------

def _edge_floats():
  out = [0.0, -0.0, NAN, -NAN, INF, -INF, 0.1, 0.2, 0.3, 1.0, 1.5, 3.0, 100.0, 1e6, 1e7,
         16777216.0, 16777217.0, 8388607.5, 1234567.5, 3.4028234663852886e38, 1.17549435e-38,
         1.1754942e-38, 1.401298464324817e-45, 2.8e-45, 1e-30, 9.999999e-5, 1e-4, 1e-5,
         0.00012345, 123456.0, 1234567.0, 12345678.0, 1e15, 1e16, 1e17, 33554430.0]
  for e in range(-45, 39):
    for m in (1.0, 1.5, 2.5, 9.999999):
      out.append(m * 10.0 ** e)
  return out


def _to_float32(x):
  try:
    return struct.unpack('<f', struct.pack('<f', x))[0]
  except OverflowError:
    return math.copysign(INF, x)


def test_float32_sweep():
  rng = random.Random(1)
  values = [_to_float32(x) for x in _edge_floats()]
  values += [struct.unpack('<f', struct.pack('<I', rng.getrandbits(32)))[0] for _ in range(6000)]
  values += [_to_float32(round(rng.uniform(-1000, 1000), rng.randint(0, 8))) for _ in range(2000)]
  values += [struct.unpack('<f', struct.pack('<I', rng.randint(0, 2 ** 23)))[0]  # subnormals
             for _ in range(500)]
  assert_native_same(tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=values))
  for v in values[:300]:
    assert_native_same(attr_value_pb2.AttrValue(f=v))


def test_float64_sweep():
  rng = random.Random(2)
  values = _edge_floats() + [5e-324, 1.7976931348623157e308, 2.2250738585072014e-308]
  for e in range(-8, 20):
    p = 10.0 ** e
    values += [p, float(np.nextafter(p, 0)), float(np.nextafter(p, INF)), -p]  # (math's: 3.9)
  values += [struct.unpack('<d', struct.pack('<Q', rng.getrandbits(64)))[0] for _ in range(6000)]
  values += [round(rng.uniform(-1e6, 1e6), rng.randint(0, 12)) for _ in range(2000)]
  values += [rng.uniform(0, 1) * 10.0 ** rng.randint(-300, 300) for _ in range(1000)]
  assert_native_same(tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, double_val=values))


# ---- Every field type: generated proto2 and proto3 messages -----------------

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = [('i32', _F.TYPE_INT32), ('i64', _F.TYPE_INT64), ('u32', _F.TYPE_UINT32),
            ('u64', _F.TYPE_UINT64), ('s32', _F.TYPE_SINT32), ('s64', _F.TYPE_SINT64),
            ('fx32', _F.TYPE_FIXED32), ('fx64', _F.TYPE_FIXED64), ('sf32', _F.TYPE_SFIXED32),
            ('sf64', _F.TYPE_SFIXED64), ('b', _F.TYPE_BOOL), ('fl', _F.TYPE_FLOAT),
            ('db', _F.TYPE_DOUBLE), ('str', _F.TYPE_STRING), ('byt', _F.TYPE_BYTES)]
_MAP_KEYS = [t for t in _SCALARS if t[1] not in (_F.TYPE_FLOAT, _F.TYPE_DOUBLE, _F.TYPE_BYTES)]


def _build_file(syntax):
  """A test .proto with every field type, singular, repeated (packed and
  not), in maps (every key type) and in a oneof; proto2 adds a group and an
  extension, proto3 an `optional` field."""
  pkg = 'fastmts_text_test_' + syntax
  fdp = descriptor_pb2.FileDescriptorProto(name=pkg + '.proto', package=pkg, syntax=syntax)
  fdp.enum_type.add(name='Color').value.extend([
      descriptor_pb2.EnumValueDescriptorProto(name=n, number=v)
      for n, v in (('RED', 0), ('GREEN', 1), ('BLUE', 5), ('NEG', -3))])
  m = fdp.message_type.add(name='All')
  optional = _F.LABEL_OPTIONAL
  number = iter(range(1, 1000))
  kinds = _SCALARS + [('color', _F.TYPE_ENUM), ('child', _F.TYPE_MESSAGE)]

  def typed(f, t):
    f.type = t
    if t == _F.TYPE_ENUM:
      f.type_name = '.%s.Color' % pkg
    if t == _F.TYPE_MESSAGE:
      f.type_name = '.%s.All' % pkg

  for name, t in kinds:
    typed(m.field.add(name=name, number=next(number), label=optional), t)
    typed(m.field.add(name='r_' + name, number=next(number), label=_F.LABEL_REPEATED), t)
    if t not in (_F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE):
      f = m.field.add(name='p_' + name, number=next(number), label=_F.LABEL_REPEATED)
      typed(f, t)
      # The other packing than the syntax's default for r_*.
      f.options.packed = syntax == 'proto2'
  m.oneof_decl.add(name='choice')
  for name, t in (('o_i', _F.TYPE_INT32), ('o_s', _F.TYPE_STRING), ('o_m', _F.TYPE_MESSAGE),
                  ('o_c', _F.TYPE_ENUM)):
    typed(m.field.add(name=name, number=next(number), label=optional, oneof_index=0), t)
  for key_name, key_type in _MAP_KEYS:
    for value_name, value_type in (('str', _F.TYPE_STRING), ('child', _F.TYPE_MESSAGE),
                                   ('color', _F.TYPE_ENUM), ('fl', _F.TYPE_FLOAT),
                                   ('i64', _F.TYPE_INT64)):
      if key_name not in ('str', 'i32', 'b', 'u64') and value_name not in ('str', 'fl'):
        continue  # every key type, and every value type with a few keys
      entry = m.nested_type.add(name='M%s%sEntry' % (key_name.capitalize(),
                                                     value_name.capitalize()))
      entry.options.map_entry = True
      typed(entry.field.add(name='key', number=1, label=optional), key_type)
      typed(entry.field.add(name='value', number=2, label=optional), value_type)
      m.field.add(name='m_%s_%s' % (key_name, value_name), number=next(number),
                  label=_F.LABEL_REPEATED, type=_F.TYPE_MESSAGE,
                  type_name='.%s.All.%s' % (pkg, entry.name))
  if syntax == 'proto2':
    m.extension_range.add(start=500, end=600)
    group = m.nested_type.add(name='Grp')
    group.field.add(name='a', number=1, label=optional, type=_F.TYPE_INT32)
    m.field.add(name='grp', number=900, label=optional, type=_F.TYPE_GROUP,
                type_name='.%s.All.Grp' % pkg)
    fdp.extension.add(name='ext_i', number=500, label=optional, type=_F.TYPE_INT32,
                      extendee='.%s.All' % pkg)
  else:
    m.oneof_decl.add(name='_opt')
    m.field.add(name='opt', number=901, label=optional, type=_F.TYPE_INT32,
                oneof_index=1, proto3_optional=True)
  pool = descriptor_pool.DescriptorPool()
  pool.Add(fdp)
  return pool, _message_class(pool.FindMessageTypeByName(pkg + '.All'))


def _message_class(descriptor):
  """The message class of `descriptor`: GetMessageClass from protobuf 3.20
  (every TF from 2.12 pins one); MessageFactory before it (TF 2.7 to 2.11 pin
  protobuf below 3.20)."""
  if hasattr(message_factory, 'GetMessageClass'):
    return message_factory.GetMessageClass(descriptor)
  return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)


_INT_EDGES = {
    _F.TYPE_INT32: (-2 ** 31, 2 ** 31 - 1), _F.TYPE_SINT32: (-2 ** 31, 2 ** 31 - 1),
    _F.TYPE_SFIXED32: (-2 ** 31, 2 ** 31 - 1), _F.TYPE_UINT32: (0, 2 ** 32 - 1),
    _F.TYPE_FIXED32: (0, 2 ** 32 - 1), _F.TYPE_INT64: (-2 ** 63, 2 ** 63 - 1),
    _F.TYPE_SINT64: (-2 ** 63, 2 ** 63 - 1), _F.TYPE_SFIXED64: (-2 ** 63, 2 ** 63 - 1),
    _F.TYPE_UINT64: (0, 2 ** 64 - 1), _F.TYPE_FIXED64: (0, 2 ** 64 - 1)}
_TEXTS = ['', 'a', 'b', 'ab', '\x00', '"\'\\', '\xe9', '\u65e5\u672c', '\U0001f600', 'z' * 40,
          '\x7f\x1f\n']


def _is_closed(enum):
  """EnumDescriptor.is_closed (protobuf 4.21 on); before it, proto2's enums
  are the closed ones."""
  if hasattr(enum, 'is_closed'):
    return enum.is_closed
  return enum.file.syntax == 'proto2'


def _random_value(field, rng):
  t = field.type
  if t in _INT_EDGES:
    lo, hi = _INT_EDGES[t]
    return rng.choice([lo, hi, 0, 1, -1 if lo < 0 else 2, rng.randint(lo, hi)])
  if t == _F.TYPE_BOOL:
    return rng.random() < 0.5
  if t == _F.TYPE_FLOAT:
    return rng.choice([0.0, -0.0, 0.1, NAN, -INF,
                       struct.unpack('<f', struct.pack('<I', rng.getrandbits(32)))[0]])
  if t == _F.TYPE_DOUBLE:
    return rng.choice([0.0, -0.0, 1e-5, 1e16, INF,
                       struct.unpack('<d', struct.pack('<Q', rng.getrandbits(64)))[0]])
  if t == _F.TYPE_STRING:
    return rng.choice(_TEXTS)
  if t == _F.TYPE_BYTES:
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 6)))
  if t == _F.TYPE_ENUM:
    if _is_closed(field.enum_type):
      return rng.choice([0, 1, 5, -3])
    return rng.choice([0, 1, 5, -3, 7, -100])
  raise AssertionError(t)


def _fill(msg, rng, depth):
  for field in msg.DESCRIPTOR.fields:
    if rng.random() < 0.4 or field.type == _F.TYPE_GROUP:
      continue
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
      key_field, value_field = field.message_type.fields
      mapping = getattr(msg, field.name)
      for _ in range(rng.randint(0, 4)):
        key = _random_value(key_field, rng)
        if value_field.type == _F.TYPE_MESSAGE:
          child = mapping[key]
          if depth < 2:
            _fill(child, rng, depth + 1)
        else:
          mapping[key] = _random_value(value_field, rng)
    elif _is_repeated(field):
      values = getattr(msg, field.name)
      for _ in range(rng.randint(0, 4)):
        if field.type == _F.TYPE_MESSAGE:
          child = values.add()
          if depth < 2:
            _fill(child, rng, depth + 1)
        else:
          values.append(_random_value(field, rng))
    elif field.type == _F.TYPE_MESSAGE:
      if depth < 2:
        child = getattr(msg, field.name)
        child.SetInParent()
        _fill(child, rng, depth + 1)
    else:
      setattr(msg, field.name, _random_value(field, rng))


@pytest.mark.timeout(_EVERY_FIELD_TYPE_HANG_BOUND_SECS)
@pytest.mark.parametrize('syntax', ['proto2', 'proto3'])
def test_every_field_type(syntax):
  _, cls = _build_file(syntax)
  rng = random.Random(syntax)
  for _ in range(100):
    msg = cls()
    _fill(msg, rng, 0)
    assert_native_same(msg)


def test_proto2_extensions_and_groups_fall_back():
  pool, cls = _build_file('proto2')
  msg = cls(i32=1)
  assert_native_same(msg)
  msg.Extensions[pool.FindExtensionByName('fastmts_text_test_proto2.ext_i')] = 5
  with pytest.raises(ValueError, match='unsupported: extension'):
    native(msg)
  assert graph_io.message_to_text(msg) == text_format.MessageToString(msg)
  msg = cls(i32=1)
  msg.grp.a = 3
  with pytest.raises(ValueError, match='unsupported: group'):
    native(msg)
  assert 'Grp {\n  a: 3\n}' in graph_io.message_to_text(msg)
  assert graph_io.message_to_text(msg) == text_format.MessageToString(msg)


def test_proto3_optional_zero_is_printed():
  _, cls = _build_file('proto3')
  assert assert_native_same(cls(opt=0, i32=0)) == 'opt: 0\n'


# ---- Wire bytes as Python's parser reads them ------------------------------

def _varint(n):
  n &= 2 ** 64 - 1
  out = bytearray()
  while True:
    out.append((n & 0x7f) | (0x80 if n > 0x7f else 0))
    n >>= 7
    if not n:
      return bytes(out)


def _tag(number, wire):
  return _varint(number << 3 | wire)


def _ld(number, payload):
  return _tag(number, 2) + _varint(len(payload)) + payload


def _is_repeated(field):
  """FieldDescriptor.is_repeated, which protobuf 4.x does not have."""
  if hasattr(field, 'is_repeated'):
    return field.is_repeated
  return field.label == field.LABEL_REPEATED


def _assert_parsed_same(cls, data):
  """Native text of raw bytes == text_format's text of the parsed message
  (nothing to compare where this protobuf's parser refuses the bytes: older
  releases are stricter than the native reader, which only ever gets what
  SerializeToString wrote)."""
  try:
    parsed = cls.FromString(data)
  except message_lib.DecodeError:
    return
  assert native_raw(cls.DESCRIPTOR, data) == text_format.MessageToString(parsed)


@_UPB_PARSER
def test_non_canonical_wire():
  _, cls2 = _build_file('proto2')
  _, cls3 = _build_file('proto3')
  f = {c: {fd.name: fd.number for fd in c.DESCRIPTOR.fields} for c in (cls2, cls3)}
  for cls in (cls2, cls3):
    n = f[cls]
    cases = [
        _tag(n['i32'], 0) + _varint(5) + _tag(n['i32'], 0) + _varint(-6),  # last wins
        _tag(n['i32'], 0) + _varint(2 ** 32),  # int32 keeps the low bits: 0
        _tag(n['i32'], 0) + _varint(0),  # explicit zero
        _tag(n['b'], 0) + _varint(300),
        _tag(n['s32'], 0) + _varint(2 ** 33 + 3),
        _ld(n['child'], _tag(n['i32'], 0) + _varint(1)) + _ld(n['child'], _tag(n['u32'], 0)
                                                              + _varint(2)),  # merged
        _tag(n['i32'], 2) + _varint(1) + b'x',  # wrong wire type: unknown
        _ld(n['r_i32'], _varint(1) + _varint(-1)) + _tag(n['r_i32'], 0) + _varint(7),
        _tag(n['p_i32'], 0) + _varint(3) + _ld(n['p_i32'], _varint(4)),
        _ld(n['p_fl'], struct.pack('<ff', 0.5, -0.0)) + _tag(n['p_fl'], 5) + struct.pack('<f', 2),
        _ld(n['o_s'], b'first') + _tag(n['o_i'], 0) + _varint(0),  # oneof: last member
        _ld(n['o_m'], _tag(n['i32'], 0) + _varint(1)) + _tag(n['o_i'], 0) + _varint(3)
        + _ld(n['o_m'], _tag(n['u32'], 0) + _varint(2)),
        _ld(n['m_str_i64'], _ld(1, b'k') + _tag(2, 0) + _varint(1))
        + _ld(n['m_str_i64'], _ld(1, b'k') + _tag(2, 0) + _varint(2))  # later entry wins
        + _ld(n['m_str_i64'], b'') + _ld(n['m_str_i64'], _tag(2, 0) + _varint(0)),
        _ld(n['m_i32_child'], _tag(2, 2) + b'\x00' + _tag(1, 0) + _varint(-4)
            + _ld(2, _tag(n['i32'], 0) + _varint(1)) + _ld(2, _tag(n['u32'], 0) + _varint(9))),
        _ld(n['m_b_str'], _tag(1, 0) + _varint(1)) + _ld(n['m_b_str'], _ld(2, b'v')),
        _tag(1000, 0) + _varint(1) + _ld(1001, b'zz') + _tag(1002, 3) + _tag(1, 0) + _varint(1)
        + _tag(1002, 4) + _tag(1003, 5) + b'abcd' + _tag(1004, 1) + b'abcdefgh',  # unknowns
        _tag(n['child'], 3) + _tag(0, 5) + b'abcd' + _tag(n['child'], 4),  # field 0 in a group
        _tag(n['i32'], 0) + b'\x81\x80\x80\x80\x80\x80\x80\x80\x80\x00',  # long varint
        _tag(n['color'], 0) + _varint(3) + _tag(n['r_color'], 0) + _varint(4)
        + _tag(n['r_color'], 0) + _varint(5) + _ld(n['p_color'], _varint(9) + _varint(1))
        + _ld(n['m_str_color'], _ld(1, b'x') + _tag(2, 0) + _varint(6))
        + _ld(n['m_str_color'], _ld(1, b'y') + _tag(2, 0) + _varint(1)),  # unknown enum values
        _tag(n['color'], 0) + _varint(1) + _tag(n['color'], 0) + _varint(3),
    ]
    for data in cases:
      _assert_parsed_same(cls, data)


@_UPB_PARSER
def test_unknown_fields_of_a_message_are_not_printed():
  node = node_def_pb2.NodeDef(name='n', attr={'a': attr_value_pb2.AttrValue(i=1)})
  unknowns = (_tag(99, 0) + _varint(5) + _ld(100, b'xyz') + _tag(101, 3) + _tag(1, 0)
              + _varint(1) + _tag(101, 4) + _ld(5, _ld(1, b'k') + _tag(7, 0) + _varint(1)))
  parsed = node_def_pb2.NodeDef.FromString(node.SerializeToString() + unknowns)
  assert assert_native_same(parsed) == text_format.MessageToString(node)


def _random_wire(descriptor, rng, depth):
  """Fields of `descriptor` (now and then unknown, or of the wrong wire
  type) with random values, in random order and number."""
  fixed = {_F.TYPE_DOUBLE: 1, _F.TYPE_FIXED64: 1, _F.TYPE_SFIXED64: 1, _F.TYPE_FLOAT: 5,
           _F.TYPE_FIXED32: 5, _F.TYPE_SFIXED32: 5}
  out = b''
  for _ in range(rng.randint(0, 8)):
    field = rng.choice(descriptor.fields)
    if field.type == _F.TYPE_GROUP:
      continue
    wire = fixed.get(field.type, 2 if field.cpp_type in (9, 10) else 0)  # string, message
    if _is_repeated(field) and wire != 2 and rng.random() < 0.3:
      wire = 2  # packed
    if rng.random() < 0.1:
      wire = rng.choice([0, 1, 2, 5])
    number = field.number if rng.random() < 0.95 else rng.randint(1, 2000)
    if wire == 0:
      out += _tag(number, 0) + _varint(rng.choice([0, 1, 5, -1, -3, 7, 2 ** 31, 2 ** 32,
                                                   rng.getrandbits(64)]))
    elif wire == 1:
      out += _tag(number, 1) + struct.pack('<Q', rng.choice([0, rng.getrandbits(64)]))
    elif wire == 5:
      out += _tag(number, 5) + struct.pack('<I', rng.choice([0, rng.getrandbits(32)]))
    elif field.type == _F.TYPE_MESSAGE:
      out += _ld(number, _random_wire(field.message_type, rng, depth + 1) if depth < 3 else b'')
    elif field.type in (_F.TYPE_STRING, _F.TYPE_BYTES):
      out += _ld(number, rng.choice(_TEXTS).encode('utf-8'))
    elif field.type in fixed:
      size = 8 if fixed[field.type] == 1 else 4
      out += _ld(number, bytes(rng.getrandbits(8) for _ in range(size * rng.randint(0, 3))))
    else:
      out += _ld(number, b''.join(_varint(rng.choice([0, 1, 5, -3, 7, 2 ** 40]))
                                  for _ in range(rng.randint(0, 4))))
  return out


@_UPB_PARSER
@pytest.mark.parametrize('syntax', ['proto2', 'proto3'])
def test_random_wire_reads_as_python_parses(syntax):
  _, cls = _build_file(syntax)
  rng = random.Random('wire' + syntax)
  for _ in range(400):
    data = _random_wire(cls.DESCRIPTOR, rng, 0)
    try:
      expected = text_format.MessageToString(cls.FromString(data))
    except Exception:  # pylint: disable=broad-except
      with pytest.raises(ValueError):
        native_raw(cls.DESCRIPTOR, data)
      continue
    try:
      assert native_raw(cls.DESCRIPTOR, data) == expected
    except ValueError as e:
      # An extension's number (Python prints it), a group, or (proto2 parses
      # them) a string that is not UTF-8: left to Python.
      reasons = ['unsupported: extension', 'unsupported: group']
      if syntax == 'proto2':
        reasons.append('not UTF-8')
      assert any(reason in str(e) for reason in reasons), e


@pytest.mark.parametrize('data', [
    b'\x08', b'\x08\x80', b'\x12\x05ab', b'\x0f\x00', b'\x00\x01', b'\x0c', b'\x1d\x00\x00',
    b'\x08' + b'\xff' * 10 + b'\x01', b'\x1b\x08\x01', b'\x1b\x24', b'\xff\xff\xff\xff\x7f\x00',
    b'\x88\x80\x80\x80\x80\x00\x01',  # a tag longer than 5 bytes
])
def test_malformed_bytes_raise(data):
  with pytest.raises(ValueError, match='malformed'):
    native_raw(node_def_pb2.NodeDef.DESCRIPTOR, data)


def test_strings_that_are_not_utf8_raise():
  # Python's parser refuses them in proto3; proto2's leniency is not reproduced.
  for data in (b'\x0a\x02\xc3\x28', b'\x2a\x05\x0a\x03\xed\xa0\x80', b'\x12\x01\xff'):
    with pytest.raises(ValueError, match='unsupported: .*not UTF-8'):
      native_raw(node_def_pb2.NodeDef.DESCRIPTOR, data)


def test_deep_nesting_falls_back():
  _, cls = _build_file('proto3')
  msg = cls()
  inner = msg
  for _ in range(150):
    inner = inner.child
  inner.i32 = 1
  with pytest.raises(ValueError, match='unsupported: message nesting'):
    native(msg)
  assert graph_io.message_to_text(msg) == text_format.MessageToString(msg)
  groups = _tag(1000, 3) * 100000 + _tag(1000, 4) * 100000  # unknown groups, nested
  with pytest.raises(ValueError):
    native_raw(cls.DESCRIPTOR, groups)


def test_bad_packed_lengths_raise():
  _, cls = _build_file('proto3')
  n = {fd.name: fd.number for fd in cls.DESCRIPTOR.fields}
  for data in (_ld(n['p_fl'], b'abc'), _ld(n['r_db'], b'a' * 9), _ld(n['r_i64'], b'\x80')):
    with pytest.raises(ValueError, match='malformed'):
      native_raw(cls.DESCRIPTOR, data)


def test_truncated_and_mutated_graph_bytes():
  with tf.Graph().as_default() as g:
    x = v1.placeholder(tf.float32, [2], name='x')
    tf.identity(x * tf.constant([1.5, -2.0]), name='y')
    tf.constant('\u00e9t\u00e9 \x00', name='s')
  data = g.as_graph_def().SerializeToString(deterministic=True)
  rng = random.Random(3)
  samples = [data[:n] for n in range(0, len(data), 7)]
  # Corrupted bytes only where the parser is upb (see _UPB_PARSER).
  for _ in range(400 if _PARSER_IS_UPB else 0):
    mutated = bytearray(data)
    for _ in range(rng.randint(1, 3)):
      mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
    samples.append(bytes(mutated))
  for sample in samples:
    try:
      parsed = graph_pb2.GraphDef.FromString(sample)
    except Exception:  # pylint: disable=broad-except
      with pytest.raises(ValueError):
        native_raw(graph_pb2.GraphDef.DESCRIPTOR, sample)
      continue
    assert native_raw(graph_pb2.GraphDef.DESCRIPTOR, sample) == text_format.MessageToString(parsed)


def test_schema_is_cached_and_checked():
  assert (text_format_schema.native_schema(graph_pb2.GraphDef.DESCRIPTOR)
          is text_format_schema.native_schema(graph_pb2.GraphDef.DESCRIPTOR))
  messages, enums = text_format_schema.build_table(graph_pb2.GraphDef.DESCRIPTOR)
  assert messages[0][0] == 'tensorflow.GraphDef'
  field = (1, 'f', _F.TYPE_MESSAGE, False, True, False, len(messages), -1, -1)
  bad_tables = [
      ([], []),
      ([('M', '', [field], [])], []),  # message index out of range
      ([('M', '', [(1, 'a', 5, False, False, False, -1, -1, -1)] * 2, [])], []),  # same number
      ([('M', '', [(1, 'm', _F.TYPE_MESSAGE, True, False, True, 0, -1, -1)], [])], []),  # map
      ([('M', '', [(1, 'e', _F.TYPE_ENUM, False, False, False, -1, 0, -1)], [])], []),  # enum
  ]
  for messages, enums in bad_tables:
    with pytest.raises(ValueError, match='text format schema'):
      _native.TextFormatSchema(messages, enums)


# ---- write_graph -----------------------------------------------------------

def _small_graph():
  g = tf.Graph()
  with g.as_default():
    v1.get_variable('w', [2, 2])
    tf.constant(b'\x00"', name='s')
  return g


@pytest.mark.parametrize('as_text', [True, False])
@pytest.mark.parametrize('as_graph_def', [False, True])
def test_write_graph_writes_tf_file(tmp_path, as_text, as_graph_def):
  g = _small_graph()
  graph = g.as_graph_def() if as_graph_def else g
  ours = graph_io.write_graph(graph, str(tmp_path / 'ours' / 'deep'), 'g.pbtxt', as_text=as_text)
  theirs = tf.io.write_graph(graph, str(tmp_path / 'tf' / 'deep'), 'g.pbtxt', as_text=as_text)
  assert ours == str(tmp_path / 'ours' / 'deep' / 'g.pbtxt')
  assert theirs == str(tmp_path / 'tf' / 'deep' / 'g.pbtxt')
  with open(ours, 'rb') as a, open(theirs, 'rb') as b:
    if as_text or WRITE_GRAPH_IS_DETERMINISTIC:
      assert a.read() == b.read()
    else:  # the same message, its maps in no set order
      assert graph_pb2.GraphDef.FromString(a.read()) == graph_pb2.GraphDef.FromString(b.read())


def _error_of(fn):
  """(type, message) of what `fn` raised, or ('returned', its value): TF
  2.4 writes to a pathlib.Path logdir, where 1.15, 2.15 and 2.21 raise."""
  try:
    value = fn()
  except Exception as e:  # pylint: disable=broad-except
    # atomic_write_string_to_file writes a temporary file with a random name first.
    return type(e), re.sub(r'\.tmp[0-9a-f]{32}', '.tmp<uuid>', str(e))
  return 'returned', value


def test_write_graph_raises_tf_errors(tmp_path):
  regular_file = tmp_path / 'file'
  regular_file.write_text('x')
  g = _small_graph()
  cases = [
      (g, str(regular_file), 'g.pbtxt'),  # logdir is a file
      (g, str(tmp_path), 'missing/g.pbtxt'),  # name in a directory that does not exist
      (g, pathlib.Path(tmp_path), 'g.pbtxt'),  # a Path: TF 2.4 writes (1.15, 2.15, 2.21 raise)
      (None, str(tmp_path / 'none'), 'g.pbtxt'),  # not a message: fails after the directory
  ]
  for graph, logdir, name in cases:
    ours = _error_of(lambda: graph_io.write_graph(graph, logdir, name))  # pylint: disable=cell-var-from-loop
    theirs = _error_of(lambda: tf.io.write_graph(graph, logdir, name))  # pylint: disable=cell-var-from-loop
    assert ours == theirs
    if not isinstance(logdir, pathlib.Path):
      assert ours[0] != 'returned', ours
  assert (tmp_path / 'none').is_dir()


# ---- float_format='' (TF 2.12 to 2.20's write_graph) ------------------------

def _text_with_empty_float_format(message):
  """MessageToString(message, float_format=''), or None where this protobuf
  has no float_format (7.x); its deprecation warnings (6.3x) silenced."""
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    try:
      return text_format.MessageToString(message, float_format='')
    except TypeError:
      return None


def test_floats_as_doubles_prints_as_empty_float_format():
  rng = random.Random(7)
  floats = [0.1, -0.0, 1e-30, 3.4e38, 1.5, 2.0 / 3.0, 1e-45, float('inf'), float('-inf'),
            float('nan'), 16777217.0, 1e16, 1e-5]
  floats += [struct.unpack('<f', struct.pack('<I', rng.getrandbits(32)))[0] for _ in range(2000)]
  tensor = tf.make_tensor_proto(np.array([f for f in floats], np.float32))
  tensor.float_val.extend(np.array(floats, np.float32).tolist())
  tensor.ClearField('tensor_content')
  tensor.double_val.extend([0.1, 1e22, -2.5e-8, float('nan')])
  expected = _text_with_empty_float_format(tensor)
  if expected is None:
    pytest.skip('this protobuf has no float_format')
  schema = text_format_schema.native_schema(tensor.DESCRIPTOR)
  ours = _native.text_format(schema, tensor.SerializeToString(deterministic=True), AS_UTF8, True)
  assert ours == expected


def test_message_to_text_with_the_float_format_of_the_installed_tf(tmp_path):
  """graph_io passes the installed TF's float_format: its write_graph's text."""
  g = tf.Graph()
  with g.as_default():
    tf.constant(np.array([0.1, 1.0 / 3.0, -7.25e-12], np.float32), name='f')
    tf.constant([0.1], name='d', dtype=tf.float64)
    tf.constant(0.3, name='scalar')
  ours = graph_io.write_graph(g, str(tmp_path), 'ours.pbtxt')
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    theirs = tf.io.write_graph(g, str(tmp_path), 'theirs.pbtxt')
  with open(ours, 'rb') as a, open(theirs, 'rb') as b:
    assert a.read() == b.read()
