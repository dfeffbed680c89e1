"""SessionRunHook dispatch: call order, hook fetches/feeds/options, stop
requests, feed conflicts, exceptions, TF's stock hooks, and run_step_fn.

Each scenario takes ``impl`` (tf.compat.v1.train or fastmts) and a scratch
directory and returns observable results; ``check`` runs it against TF and the
implementation under test and compares (see conftest.py).
"""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import (Raised, SessionInterface, ckpt_files,
                          outcome, raised, recording_hook_class)

v1 = tf.compat.v1
Pair = collections.namedtuple('Pair', ['first', 'second'])
ArgsLike = collections.namedtuple('ArgsLike', ['fetches', 'feed_dict',
                                               'options'])

X = ('Tensor', 'x:0')
CREATE = lambda n: [(n, 'begin')]
ACS = lambda n: [(n, 'after_create_session', True, True, False)]


def _before(name, fetches=X, feeds=None, stop=False):
  return (name, 'before_run', True, True, fetches, feeds, True, stop)


def _after(name, results=None, stop=False):
  return (name, 'after_run', True, results, stop)


def _end(name):
  return (name, 'end', True)


# ---------------------------------------------------------------------------
# Call order and arguments
# ---------------------------------------------------------------------------


def test_call_order(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    hook = recording_hook_class(impl)
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      p = v1.placeholder(tf.float32, shape=(), name='p')
      hooks = [hook('h1', log), hook('h2', log)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        log.append(('user', 'created'))
        r1 = sess.run(x)
        r2 = sess.run([x, 'x:0'], feed_dict={p: 1.0})
        log.append(('user', 'exiting'))
      log.append(('user', 'exited'))
    return r1, r2, log

  check(scenario, expected=(
      np.int32(3), [np.int32(3), np.int32(3)],
      CREATE('h1') + CREATE('h2') + ACS('h1') + ACS('h2') +
      [('user', 'created'),
       _before('h1'), _before('h2'), _after('h1'), _after('h2'),
       _before('h1', [X, 'x:0'], {('Tensor', 'p:0'): 1.0}),
       _before('h2', [X, 'x:0'], {('Tensor', 'p:0'): 1.0}),
       _after('h1'), _after('h2'),
       ('user', 'exiting'), _end('h1'), _end('h2'), ('user', 'exited')]))


def test_original_args_are_the_callers_objects(check):

  def scenario(impl, workdir):
    del workdir
    seen = []

    def request(run_context):
      seen.append(run_context.original_args)

    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      p = v1.placeholder(tf.float32, shape=(), name='p')
      fetches = {'x': [x]}
      feeds = {p: 2.0}
      hook = recording_hook_class(impl)('h', [], request=request)
      with impl.MonitoredSession(hooks=[hook]) as sess:
        sess.run(fetches, feed_dict=feeds)
        sess.run(x)
    return ([(a.fetches is fetches, a.feed_dict is feeds) for a in seen[:1]] +
            [(a.fetches is x, a.feed_dict, a.options) for a in seen[1:]])

  check(scenario, expected=[(True, True), (True, None, None)])


def test_after_create_session_can_run(check):

  def scenario(impl, workdir):
    del workdir
    seen = []

    class Hook(impl.SessionRunHook):

      def after_create_session(self, session, coord):
        seen.append((session.run(v), session.graph.finalized,
                     coord.should_stop()))

    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=7.0)
      with impl.MonitoredSession(hooks=[Hook()]) as sess:
        seen.append(sess.run(v))
    return seen

  check(scenario, expected=[(np.float32(7.0), True, False), np.float32(7.0)])


# ---------------------------------------------------------------------------
# Hook fetches, feeds and RunOptions
# ---------------------------------------------------------------------------


def test_hook_fetches_keep_structure(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      y = tf.constant([1.0, 2.0], name='y')
      sp = tf.SparseTensor([[0, 0]], [5], [1, 2])
      train = tf.no_op(name='train')
      hooks = [
          recording_hook_class(impl)('dict', log, request=impl.SessionRunArgs(
              {'a': x, 'b': [y, train, 'x:0'], 'nt': Pair(x, sp)})),
          recording_hook_class(impl)('single', log,
                                     request=impl.SessionRunArgs(x)),
          recording_hook_class(impl)('op', log,
                                     request=impl.SessionRunArgs(train)),
          recording_hook_class(impl)('none-fetch', log,
                                     request=impl.SessionRunArgs(None)),
          recording_hook_class(impl)('none', log, request=None),
      ]
      with impl.MonitoredSession(hooks=hooks) as sess:
        del log[:]
        caller = sess.run(y)
    return caller, [e[3] for e in log if e[1] == 'after_run']

  check(scenario, expected=(
      np.array([1.0, 2.0], np.float32),
      [{'a': np.int32(3),
        'b': [np.array([1.0, 2.0], np.float32), None, np.int32(3)],
        'nt': Pair(np.int32(3), v1.SparseTensorValue(
            np.array([[0, 0]], np.int64), np.array([5], np.int32),
            np.array([1, 2], np.int64)))},
       np.int32(3), None, None, None]))


def test_hook_feeds(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      p = v1.placeholder(tf.float32, shape=(), name='p')
      q = v1.placeholder(tf.int32, shape=(2,), name='q')
      y = p * 2
      z = tf.reduce_sum(q)
      z10 = z * 10
      hooks = [
          recording_hook_class(impl)(
              'p', log, request=impl.SessionRunArgs(y, feed_dict={p: 1.5})),
          recording_hook_class(impl)(
              'q', log, request=impl.SessionRunArgs(
                  None, feed_dict={'q:0': [3, 4]})),
      ]
      with impl.MonitoredSession(hooks=hooks) as sess:
        del log[:]
        caller = sess.run([y, z])
        # The hook's feed is merged with a feed of another tensor by the user.
        other = sess.run(z10)
    return caller, other, [e[3] for e in log if e[1] == 'after_run']

  check(scenario, expected=([np.float32(3.0), np.int32(7)], np.int32(70),
                            [np.float32(3.0), None, np.float32(3.0), None]))


def test_run_options_and_metadata_from_hook(check):

  def scenario(impl, workdir):
    del workdir
    seen = []
    full = v1.RunOptions.FULL_TRACE

    def on_after_run(run_context, run_values):
      del run_context
      seen.append((run_values.options.trace_level,
                   run_values.options.timeout_in_ms,
                   run_values.options.output_partition_graphs,
                   run_values.options.report_tensor_allocations_upon_oom,
                   len(run_values.run_metadata.step_stats.dev_stats) > 0,
                   len(run_values.run_metadata.partition_graphs) > 0))
      seen.append(run_values)

    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      hooks = [
          recording_hook_class(impl)('a', [], request=impl.SessionRunArgs(
              None, options=v1.RunOptions(trace_level=full,
                                          timeout_in_ms=5000))),
          recording_hook_class(impl)('b', [], request=impl.SessionRunArgs(
              None, options=v1.RunOptions(
                  timeout_in_ms=7000, output_partition_graphs=True,
                  report_tensor_allocations_upon_oom=True)),
                                     on_after_run=on_after_run),
      ]
      with impl.MonitoredSession(hooks=hooks) as sess:
        sess.run(x)
        # The caller's options/metadata objects are the ones merged into and
        # handed to the hooks.
        opts = v1.RunOptions(timeout_in_ms=60000)
        md = v1.RunMetadata()
        sess.run(x, options=opts, run_metadata=md)
    first, _, second, values = seen
    return (first, second, values.options is opts, values.run_metadata is md,
            (opts.trace_level, opts.timeout_in_ms,
             opts.output_partition_graphs),
            len(md.step_stats.dev_stats) > 0)

  check(scenario, expected=(
      (3, 7000, True, True, True, True),
      (3, 60000, True, True, True, True),
      True, True, (3, 60000, True), True))


def test_native_full_trace_merges_into_the_steps_options(check):
  """One RunOptions merge rule, TF's: a stock ProfilerHook's FULL_TRACE
  (natively run by fastmts) is merged into the options every Python hook's
  after_run sees, with the other hooks' and the caller's (max of the
  numbers), and into the caller's own RunOptions object."""

  def scenario(impl, workdir):
    seen = []

    def on_after_run(run_context, run_values):
      del run_context
      seen.append((run_values.options.trace_level, run_values.options.timeout_in_ms))

    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      step = v1.assign_add(gs, 1)
      hooks = [
          recording_hook_class(impl)('a', [], on_after_run=on_after_run),
          v1.train.ProfilerHook(save_steps=2, output_dir=workdir),
          recording_hook_class(impl)('b', [], request=impl.SessionRunArgs(
              None, options=v1.RunOptions(timeout_in_ms=5000)), on_after_run=on_after_run),
      ]
      opts = v1.RunOptions(timeout_in_ms=100)
      with impl.MonitoredSession(hooks=hooks) as sess:
        for _ in range(4):
          sess.run(step, options=opts)
    return seen, (opts.trace_level, opts.timeout_in_ms)

  check(scenario, expected=(
      [(0, 5000), (0, 5000), (3, 5000), (3, 5000), (3, 5000), (3, 5000),
       (3, 5000), (3, 5000)], (3, 5000)))


def test_native_full_trace_merges_into_the_callers_options_without_python_hooks(check):
  """With only stock hooks (the whole step native), a ProfilerHook's
  FULL_TRACE reaches the caller's own RunOptions object on exactly the steps
  it traces (those whose timeline-N.json it writes), as TF's merge leaves it.
  Which steps those are depends on whether the step's global-step fetch read
  the increment, on both sides, so the steps are matched to the files."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      step = v1.assign_add(gs, 1)
      hooks = [v1.train.ProfilerHook(save_steps=3, output_dir=workdir),
               v1.train.StopAtStepHook(last_step=100)]
      traced_steps = set()
      with impl.MonitoredSession(hooks=hooks) as sess:
        for i in range(7):
          opts = v1.RunOptions(timeout_in_ms=100)
          sess.run(step, options=opts)
          assert opts.timeout_in_ms == 100
          if opts.trace_level == v1.RunOptions.FULL_TRACE:
            traced_steps.add(i + 1)  # the global step after this run
    timelines = {int(name[len('timeline-'):-len('.json')]) for name in os.listdir(workdir)
                 if name.startswith('timeline-')}
    return len(traced_steps) >= 2, traced_steps == timelines

  check(scenario, expected=(True, True))


def test_caller_run_options_without_hooks(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      with impl.MonitoredSession() as sess:
        md = v1.RunMetadata()
        value = sess.run(x, options=v1.RunOptions(
            trace_level=v1.RunOptions.FULL_TRACE), run_metadata=md)
        return value, len(md.step_stats.dev_stats) > 0

  check(scenario, expected=(np.int32(3), True))


# ---------------------------------------------------------------------------
# Feed conflicts
# ---------------------------------------------------------------------------


def _conflict_scenario(hook_feeds, user_feed, second_user_feed):
  """Hooks feed hook_feeds[i](p); the user runs y = 2p twice.

  Returns the outcome of the first run (user_feed(p)), should_stop() after
  it, and the outcome of a second run (second_user_feed, keyed by name) to
  show whether the session is still usable.
  """

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      p = v1.placeholder(tf.float32, shape=(), name='p')
      y = p * 2
      hooks = [recording_hook_class(impl)(
          'h%d' % i, [], request=impl.SessionRunArgs(None, feed_dict=f(p)))
               for i, f in enumerate(hook_feeds)]
      with impl.MonitoredSession(hooks=hooks) as sess:
        first = outcome(sess.run, y, feed_dict=user_feed(p))
        stop = sess.should_stop()
        second = outcome(sess.run, y, feed_dict=second_user_feed)
        return first, stop, second

  return scenario


P_CONFLICT = "[<tf.Tensor 'p:0' shape=() dtype=float32>]"


def test_same_tensor_fed_by_hook_and_user(check):
  check(_conflict_scenario([lambda p: {p: 1.0}], lambda p: {p: 2.0},
                           {'p:0': 4.0}),
        expected=(Raised(RuntimeError, 'Same tensor is fed by a SessionRunHook'
                         ' and user. Conflict(s): ' + P_CONFLICT), False,
                  # Keyed by name the same feed is not a conflict (see below).
                  np.float32(8.0)))


def test_same_tensor_fed_by_two_hooks(check):
  conflict = Raised(RuntimeError, 'Same tensor is fed by two hooks. '
                    'Conflict(s): ' + P_CONFLICT)
  check(_conflict_scenario([lambda p: {p: 1.0}, lambda p: {p: 3.0}],
                           lambda p: None, None),
        expected=(conflict, False, conflict))


def test_conflict_check_compares_keys_not_tensors(check):
  # TF detects conflicts on the dict keys, so a Tensor key and its name are
  # not a conflict; the later entry in the merged dict (the user's) wins.
  check(_conflict_scenario([lambda p: {p: 1.0}], lambda p: {'p:0': 2.0},
                           {'p:0': 4.0}),
        expected=(np.float32(4.0), False, np.float32(8.0)))


def test_two_hooks_feeding_tensor_and_name(check):
  # Same between hooks: no conflict, the later hook's feed wins.
  check(_conflict_scenario([lambda p: {p: 1.0}, lambda p: {'p:0': 5.0}],
                           lambda p: None, None),
        expected=(np.float32(10.0), False, np.float32(10.0)))


# ---------------------------------------------------------------------------
# Stop requests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('where', ['after_run', 'before_run'])
def test_hook_requests_stop(check, where):

  def scenario(impl, workdir):
    del workdir
    log = []

    def stop_in_third_run(run_context, *unused):
      if len([e for e in log if e[1] == 'before_run']) == 3:
        run_context.request_stop()

    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=0)
      inc = v1.assign_add(v, 1)
      kwargs = ({'on_after_run': stop_in_third_run} if where == 'after_run'
                else {'request': stop_in_third_run})
      with impl.MonitoredSession(
          hooks=[recording_hook_class(impl)('h', log, **kwargs)]) as sess:
        values = []
        while not sess.should_stop():
          values.append(sess.run(inc))
        again = raised(sess.run, inc)
        final = sess.should_stop()
    return values, again, final, [e[1:] for e in log[-3:]]

  inc = ('Variable', 'AssignAddVariableOp')  # assign_add's _UnreadVariable
  check(scenario, expected=(
      # The run in which the stop is requested still returns its value.
      [np.int32(1), np.int32(2), np.int32(3)],
      Raised(RuntimeError, 'Run called even after should_stop requested.'),
      True,
      [('before_run', True, True, inc, None, True, False),
       # stop_requested as seen by after_run (after the request, if any).
       ('after_run', True, None, where == 'before_run'),
       ('end', True)]))


# ---------------------------------------------------------------------------
# Exceptions in hooks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('method', ['before_run', 'after_run'])
def test_exception_in_hook_propagates(check, method):

  def scenario(impl, workdir):
    del workdir
    log = []
    hook = recording_hook_class(impl)
    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=0)
      inc = v1.assign_add(v, 1)

      def body():
        with impl.MonitoredSession(hooks=[
            hook('h1', log, raise_in={method: KeyError('hook failed')}),
            hook('h2', log)]) as sess:
          body.sess = sess
          del log[:]
          first = raised(sess.run, inc)
          # One failure does not close or stop the session.
          body.state = (first, sess.should_stop(), sess.run(v))
          raise TypeError('user error')  # with-block exits with an error

      exit_error = raised(body)
      return body.state, exit_error, body.sess.should_stop(), [
          e[:2] for e in log]

  run_happened = np.int32(1) if method == 'after_run' else np.int32(0)
  first_run = ([('h1', 'before_run')] if method == 'before_run' else
               [('h1', 'before_run'), ('h2', 'before_run'),
                ('h1', 'after_run')])
  check(scenario, expected=(
      (Raised(KeyError, "'hook failed'"), False, run_happened),
      Raised(TypeError, 'user error'), True,
      # No end() calls: the with-block exited with an exception.
      first_run + [('h1', 'before_run'), ('h2', 'before_run'),
                   ('h1', 'after_run'), ('h2', 'after_run')]))


@pytest.mark.parametrize('method', ['begin', 'after_create_session'])
def test_exception_while_creating(check, method):

  def scenario(impl, workdir):
    del workdir
    log = []
    hook = recording_hook_class(impl)
    with tf.Graph().as_default() as g:
      tf.constant(1)
      err = raised(impl.MonitoredSession, hooks=[
          hook('h1', log, raise_in={method: ValueError('create failed')}),
          hook('h2', log)])
      return err, g.finalized, [e[:2] for e in log]

  check(scenario, expected=(
      Raised(ValueError, 'create failed'),
      # The graph is left finalized once the session was created.
      method == 'after_create_session',
      [('h1', 'begin')] if method == 'begin' else
      [('h1', 'begin'), ('h2', 'begin'), ('h1', 'after_create_session')]))


def test_exception_in_end(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    hook = recording_hook_class(impl)
    with tf.Graph().as_default() as g:
      tf.constant(1)
      sess = impl.MonitoredSession(hooks=[
          hook('h1', log, raise_in={'end': ValueError('end failed')}),
          hook('h2', log)])
      del log[:]
      err = raised(sess.close)
      # The session is closed nonetheless, and the graph unfinalized.
      return (err, sess.should_stop(), g.finalized, raised(sess.close),
              [e[:2] for e in log])

  check(scenario, expected=(
      Raised(ValueError, 'end failed'), True, False,
      Raised(RuntimeError, 'Session is already closed.'),
      [('h1', 'end'), ('h1', 'end'), ('h2', 'end')]))


with tf.Graph().as_default():
  # 'SymbolicTensor' in recent TF releases, 'Tensor' in TF 2.12
  _GRAPH_TENSOR_CLASS = type(tf.constant(0)).__name__


@pytest.mark.parametrize('kind,expected', [
    ('tensor', Raised(AttributeError,
                      "'%s' object has no attribute 'fetches'" % _GRAPH_TENSOR_CLASS)),
    ('dict', Raised(AttributeError,
                    "'dict' object has no attribute 'fetches'")),
    ('list', Raised(AttributeError,
                    "'list' object has no attribute 'fetches'")),
    ('tuple', Raised(AttributeError,
                     "'tuple' object has no attribute 'fetches'")),
    ('int', Raised(AttributeError, "'int' object has no attribute 'fetches'")),
    # Anything with the three attributes is accepted (duck typing).
    ('namedtuple-like', (np.int32(3), np.int32(3))),
    ('tf-SessionRunArgs', (np.int32(3), np.int32(3))),
])
def test_before_run_returning_other_objects(check, kind, expected):

  def scenario(impl, workdir):
    del workdir
    results = []
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      ret = {
          'tensor': x, 'dict': {'fetches': x}, 'list': [x], 'tuple': (x,),
          'int': 5, 'namedtuple-like': ArgsLike(x, None, None),
          'tf-SessionRunArgs': v1.train.SessionRunArgs(x),
      }[kind]
      hook = recording_hook_class(impl)(
          'h', [], request=ret,
          on_after_run=lambda ctx, vals: results.append(vals.results))
      with impl.MonitoredSession(hooks=[hook]) as sess:
        got = outcome(sess.run, x)
        if isinstance(got, Raised):
          return got
        return got, results[0]

  check(scenario, expected=expected)


# ---------------------------------------------------------------------------
# TensorFlow's own hooks driving the implementation's sessions
# ---------------------------------------------------------------------------


def test_tf_nan_tensor_hook(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      p = v1.placeholder(tf.float32, shape=(), name='p')
      loss = tf.identity(p)
      out = []
      for fail in (True, False):
        sess = impl.MonitoredSession(
            hooks=[v1.train.NanTensorHook(loss, fail_on_nan_loss=fail)])
        out.append((sess.run(loss, feed_dict={p: 1.0}),
                    outcome(sess.run, loss, feed_dict={p: np.nan}),
                    sess.should_stop()))
        sess.close()
    return out

  check(scenario, expected=[
      (np.float32(1.0),
       Raised(v1.train.NanLossDuringTrainingError, 'NaN loss during training.'),
       False),
      (np.float32(1.0), np.float32(np.nan), True)])


def test_tf_logging_final_ops_and_feed_fn_hooks(check):

  def scenario(impl, workdir):
    del workdir
    logged = []
    with tf.Graph().as_default():
      p = v1.placeholder(tf.float32, shape=(), name='p')
      loss = tf.identity(p)
      feeds = iter([1.0, 2.0, 3.0, 4.0, 5.0])
      final = v1.train.FinalOpsHook({'triple': p * 3},
                                    final_ops_feed_dict={p: 2.0})
      hooks = [
          v1.train.LoggingTensorHook(
              {'loss': loss}, every_n_iter=2,
              formatter=lambda d: logged.append(dict(d)) or 'logged'),
          v1.train.FeedFnHook(lambda: {p: next(feeds)}),
          final,
      ]
      with impl.MonitoredSession(hooks=hooks) as sess:
        values = [sess.run(loss) for _ in range(5)]
    return values, logged, final.final_ops_values

  check(scenario, expected=(
      [np.float32(v) for v in (1.0, 2.0, 3.0, 4.0, 5.0)],
      [{'loss': np.float32(1.0)}, {'loss': np.float32(3.0)},
       {'loss': np.float32(5.0)}],
      {'triple': np.float32(6.0)}))


def test_tf_checkpoint_saver_hook_with_listener(check):

  def scenario(impl, workdir):
    log = []

    class Listener(v1.train.CheckpointSaverListener):

      def begin(self):
        log.append('begin')

      def before_save(self, session, global_step_value):
        log.append(('before_save', isinstance(session, SessionInterface),
                    global_step_value))

      def after_save(self, session, global_step_value):
        log.append(('after_save', global_step_value))

      def end(self, session, global_step_value):
        log.append(('end', global_step_value))

    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      train = v1.assign_add(gs, 1)
      with impl.MonitoredSession(hooks=[v1.train.CheckpointSaverHook(
          workdir, save_steps=2, listeners=[Listener()])]) as sess:
        steps = [sess.run(train) for _ in range(5)]
    return (steps, log, ckpt_files(workdir),
            os.path.basename(v1.train.latest_checkpoint(workdir)))

  saves = lambda s: [('before_save', True, np.int64(s)),
                     ('after_save', np.int64(s))]
  check(scenario, expected=(
      [np.int64(s) for s in range(1, 6)],
      ['begin'] + saves(0) + saves(2) + saves(4) + saves(5) +
      [('end', np.int64(5))],
      ['checkpoint', 'graph.pbtxt'] + sorted(
          'model.ckpt-%d.%s' % (s, ext) for s in (0, 2, 4, 5)
          for ext in ('data-00000-of-00001', 'index', 'meta')),
      'model.ckpt-5'))


def test_tf_summary_saver_and_step_counter_hooks(check):

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      gs = v1.train.get_or_create_global_step()
      train = v1.assign_add(gs, 1)
      v1.summary.scalar('gs', gs)
      hooks = [
          v1.train.SummarySaverHook(save_steps=1, output_dir=workdir,
                                    summary_op=v1.summary.merge_all()),
          v1.train.StepCounterHook(every_n_steps=1, output_dir=workdir),
      ]
      with impl.MonitoredSession(hooks=hooks) as sess:
        steps = [sess.run(train) for _ in range(3)]
    v1.summary.FileWriterCache.clear()
    records = set()
    for name in os.listdir(workdir):
      if name.startswith('events.'):
        for event in v1.train.summary_iterator(os.path.join(workdir, name)):
          kind = event.WhichOneof('what')
          if kind == 'summary':
            # Values are not compared: the scalar reads gs concurrently with
            # the increment in the same run.
            records.update((event.step, v.tag) for v in event.summary.value)
          else:
            records.add((event.step, kind))
    return steps, sorted(records)

  check(scenario, expected=(
      [np.int64(1), np.int64(2), np.int64(3)],
      [(0, 'file_version'), (0, 'graph_def'), (0, 'meta_graph_def'),
       (1, 'gs'), (1, 'session_log'), (2, 'global_step/sec'), (2, 'gs'),
       (3, 'global_step/sec'), (3, 'gs')]))


# ---------------------------------------------------------------------------
# run_step_fn
# ---------------------------------------------------------------------------


def test_run_step_fn_session_and_run_with_hooks(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      y = tf.constant(4, name='y')
      hook = recording_hook_class(impl)('h', log,
                                        request=impl.SessionRunArgs(y))

      def step_fn(step_context):
        log.append(('step', 'raw', step_context.session.run(x)))
        log.append(('step', 'session-type',
                    isinstance(step_context.session, SessionInterface)))
        return step_context.run_with_hooks(fetches=[x], feed_dict=None)

      with impl.MonitoredSession(hooks=[hook]) as sess:
        del log[:]
        result = sess.run_step_fn(step_fn)
    return result, log

  check(scenario, expected=(
      [np.int32(3)],
      [('step', 'raw', np.int32(3)), ('step', 'session-type', True),
       _before('h', [X]), _after('h', np.int32(4)), _end('h')]))


def test_run_step_fn_request_stop(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')

      def step_fn(step_context):
        log.append(step_context.run_with_hooks(x))
        step_context.request_stop()
        log.append('not reached')

      sess = impl.MonitoredSession(
          hooks=[recording_hook_class(impl)('h', log)])
      del log[:]
      err = raised(sess.run_step_fn, step_fn)
      # TF does not record the request: should_stop() stays False and the
      # session remains usable until closed.
      stop_after = sess.should_stop()
      again = sess.run(x)
      sess.close()

      # Inside a with-block the StopIteration ends the block quietly.
      with impl.MonitoredSession() as sess2:
        sess2.run_step_fn(step_fn)
        log.append('not reached either')
    return err, stop_after, again, sess2.should_stop(), [
        e if not isinstance(e, tuple) else e[:2] for e in log]

  check(scenario, expected=(
      Raised(StopIteration, 'step_fn has requested the iterations to stop.'),
      False, np.int32(3), True,
      [('h', 'before_run'), ('h', 'after_run'), np.int32(3),
       ('h', 'before_run'), ('h', 'after_run'), ('h', 'end'),
       np.int32(3)]))


def test_run_step_fn_after_hook_stop(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      hook = recording_hook_class(impl)(
          'h', [], on_after_run=lambda ctx, vals: ctx.request_stop())

      def step_fn(step_context):
        return (step_context.session.run(x),
                raised(step_context.run_with_hooks, x))

      with impl.MonitoredSession(hooks=[hook]) as sess:
        first = sess.run(x)
        return first, sess.should_stop(), sess.run_step_fn(step_fn)

  check(scenario, expected=(
      np.int32(3), True,
      (np.int32(3), Raised(RuntimeError,
                           'Run called even after should_stop requested.'))))


def test_run_step_fn_signatures(check):

  class Stepper(object):

    def step(self, step_context):
      return ('method', step_context.session.run('x:0'))

    @staticmethod
    def static_step(step_context):
      return ('static', step_context.session.run('x:0'))

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      tf.constant(3, name='x')
      with impl.MonitoredSession() as sess:
        return [
            outcome(sess.run_step_fn, Stepper().step),
            outcome(sess.run_step_fn, Stepper.static_step),
            outcome(sess.run_step_fn, lambda step_context: 'lambda'),
            outcome(sess.run_step_fn, lambda ctx: 'bad'),
            outcome(sess.run_step_fn, lambda step_context, extra=1: 'bad'),
            outcome(sess.run_step_fn, lambda: 'bad'),
            outcome(sess.run_step_fn,
                    lambda step_context: step_context.run_with_hooks('x:0')),
        ]

  msg = ('`step_fn` may either have one `step_context` argument, or `self` '
         "and `step_context` arguments if it's an instance method. Got %s "
         'instead.')
  check(scenario, expected=[
      ('method', np.int32(3)),
      ('static', np.int32(3)),
      'lambda',
      Raised(ValueError, msg % "('ctx',)"),
      Raised(ValueError, msg % "('step_context', 'extra')"),
      Raised(ValueError, msg % '()'),
      np.int32(3),
  ])


def test_run_step_fn_exception_propagates(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')

      def step_fn(step_context):
        step_context.session.run(x)
        raise LookupError('in step')

      with impl.MonitoredSession() as sess:
        return raised(sess.run_step_fn, step_fn), sess.should_stop()

  check(scenario, expected=(Raised(LookupError, 'in step'), False))
