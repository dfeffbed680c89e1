"""Property-based: random nested fetch structures and feeds give the same
results through a fastmts MonitoredSession as through stock TF's Session.run.

One graph holds tensors of several dtypes and shapes, an operation, a
variable and placeholders; hypothesis draws nested lists, tuples, dicts and
namedtuples of them (by object or by name) and feed values, and both
sessions run the same draw.
"""
import collections
import re

import numpy as np
import pytest
import tensorflow as tf

from compat_utils import Raised
from compat_utils import assert_same
from compat_utils import outcome

hypothesis = pytest.importorskip('hypothesis')
st = hypothesis.strategies
v1 = tf.compat.v1

Pair = collections.namedtuple('Pair', ['first', 'second'])


@pytest.fixture(scope='module')
def sessions():
  """(leaves, placeholders, stock Session, fastmts MonitoredSession)."""
  fastmts = pytest.importorskip('fastmts')
  graph = tf.Graph()
  with graph.as_default():
    x = v1.placeholder(tf.float32, [None, 3], name='x')
    n = v1.placeholder_with_default(tf.constant(2, tf.int64), [], name='n')
    s = v1.placeholder(tf.string, [], name='s')
    var = v1.get_variable('var', initializer=np.arange(4, dtype=np.float64))
    leaves = {
        'sum': tf.reduce_sum(x, axis=1, name='sum'),
        'x2': tf.multiply(x, 2.0, name='x2'),
        'n_sq': tf.square(n, name='n_sq'),
        'cast': tf.cast(n, tf.int32, name='cast'),
        'text': tf.strings.join([s, '!'], name='text'),
        'flag': tf.greater(n, 1, name='flag'),
        'half': tf.cast(x, tf.float16, name='half'),
        'var': var,
        'noop': tf.no_op(name='noop'),
        'by_name': 'n_sq:0',
        'x': x,
    }
    init = v1.global_variables_initializer()
  stock = v1.Session(graph=graph)
  stock.run(init)
  with graph.as_default():
    monitored = fastmts.MonitoredSession(
        session_creator=fastmts.ChiefSessionCreator(scaffold=fastmts.Scaffold(init_op=init)))
  try:
    yield leaves, {'x': x, 'n': n, 's': s}, stock, monitored
  finally:
    monitored.close()
    stock.close()


def _structures(leaf_names):
  leaf = st.sampled_from(leaf_names)
  return st.recursive(
      leaf,
      lambda children: st.one_of(
          st.lists(children, max_size=3),
          st.lists(children, max_size=3).map(tuple),
          st.dictionaries(st.sampled_from(['a', 'b', 'c']), children, max_size=3),
          st.tuples(children, children).map(lambda t: Pair(*t))),
      max_leaves=6)


def _materialize(structure, leaves):
  if isinstance(structure, str):
    return leaves[structure]
  if isinstance(structure, Pair):
    return Pair(*[_materialize(s, leaves) for s in structure])
  if isinstance(structure, dict):
    return {k: _materialize(v, leaves) for k, v in structure.items()}
  return type(structure)(_materialize(s, leaves) for s in structure)


_FEEDS = st.fixed_dictionaries({
    'x': st.integers(0, 3).flatmap(lambda rows: st.lists(
        st.lists(st.floats(-1e3, 1e3, width=32), min_size=3, max_size=3),
        min_size=rows, max_size=rows)),
    's': st.text(max_size=5),
}, optional={'n': st.integers(-1000, 1000)})


@hypothesis.settings(max_examples=60, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(structure=_structures(sorted(
    ['sum', 'x2', 'n_sq', 'cast', 'text', 'flag', 'half', 'var', 'noop', 'by_name', 'x'])),
                  feeds=st.none() | _FEEDS, by_name_keys=st.booleans())
def test_random_fetches_and_feeds_match_session_run(sessions, structure, feeds, by_name_keys):
  """Without feeds, flat structures take fastmts's native fast path; a fetch
  that needs an unfed placeholder must fail the same way in both."""
  leaves, placeholders, stock, monitored = sessions
  fetches = _materialize(structure, leaves)
  feed_dict = None
  if feeds is not None:
    feed_dict = {}
    for key, value in feeds.items():
      tensor = placeholders[key]
      if key == 'x':
        value = np.array(value, np.float32).reshape(-1, 3)
      feed_dict[tensor.name if by_name_keys else tensor] = value
  got = outcome(monitored.run, fetches, feed_dict=feed_dict)
  want = outcome(stock.run, fetches, feed_dict=feed_dict)
  unfed = _unfed_placeholders(structure, feeds)
  if len(unfed) > 1 and isinstance(want, Raised):
    # TF names whichever unfed placeholder its executor reaches first, which
    # varies from run to run (seen under AddressSanitizer): any of them will do.
    assert _unfed_error_of(want) in unfed, want
    assert type(got) is type(want) and _unfed_error_of(got) in unfed, got
    return
  assert_same(got, want, 'fastmts vs Session.run for %r' % (structure,))


# The placeholders (of x, n, s) each leaf needs fed; n has a default.
_NEEDS = {'sum': 'x', 'x2': 'x', 'x': 'x', 'half': 'x', 'text': 's'}


def _leaf_names(structure):
  if isinstance(structure, str):
    yield structure
  else:
    for child in (structure.values() if isinstance(structure, dict) else structure):
      yield from _leaf_names(child)


def _unfed_placeholders(structure, feeds):
  fed = set(feeds or ())
  return {_NEEDS[leaf] for leaf in _leaf_names(structure) if leaf in _NEEDS} - fed


def _unfed_error_of(result):
  """The placeholder an InvalidArgumentError says must be fed, else None."""
  if not isinstance(result, Raised) or result.type is not tf.errors.InvalidArgumentError:
    return None
  match = re.search(r"You must feed a value for placeholder tensor '(\w+)'", result.message)
  return match and match.group(1)


def test_one_structure_changed_between_runs_matches_session_run(sessions):
  """The fast path finds a structure's plan by comparing the caller's list,
  tuple or dict in place with those seen before: the same object changed
  between runs (an item replaced, added or removed, a dict's keys
  reordered) gives that run's results, as TF's Session.run does."""
  leaves, _, stock, monitored = sessions
  a, b, c, noop = leaves['n_sq'], leaves['cast'], leaves['flag'], leaves['noop']
  as_list = [a, b]
  as_dict = {'a': a, 'b': b}
  changes = [
      lambda: None,
      lambda: as_list.__setitem__(1, c),
      lambda: as_list.append(noop),
      lambda: as_list.pop(0),
      lambda: as_dict.__setitem__('b', c),
      lambda: as_dict.__setitem__('c', noop),
      lambda: as_dict.update({'a': as_dict.pop('a')}),  # the same items, 'a' now last
      lambda: as_dict.pop('c'),
  ]
  for i, change in enumerate(changes):
    change()
    for fetches in (as_list, as_dict, tuple(as_list), as_list[0]):
      want = stock.run(fetches)
      for attempt in range(2):  # the second run finds the first one's plan
        assert_same(monitored.run(fetches), want, 'change %d, run %d' % (i, attempt))
