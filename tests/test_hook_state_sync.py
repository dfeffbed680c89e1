"""The state TF's hook objects keep while their native hooks run them
(HookStateSync): schedules on stale and fresh global steps, a native read
failing at session creation, and hook objects that keep their schedules
past a close where end() does not run."""

import pytest
import tensorflow as tf
from tensorflow.python.platform import tf_logging

import compat_utils
from compat_utils import LITERALS_HOLD, Raised, ckpt_files, outcome
from hook_test_utils import (STEP_RATE, events, flush_cached_writer, global_step_read_after,
                             in_dir, read_first_graph, run_n_times, schedule_state, tf_log)

v1 = tf.compat.v1


def read_after_increment_graph():
  """A graph whose stock hooks' global-step read tensor runs the increment
  first (it waits for `train`): every step they fetch is already the
  incremented one, so StepCounterHook and CheckpointSaverHook see their
  timer fire for stale + 1 one step early and read the step afresh -- and
  each such fresh read runs `train` once more. The global step thus counts
  every fresh read TF's algorithm makes. Returns `train`."""
  gs = v1.train.get_or_create_global_step()
  train = v1.assign_add(gs, 1, name='train')
  global_step_read_after(train)
  return train


def _hook_states(counter, saver, summaries):
  """What TF's hook objects hold of their schedules after a run."""
  def timer(hook):
    last = hook._timer._last_triggered_step  # pylint: disable=protected-access
    return None if last is None else int(last)
  def step(value):
    return None if value is None else int(value)
  return dict(counter=(timer(counter), step(counter._last_global_step)),  # pylint: disable=protected-access
              saver=timer(saver),
              summaries=(timer(summaries), step(summaries._next_step)))  # pylint: disable=protected-access


def _timed(message):
  return STEP_RATE.sub(r'\1<rate>', message)


@pytest.mark.parametrize('graph', ['read_first', 'read_after_increment'])
def test_global_step_schedules_with_stale_and_fresh_steps(check, graph):
  """StepCounterHook, CheckpointSaverHook (save_steps) and a SummarySaverHook
  with no summary op, whose fresh global-step reads and timers run natively
  in fastmts: the same summaries, checkpoints and log lines as TF, and TF's
  hook objects end with the same timer and step state, whether the fetched
  step predates the increment or not."""

  def scenario(impl, workdir):
    with tf.Graph().as_default(), tf_log() as lines:
      if graph == 'read_first':
        train = read_first_graph()[2]
      else:
        train = read_after_increment_graph()
      scaffold = impl.Scaffold()
      counter = v1.train.StepCounterHook(every_n_steps=5, output_dir=workdir)
      saver = v1.train.CheckpointSaverHook(workdir, save_steps=4, scaffold=scaffold)
      summaries = v1.train.SummarySaverHook(save_steps=3, output_dir=workdir,
                                            scaffold=scaffold)
      creator = impl.ChiefSessionCreator(scaffold=scaffold)
      with impl.MonitoredSession(session_creator=creator,
                                 hooks=[counter, saver, summaries]) as sess:
        results = run_n_times(sess, train, 23)
      states = _hook_states(counter, saver, summaries)
    flush_cached_writer(workdir)
    logged = [(level, msg.split(':')[0]) for level, msg in in_dir(workdir, lines)]
    return results, events(workdir, rates=False), ckpt_files(workdir), logged, states

  _, (_, records), _, logged, states = check(scenario)
  rate_steps = [r[2] for r in records if r[1] == 'global_step/sec']
  ckpt_steps = [r[2] for r in records if r[:2] == ('session_log', 'CHECKPOINT')]
  # TF's figures (of 2.12 to 2.21: LITERALS_HOLD; TF 2.0's hooks read the
  # step at other points); the fastmts run must equal TF's (check compares all).
  if not LITERALS_HOLD:
    pass
  elif graph == 'read_first':
    assert rate_steps == [6, 11, 16, 21], records
    assert ckpt_steps == [0, 4, 8, 12, 16, 20, 23], records
    assert states == dict(counter=(21, 22), saver=20, summaries=(22, 24)), states
  else:
    assert rate_steps == list(range(9, 70, 6)), records
    assert ckpt_steps == list(range(1, 68, 6)) + [72], records
    assert states == dict(counter=(69, 68), saver=67, summaries=(71, 72)), states
  assert logged.count(('INFO', 'global_step/sec')) == len(rate_steps), logged


def test_native_hook_read_failing_at_session_creation(check):
  """StopAtStepHook(num_steps) reads the global step natively when the
  session is created; a TF error there is the tf.errors class TF raises
  (here OutOfRangeError: the read tensor waits for an exhausted dataset)."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      item = v1.data.make_one_shot_iterator(tf.data.Dataset.range(0)).get_next()
      with tf.control_dependencies([item]):
        train = v1.assign_add(gs, 1)
      global_step_read_after(train)
      hook = v1.train.StopAtStepHook(num_steps=3)
      got = compat_utils.without_stack_trace(
          outcome(impl.MonitoredSession, hooks=[hook]))
    return got.type, 'End of sequence' in got.message, got.message

  assert check(scenario)[:2] == (tf.errors.OutOfRangeError, True)


@pytest.mark.parametrize('close', ['exception', 'earlier_end_raises'])
def test_hook_objects_keep_their_schedules_past_a_close_without_end(check, close):
  """TF's hook objects keep what their after_run left even when their end()
  never runs: the `with` block raised (no end() at all), or an earlier
  hook's end() raised (TF skips the later ones). The same objects in a
  second session then continue from there: same state, events and lines."""

  class EndRaisesOnce(v1.train.SessionRunHook):

    def __init__(self):
      self.raised = False

    def end(self, session):
      if close == 'earlier_end_raises' and not self.raised:
        self.raised = True
        raise ValueError('end() failed')

  def scenario(impl, workdir):
    # StepCounterHook's stuck-step warning is TF's log_first_n, counted per
    # process: each run starts from a fresh count.
    tf_logging._log_counter_per_token.clear()  # pylint: disable=protected-access
    with tf.Graph().as_default(), tf_log(rewrite=_timed) as lines:
      step, loss, train = read_first_graph()
      summary_op = v1.summary.scalar('loss', loss)
      native_hooks = [
          v1.train.StepCounterHook(every_n_steps=3, output_dir=workdir),
          v1.train.SummarySaverHook(save_steps=4, output_dir=workdir, summary_op=summary_op),
          v1.train.LoggingTensorHook({'step': step}, every_n_iter=3)]
      hooks = [EndRaisesOnce()] + native_hooks
      trace = []
      for steps in (7, 6):

        def drive(steps=steps):
          with impl.MonitoredSession(hooks=hooks) as sess:
            results = [sess.run(train) for _ in range(steps)]
            if close == 'exception' and not trace:
              raise ValueError('the with block failed')
          return results

        trace.append((compat_utils.without_stack_trace(outcome(drive)),
                      [schedule_state(hook) for hook in native_hooks]))
    flush_cached_writer(workdir)
    return trace, events(workdir, rates=False), in_dir(workdir, lines)

  trace, _, _ = check(scenario)
  assert isinstance(trace[0][0], Raised), trace
  # After steps 0-6: StepCounterHook fired at the fresh step 7 and last saw
  # 6, the summary saver wrote at 5 and expects 8 next, the logger counted 7
  # iterations. (In the second session StepCounterHook's timer, still at 7,
  # does not fire for steps 0-5: the objects' state is observable.)
  assert trace[0][1] == [('StepCounterHook', 7, 6, None, None, None),
                         ('SummarySaverHook', 5, None, 8, None, None),
                         ('LoggingTensorHook', 6, None, None, None, 7)], trace
