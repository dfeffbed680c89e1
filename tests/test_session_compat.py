"""Session.run compatibility: fetch structures, feeds, eval/run, lifecycle.

Each scenario takes ``impl`` (tf.compat.v1.train or fastmts) and a scratch
directory and returns observable results; ``check`` runs it against TF and the
implementation under test and compares (see conftest.py).
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import Raised, outcome, raised, recording_hook_class

v1 = tf.compat.v1
Pair = collections.namedtuple('Pair', ['first', 'second'])


def _run_one(build, fetch, feed=None):
  """Scenario factory: build() -> dict of graph elements; run one fetch."""

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      t = build()
      with impl.MonitoredSession() as sess:
        fetches = fetch(t) if callable(fetch) else fetch
        feeds = feed(t) if callable(feed) else feed
        return outcome(sess.run, fetches, feed_dict=feeds)

  return scenario


def _basic_graph():
  x = tf.constant(3, name='x')
  y = tf.constant([1.5, 2.5], name='y')
  train = tf.no_op(name='train')
  return dict(x=x, y=y, train=train)


# ---------------------------------------------------------------------------
# Fetch structures
# ---------------------------------------------------------------------------


def test_fetch_tensor(check):
  check(_run_one(_basic_graph, lambda t: t['x']), expected=np.int32(3))


def test_fetch_operation_returns_none(check):
  check(_run_one(_basic_graph, lambda t: t['train']), expected=None)


@pytest.mark.parametrize('fetch,expected', [
    ('x:0', np.int32(3)),
    ('train', None),
    (['x:0', 'train', 'y:0'], [np.int32(3), None,
                               np.array([1.5, 2.5], np.float32)]),
])
def test_fetch_by_name(check, fetch, expected):
  check(_run_one(_basic_graph, fetch), expected=expected)


def test_fetch_by_unknown_name(check):
  check(_run_one(_basic_graph, 'nope:0'),
        expected=Raised(
            ValueError,
            # The inner message is a KeyError's str(), hence the double quotes.
            'Argument `fetch` = nope:0 cannot be interpreted as a Tensor. '
            '("The name \'nope:0\' refers to a Tensor which does not exist. '
            'The operation, \'nope\', does not exist in the graph.")'))


def test_fetch_nested_structures(check):

  def fetch(t):
    return {
        'list': [t['x'], (t['y'], t['train'])],
        'namedtuple': Pair(t['x'], t['train']),
        'dict': {'by_name': 'y:0', 'empty': []},
        'tuple': (t['x'],),
    }

  y = np.array([1.5, 2.5], np.float32)
  check(_run_one(_basic_graph, fetch), expected={
      'list': [np.int32(3), (y, None)],
      'namedtuple': Pair(np.int32(3), None),
      'dict': {'by_name': y, 'empty': []},
      'tuple': (np.int32(3),),
  })


def test_fetch_ordered_dict_keeps_type_and_order(check):
  fetch = lambda t: collections.OrderedDict([('b', t['x']), ('a', t['y'])])
  check(_run_one(_basic_graph, fetch), expected=collections.OrderedDict([
      ('b', np.int32(3)), ('a', np.array([1.5, 2.5], np.float32))]))


@pytest.mark.parametrize('fetch', [[], (), {}, [[]], {'a': ()}],
                         ids=['list', 'tuple', 'dict', 'nested-list',
                              'dict-of-tuple'])
def test_fetch_empty_structures(check, fetch):
  check(_run_one(_basic_graph, fetch), expected=fetch)


def test_fetch_tensor_keyed_dict(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      with impl.MonitoredSession() as sess:
        result = sess.run({x: x})
        return list(result.keys())[0] is x, list(result.values())

  check(scenario, expected=(True, [np.int32(3)]))


def test_fetch_sparse_tensor(check):

  def build():
    return tf.SparseTensor(indices=[[0, 1], [1, 0]], values=[2.0, 3.0],
                           dense_shape=[2, 2])

  check(_run_one(build, lambda sp: [sp, {'s': sp}]), expected=[
      v1.SparseTensorValue(np.array([[0, 1], [1, 0]], np.int64),
                           np.array([2.0, 3.0], np.float32),
                           np.array([2, 2], np.int64)),
      {'s': v1.SparseTensorValue(np.array([[0, 1], [1, 0]], np.int64),
                                 np.array([2.0, 3.0], np.float32),
                                 np.array([2, 2], np.int64))},
  ])


def test_fetch_variable(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=5.0)
      vec = v1.get_variable('vec', initializer=[1, 2, 3])
      inc = v1.assign_add(v, 1.5)
      with impl.MonitoredSession() as sess:
        before = sess.run([v, vec])
        sess.run(inc)
        return before, sess.run(v), sess.run({'v': v})

  check(scenario, expected=([np.float32(5.0), np.array([1, 2, 3], np.int32)],
                            np.float32(6.5), {'v': np.float32(6.5)}))


def test_fetch_duplicates(check):
  fetch = lambda t: [t['x'], t['x'], {'a': t['x'], 'b': [t['x'], 'x:0']},
                     t['train'], t['train']]
  check(_run_one(_basic_graph, fetch), expected=[
      np.int32(3), np.int32(3), {'a': np.int32(3), 'b': [np.int32(3),
                                                         np.int32(3)]},
      None, None])


def test_fetch_result_types(check):

  def build():
    return [
        tf.constant(3, tf.int32),
        tf.constant(3, tf.int64),
        tf.constant(2.5, tf.float32),
        tf.constant(2.5, tf.float64),
        tf.constant(True),
        tf.constant('hi'),
        tf.constant(['a', 'bb']),
        tf.constant([1.0, 2.0], tf.float64),
        tf.constant([[1, 2], [3, 4]], tf.int64),
        tf.constant([True, False]),
        tf.zeros([0, 3], tf.float32),
        tf.constant(7, tf.uint8),
    ]

  check(_run_one(build, lambda t: t), expected=[
      np.int32(3),
      np.int64(3),
      np.float32(2.5),
      np.float64(2.5),
      np.True_,
      b'hi',
      np.array([b'a', b'bb'], dtype=object),
      np.array([1.0, 2.0], np.float64),
      np.array([[1, 2], [3, 4]], np.int64),
      np.array([True, False]),
      np.zeros([0, 3], np.float32),
      np.uint8(7),
  ])


@pytest.mark.parametrize('fetch,expected', [
    (None, Raised(TypeError, 'Argument `fetch` = None has invalid type '
                  '"NoneType". Cannot be None')),
    (3, Raised(TypeError, 'Argument `fetch` = 3 has invalid type "int" must '
               'be a string or Tensor. (Can not convert a int into a Tensor '
               'or Operation.)')),
    ([1.5], Raised(TypeError, 'Argument `fetch` = 1.5 has invalid type '
                   '"float" must be a string or Tensor. (Can not convert a '
                   'float into a Tensor or Operation.)')),
], ids=['None', 'int', 'list-of-float'])
def test_fetch_invalid_type(check, fetch, expected):
  check(_run_one(_basic_graph, fetch), expected=expected)


def test_fetch_tensor_from_other_graph(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      other = tf.constant(1, name='other')
    with tf.Graph().as_default():
      tf.constant(3, name='x')
      with impl.MonitoredSession() as sess:
        return raised(sess.run, other)

  check(scenario, expected=Raised(
      ValueError,
      'Argument `fetch` = Tensor("other:0", shape=(), dtype=int32) cannot be '
      'interpreted as a Tensor. (Tensor Tensor("other:0", shape=(), '
      'dtype=int32) is not an element of this graph.)'))


# ---------------------------------------------------------------------------
# Feeds
# ---------------------------------------------------------------------------


def _feed_graph():
  p = v1.placeholder(tf.int32, shape=(), name='p')
  f = v1.placeholder(tf.float32, shape=(2,), name='f')
  m = v1.placeholder(tf.float32, shape=(None, 2), name='m')
  s = v1.placeholder(tf.string, shape=(), name='s')
  b = v1.placeholder(tf.bool, shape=(), name='b')
  return dict(p=p, p2=p * 2, f=f, f2=f * 2, m=m, msum=tf.reduce_sum(m),
              s=s, slen=tf.strings.length(s), sid=tf.identity(s), b=b,
              bnot=tf.logical_not(b))


@pytest.mark.parametrize('key', ['tensor', 'name'])
def test_feed_keys_tensor_and_name(check, key):

  def feed(t):
    k = (lambda n: t[n]) if key == 'tensor' else (lambda n: t[n].name)
    return {k('p'): 4, k('f'): [1.0, 2.0], k('m'): np.ones((3, 2)),
            k('s'): b'abc', k('b'): True}

  check(_run_one(_feed_graph,
                 lambda t: [t['p2'], t['f2'], t['msum'], t['slen'],
                            t['bnot']], feed),
        expected=[np.int32(8), np.array([2.0, 4.0], np.float32),
                  np.float32(6.0), np.int32(3), np.False_])


@pytest.mark.parametrize('value,expected', [
    (4, np.int32(8)),
    (1.7, np.int32(2)),  # truncated to 1 as by np.asarray(1.7, np.int32)
    (-1.7, np.int32(-2)),
    (True, np.int32(2)),
    ('3', np.int32(6)),
    (np.int64(5), np.int32(10)),
    (np.float64(5.9), np.int32(10)),
    (np.array(6, np.int16), np.int32(12)),
    (2**31 - 1, np.int32(-2)),  # wraps in the int32 multiply
], ids=['int', 'float', 'neg-float', 'bool', 'str', 'np.int64',
        'np.float64', 'np.int16-array', 'int32-max'])
def test_feed_dtype_conversion(check, value, expected):
  check(_run_one(_feed_graph, lambda t: t['p2'], lambda t: {t['p']: value}),
        expected=expected)


def test_feed_float_placeholder_from_ints(check):
  check(_run_one(_feed_graph, lambda t: t['f2'],
                 lambda t: {t['f']: np.array([1, 2], np.int64)}),
        expected=np.array([2.0, 4.0], np.float32))


def test_fetching_a_fed_tensor_returns_the_fed_value(check):
  # TF short-circuits fetches of fed tensors: the result is the converted
  # feed value itself (a 0-d ndarray, and a str stays a str), not a value
  # computed by the runtime.
  def fetch(t):
    return [t['p'], t['p2'], t['s'], t['sid'], t['f']]

  def feed(t):
    return {t['p']: 1.7, t['s']: 'h\u00e9llo', t['f']: [1, 2]}

  check(_run_one(_feed_graph, fetch, feed), expected=[
      np.array(1, np.int32),
      np.int32(2),
      np.array('h\u00e9llo', dtype=object),
      'h\u00e9llo'.encode('utf-8'),
      np.array([1.0, 2.0], np.float32),
  ])


@pytest.mark.parametrize('value', [b'x\x00y', 'h\u00e9llo', np.bytes_(b'nb')],
                         ids=['bytes', 'str', 'np.bytes_'])
def test_feed_strings(check, value):
  raw = value.encode('utf-8') if isinstance(value, str) else bytes(value)
  check(_run_one(_feed_graph, lambda t: [t['sid'], t['slen']],
                 lambda t: {t['s']: value}),
        expected=[raw, np.int32(len(raw))])


def test_feed_non_placeholder_tensor(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      y = x * 2
      with impl.MonitoredSession() as sess:
        return sess.run(y, feed_dict={x: 10}), sess.run(y)

  check(scenario, expected=(np.int32(20), np.int32(6)))


@pytest.mark.parametrize('name,value,expected', [
    ('f', [1.0, 2.0, 3.0], Raised(
        ValueError, 'Cannot feed value of shape (3,) for Tensor f:0, which '
        'has shape (2,)')),
    ('p', np.array([1]), Raised(
        ValueError, 'Cannot feed value of shape (1,) for Tensor p:0, which '
        'has shape ()')),
    ('m', np.ones((3, 3)), Raised(
        ValueError, 'Cannot feed value of shape (3, 3) for Tensor m:0, which '
        'has shape (None, 2)')),
    ('p', 2**32, Raised(
        TypeError, "Type of feed value 4294967296 with type <class 'int'> is "
        "not compatible with Tensor type <class 'numpy.int32'>. Try "
        "explicitly setting the type of the feed tensor to a larger type "
        "(e.g. int64).")),
    ('p', 2**31, Raised(
        TypeError, "Type of feed value 2147483648 with type <class 'int'> is "
        "not compatible with Tensor type <class 'numpy.int32'>. Try "
        "explicitly setting the type of the feed tensor to a larger type "
        "(e.g. int64).")),
    ('p', None, Raised(
        TypeError, "int() argument must be a string, a bytes-like object or a "
        "real number, not 'NoneType'")),
    ('p', 'a', Raised(
        # numpy's repr of the item: np.str_('a') from numpy 2 on, 'a' before
        ValueError, 'invalid literal for int() with base 10: %r' % np.str_('a'))),
], ids=['vector-too-long', 'vector-for-scalar', 'matrix-cols',
        'int-too-large', 'int32-max-plus-1', 'None', 'non-numeric-str'])
def test_feed_errors(check, name, value, expected):
  check(_run_one(_feed_graph, lambda t: t['p2'],
                 lambda t: {t[name].name: value}), expected=expected)


def test_string_feed_of_a_non_string(check):
  check(_run_one(_feed_graph, lambda t: t['sid'], lambda t: {t['s']: 1.5}),
        expected=Raised(tf.errors.InternalError,
                        'Graph execution error:\n\nUnsupported object type float'))


def test_feed_tensor_that_may_not_be_fed(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      x = tf.constant(3, name='x')
      q = tf.identity(x, name='q')
      tf.compat.v1.get_default_graph().prevent_feeding(q)
      with impl.MonitoredSession() as sess:
        return raised(sess.run, x, feed_dict={q: 1})

  check(scenario, expected=Raised(ValueError, 'Tensor q:0 may not be fed.'))


@pytest.mark.parametrize('key_kind,expected', [
    ('unknown-name', Raised(
        TypeError, "Cannot interpret feed_dict key as Tensor: The name "
        "'nope:0' refers to a Tensor which does not exist. The operation, "
        "'nope', does not exist in the graph.")),
    ('op-name', Raised(
        TypeError, "Cannot interpret feed_dict key as Tensor: The name "
        "'train' refers to an Operation, not a Tensor. Tensor names must be "
        "of the form \"<op_name>:<output_index>\".")),
    ('int', Raised(
        TypeError, 'Cannot interpret feed_dict key as Tensor: Can not '
        'convert a int into a Tensor.')),
    ('operation', Raised(
        TypeError, 'Cannot interpret feed_dict key as Tensor: Can not '
        'convert a Operation into a Tensor.')),
    ('tensor-value', Raised(
        TypeError, 'The value of a feed cannot be a tf.Tensor object. '
        'Acceptable feed values include Python scalars, strings, lists, numpy '
        'ndarrays, or TensorHandles. For reference, the tensor object was '
        'Tensor("x:0", shape=(), dtype=int32) which was passed to the '
        'argument `feed_dict` with key Tensor("x:0", shape=(), '
        'dtype=int32).')),
])
def test_feed_bad_keys_and_values(check, key_kind, expected):

  def feed(t):
    return {
        'unknown-name': {'nope:0': 1},
        'op-name': {'train': 1},
        'int': {3: 1},
        'operation': {t['train']: 1},
        'tensor-value': {t['x']: t['x']},
    }[key_kind]

  check(_run_one(_basic_graph, lambda t: t['x'], feed), expected=expected)


def test_missing_feed_raises_runtime_error(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      p = v1.placeholder(tf.float32, shape=(), name='p')
      y = p * 2
      with impl.MonitoredSession() as sess:
        try:
          sess.run(y)
        except tf.errors.InvalidArgumentError as e:
          err = (type(e), "You must feed a value for placeholder tensor 'p' "
                 'with dtype float' in str(e))
        # The session stays usable after a failed run.
        return err, sess.should_stop(), sess.run(y, feed_dict={p: 1.0})

  check(scenario, expected=((tf.errors.InvalidArgumentError, True), False,
                            np.float32(2.0)))


# ---------------------------------------------------------------------------
# Tensor.eval / Operation.run with session=
# ---------------------------------------------------------------------------


def test_tensor_eval_and_operation_run(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    hook = recording_hook_class(impl)('h', log)
    with tf.Graph().as_default():
      p = v1.placeholder(tf.float32, shape=(), name='p')
      v = v1.get_variable('v', initializer=1.0)
      y = p + v
      inc = v1.assign_add(v, 2.0).op
      with impl.MonitoredSession(hooks=[hook]) as sess:
        del log[:]
        first = y.eval(session=sess, feed_dict={p: 10.0})
        ran = inc.run(session=sess)
        second = v.eval(session=sess)
    return first, ran, second, log

  run_entries = lambda fetch, feed: [
      ('h', 'before_run', True, True, fetch, feed, True, False),
      ('h', 'after_run', True, None, False)]
  check(scenario, expected=(
      np.float32(11.0), None, np.float32(3.0),
      run_entries(('Tensor', 'add:0'), {('Tensor', 'p:0'): 10.0}) +
      run_entries(('Operation', 'AssignAddVariableOp'), None) +
      # Variable.eval() runs the variable's snapshot tensor.
      run_entries(('Tensor', 'v/Read/ReadVariableOp:0'), None) +
      [('h', 'end', True)]))


def test_eval_tensor_from_other_graph(check):
  # The seed example of the issue.
  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      c = tf.constant(1, name='c')
      op = tf.no_op(name='op')
    with tf.Graph().as_default():
      tf.constant(3, name='x')
      with impl.MonitoredSession() as sess:
        return raised(c.eval, session=sess), raised(op.run, session=sess)

  check(scenario, expected=(
      Raised(ValueError, "Cannot use the given session to evaluate tensor: "
             "the tensor's graph is different from the session's graph."),
      Raised(ValueError, "Cannot use the given session to execute operation: "
             "the operation's graph is different from the session's graph.")))


# ---------------------------------------------------------------------------
# Lifecycle: context manager, should_stop, close, graph
# ---------------------------------------------------------------------------


def test_context_manager_returns_session_and_suppresses_out_of_range(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      it = v1.data.make_one_shot_iterator(tf.data.Dataset.range(3))
      nxt = it.get_next()
      values = []
      monitored = impl.MonitoredSession(
          hooks=[recording_hook_class(impl)('h', log)])
      with monitored as sess:
        entered_is_self = sess is monitored
        while not sess.should_stop():
          values.append(sess.run(nxt))
      events = [e[1] for e in log]
      return entered_is_self, values, sess.should_stop(), events[-2:]

  check(scenario, expected=(
      True, [np.int64(0), np.int64(1), np.int64(2)], True,
      # The failing run gets no after_run; end() is still called.
      ['before_run', 'end']))


@pytest.mark.parametrize('exc', ['StopIteration', 'OutOfRangeError'])
def test_context_manager_suppresses_stop_exceptions(check, exc):

  def scenario(impl, workdir):
    del workdir
    log = []
    reached_after = False
    with tf.Graph().as_default():
      tf.constant(1)
      with impl.MonitoredSession(
          hooks=[recording_hook_class(impl)('h', log)]) as sess:
        if exc == 'StopIteration':
          raise StopIteration
        raise tf.errors.OutOfRangeError(None, None, 'done')
      reached_after = True  # pylint: disable=unreachable
      finalized = tf.compat.v1.get_default_graph().finalized
    return reached_after, sess.should_stop(), finalized, log

  check(scenario, expected=(True, True, False, [
      ('h', 'begin'), ('h', 'after_create_session', True, True, False),
      ('h', 'end', True)]))


def test_context_manager_propagates_other_exceptions(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      tf.constant(1)

      def body():
        with impl.MonitoredSession(
            hooks=[recording_hook_class(impl)('h', log)]) as sess:
          body.sess = sess
          raise ValueError('boom')

      err = raised(body)
      # Closed, but hooks' end() is not called on an error exit.
      return (err, body.sess.should_stop(), body.sess.graph,
              [e[1] for e in log])

  check(scenario, expected=(Raised(ValueError, 'boom'), True, None,
                            ['begin', 'after_create_session']))


def test_should_stop_and_close(check):

  def scenario(impl, workdir):
    del workdir
    log = []
    with tf.Graph().as_default():
      x = tf.constant(1)
      sess = impl.MonitoredSession(
          hooks=[recording_hook_class(impl)('h', log)])
      open_stop = sess.should_stop()
      value = sess.run(x)
      first_close = sess.close()
      closed_stop = sess.should_stop()
      del log[:]
      second_close = raised(sess.close)
      # TF calls end() again (with session=None) before noticing.
      log_second = list(log)
      run_after = raised(sess.run, x)
    return (open_stop, value, first_close, closed_stop, second_close,
            log_second, run_after)

  check(scenario, expected=(
      False, np.int32(1), None, True,
      Raised(RuntimeError, 'Session is already closed.'),
      [('h', 'end', True)],
      Raised(AttributeError, "'NoneType' object has no attribute 'run'")))


@pytest.mark.parametrize('prefinalize', [False, True])
def test_graph_property_and_finalization(check, prefinalize):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default() as g:
      x = tf.constant(1)
      sc = impl.Scaffold()
      if prefinalize:
        sc.finalize()  # builds the default ops, then finalizes the graph
      before = g.finalized
      sess = impl.MonitoredSession(
          session_creator=impl.ChiefSessionCreator(scaffold=sc))
      during = (sess.graph is g, g.finalized, sess.run(x))
      modify_while_open = raised(tf.constant, 2)
      sess.close()
      after = (sess.graph, g.finalized)
    return before, during, modify_while_open, after

  check(scenario, expected=(
      prefinalize, (True, True, np.int32(1)),
      Raised(RuntimeError, 'Graph is finalized and cannot be modified.'),
      (None, prefinalize)))


def test_results_do_not_alias_between_runs(check):

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      v = v1.get_variable('v', initializer=[1.0, 2.0])
      inc = v1.assign_add(v, [1.0, 1.0])
      with impl.MonitoredSession() as sess:
        first = sess.run(v)
        sess.run(inc)
        second = sess.run(v)
        first[0] = 100.0  # results are writable and independent
        return first, second, sess.run(v)

  check(scenario, expected=(np.array([100.0, 2.0], np.float32),
                            np.array([2.0, 3.0], np.float32),
                            np.array([2.0, 3.0], np.float32)))


def test_kept_results_are_snapshots_when_native_hooks_share_fetches(check):
  """Native hooks that only read the values they fetch (StopAtStepHook reads
  the global step, NanTensorHook the loss) share those fetches with the
  caller and with a Python hook that keeps what it gets: every value kept is
  that step's, never a view of the variable that later steps change."""

  class KeepingHook(v1.train.SessionRunHook):

    def __init__(self, tensor):
      self.tensor, self.kept = tensor, []

    def before_run(self, run_context):
      return v1.train.SessionRunArgs(self.tensor)

    def after_run(self, run_context, run_values):
      self.kept.append(run_values.results)

  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      # Ref variables: TF updates them in place, so a fetched value that
      # still viewed one would change under later steps.
      gs = v1.get_variable(
          'global_step', shape=[], dtype=tf.int64, trainable=False,
          initializer=v1.zeros_initializer(), use_resource=False,
          collections=[v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.GLOBAL_STEP])
      v = v1.get_variable('v', initializer=[0.0, 0.0], use_resource=False)
      loss = tf.reduce_sum(v)
      with tf.control_dependencies([loss]):  # else the loss races the increment
        train = tf.group(v1.assign_add(v, [1.0, 2.0]), v1.assign_add(gs, 1))
      keeper = KeepingHook(v)
      hooks = [v1.train.StopAtStepHook(last_step=4), v1.train.NanTensorHook(loss), keeper]
      caller = []
      with impl.MonitoredSession(hooks=hooks) as sess:
        while not sess.should_stop():
          caller.append(sess.run([train, gs, v, loss])[1:])
      # A view of the variable would now show its last value everywhere.
      return ([(int(s), list(map(float, a)), float(l)) for s, a, l in caller],
              sorted(tuple(map(float, a)) for a in keeper.kept))

  result = check(scenario)
  steps = [s for s, _, _ in result[0]]
  assert len(steps) == 4 and len(set(steps)) == 4, result
  assert len(set(result[1])) == 4, result
