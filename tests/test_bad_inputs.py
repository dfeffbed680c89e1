"""Bad inputs: each gets TF's exception (exact class and message), never a
crash or a hang, and the session is still usable, or closable, wherever TF's
is.

Each scenario takes ``impl`` (tf.compat.v1.train or fastmts) and a scratch
directory and returns observable results; ``check`` runs it against TF and the
implementation under test and compares (see conftest.py).  The README's
"Bad input" table lists every input tried, with the test that covers it; the
inputs whose message is already checked elsewhere (e.g. a fetch from another
graph, test_session_compat.py::test_fetch_tensor_from_other_graph) appear here
only by the exception's class, followed by what the session does next.

The fastmts-only API (``run_steps``, ``RecoveryPolicy``, ``recovery=``) is
checked at the end; where TF has an equivalent (``run`` after close, the
``while not should_stop()`` loop after stop) the scenario compares with it.
"""

import collections
import os
import re
import stat

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import (SESSION_KINDS, TF_IMPL, Raised, ckpt_files, global_step_of,
                          monitored_session_of_kind, outcome, raised, recording_hook_class,
                          run_steps_or_tf_loop, without_random_file_names, without_stack_trace)
from hook_test_utils import step_graph

v1 = tf.compat.v1

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

_TMP_SUFFIX = re.compile(r'\.tmp[0-9a-f]{32}')


def clean(result, workdir=None, obj=None):
  """A Raised record made comparable between the TF and the fastmts run: a TF
  error loses the Python stack traces TF appends (they show the call path),
  `workdir` becomes 'DIR', the random suffix of TF's temporary files becomes
  '.tmpX' and repr(obj) (which holds an address) becomes '<obj>'.  Anything
  else is returned unchanged."""
  if not isinstance(result, Raised):
    return result
  message = without_stack_trace(result).message
  if workdir:
    message = message.replace(workdir, 'DIR')
  message = _TMP_SUFFIX.sub('.tmpX', message)
  if obj is not None:
    message = message.replace(repr(obj), '<obj>')
  return Raised(result.type, message)


def class_of(result):
  """The exception class of a Raised record (for inputs whose message is
  checked by another test), else the result itself."""
  return result.type if isinstance(result, Raised) else result


def I(n):  # pylint: disable=invalid-name
  return np.int64(n)


# Hooks around the bad call: none (the fastest path), one natively run stock
# hook, or one Python hook (whose calls are compared).
HOOK_KINDS = ['no-hooks', 'native-hook', 'python-hook']


def make_hooks(impl, kind, log):
  if kind == 'no-hooks':
    return []
  if kind == 'native-hook':
    return [v1.train.StopAtStepHook(last_step=1000)]
  return [recording_hook_class(impl)('h', log)]


def _graph(other):
  """step_graph's `train` (returns the new global step), a few more tensors,
  and the graph elements of `other` (another graph)."""
  _, _, train = step_graph()
  x = tf.constant(3, name='x')
  p = v1.placeholder(tf.int32, shape=(), name='p')
  f = v1.placeholder(tf.float32, shape=(2,), name='f')
  q = tf.identity(x, name='q')
  v1.get_default_graph().prevent_feeding(q)
  fn = lambda: x
  return dict(train=train, x=x, p=p, p2=p * 2, f=f, f2=f * 2, q=q, fn=fn,
              obj=object(), other=other['tensor'], other_op=other['op'])


# ---------------------------------------------------------------------------
# Bad fetches, feeds, options and run_metadata given to run (and run_steps)
# ---------------------------------------------------------------------------

# name -> (call(t) -> (fetches, run kwargs), expected, steps the bad call ran,
#          object whose repr the message holds).
# `expected` is TF's Raised record for inputs first checked here, and only the
# exception class for those whose message another test already checks.
_RUN_CASES = {
    # Fetches.
    'tensor-from-other-graph': (  # test_session_compat.py::test_fetch_tensor_from_other_graph
        lambda t: (t['other'], {}), ValueError, 0, None),
    'op-from-other-graph': (
        lambda t: (t['other_op'], {}),
        Raised(ValueError,
               'Argument `fetch` = name: "otherop"\nop: "NoOp"\n cannot be '
               'interpreted as a Tensor. (Operation name: "otherop"\nop: '
               '"NoOp"\n is not an element of this graph.)'), 0, None),
    'unknown-tensor-name': (  # test_session_compat.py::test_fetch_by_unknown_name
        lambda t: ('nope:0', {}), ValueError, 0, None),
    'unknown-op-name': (
        lambda t: ('nope', {}),
        Raised(ValueError,
               'Argument `fetch` = nope cannot be interpreted as a Tensor. '
               '("The name \'nope\' refers to an Operation not in the '
               'graph.")'), 0, None),
    'bad-output-index': (
        lambda t: ('x:1', {}),
        Raised(ValueError,
               'Argument `fetch` = x:1 cannot be interpreted as a Tensor. '
               '("The name \'x:1\' refers to a Tensor which does not exist. '
               'The operation, \'x\', exists but only has 1 outputs.")'),
        0, None),
    'int': (  # test_session_compat.py::test_fetch_invalid_type
        lambda t: (3, {}), TypeError, 0, None),
    'lambda': (
        lambda t: (t['fn'], {}),
        Raised(TypeError,
               'Argument `fetch` = <obj> has invalid type "function" must be '
               'a string or Tensor. (Can not convert a function into a Tensor '
               'or Operation.)'), 0, 'fn'),
    'object': (
        lambda t: (t['obj'], {}),
        Raised(TypeError,
               'Argument `fetch` = <obj> has invalid type "object" must be a '
               'string or Tensor. (Can not convert a object into a Tensor or '
               'Operation.)'), 0, 'obj'),
    'set-of-tensors': (
        lambda t: ({t['x']}, {}),
        Raised(TypeError,
               'Argument `fetch` = {<tf.Tensor \'x:0\' shape=() '
               'dtype=int32>} has invalid type "set" must be a string or '
               'Tensor. (Can not convert a set into a Tensor or '
               'Operation.)'), 0, None),
    # Feeds (the message does not depend on what is fetched).
    'feed-wrong-dtype': (  # test_session_compat.py::test_feed_errors[int32-max-plus-1]
        lambda t: (t['x'], {'feed_dict': {t['p']: 2**31}}), TypeError, 0,
        None),
    'feed-non-numeric-string': (  # test_session_compat.py::test_feed_errors[non-numeric-str]
        lambda t: (t['p2'], {'feed_dict': {t['p']: 'a'}}), ValueError, 0,
        None),
    'feed-wrong-shape': (  # test_session_compat.py::test_feed_errors[vector-too-long]
        lambda t: (t['f2'], {'feed_dict': {t['f']: [1.0, 2.0, 3.0]}}),
        ValueError, 0, None),
    'feed-non-feedable': (  # test_session_compat.py::test_feed_tensor_that_may_not_be_fed
        lambda t: (t['x'], {'feed_dict': {t['q']: 1}}), ValueError, 0, None),
    'feed_dict-list-of-pairs': (
        lambda t: (t['f2'], {'feed_dict': [(t['f'], [1.0, 2.0])]}),
        Raised(TypeError,
               "FlattenDictItems: 'dict' must be a dictionary or "
               "collection.Mapping type object, instead of 'list'."), 0,
        None),
    'feed_dict-str': (
        lambda t: (t['x'], {'feed_dict': 'abc'}),
        Raised(TypeError,
               "FlattenDictItems: 'dict' must be a dictionary or "
               "collection.Mapping type object, instead of 'str'."), 0, None),
    'feed_dict-set': (
        lambda t: (t['x'], {'feed_dict': {t['p']}}),
        Raised(TypeError,
               "FlattenDictItems: 'dict' must be a dictionary or "
               "collection.Mapping type object, instead of 'set'."), 0, None),
    # RunOptions / RunMetadata of the wrong type.
    'options-dict': (
        lambda t: (t['train'], {'options': {'trace_level': 3}}),
        Raised(AttributeError,
               "'dict' object has no attribute 'SerializeToString'"), 0, None),
    'run_metadata-str': (  # TF runs the step, then fails filling it in
        lambda t: (t['train'], {'run_metadata': 'x'}),
        Raised(AttributeError, "'str' object has no attribute "
               "'ParseFromString'"), 1, None),
}

# The cases run_steps can take (it has no options / run_metadata).
_RUN_STEPS_CASES = [c for c, (call, _, _, _) in _RUN_CASES.items()
                    if not c.startswith(('options', 'run_metadata'))]


def _bad_run_scenario(case, hooks, via, hook_calls=False):
  """The bad call, then what the session does next; with `hook_calls`, only
  the Python hook's calls instead."""
  call, expected, _, obj_key = _RUN_CASES[case]

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      other = {'tensor': tf.constant(1, name='other'),
               'op': tf.no_op(name='otherop')}
    with tf.Graph().as_default():
      t = _graph(other)
      fetches, kwargs = call(t)
      sess = impl.MonitoredSession(hooks=make_hooks(impl, hooks, log))
      if via == 'run':
        err = outcome(sess.run, fetches, **kwargs)
      else:
        err = outcome(run_steps_or_tf_loop, impl, sess, fetches, max_steps=1,
                      feed_dict=kwargs.get('feed_dict'))
      err = clean(err, obj=t[obj_key] if obj_key else None)
      if not isinstance(expected, Raised):
        err = class_of(err)
      # Still usable, then closable.
      result = (err, global_step_of(sess), outcome(sess.run, t['train']),
                outcome(sess.run, [t['x'], t['f2']],
                        feed_dict={t['f']: [1.0, 2.0]}),
                sess.should_stop(), outcome(sess.close), sess.should_stop())
      return [e[1] for e in log] if hook_calls else result

  return scenario


def _bad_run_expected(case):
  _, expected, ran, _ = _RUN_CASES[case]
  return (expected, I(ran), I(ran + 1),
          [np.int32(3), np.array([2.0, 4.0], np.float32)], False, None, True)


# The hook's calls: the bad run reaches before_run (TF resolves fetches and
# feeds after the hooks' before_run) but not after_run; two good runs; close.
_HOOK_CALLS = (['begin', 'after_create_session', 'before_run'] +
               ['before_run', 'after_run'] * 2 + ['end'])


@pytest.mark.parametrize('hooks', HOOK_KINDS)
@pytest.mark.parametrize('case', sorted(_RUN_CASES))
def test_bad_run_call(check, case, hooks):
  check(_bad_run_scenario(case, hooks, 'run'),
        expected=_bad_run_expected(case))


@pytest.mark.parametrize('hooks', HOOK_KINDS)
@pytest.mark.parametrize('case', sorted(_RUN_STEPS_CASES))
def test_bad_run_steps_call(check, case, hooks):
  """fastmts's run_steps against TF's `while not should_stop(): run` loop."""
  check(_bad_run_scenario(case, hooks, 'run_steps'),
        expected=_bad_run_expected(case))


@pytest.mark.parametrize('via', ['run', 'run_steps'])
@pytest.mark.parametrize('case', sorted(_RUN_CASES))
def test_bad_run_call_hook_calls(check, case, via):
  """A Python hook sees the failed run as in TF: before_run, no after_run."""
  if via == 'run_steps' and case not in _RUN_STEPS_CASES:
    pytest.skip('run_steps takes no options / run_metadata')
  check(_bad_run_scenario(case, 'python-hook', via, hook_calls=True),
        expected=_HOOK_CALLS)


# ---------------------------------------------------------------------------
# run's own arguments, by position and by name (fastmts's `sess.run` is a
# native function that takes the usual calls itself and hands any other to
# the Python method, whose errors must be Python's as in TF)
# ---------------------------------------------------------------------------

# name -> call(run, t): the run call, with the graph's tensors t.
_RUN_SIGNATURE_CALLS = {
    'positional-4': lambda run, t: run(t['p2'], {t['p']: 3}, None, None),
    'keywords-all': lambda run, t: run(run_metadata=None, options=None,
                                       feed_dict={t['p']: 4}, fetches=t['p2']),
    'fetches-by-keyword': lambda run, t: run(fetches=[t['x'], t['train']]),
    'feed_dict-positional': lambda run, t: run(t['p2'], {t['p']: 5}),
    'no-arguments': lambda run, t: run(),
    'only-feed_dict': lambda run, t: run(feed_dict={t['p']: 1}),
    'unknown-keyword': lambda run, t: run(t['x'], feed=None),
    'five-positional': lambda run, t: run(t['x'], None, None, None, None),
    'fetches-twice': lambda run, t: run(t['x'], fetches=t['x']),
    'feed_dict-twice': lambda run, t: run(t['x'], None, feed_dict=None),
}


@pytest.mark.parametrize('hooks', HOOK_KINDS)
@pytest.mark.parametrize('case', sorted(_RUN_SIGNATURE_CALLS))
def test_run_signature(check, case, hooks):
  """Each call gives TF's result or TF's TypeError (the same message), and
  the session goes on as TF's."""

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      t = _graph({'tensor': None, 'op': None})
      sess = impl.MonitoredSession(hooks=make_hooks(impl, hooks, log))
      with sess:
        result = outcome(_RUN_SIGNATURE_CALLS[case], sess.run, t)
        return result, global_step_of(sess), outcome(sess.run, t['train'])

  result = check(scenario)
  if case in ('no-arguments', 'only-feed_dict', 'unknown-keyword',
              'five-positional', 'fetches-twice', 'feed_dict-twice'):
    assert isinstance(result[0], Raised) and result[0].type is TypeError, result


def test_run_overridden_by_a_subclass_is_called(fastmts):
  """A subclass's own run is what `sess.run` calls (fastmts binds its
  native entry only where run is not overridden)."""
  calls = []

  class Counting(fastmts.MonitoredSession):

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
      calls.append(fetches)
      return super().run(fetches, feed_dict, options, run_metadata)

  with tf.Graph().as_default():
    _, _, train = step_graph()
    with Counting() as sess:
      assert sess.run(train) == 1
      assert sess.run(fetches=train) == 2
  assert calls == [train, train]


# ---------------------------------------------------------------------------
# A hook's before_run returning something other than None / SessionRunArgs
# ---------------------------------------------------------------------------

FetchesOnly = collections.namedtuple('FetchesOnly', ['fetches'])
FetchesAndFeeds = collections.namedtuple('FetchesAndFeeds',
                                         ['fetches', 'feed_dict'])
ArgsLike = collections.namedtuple('ArgsLike',
                                  ['fetches', 'feed_dict', 'options'])


def _args(fetches=None, feed_dict=None, options=None):
  return ArgsLike(fetches, feed_dict, options)


_NO_KEYS = "'%s' object has no attribute 'keys'"

# name -> (request(t, hook), expected, object whose repr the message holds).
# The first five are also in test_hooks_dispatch.py::
# test_before_run_returning_other_objects, which checks their message.
_REQUESTS = {
    'tensor': (lambda t, h: t['x'], AttributeError, None),
    'dict': (lambda t, h: {'fetches': t['x']}, AttributeError, None),
    'list': (lambda t, h: [t['x']], AttributeError, None),
    'tuple': (lambda t, h: (t['x'], None, None), AttributeError, None),
    'int': (lambda t, h: 5, AttributeError, None),
    # Falsy, but not None: TF still looks for .fetches.
    'empty-dict': (lambda t, h: {}, Raised(
        AttributeError, "'dict' object has no attribute 'fetches'"), None),
    'zero': (lambda t, h: 0, Raised(
        AttributeError, "'int' object has no attribute 'fetches'"), None),
    'False': (lambda t, h: False, Raised(
        AttributeError, "'bool' object has no attribute 'fetches'"), None),
    'empty-tuple': (lambda t, h: (), Raised(
        AttributeError, "'tuple' object has no attribute 'fetches'"), None),
    'str': (lambda t, h: 'x:0', Raised(
        AttributeError, "'str' object has no attribute 'fetches'"), None),
    'the-hook-itself': (lambda t, h: h, Raised(
        AttributeError, "'RecordingHook' object has no attribute 'fetches'"),
                        None),
    # Partly SessionRunArgs-like.
    'no-feed_dict-attribute': (lambda t, h: FetchesOnly(t['x']), Raised(
        AttributeError, "'FetchesOnly' object has no attribute 'feed_dict'"),
                               None),
    'no-options-attribute': (lambda t, h: FetchesAndFeeds(t['x'], None),
                             Raised(AttributeError, "'FetchesAndFeeds' object "
                                    "has no attribute 'options'"), None),
    # SessionRunArgs-like with a bad field.
    'fetches-lambda': (lambda t, h: _args(t['fn']), Raised(
        TypeError, 'Argument `fetch` = <obj> has invalid type "function" '
        'must be a string or Tensor. (Can not convert a function into a '
        'Tensor or Operation.)'), 'fn'),
    'fetches-int': (lambda t, h: _args(3), Raised(
        TypeError, 'Argument `fetch` = 3 has invalid type "int" must be a '
        'string or Tensor. (Can not convert a int into a Tensor or '
        'Operation.)'), None),
    'fetches-unknown-name': (lambda t, h: _args('nope:0'), Raised(
        ValueError, 'Argument `fetch` = nope:0 cannot be interpreted as a '
        'Tensor. ("The name \'nope:0\' refers to a Tensor which does not '
        'exist. The operation, \'nope\', does not exist in the graph.")'),
                             None),
    'feed_dict-list-of-pairs': (
        lambda t, h: _args(None, [(t['f'], [1.0, 2.0])]),
        Raised(AttributeError, _NO_KEYS % 'list'), None),
    'feed_dict-tuple-of-pairs': (
        lambda t, h: _args(None, ((t['f'], [1.0, 2.0]),)),
        Raised(AttributeError, _NO_KEYS % 'tuple'), None),
    'feed_dict-str': (lambda t, h: _args(None, 'abc'),
                      Raised(AttributeError, _NO_KEYS % 'str'), None),
    'feed_dict-set': (lambda t, h: _args(None, {t['f']}),
                      Raised(AttributeError, _NO_KEYS % 'set'), None),
    'feed-key-int': (lambda t, h: _args(None, {3: 1.0}), Raised(
        TypeError, 'Cannot interpret feed_dict key as Tensor: Can not '
        'convert a int into a Tensor.'), None),
    'feed-value-wrong-dtype': (lambda t, h: _args(None, {t['p']: 'a'}), Raised(
        # numpy's repr of the item: np.str_('a') from numpy 2 on, 'a' before
        ValueError, 'invalid literal for int() with base 10: %r' % np.str_('a')),
                               None),
    'feed-value-wrong-shape': (
        lambda t, h: _args(None, {t['f']: [1.0, 2.0, 3.0]}), Raised(
            ValueError, 'Cannot feed value of shape (3,) for Tensor f:0, '
            'which has shape (2,)'), None),
    'feed-value-tensor': (lambda t, h: _args(None, {t['p']: t['x']}), Raised(
        TypeError, 'The value of a feed cannot be a tf.Tensor object. '
        'Acceptable feed values include Python scalars, strings, lists, numpy '
        'ndarrays, or TensorHandles. For reference, the tensor object was '
        'Tensor("x:0", shape=(), dtype=int32) which was passed to the '
        'argument `feed_dict` with key Tensor("p:0", shape=(), '
        'dtype=int32).'), None),
    'feed-non-feedable': (lambda t, h: _args(None, {t['q']: 1}), Raised(
        ValueError, 'Tensor q:0 may not be fed.'), None),
    'options-dict': (lambda t, h: _args(None, None, {'trace_level': 3}),
                     Raised(AttributeError,
                            "'dict' object has no attribute 'trace_level'"),
                     None),
    'options-RunMetadata': (lambda t, h: _args(None, None, v1.RunMetadata()),
                            Raised(AttributeError, 'trace_level'), None),
}


@pytest.mark.parametrize('others', ['alone', 'with-native-hooks'])
@pytest.mark.parametrize('kind', sorted(_REQUESTS))
def test_before_run_returning_a_bad_request(check, kind, others):
  """The hook returns the bad request on its first before_run only: that run
  fails; the session still runs and closes."""
  make_request, expected, obj_key = _REQUESTS[kind]

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      t = _graph({'tensor': None, 'op': None})
      calls = []

      def request(run_context):
        del run_context
        calls.append(1)
        return make_request(t, hook) if len(calls) == 1 else None

      hook = recording_hook_class(impl)('h', log, request=request)
      hooks = [hook]
      if others == 'with-native-hooks':
        hooks = [v1.train.StopAtStepHook(last_step=1000), hook,
                 v1.train.LoggingTensorHook({'x': t['x']}, every_n_iter=1000)]
      sess = impl.MonitoredSession(hooks=hooks)
      err = clean(outcome(sess.run, t['train']),
                  obj=t[obj_key] if obj_key else None)
      if not isinstance(expected, Raised):
        err = class_of(err)
      return (err, global_step_of(sess), outcome(sess.run, t['train']),
              sess.should_stop(), outcome(sess.close), [e[1] for e in log])

  check(scenario, expected=(expected, I(0), I(1), False, None,
                            ['begin', 'after_create_session', 'before_run',
                             'before_run', 'after_run', 'end']))


@pytest.mark.parametrize('via', ['run', 'run_steps'])
def test_bad_request_on_a_later_step(check, via):
  """Two good steps, then before_run returns a dict: the error comes at the
  third step (fastmts: inside the native loop), after two steps ran."""

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      _, _, train = step_graph()
      calls = []

      def request(run_context):
        del run_context
        calls.append(1)
        return {'fetches': train} if len(calls) == 3 else None

      hook = recording_hook_class(impl)('h', log, request=request)
      sess = impl.MonitoredSession(
          hooks=[v1.train.StopAtStepHook(last_step=6), hook])
      if via == 'run':
        first = [outcome(sess.run, train) for _ in range(3)]
      else:
        first = outcome(run_steps_or_tf_loop, impl, sess, train)
      return (first, global_step_of(sess), run_steps_or_tf_loop(impl, sess, train),
              sess.should_stop(), outcome(sess.close), [e[1] for e in log])

  err = Raised(AttributeError, "'dict' object has no attribute 'fetches'")
  check(scenario, expected=(
      [I(1), I(2), err] if via == 'run' else err, I(2), I(6), True, None,
      ['begin', 'after_create_session'] + ['before_run', 'after_run'] * 2 +
      ['before_run'] + ['before_run', 'after_run'] * 4 + ['end']))


# ---------------------------------------------------------------------------
# Run after stop; run_steps after close and after stop
# ---------------------------------------------------------------------------

_AFTER_STOP = Raised(RuntimeError,
                     'Run called even after should_stop requested.')
_AFTER_CLOSE = Raised(AttributeError,
                      "'NoneType' object has no attribute 'run'")


@pytest.mark.parametrize('kind', SESSION_KINDS)
def test_run_after_stop(check, kind):
  """StopAtStepHook reached, then run: TF's RuntimeError, nothing runs (no
  hook is called), the session still closes normally."""

  def scenario(impl, workdir):
    log = []
    with tf.Graph().as_default():
      step, _, train = step_graph()
      hooks = [v1.train.StopAtStepHook(last_step=2),
               recording_hook_class(impl)('h', log)]
      sess = monitored_session_of_kind(impl, kind, hooks, workdir)
      steps = []
      while not sess.should_stop():
        steps.append(sess.run(train))
      del log[:]
      after = [outcome(sess.run, train), sess.should_stop(),
               outcome(sess.run, [train, step]), global_step_of(sess),
               list(log), outcome(sess.close), [e[1] for e in log]]
    return steps, after

  check(scenario, expected=(
      [I(1), I(2)],
      [_AFTER_STOP, True, _AFTER_STOP, I(2), [], None, ['end']]))


def test_run_after_stop_inside_with(check):
  """The RuntimeError leaves the `with` block; hooks' end() is not called
  (the block ended with an exception), the session is closed."""

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      _, _, train = step_graph()
      hooks = [v1.train.StopAtStepHook(last_step=1),
               recording_hook_class(impl)('h', log)]

      def body():
        with impl.MonitoredSession(hooks=hooks) as sess:
          body.sess = sess
          while not sess.should_stop():
            sess.run(train)
          sess.run(train)
        return 'not reached'

      result = outcome(body)
      return (result, body.sess.should_stop(), outcome(body.sess.run, train),
              [e[1] for e in log])

  check(scenario, expected=(_AFTER_STOP, True, _AFTER_CLOSE,
                            ['begin', 'after_create_session', 'before_run',
                             'after_run']))


@pytest.mark.parametrize('kind', SESSION_KINDS)
def test_run_steps_after_close(check, kind):
  """fastmts's run_steps after close raises exactly what TF's run does
  (test_native_loop.py::test_run_steps_after_close checks the class)."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = step_graph()
      sess = monitored_session_of_kind(impl, kind, [], workdir)
      first = sess.run(train)
      sess.close()
      if impl is TF_IMPL:
        errors = [raised(sess.run, train), raised(sess.run, train)]
      else:
        errors = [raised(sess.run_steps, train),
                  raised(sess.run_steps, train, max_steps=2)]
      return first, errors, sess.should_stop(), raised(sess.close)

  check(scenario, expected=(
      I(1), [_AFTER_CLOSE, _AFTER_CLOSE], True,
      Raised(RuntimeError, 'Session is already closed.')))


@pytest.mark.parametrize('kind', SESSION_KINDS)
def test_run_steps_after_stop(check, kind):
  """After the stop, run_steps runs no step and returns None, as TF's `while
  not sess.should_stop(): sess.run(...)` loop it stands for; `run` itself
  still raises TF's RuntimeError."""

  def scenario(impl, workdir):
    log = []
    with tf.Graph().as_default():
      _, _, train = step_graph()
      hooks = [v1.train.StopAtStepHook(last_step=3),
               recording_hook_class(impl)('h', log)]
      sess = monitored_session_of_kind(impl, kind, hooks, workdir)
      first = run_steps_or_tf_loop(impl, sess, train)
      del log[:]
      again = [run_steps_or_tf_loop(impl, sess, train),
               run_steps_or_tf_loop(impl, sess, train, max_steps=2),
               global_step_of(sess), list(log), outcome(sess.run, train)]
      return first, again, outcome(sess.close), [e[1] for e in log]

  check(scenario, expected=(I(3), [None, None, I(3), [], _AFTER_STOP], None,
                            ['end']))


# ---------------------------------------------------------------------------
# Invalid arguments of TF's stock hooks (fastmts exports TF's own classes)
# ---------------------------------------------------------------------------

_TIMER_NEITHER = 'Either every_secs or every_steps should be provided.'
_TIMER_BOTH = 'Can not provide both every_secs and every_steps.'
_LOGGING_ARGS = ('either at_end and/or exactly one of every_n_iter and '
                 'every_n_secs must be provided.')
_STEP_COUNTER_ARGS = ('exactly one of every_n_steps and every_n_secs should '
                      'be provided.')

# name -> (make(impl, t, workdir), message of TF's ValueError).
# StopAtStepHook both/neither: test_session_creation.py::
# test_stop_at_step_hook_errors; SummarySaverHook: test_hook_summary_saver.py::
# test_summary_saver_bad_arguments.
_HOOK_ARGS = {
    'LoggingTensorHook-neither': (
        lambda impl, t, d: impl.LoggingTensorHook({'x': t['x']}),
        _LOGGING_ARGS),
    'LoggingTensorHook-both': (
        lambda impl, t, d: impl.LoggingTensorHook(
            {'x': t['x']}, every_n_iter=1, every_n_secs=1), _LOGGING_ARGS),
    'LoggingTensorHook-every_n_iter-0': (
        lambda impl, t, d: impl.LoggingTensorHook({'x': t['x']},
                                                  every_n_iter=0),
        'invalid every_n_iter=0.'),
    'LoggingTensorHook-every_n_iter-negative': (
        lambda impl, t, d: impl.LoggingTensorHook({'x': t['x']},
                                                  every_n_iter=-2),
        'invalid every_n_iter=-2.'),
    'LoggingTensorHook-every_n_iter-0-at_end': (
        lambda impl, t, d: impl.LoggingTensorHook(
            {'x': t['x']}, every_n_iter=0, at_end=True),
        'invalid every_n_iter=0.'),
    'CheckpointSaverHook-neither': (
        lambda impl, t, d: impl.CheckpointSaverHook(d), _TIMER_NEITHER),
    'CheckpointSaverHook-both': (
        lambda impl, t, d: impl.CheckpointSaverHook(d, save_secs=1,
                                                    save_steps=1),
        _TIMER_BOTH),
    'CheckpointSaverHook-saver-and-scaffold': (
        lambda impl, t, d: impl.CheckpointSaverHook(
            d, save_steps=1, saver=v1.train.Saver(), scaffold=impl.Scaffold()),
        'You cannot provide both saver and scaffold.'),
    'StepCounterHook-both': (
        lambda impl, t, d: impl.StepCounterHook(every_n_steps=1,
                                                every_n_secs=1),
        _STEP_COUNTER_ARGS),
    'StepCounterHook-neither': (
        lambda impl, t, d: impl.StepCounterHook(every_n_steps=None),
        _STEP_COUNTER_ARGS),
    'ProfilerHook-neither': (
        lambda impl, t, d: impl.ProfilerHook(output_dir=d), _TIMER_NEITHER),
    'ProfilerHook-both': (
        lambda impl, t, d: impl.ProfilerHook(save_steps=1, save_secs=1,
                                             output_dir=d), _TIMER_BOTH),
}


@pytest.mark.parametrize('case', sorted(_HOOK_ARGS))
def test_hook_bad_arguments(check, case):
  """TF's ValueError; the graph is still usable by a session afterwards."""
  make, message = _HOOK_ARGS[case]

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      t = _graph({'tensor': None, 'op': None})
      err = raised(make, impl, t, workdir)
      with impl.MonitoredSession() as sess:
        return err, sess.run(t['train'])

  check(scenario, expected=(Raised(ValueError, message), I(1)))


@pytest.mark.parametrize('kwargs', [
    dict(num_steps=-1), dict(num_steps=-3), dict(num_steps=0),
    dict(last_step=-1), dict(last_step=0),
], ids=['num_steps-1', 'num_steps-3', 'num_steps0', 'last_step-1',
        'last_step0'])
@pytest.mark.parametrize('via', ['run', 'run_steps'])
def test_stop_at_step_hook_negative_or_zero(check, kwargs, via):
  """TF accepts these: the first step runs, then stop is requested; the hook
  keeps the last step it computed (reused by a second session, which again
  runs one step)."""

  def scenario(impl, workdir):
    del workdir
    hook = impl.StopAtStepHook(**kwargs)
    out = []
    for _ in range(2):
      with tf.Graph().as_default():
        _, _, train = step_graph()
        with impl.MonitoredSession(hooks=[hook]) as sess:
          before = sess.should_stop()
          if via == 'run':
            steps = []
            while not sess.should_stop() and len(steps) < 5:
              steps.append(sess.run(train))
          else:
            steps = run_steps_or_tf_loop(impl, sess, train, max_steps=5)
          out.append((before, steps, sess.should_stop(),
                      outcome(sess.run, train)))
    last = hook._last_step  # pylint: disable=protected-access
    return out, last, type(last)

  last = kwargs.get('last_step')
  last = np.int64(kwargs['num_steps']) if last is None else last
  steps = [I(1)] if via == 'run' else I(1)
  check(scenario, expected=([(False, steps, True, _AFTER_STOP)] * 2, last,
                            type(last)))


_NAN_LOSS = {
    'int': (3, Raised(
        TypeError, 'Argument `fetch` = 3 has invalid type "int" must be a '
        'string or Tensor. (Can not convert a int into a Tensor or '
        'Operation.)'), 0),
    'float': (1.5, Raised(
        TypeError, 'Argument `fetch` = 1.5 has invalid type "float" must be '
        'a string or Tensor. (Can not convert a float into a Tensor or '
        'Operation.)'), 0),
    'np.float32-nan': (np.float32(np.nan), Raised(
        TypeError, 'Argument `fetch` = nan has invalid type "float32" must '
        'be a string or Tensor. (Can not convert a float32 into a Tensor or '
        'Operation.)'), 0),
    'list-of-float': ([1.0], Raised(
        TypeError, 'Argument `fetch` = 1.0 has invalid type "float" must be '
        'a string or Tensor. (Can not convert a float into a Tensor or '
        'Operation.)'), 0),
    'lambda': ('fn', Raised(
        TypeError, 'Argument `fetch` = <obj> has invalid type "function" '
        'must be a string or Tensor. (Can not convert a function into a '
        'Tensor or Operation.)'), 0),
    'unknown-name': ('nope:0', Raised(
        ValueError, 'Argument `fetch` = nope:0 cannot be interpreted as a '
        'Tensor. ("The name \'nope:0\' refers to a Tensor which does not '
        'exist. The operation, \'nope\', does not exist in the graph.")'), 0),
    # Nothing is fetched for the hook: the step runs, then np.isnan(None)
    # fails in after_run.
    'None': (None, Raised(
        TypeError, "ufunc 'isnan' not supported for the input types, and the "
        "inputs could not be safely coerced to any supported types according "
        "to the casting rule ''safe''"), 1),
}


@pytest.mark.parametrize('via', ['run', 'run_steps'])
@pytest.mark.parametrize('loss', sorted(_NAN_LOSS))
def test_nan_tensor_hook_given_a_non_tensor(check, loss, via):
  value, expected, ran = _NAN_LOSS[loss]

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      t = _graph({'tensor': None, 'op': None})
      hook_loss = t['fn'] if value == 'fn' else value
      sess = impl.MonitoredSession(hooks=[
          v1.train.StopAtStepHook(last_step=1000),
          impl.NanTensorHook(hook_loss)])
      out = []
      for _ in range(2):
        if via == 'run':
          err = outcome(sess.run, t['train'])
        else:
          err = outcome(run_steps_or_tf_loop, impl, sess, t['train'], max_steps=3)
        out.append((clean(err, obj=t['fn']), global_step_of(sess)))
      return out, sess.should_stop(), outcome(sess.close)

  check(scenario, expected=([(expected, I(ran)), (expected, I(2 * ran))],
                            False, None))


# ---------------------------------------------------------------------------
# Bad arguments of the session constructors
# ---------------------------------------------------------------------------

_SESSION_ARGS = {
    'hooks-list-of-int': (
        lambda impl, d: impl.MonitoredSession(hooks=[3]),
        Raised(AttributeError, "'int' object has no attribute 'begin'")),
    'hooks-int': (
        lambda impl, d: impl.MonitoredSession(hooks=3),
        Raised(TypeError, "'int' object is not iterable")),
    'hooks-a-hook-not-a-list': (
        lambda impl, d: impl.MonitoredSession(
            hooks=impl.StopAtStepHook(last_step=3)),
        Raised(TypeError, "'StopAtStepHook' object is not iterable")),
    'chief_only_hooks-list-of-object': (
        lambda impl, d: impl.MonitoredTrainingSession(
            chief_only_hooks=[object()]),
        Raised(AttributeError, "'object' object has no attribute 'begin'")),
    'singular-hooks-list-of-int': (
        lambda impl, d: impl.SingularMonitoredSession(hooks=[3]),
        Raised(AttributeError, "'int' object has no attribute 'begin'")),
    'session_creator-int': (
        lambda impl, d: impl.MonitoredSession(session_creator=3),
        Raised(AttributeError,
               "'int' object has no attribute 'create_session'")),
    'scaffold-int': (
        lambda impl, d: impl.MonitoredTrainingSession(scaffold=3),
        Raised(AttributeError, "'int' object has no attribute 'finalize'")),
    'config-str': (
        lambda impl, d: impl.MonitoredTrainingSession(config='x'),
        Raised(TypeError,
               'Argument `config` must be a tf.ConfigProto, but got "str"')),
    'master-int': (
        lambda impl, d: impl.MonitoredTrainingSession(master=3),
        Raised(TypeError, 'Argument `target` must be a string, but got '
               '"int"')),
    'save_checkpoint_steps-str': (
        lambda impl, d: impl.MonitoredTrainingSession(
            checkpoint_dir=d, save_checkpoint_steps='x'),
        Raised(TypeError,
               "'>' not supported between instances of 'str' and 'int'")),
}


@pytest.mark.parametrize('case', sorted(_SESSION_ARGS))
def test_session_bad_arguments(check, case):
  """TF's exception; a new session on the same graph still works."""
  make, expected = _SESSION_ARGS[case]

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = step_graph()
      err = raised(make, impl, workdir)
      with impl.MonitoredSession() as sess:
        return err, sess.run(train)

  check(scenario, expected=(expected, I(1)))


# ---------------------------------------------------------------------------
# checkpoint_dir that cannot be written
# ---------------------------------------------------------------------------

_NO_SUMMARIES = dict(save_summaries_steps=None, save_summaries_secs=None,
                     log_step_count_steps=None)
_SAVERS = {
    'defaults': {},
    'checkpoints-only': dict(save_checkpoint_steps=2, **_NO_SUMMARIES),
    'nothing-saved': dict(save_checkpoint_steps=None,
                          save_checkpoint_secs=None, **_NO_SUMMARIES),
}


@pytest.mark.parametrize('savers', sorted(_SAVERS))
def test_checkpoint_dir_under_a_regular_file(check, savers):
  """checkpoint_dir=<dir>/file/ckpt where <dir>/file is a file: TF's
  FailedPreconditionError from the constructor (unless nothing is ever
  written there); the graph is still usable by a session with a good
  directory."""

  def scenario(impl, workdir):
    with open(os.path.join(workdir, 'file'), 'w'):
      pass
    bad = os.path.join(workdir, 'file', 'ckpt')
    with tf.Graph().as_default():
      _, _, train = step_graph()

      def bad_session():
        with impl.MonitoredTrainingSession(checkpoint_dir=bad,
                                           **_SAVERS[savers]) as sess:
          return sess.run(train)

      err = clean(outcome(bad_session), workdir)
      finalized = v1.get_default_graph().finalized
      good = os.path.join(workdir, 'good')
      with impl.MonitoredTrainingSession(checkpoint_dir=good,
                                         **_SAVERS[savers]) as sess:
        result = sess.run(train)
    return err, finalized, result, sorted(os.listdir(workdir))

  err = Raised(tf.errors.FailedPreconditionError, 'DIR/file is not a directory')
  if savers == 'nothing-saved':
    check(scenario, expected=(I(1), False, I(1), ['file']))
  else:
    check(scenario, expected=(err, False, I(1), ['file', 'good']))


def _permission_bits_apply(tmp_path):
  """Whether a directory's missing write bit stops this process (not so for
  root, or with CAP_DAC_OVERRIDE)."""
  probe = tmp_path / 'probe'
  probe.mkdir()
  probe.chmod(stat.S_IRUSR | stat.S_IXUSR)
  try:
    (probe / 'f').touch()
  except PermissionError:
    return True
  finally:
    probe.chmod(stat.S_IRWXU)
  return False


@pytest.mark.parametrize('where', ['the-directory', 'its-parent'])
def test_checkpoint_dir_read_only(check, where, tmp_path):
  """A read-only checkpoint_dir (or a missing one under a read-only parent):
  TF's PermissionDeniedError from the constructor; a session on a new graph
  with a writable directory works."""
  if not _permission_bits_apply(tmp_path):
    pytest.skip('permission bits do not stop writes here (running as root)')

  def scenario(impl, workdir):
    ro = os.path.join(workdir, 'ro')
    os.mkdir(ro)
    os.chmod(ro, 0o555)
    try:
      d = ro if where == 'the-directory' else os.path.join(ro, 'ckpt')
      with tf.Graph().as_default():
        _, _, train = step_graph()
        err = clean(outcome(impl.MonitoredTrainingSession, checkpoint_dir=d),
                    workdir)
      listing = sorted(os.listdir(ro))
    finally:
      os.chmod(ro, 0o755)
    with tf.Graph().as_default():
      _, _, train = step_graph()
      with impl.MonitoredTrainingSession(checkpoint_dir=ro) as sess:
        result = sess.run(train)
    return err, listing, result

  message = ('DIR/ro/graph.pbtxt.tmpX; Permission denied'
             if where == 'the-directory' else 'DIR/ro/ckpt; Permission denied')
  check(scenario, expected=(
      Raised(tf.errors.PermissionDeniedError, message), [], I(1)))


# A checkpoint file's name taken by a directory makes that one write fail,
# whoever runs the tests.
_TAKEN = {
    'checkpoint': (Raised(
        tf.errors.FailedPreconditionError,
        'DIR/checkpoint.tmpX; Is a directory'),
                   ['checkpoint', 'graph.pbtxt',
                    'model.ckpt-0.data-00000-of-00001', 'model.ckpt-0.index']),
    'graph.pbtxt': (Raised(
        tf.errors.FailedPreconditionError,
        'DIR/graph.pbtxt.tmpX; Is a directory'), ['graph.pbtxt']),
    'model.ckpt-0.index': (Raised(
        tf.errors.FailedPreconditionError,
        "Graph execution error:\n\nNode: 'save/MergeV2Checkpoints'\n"
        'DIR/model.ckpt-0.index; Is a directory\n\t [[{{node '
        'save/MergeV2Checkpoints}}]]'),
                           ['graph.pbtxt', 'model.ckpt-0.data-00000-of-00001',
                            'model.ckpt-0.index', 'model.ckpt-0_temp']),
    # A save in the middle of training fails: run raises (after the step
    # ran), training goes on, the next save works.
    'model.ckpt-2.index': (([I(1), Raised(
        tf.errors.FailedPreconditionError,
        "Graph execution error:\n\nNode: 'save/MergeV2Checkpoints'\n"
        'DIR/model.ckpt-2.index; Is a directory\n\t [[{{node '
        'save/MergeV2Checkpoints}}]]'), I(3), I(4), I(5)], False),
                           ['checkpoint', 'graph.pbtxt',
                            'model.ckpt-0.data-00000-of-00001',
                            'model.ckpt-0.index', 'model.ckpt-0.meta',
                            'model.ckpt-2.data-00000-of-00001',
                            'model.ckpt-2.index', 'model.ckpt-2_temp',
                            'model.ckpt-4.data-00000-of-00001',
                            'model.ckpt-4.index', 'model.ckpt-4.meta',
                            'model.ckpt-5.data-00000-of-00001',
                            'model.ckpt-5.index', 'model.ckpt-5.meta']),
    'model.ckpt-2.meta': (([I(1), Raised(
        tf.errors.FailedPreconditionError,
        'DIR/model.ckpt-2.meta.tmpX; Is a directory'), I(3), I(4), I(5)],
                           False),
                          ['checkpoint', 'graph.pbtxt',
                           'model.ckpt-0.data-00000-of-00001',
                           'model.ckpt-0.index', 'model.ckpt-0.meta',
                           'model.ckpt-2.data-00000-of-00001',
                           'model.ckpt-2.index', 'model.ckpt-2.meta',
                           'model.ckpt-4.data-00000-of-00001',
                           'model.ckpt-4.index', 'model.ckpt-4.meta',
                           'model.ckpt-5.data-00000-of-00001',
                           'model.ckpt-5.index', 'model.ckpt-5.meta']),
}


@pytest.mark.parametrize('taken', sorted(_TAKEN))
def test_checkpoint_file_name_taken_by_a_directory(check, taken):

  def scenario(impl, workdir):
    os.makedirs(os.path.join(workdir, taken, 'x'))
    with tf.Graph().as_default():
      _, _, train = step_graph()

      def body():
        with impl.MonitoredTrainingSession(
            checkpoint_dir=workdir, save_checkpoint_steps=2,
            **_NO_SUMMARIES) as sess:
          steps = [clean(outcome(sess.run, train), workdir)
                   for _ in range(5)]
          return steps, sess.should_stop()

      result = clean(outcome(body), workdir)
    # (older releases, 2.0 among them, name a failed save's temporary files with a uuid)
    return result, [without_random_file_names(name) for name in ckpt_files(workdir)]

  check(scenario, expected=_TAKEN[taken])


# ---------------------------------------------------------------------------
# A corrupt latest checkpoint
# ---------------------------------------------------------------------------


def _corrupt(workdir, how):
  latest = tf.train.latest_checkpoint(workdir)
  data = latest + '.data-00000-of-00001'
  if how == 'index-truncated':
    open(latest + '.index', 'wb').close()
  elif how == 'index-overwritten':
    with open(latest + '.index', 'wb') as f:
      f.write(b'garbage' * 10)
  elif how == 'index-missing':
    os.remove(latest + '.index')
  elif how == 'data-truncated':
    open(data, 'wb').close()
  elif how == 'data-overwritten':
    size = os.path.getsize(data)
    with open(data, 'wb') as f:
      f.write(b'\xff' * size)
  elif how == 'data-missing':
    os.remove(data)
  elif how == 'state-names-a-missing-checkpoint':
    with open(os.path.join(workdir, 'checkpoint'), 'w') as f:
      f.write('model_checkpoint_path: "model.ckpt-99"\n'
              'all_model_checkpoint_paths: "model.ckpt-99"\n')
  elif how == 'state-empty':
    open(os.path.join(workdir, 'checkpoint'), 'w').close()
  elif how == 'state-unparsable':
    with open(os.path.join(workdir, 'checkpoint'), 'w') as f:
      f.write('this is not a CheckpointState {{{')
  else:
    raise AssertionError(how)


_RESTORE = "Graph execution error:\n\nNode: 'save/RestoreV2'\n%s\n\t [[{{node save/RestoreV2}}]]"
_CORRUPT = {
    'index-truncated': Raised(tf.errors.DataLossError,
                              _RESTORE % 'file is too short to be an sstable'),
    'index-overwritten': Raised(
        tf.errors.DataLossError,
        _RESTORE % 'not an sstable (bad magic number)'),
    'index-missing': Raised(
        ValueError,
        'The passed save_path is not a valid checkpoint: DIR/model.ckpt-3'),
    'data-truncated': Raised(tf.errors.OutOfRangeError,
                             _RESTORE % 'Read less bytes than requested'),
    'data-overwritten': Raised(
        tf.errors.DataLossError,
        _RESTORE % 'TensorBundle at DIR/model.ckpt-3 shard 0 (8 bytes): '
        'Checksum does not match: stored 1466709475 vs. calculated on the '
        'restored bytes 1214729159'),
    'data-missing': Raised(
        tf.errors.NotFoundError,
        'Restoring from checkpoint failed. This is most likely due to a '
        'Variable name or other graph key that is missing from the '
        'checkpoint. Please ensure that you have not altered the graph '
        'expected based on the checkpoint. Original error:\n\n' + _RESTORE %
        'DIR/model.ckpt-3.data-00000-of-00001; No such file or directory'),
    'state-names-a-missing-checkpoint': Raised(
        ValueError,
        'The passed save_path is not a valid checkpoint: DIR/model.ckpt-99'),
    'state-empty': Raised(ValueError,
                          'Invalid checkpoint state loaded from DIR'),
    # TF logs a warning, ignores the file and starts from scratch.
    'state-unparsable': ('created', I(0)),
}


@pytest.mark.parametrize('how', sorted(_CORRUPT))
def test_corrupt_latest_checkpoint(check, how):
  """Checkpoints 0, 2 and 3 (written by TF), the latest one damaged, then a
  MonitoredTrainingSession on that checkpoint_dir: TF's exception from the
  constructor. Pointing the state file at checkpoint 2 then resumes from it."""

  def scenario(impl, workdir):
    with tf.Graph().as_default():
      _, _, train = step_graph()
      with TF_IMPL.MonitoredTrainingSession(
          checkpoint_dir=workdir, save_checkpoint_steps=2,
          **_NO_SUMMARIES) as sess:
        for _ in range(3):
          sess.run(train)
    _corrupt(workdir, how)
    with tf.Graph().as_default():
      step, _, train = step_graph()
      created = outcome(impl.MonitoredTrainingSession, checkpoint_dir=workdir,
                        save_checkpoint_steps=None, save_checkpoint_secs=None,
                        **_NO_SUMMARIES)
      if isinstance(created, Raised):
        first = clean(created, workdir)
      else:
        with created as sess:
          first = ('created', sess.run(step))
      finalized = v1.get_default_graph().finalized
    v1.train.update_checkpoint_state(workdir,
                                     os.path.join(workdir, 'model.ckpt-2'))
    with tf.Graph().as_default():
      step, _, train = step_graph()
      with impl.MonitoredTrainingSession(
          checkpoint_dir=workdir, save_checkpoint_steps=None,
          save_checkpoint_secs=None, **_NO_SUMMARIES) as sess:
        resumed = sess.run([step, train])
    return first, finalized, resumed

  check(scenario, expected=(_CORRUPT[how], how != 'state-unparsable',
                            [I(2), I(3)]))


# ---------------------------------------------------------------------------
# fastmts-only API: run_steps, RecoveryPolicy, recovery=
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('bad,expected', [
    (-1, Raised(ValueError, 'max_steps must be >= 0, got -1')),
    (1.5, Raised(TypeError, 'max_steps must be an int or None, got 1.5')),
    ('3', Raised(TypeError, "max_steps must be an int or None, got '3'")),
    (True, Raised(TypeError, 'max_steps must be an int or None, got True')),
], ids=['-1', '1.5', 'str', 'bool'])
def test_run_steps_bad_max_steps(fastmts, bad, expected):
  """Raised before any step or hook runs; the session is usable after."""
  log = []
  with tf.Graph().as_default():
    _, _, train = step_graph()
    hooks = [fastmts.StopAtStepHook(last_step=5),
             recording_hook_class(fastmts)('h', log)]
    sess = fastmts.MonitoredSession(hooks=hooks)
    del log[:]
    assert raised(sess.run_steps, train, max_steps=bad) == expected
    assert log == []
    assert global_step_of(sess) == 0
    assert not sess.should_stop()
    assert sess.run_steps(train, max_steps=2) == 2
    assert sess.run_steps(train) == 5
    assert outcome(sess.close) is None


@pytest.mark.parametrize('kwargs,expected', [
    (dict(max_recreations=-1), Raised(
        ValueError, 'max_recreations must be >= 0, got -1')),
    (dict(max_recreations=1.5), Raised(
        TypeError, 'max_recreations must be None or an int, got 1.5')),
    (dict(backoff_secs=-1), Raised(
        ValueError, 'backoff_secs must be >= 0, got -1')),
    (dict(max_backoff_secs='x'), Raised(
        TypeError, "max_backoff_secs must be a number, got 'x'")),
], ids=['max_recreations-1', 'max_recreations-1.5', 'backoff_secs-1',
        'max_backoff_secs-str'])
def test_recovery_policy_bad_arguments(fastmts, kwargs, expected):
  assert raised(fastmts.RecoveryPolicy, **kwargs) == expected


@pytest.mark.parametrize('session', ['MonitoredSession',
                                     'MonitoredTrainingSession'])
def test_recovery_not_a_policy(fastmts, session, tmp_path):
  """TypeError; the same graph then takes a session with a valid policy."""
  make = getattr(fastmts, session)
  kwargs = {'checkpoint_dir': str(tmp_path)} if session.endswith(
      'TrainingSession') else {}
  with tf.Graph().as_default():
    _, _, train = step_graph()
    assert raised(make, recovery='x', **kwargs) == Raised(
        TypeError, "recovery must be a fastmts.RecoveryPolicy or None, got 'x'")
    with make(recovery=fastmts.RecoveryPolicy(max_recreations=1),
              **kwargs) as sess:
      assert sess.run(train) == 1
