"""Fetch and feed structures -> cached native run plans, and results back.

TF's Session.run re-walks the fetch structure and feed_dict on every call.
Here a structure is resolved once (with TF's own _FetchHandler, so every
structure TF accepts works and every error is TF's) into a native RunPlan,
cached by the identity of its leaves; later steps only look the plan up.
"""
import numpy as np

from tensorflow.python.client import session as _tf_session
from tensorflow.python.framework import indexed_slices
from tensorflow.python.framework import ops
from tensorflow.python.framework import sparse_tensor
from tensorflow.python.ops import variables
from tensorflow.python.util import nest

from fastmts import _native
from fastmts import _tensorflow
from fastmts._internal import c_handles

# Plans are few per session (one per distinct fetch structure); the bound only
# protects against a caller that builds a new structure of new leaves per step.
_MAX_CACHED_PLANS = 512

_LEAF_BASES = (_tensorflow.Tensor, ops.Operation, variables.Variable)
LEAF_TYPES = _LEAF_BASES  # what the native fast path takes as a fetched leaf
_is_leaf_type = {}


def _leaf(t):
  known = _is_leaf_type.get(t)
  if known is None:
    known = _is_leaf_type[t] = issubclass(t, _LEAF_BASES)
  return known


def _structure_key(fetches):
  """A hashable key for a fetch structure, or None if it is not cacheable.

  Leaves are keyed by identity; the plan keeps them alive so an id is never
  reused while its plan is cached. Containers are keyed by type and content,
  so a new list with the same leaves finds the same plan.
  """
  t = type(fetches)
  if t is str:
    return fetches
  if _leaf(t):
    return id(fetches)
  if t is list or t is tuple or (issubclass(t, tuple) and hasattr(t, '_fields')):
    keys = tuple([_structure_key(f) for f in fetches])
    return None if None in keys else (t, keys)
  if t is dict:
    try:
      keys = tuple([(k, _structure_key(v)) for k, v in fetches.items()])
    except TypeError:
      return None
    return None if any(k[1] is None for k in keys) else (t, keys)
  return None


class FetchPlan:
  """A resolved fetch structure: the native plan and how to rebuild results."""
  __slots__ = ('native', 'build', 'source', 'fetched', 'fed_overlap')

  def __init__(self, native, build, source, fetched):
    self.native = native
    self.build = build      # list of fetched values -> caller's structure
    self.source = source    # keeps the keyed leaves alive
    self.fetched = fetched  # refs of the fetched tensors
    self.fed_overlap = {}   # FeedPlan -> does it feed a fetched tensor?


def _make_fetch_plan(graph, tf_session, fetches, fed_values=None):
  # pylint: disable=protected-access
  # (TF's Session.run resolves fetches with its private _FetchHandler: the same, here.)
  handler = _tf_session._FetchHandler(graph, fetches, fed_values or {})
  tensors = handler.fetches()
  targets = handler.targets()
  native = _native.RunPlan([c_handles.output_of(t) for t in tensors],
                           [c_handles.c_op_of(op) for op in targets])
  t = type(fetches)
  if (_leaf(t) or t is str) and not fed_values:
    build = (lambda values: values[0]) if tensors else (lambda values: None)
    if tensors and handler._fetch_handles:
      build = lambda values: handler.build_results(tf_session, values)
  else:
    build = lambda values: handler.build_results(tf_session, values)
  return FetchPlan(native, build, fetches, frozenset(_tensorflow.tensor_ref(t) for t in tensors))


class _FeedConverter:
  """Converts one fed value as TF's Session.run does, with TF's errors."""
  __slots__ = ('tensor', 'np_dtype', 'dims', 'feedable')

  def __init__(self, graph, tensor):
    self.tensor = tensor
    self.np_dtype = tensor.dtype.as_numpy_dtype
    shape = tensor.get_shape()
    self.dims = None if shape.rank is None else tuple(shape.as_list())
    self.feedable = graph.is_feedable(tensor)

  def __call__(self, value, original_key, original_value):
    if isinstance(value, _tensorflow.Tensor):
      passed_to = ('feed' if _tensorflow.FEED_ERRORS_USE_PERCENT_FORMAT
                   else 'argument `feed_dict`')
      raise TypeError(
          'The value of a feed cannot be a tf.Tensor object. Acceptable '
          'feed values include Python scalars, strings, lists, numpy '
          'ndarrays, or TensorHandles. For reference, the tensor object '
          f'was {str(original_value)} which was passed to the {passed_to} '
          f'with key {str(original_key)}.')
    np_dtype = self.np_dtype
    # TF's Session.run converts an int feed with this private function.
    if isinstance(value, int) and _tf_session._convert_to_numpy_obj(  # pylint: disable=protected-access
        np_dtype, value) != value:
      raise TypeError(
          f'Type of feed value {str(value)} with type ' +
          f'{str(type(value))} is not compatible with Tensor type '
          f'{str(np_dtype)}. Try explicitly setting the type of the '
          'feed tensor to a larger type (e.g. int64).')
    if hasattr(value, 'to_numpy_array') and not isinstance(value, np.ndarray):
      np_val = value.to_numpy_array()  # a TensorHandle
    else:
      if type(value) is np.ndarray and value.dtype == np_dtype:
        np_val = value  # what np_asarray returns too, without its checks
      else:
        np_val = _tensorflow.np_asarray(value, np_dtype)
      dims = self.dims
      if dims is not None:
        shape = np_val.shape
        if len(shape) != len(dims) or any(
            d is not None and d != s for d, s in zip(dims, shape)):
          name, shape = self.tensor.name, str(self.tensor.get_shape())
          if _tensorflow.FEED_ERRORS_USE_PERCENT_FORMAT:
            name, shape = repr(name), repr(shape)
          raise ValueError(f'Cannot feed value of shape {str(np_val.shape)} for Tensor '
                           f'{name}, which has shape {shape}')
    if not self.feedable:
      raise ValueError('Tensor %s may not be fed.' % (
          self.tensor if _tensorflow.FEED_ERRORS_USE_PERCENT_FORMAT else self.tensor.name))
    return np_val


class FeedPlan:
  """A resolved feed_dict key set: the native plan and one converter a key."""
  __slots__ = ('native', 'converters', 'keys', '__weakref__')

  def __init__(self, native, converters, keys):
    self.native = native
    self.converters = converters
    self.keys = keys

  @property
  def fed(self):
    """The fed tensors, in the plan's order."""
    return [conv.tensor for conv in self.converters]


def _expand_feed(feed, feed_val):
  """TF's feed expansions: a SparseTensor or IndexedSlices key feeds several."""
  # TF's registry of fetch and feed types (register_session_run_conversion_functions).
  for tensor_type, _, feed_fn, _ in _tf_session._REGISTERED_EXPANSIONS:  # pylint: disable=protected-access
    if isinstance(feed, tensor_type):
      return feed_fn(feed, feed_val)
  raise TypeError(f'{feed} in argument `feed_dict` has invalid type '
                  f'"{type(feed).__name__}"')


def _resolve_feed_key(graph, key):
  try:
    return graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
  except Exception as e:  # pylint: disable=broad-except
    raise TypeError(f'Cannot interpret feed_dict key as Tensor: {e.args[0]}')


def _make_feed_plan(graph, subfeeds):
  """subfeeds: list of (key as given, subfeed key) in feed order."""
  converters = []
  outputs, dtypes, labels = [], [], []
  for key, subfeed in subfeeds:
    t = _resolve_feed_key(graph, subfeed)
    converters.append(_FeedConverter(graph, t))
    outputs.append(c_handles.output_of(t))
    dtypes.append(t.dtype.base_dtype.as_datatype_enum)
    labels.append(repr(key))
  native = _native.FeedPlan(outputs, dtypes, labels)
  return FeedPlan(native, converters, [k for k, _ in subfeeds])


class PlanCache:
  """The plans of one graph and session."""

  def __init__(self, graph, tf_session):
    self._graph = graph
    self._tf_session = tf_session
    self._fetch_plans = {}
    self._feed_plans = {}

  def fetch_plan(self, fetches):
    """The cached plan of the fetch structure `fetches`, resolved by TF's
    own fetch handling the first time it is seen."""
    key = _structure_key(fetches)
    if key is not None:
      plan = self._fetch_plans.get(key)
      if plan is not None:
        return plan
    plan = _make_fetch_plan(self._graph, self._tf_session, fetches)
    if key is not None:
      if len(self._fetch_plans) >= _MAX_CACHED_PLANS:
        self._fetch_plans.clear()
      self._fetch_plans[key] = plan
    return plan

  def fast_layout(self, fetches):
    """(RunPlan, layout) when the results of `fetches` (a leaf, or a flat
    list, tuple or dict of leaves) are each leaf's fetched value, or None for an
    operation: layout[i] is leaf i's index among the plan's fetches, or -1.
    None when the results need TF's own building (e.g. session handles)."""
    t = type(fetches)
    leaves = fetches if t in (list, tuple) else list(fetches.values()) if t is dict else [fetches]
    # pylint: disable=protected-access
    # (TF's Session.run resolves fetches with its private _FetchHandler: the same, here.)
    handler = _tf_session._FetchHandler(self._graph, fetches, {})
    if handler._fetch_handles:
      return None
    position = {_tensorflow.tensor_ref(t): i for i, t in enumerate(handler.fetches())}
    layout = []
    for leaf in leaves:
      element = self._graph.as_graph_element(leaf, allow_tensor=True, allow_operation=True)
      if isinstance(element, ops.Operation):
        layout.append(-1)
      elif _tensorflow.tensor_ref(element) in position:
        layout.append(position[_tensorflow.tensor_ref(element)])
      else:
        return None
    return self.fetch_plan(fetches).native, layout

  def plan_for(self, fetches, feed_dict):
    """(FetchPlan, FeedPlan or None, converted values or None) for one run."""
    fetch_plan = self.fetch_plan(fetches)
    if not feed_dict:
      return fetch_plan, None, None
    feed_plan, values = self.feeds(feed_dict)
    overlap = fetch_plan.fed_overlap.get(feed_plan)
    if overlap is None:
      overlap = fetch_plan.fed_overlap[feed_plan] = any(
          _tensorflow.tensor_ref(t) in fetch_plan.fetched for t in feed_plan.fed)
    if overlap:
      # TF returns the fed value for a tensor that is also fetched, without
      # fetching it; rare, so resolved afresh with this step's values.
      fed_values = {_tensorflow.feed_key(t): v for t, v in zip(feed_plan.fed, values)}
      fetch_plan = _make_fetch_plan(self._graph, self._tf_session, fetches, fed_values)
    return fetch_plan, feed_plan.native, values

  def hook_feeds(self, feed_dict):
    """A hook's SessionRunArgs.feed_dict -> (native FeedPlan, values), or
    (None, None) when it feeds nothing. TF merges hooks' feeds as mappings
    (keys()), so anything else fails there the same way."""
    if not feed_dict:
      return None, None
    feed_dict.keys()
    plan, values = self.feeds(feed_dict)
    return plan.native, values

  def feeds(self, feed_dict):
    """feed_dict -> (FeedPlan, list of converted values)."""
    if type(feed_dict) is not dict:
      nest.flatten_dict_items(feed_dict)  # TF's TypeError for what is no mapping
    simple = True
    key = []
    for k in feed_dict:
      t = type(k)
      if t is str:
        key.append(k)
      elif _leaf(t) and not issubclass(t, (sparse_tensor.SparseTensor,
                                           indexed_slices.IndexedSlices)):
        key.append(id(k))
      else:
        simple = False
        break
    if simple:
      key = tuple(key)
      plan = self._feed_plans.get(key)
      if plan is None:
        plan = _make_feed_plan(self._graph, [(k, k) for k in feed_dict])
        if len(self._feed_plans) >= _MAX_CACHED_PLANS:
          self._feed_plans.clear()
        self._feed_plans[key] = plan
      values = [conv(v, k, v) for conv, k, v in
                zip(plan.converters, plan.keys, feed_dict.values())]
      return plan, values
    # Nested keys (tuples of tensors) and expanding keys (SparseTensor):
    # resolved afresh, exactly as TF does on every call.
    subfeeds, subvalues = [], []
    for feed, feed_val in nest.flatten_dict_items(feed_dict).items():
      for subfeed, subfeed_val in _expand_feed(feed, feed_val):
        subfeeds.append((feed, subfeed))
        subvalues.append((subfeed_val, feed, feed_val))
    plan = _make_feed_plan(self._graph, subfeeds)
    values = [conv(v, k, orig) for conv, (v, k, orig) in
              zip(plan.converters, subvalues)]
    return plan, values
