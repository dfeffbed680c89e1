"""The native event-file encoding (cpp/core/file_formats/event_file.cc) against TF's own:
TFRecord framing byte for byte as tf.io.TFRecordWriter writes it, Event and
Summary bytes as protobuf serializes TF's messages."""
import math
import os
import random

import pytest
import tensorflow as tf
from tensorflow.core.framework import summary_pb2
from tensorflow.core.util import event_pb2

from fastmts import _native


@pytest.mark.parametrize('size', [0, 1, 7, 255, 4096, 100003])
def test_tfrecord_matches_tf_record_writer(tmp_path, size):
  rng = random.Random(size)
  data = bytes(rng.getrandbits(8) for _ in range(size))
  path = str(tmp_path / 'r.tfrecord')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(data)
  with open(path, 'rb') as f:
    assert _native.tfrecord(data) == f.read()


_WHAT = {3: 'file_version', 4: 'graph_def', 5: 'summary', 7: 'session_log',
         8: 'tagged_run_metadata', 9: 'meta_graph_def'}


def _reference(wall_time, step, what, payload):
  event = event_pb2.Event(wall_time=wall_time, step=step)
  field = _WHAT[what]
  if field in ('file_version', 'graph_def', 'meta_graph_def'):
    setattr(event, field, payload.decode() if field == 'file_version' else payload)
  else:
    getattr(event, field).ParseFromString(payload)
    getattr(event, field).SetInParent()
  return event.SerializeToString()


_SUMMARY = summary_pb2.Summary(value=[summary_pb2.Summary.Value(
    tag='loss', simple_value=0.5)]).SerializeToString()
_SESSION_LOG = event_pb2.SessionLog(status=event_pb2.SessionLog.START).SerializeToString()


@pytest.mark.parametrize('wall_time', [0.0, -0.0, 1796206520.438533, 1e-300, math.inf])
@pytest.mark.parametrize('step', [0, 1, 127, 128, 2**40, -1, -2**63])
@pytest.mark.parametrize('what, payload', [
    (3, b'brain.Event:2'), (4, b'\x0a\x03\x0a\x01x'), (5, _SUMMARY), (5, b''),
    (7, _SESSION_LOG), (7, b''), (9, b'')])
def test_event_bytes_match_protobuf(wall_time, step, what, payload):
  assert _native.event_bytes(wall_time, step, what, payload) == _reference(
      wall_time, step, what, payload)


def test_event_bytes_rejects_other_fields():
  with pytest.raises(ValueError) as raised:
    _native.event_bytes(1.0, 1, 6, b'')
  assert str(raised.value) == "not a field of Event's `what`: 6"


@pytest.mark.parametrize('tag', ['global_step/sec', '', 'ü/x' * 50])
@pytest.mark.parametrize('value', [0.0, -0.0, 123.456, 1e38, math.inf, -math.inf])
def test_simple_value_summary_matches_protobuf(tag, value):
  expected = summary_pb2.Summary(value=[summary_pb2.Summary.Value(
      tag=tag, simple_value=value)]).SerializeToString()
  assert _native.simple_value_summary(tag, value) == expected


def test_simple_value_summary_nan():
  got = summary_pb2.Summary.FromString(_native.simple_value_summary('t', math.nan))
  assert got.value[0].tag == 't' and math.isnan(got.value[0].simple_value)
