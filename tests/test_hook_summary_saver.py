"""SummarySaverHook run natively, compared with stock TF: the summaries and
session logs written to event files (read back and compared by content),
the writer forms, its schedule over steps and seconds, reuse in a second
session and TF's argument checks."""

import os

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import Raised, ckpt_files, outcome, raised
from hook_test_utils import (GRAPHS, STEPS_10, ckpt_log, ckpt_names, doubled, events,
                             flush_cached_writer, read_first_graph, run_n_times, start, summary,
                             tick_runs)

v1 = tf.compat.v1


def _loss_summary_hook(workdir, loss, **trigger):
  """A SummarySaverHook writing scalar 'loss_sum' of `loss` to `workdir`
  (trigger: save_steps or save_secs)."""
  summ = v1.summary.scalar('loss_sum', loss)
  return v1.train.SummarySaverHook(output_dir=workdir, summary_op=summ,
                                   **trigger)


_SUMMARY_SOURCES = ['tensor', 'list', 'scaffold_summary_op',
                    'scaffold_merge_all', 'scaffold_not_used_by_session']


_BAD_SUMMARY_ARGS = {
    'both_steps_and_secs': (dict(save_steps=2, save_secs=3, summary_op='op'),
                            'Can not provide both every_secs and every_steps.'),
    'neither_steps_nor_secs': (dict(summary_op='op'), 'Either every_secs or '
                               'every_steps should be provided.'),
    'neither_scaffold_nor_op': (dict(save_steps=2), 'Exactly one of scaffold '
                                'or summary_op must be provided.'),
    'both_scaffold_and_op': (dict(save_steps=2, summary_op='op',
                                  scaffold='scaffold'),
                             'Exactly one of scaffold or summary_op must be '
                             'provided.'),
}


@pytest.mark.parametrize('source', _SUMMARY_SOURCES)
def test_summary_saver_save_steps(check, source):
  """Summaries every 3 steps; the first run always writes (and logs START).

  The value is computed in the train run (stale step) but written at the
  global step read after it: loss 1.5 (step 3) is written at step 4.
  """

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      step, loss, train = read_first_graph()
      loss_sum = v1.summary.scalar('loss_sum', loss)
      twice_sum = v1.summary.scalar('twice', doubled())
      scaffold = None
      kwargs = {}
      if source == 'tensor':
        kwargs['summary_op'] = loss_sum
      elif source == 'list':
        kwargs['summary_op'] = [loss_sum, twice_sum]
      elif source == 'scaffold_summary_op':
        scaffold = impl.Scaffold(summary_op=twice_sum)
        kwargs['scaffold'] = scaffold
      elif source == 'scaffold_merge_all':
        scaffold = impl.Scaffold()
        kwargs['scaffold'] = scaffold
      else:
        # The hook's scaffold is never finalized: its summary_op stays None.
        kwargs['scaffold'] = impl.Scaffold()
      hook = v1.train.SummarySaverHook(save_steps=3, output_dir=workdir,
                                       **kwargs)
      creator = impl.ChiefSessionCreator(scaffold=scaffold)
      with impl.MonitoredSession(session_creator=creator, hooks=[hook]) as sess:
        results = run_n_times(sess, [train, step], 8)
    return [r[0] for r in results], events(workdir)

  loss = [summary('loss_sum', s, s / 2 - 0.5) for s in (1, 4, 7)]
  twice = [summary('twice', s, s - 1.0) for s in (1, 4, 7)]
  written = {
      'tensor': loss,
      'list': [x for pair in zip(loss, twice) for x in pair],
      'scaffold_summary_op': twice,
      'scaffold_merge_all': [x for pair in zip(loss, twice) for x in pair],
      'scaffold_not_used_by_session': [],
  }[source]
  check(scenario, expected=(
      STEPS_10[:8], (1, GRAPHS + [start(1)] + written)))


@pytest.mark.parametrize('form', ['output_dir', 'summary_writer', 'neither'])
def test_summary_saver_writer_forms(check, form):
  """output_dir (a FileWriterCache writer, which records the graph),
  summary_writer (the user's), or neither (nothing written, runs unchanged)."""

  def scenario(impl, workdir):
    out_dir = os.path.join(workdir, 'summaries')
    os.mkdir(out_dir)
    writer = None
    with tf.Graph().as_default():
      step, loss, train = read_first_graph()
      summ = v1.summary.scalar('loss_sum', loss)
      kwargs = {}
      if form == 'output_dir':
        kwargs['output_dir'] = out_dir
      elif form == 'summary_writer':
        writer = v1.summary.FileWriter(out_dir)
        kwargs['summary_writer'] = writer
      hook = v1.train.SummarySaverHook(save_steps=2, summary_op=summ, **kwargs)
      try:
        with impl.MonitoredSession(hooks=[hook]) as sess:
          results = run_n_times(sess, [train, step], 5)
      finally:
        if writer is not None:
          writer.close()
    return results, events(out_dir)

  ok = [[np.int64(s + 1), np.int64(s)] for s in range(5)]
  written = [start(1), summary('loss_sum', 1, 0.0),
             summary('loss_sum', 3, 1.0), summary('loss_sum', 5, 2.0)]
  expected = {
      'output_dir': (1, GRAPHS + written),
      'summary_writer': (1, written),
      'neither': (0, []),
  }[form]
  check(scenario, expected=(ok, expected))


def test_summary_saver_via_monitored_training_session(check):
  """MonitoredTrainingSession(save_summaries_steps=3): the graph's merged
  summaries, the global_step/sec counter and the checkpoint logs all go to
  the checkpoint_dir's cached writer."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, loss, train = read_first_graph()
      v1.summary.scalar('loss_sum', loss)
      v1.summary.scalar('twice', doubled())
      with impl.MonitoredTrainingSession(
          checkpoint_dir=workdir, save_summaries_steps=3,
          log_step_count_steps=4) as sess:
        results = run_n_times(sess, train, 8)
    flush_cached_writer(workdir)
    return results, events(workdir, rates=False), ckpt_files(workdir)

  merged = lambda s: [summary('loss_sum', s, s / 2 - 0.5),
                      summary('twice', s, s - 1.0)]
  check(scenario, expected=(
      STEPS_10[:8],
      (1, GRAPHS + GRAPHS + [ckpt_log(0), start(1)] + merged(1) + merged(4) +
       [summary('global_step/sec', 5, None)] + merged(7) + [ckpt_log(8)]),
      ['checkpoint', 'graph.pbtxt'] + ckpt_names(0, 8)))


def test_summary_saver_fetch_schedule_with_unfed_placeholder(check):
  """The summary depends on a placeholder the caller feeds only to its train
  runs; every 4th run only reads the step (no side effects, so a failed run
  changes nothing).  A read run fails exactly when the hook requests the
  summary, and the failed run leaves the hook's schedule as it was: it asks
  again at the next run, whose summary is then written."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      step, _, train = read_first_graph()
      p = v1.placeholder(tf.float32, (), name='p')
      summ = v1.summary.scalar('p_sum', p)
      hook = v1.train.SummarySaverHook(save_steps=3, output_dir=workdir,
                                       summary_op=summ)
      out = []
      with impl.MonitoredSession(hooks=[hook]) as sess:
        for i in range(12):
          if i % 4 != 3:
            r = outcome(sess.run, train, feed_dict={p: float(10 * i)})
          else:
            r = outcome(sess.run, step)
          if isinstance(r, Raised):  # without the stack traces' lines
            # (their frames, and in TF 2.12 the frames' source lines)
            r = (r.type, [line for line in r.message.splitlines()
                          if not line.startswith(' ')])
          out.append(r)
    return out, events(workdir)

  unfed = (tf.errors.InvalidArgumentError, [
      'Graph execution error:', '',
      "Detected at node 'p' defined at (most recent call last):",
      "Node: 'p'",
      "You must feed a value for placeholder tensor 'p' with dtype float",
      '\t [[{{node p}}]]', '', "Original stack trace for 'p':"])
  check(scenario, expected=(
      [np.int64(1), np.int64(2), np.int64(3), unfed, np.int64(4),
       np.int64(5), np.int64(6), unfed, np.int64(7), np.int64(8),
       np.int64(9), unfed],
      (1, GRAPHS + [start(1), summary('p_sum', 1, 0.0),
                    summary('p_sum', 4, 40.0), summary('p_sum', 7, 80.0)])))


def test_summary_saver_runs_without_increment(check):
  """Runs that do not move the global step still make TF expect the next
  run at stale step + 1 (its `_next_step`), so with save_steps=3 and one
  train run in three, a summary is written at every global step."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      step, loss, train = read_first_graph()
      hook = _loss_summary_hook(workdir, loss, save_steps=3)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        results = [sess.run(train if i % 3 == 0 else step)
                   for i in range(12)]
    return results, events(workdir)

  check(scenario, expected=(
      [np.int64(s) for s in (1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4)],
      (1, GRAPHS + [start(1), summary('loss_sum', 1, 0.0),
                    summary('loss_sum', 2, 1.0), summary('loss_sum', 3, 1.5),
                    summary('loss_sum', 4, 2.0)])))


@pytest.mark.parametrize('case', sorted(_BAD_SUMMARY_ARGS))
def test_summary_saver_bad_arguments(check, case):
  kwargs, message = _BAD_SUMMARY_ARGS[case]

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      read_first_graph()
      args = dict(kwargs)
      if args.get('summary_op') == 'op':
        args['summary_op'] = v1.summary.scalar('s', tf.constant(1.0))
      if args.get('scaffold') == 'scaffold':
        args['scaffold'] = impl.Scaffold()
      return raised(lambda: impl.SummarySaverHook(output_dir=workdir, **args))

  check(scenario, expected=Raised(ValueError, message))


def test_summary_saver_reused_in_two_sessions(check):
  """begin() resets the hook: the second session logs START again and writes
  at its first step; both sessions share the cached writer (one file)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, loss, train = read_first_graph()
      hook = _loss_summary_hook(workdir, loss, save_steps=3)
      results = []
      for n in (5, 4):
        with impl.MonitoredSession(hooks=[hook]) as sess:
          results.append(run_n_times(sess, train, n))
    return results, events(workdir)

  check(scenario, expected=(
      [STEPS_10[:5], STEPS_10[:4]],
      (1, GRAPHS + [start(1), summary('loss_sum', 1, 0.0),
                    summary('loss_sum', 4, 1.5),
                    start(1), summary('loss_sum', 1, 0.0),
                    summary('loss_sum', 4, 1.5)])))


def test_summary_saver_save_secs_controlled_time(check, monkeypatch):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, loss, train = read_first_graph()
      hook = _loss_summary_hook(workdir, loss, save_secs=5)
      results = tick_runs(impl, monkeypatch, train, hooks=[hook])
    return results, events(workdir)

  check(scenario, expected=(
      STEPS_10,
      (1, GRAPHS + [start(1)] +
       [summary('loss_sum', s, s / 2 - 0.5) for s in (1, 5, 9)])))
