"""ProfilerHook run natively, compared with stock TF: the timelines written
on its step and seconds schedules."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from hook_test_utils import (CREATED, GRAPHS, STEPS_10, events, flush_cached_writer, in_dir,
                             read_first_graph, run_n_times, tf_log, tick_runs)

v1 = tf.compat.v1


def timelines(directory):
  """{timeline file: (has 'traceEvents', the train op's AssignAdd was
  traced, has memory events)} for the ProfilerHook files in `directory`.

  (Whether dataflow arrows are drawn varies from run to run in TF, so the
  show_dataflow flag is only checked to be accepted.)"""
  out = {}
  for name in sorted(os.listdir(directory)):
    if not name.startswith('timeline-'):
      continue
    with open(os.path.join(directory, name)) as f:
      trace = json.load(f)
    trace_events = trace.get('traceEvents', [])
    out[name] = (
        'traceEvents' in trace,
        any(e.get('ph') == 'X' and
            e.get('args', {}).get('op') == 'AssignAddVariableOp'
            for e in trace_events),
        any(e.get('ph') in ('C', 'D', 'N', 'O') for e in trace_events))
  return out


@pytest.mark.parametrize('show_dataflow,show_memory', [
    (True, False), (False, True), (False, False), (True, True)])
def test_profiler_hook_save_steps(check, show_dataflow, show_memory):
  """Traces every 3 steps (not the first run): timeline-<step>.json in
  Chrome trace format, and the run metadata in the cached writer."""

  def scenario(impl, workdir):
    with tf.Graph().as_default(), tf_log() as lines:
      step, _, train = read_first_graph()
      hook = v1.train.ProfilerHook(save_steps=3, output_dir=workdir,
                                   show_dataflow=show_dataflow,
                                   show_memory=show_memory)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        results = run_n_times(sess, [train, step], 8)
    flush_cached_writer(workdir)
    return results, timelines(workdir), events(workdir), in_dir(workdir, lines)

  check(scenario, expected=(
      [[np.int64(s + 1), np.int64(s)] for s in range(8)],
      {'timeline-3.json': (True, True, show_memory),
       'timeline-6.json': (True, True, show_memory)},
      (1, GRAPHS + [('run_metadata', 'step_3', 0),
                    ('run_metadata', 'step_6', 0)]),
      CREATED + [('INFO', "Saving timeline for %d into '<dir>/timeline-%d"
                  ".json'." % (s, s)) for s in (3, 6)]))


def test_profiler_hook_save_secs_controlled_time(check, monkeypatch):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = read_first_graph()
      hook = v1.train.ProfilerHook(save_secs=5, output_dir=workdir)
      results = tick_runs(impl, monkeypatch, train, hooks=[hook])
    flush_cached_writer(workdir)
    return results, timelines(workdir), events(workdir)

  check(scenario, expected=(
      STEPS_10,
      {'timeline-5.json': (True, True, False),
       'timeline-9.json': (True, True, False)},
      (1, GRAPHS + [('run_metadata', 'step_5', 0),
                    ('run_metadata', 'step_9', 0)])))


def test_the_full_trace_rule_rests_on_tfs_order_of_trace_levels(fastmts):
  """A native ProfilerHook's full-trace request is one rule, on each side:
  python_hooked_session.merge_full_trace on RunOptions objects, and
  core/run_options.h's with_full_trace, which appends trace_level=FULL_TRACE
  (b'\\x08\\x03') to the step's serialized options. Both are TF's merge of a
  hook's RunOptions(trace_level=FULL_TRACE) only because FULL_TRACE is TF's
  largest trace level and TF's merge keeps the larger: pinned here, for
  every level the options may already hold."""
  from tensorflow.core.protobuf import config_pb2  # pylint: disable=import-outside-toplevel
  from tensorflow.python.training import monitored_session as tf_monitored  # pylint: disable=import-outside-toplevel
  from fastmts._internal import python_hooked_session  # pylint: disable=import-outside-toplevel
  del fastmts
  run_options = config_pb2.RunOptions
  assert max(run_options.TraceLevel.values()) == run_options.FULL_TRACE
  assert sorted(run_options.TraceLevel.values()) == [
      run_options.NO_TRACE, run_options.SOFTWARE_TRACE, run_options.HARDWARE_TRACE,
      run_options.FULL_TRACE]
  for level in run_options.TraceLevel.values():
    by_tf = run_options(trace_level=level, timeout_in_ms=5, output_partition_graphs=True)
    tf_monitored._HookedSession._merge_run_options(  # pylint: disable=protected-access
        None, by_tf, run_options(trace_level=run_options.FULL_TRACE))
    by_fastmts = run_options(trace_level=level, timeout_in_ms=5, output_partition_graphs=True)
    python_hooked_session.merge_full_trace(by_fastmts)
    natively = run_options.FromString(
        run_options(trace_level=level, timeout_in_ms=5,
                    output_partition_graphs=True).SerializeToString() + b'\x08\x03')
    assert by_tf.trace_level == run_options.FULL_TRACE
    assert by_fastmts == by_tf, level
    # TF's merge also leaves an empty debug_options, which means nothing.
    fields = lambda o: (o.trace_level, o.timeout_in_ms, o.output_partition_graphs)
    assert fields(natively) == fields(by_tf) and not natively.HasField('debug_options'), level
