"""tf.estimator on fastmts: each scenario runs stock, then after fastmts.patch().

tf.estimator (tensorflow-estimator, shipped up to TF 2.15) builds its sessions
from TF's modules at call time: `training.MonitoredTrainingSession` for
train(), `evaluation._evaluate_once` (a MonitoredSession) for evaluate(),
`tf.compat.v1.train.MonitoredSession` for predict(). After fastmts.patch()
all three are fastmts's. Each scenario here trains, evaluates and predicts
once on stock TF and once patched (unpatch() in a finally), each in a model_dir
of its own, in graph mode as the estimator runs itself (it builds its own
graphs; conftest.py has disabled eager execution, which it does not need), and
compares what a user observes:

* checkpoints: the steps the `checkpoint` state file lists, the files of the
  model_dir tree (event files' names carry host and time, so only their
  number), and every variable's value in the final checkpoint;
* event records of every directory (train and eval): kind, tag, step and
  value, in file order; timing values (`global_step/sec`, the input queue's
  `fraction_..._full`) and the canned linear model's summaries of its
  variables (which race their update) by tag and step only; graph and
  meta-graph events by kind and step only (their cond functions' names come from a process-wide
  counter, so they differ between any two estimators built in one process);
* evaluate()'s metrics dict and predict()'s predictions, types included;
* what hooks and listeners saw (values fetched at each step, listener calls),
  and what LoggingTensorHook and the estimator log.

The estimator module is imported (below) before any patch(), as in a script
that calls patch() after its imports; patch() makes its
tf.estimator.CheckpointSaverHook fastmts's as well (test_patch_aliases.py),
and tf.estimator.CheckpointSaverListener is TF's own in both.

Determinism: a graph-level seed (RunConfig.tf_random_seed), one intra- and
one inter-op thread, small data, few steps, saves by steps.
"""

import os
import random
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import training_util

from compat_utils import assert_same
from hook_test_utils import tf_log

try:
  import tensorflow_estimator  # pylint: disable=g-import-not-at-top,unused-import
  from tensorflow_estimator.python.estimator.inputs.queues import feeding_functions  # pylint: disable=g-import-not-at-top
  _estimator_v1 = tf.compat.v1.estimator
  _estimator = tf.estimator
  _estimator.RunConfig  # pylint: disable=pointless-statement  (loads the lazy module now)
except (ImportError, AttributeError) as _e:
  pytest.skip('tf.estimator is not available (tensorflow-estimator ships with TF up to 2.15; '
              'TF %s has none): %s: %s' % (tf.__version__, type(_e).__name__, _e),
              allow_module_level=True)

v1 = tf.compat.v1
# The global step's read tensor the stock hooks fetch.
_global_step_read = training_util._get_or_create_global_step_read  # pylint: disable=protected-access

pytestmark = pytest.mark.timeout(60)

_SEED = 1234
_SAVE_STEPS = 5
_TRAIN_STEPS = 12
# The `checkpoint` state file's list after train(steps=12) saving every 5 steps.
_CHECKPOINT_STEPS = [0, 5, 10, 12]

# Summaries compared by tag and step only: timing; and the canned linear
# model's summaries of its variables, which read them in the run that updates
# them, before or after the update (so in stock TF too, from run to run).
_UNSETTLED_TAG = re.compile(r'/sec$|fraction_over_\d+_of_\d+_full$|'
                            r'^linear/(bias|fraction_of_zero_weights)$')


# ---------------------------------------------------------------------------
# What a run leaves behind
# ---------------------------------------------------------------------------


def _summary_value(v, model_dir):
  kind = v.WhichOneof('value')
  if kind == 'simple_value':
    return v.simple_value
  if kind == 'tensor':
    value = tf.make_ndarray(v.tensor)
    if value.dtype == object:  # evaluate()'s checkpoint_path
      value = np.vectorize(lambda b: b.replace(model_dir.encode(), b'DIR'), otypes=[object])(value)
    return value
  if kind == 'histo':
    h = v.histo
    return ('histo', h.min, h.max, h.num, h.sum, h.sum_squares, tuple(h.bucket_limit),
            tuple(h.bucket))
  return kind


def _events(directory, model_dir):
  """(number of event files, their records) of one directory; model_dir
  becomes 'DIR' in string values."""
  names = sorted(n for n in os.listdir(directory) if n.startswith('events.out.tfevents.'))
  records = []
  for name in names:
    for e in v1.train.summary_iterator(os.path.join(directory, name)):
      what = e.WhichOneof('what')
      if what == 'summary':
        for v in e.summary.value:
          value = None if _UNSETTLED_TAG.search(v.tag) else _summary_value(v, model_dir)
          records.append(('summary', v.tag, e.step, value))
      elif what == 'session_log':
        s = e.session_log
        records.append(('session_log', v1.SessionLog.SessionStatus.Name(s.status), e.step,
                        os.path.basename(s.checkpoint_path)))
      elif what == 'file_version':
        records.append(('file_version', e.file_version))
      else:
        records.append((what, e.step))
  return len(names), records


def _tree(model_dir):
  """The model_dir tree's files, event files by number only."""
  out = []
  for root, _, files in sorted(os.walk(model_dir)):
    rel = os.path.relpath(root, model_dir)
    out.append((rel, sorted(f for f in files if not f.startswith('events.out.tfevents.')),
                sum(f.startswith('events.out.tfevents.') for f in files)))
  return out


def _final_variables(model_dir):
  reader = tf.train.load_checkpoint(model_dir)
  return {name: (tuple(shape), reader.get_tensor(name))
          for name, shape in tf.train.list_variables(model_dir)}


def _checkpoint_steps(model_dir):
  state = tf.train.get_checkpoint_state(model_dir)
  return [int(p.rsplit('-', 1)[1]) for p in state.all_model_checkpoint_paths]


def _observed(model_dir):
  """What a run wrote: checkpoints, files, events of every directory."""
  # Hooks write events through writers TF caches per directory and flushes
  # when it likes (a final save's CHECKPOINT record may still be buffered):
  # close them all, as at the end of a process.
  v1.summary.FileWriterCache.clear()
  event_dirs = sorted(os.path.relpath(root, model_dir) for root, _, files in os.walk(model_dir)
                      if any(f.startswith('events.out.tfevents.') for f in files))
  events = {d: _events(os.path.join(model_dir, d), model_dir) for d in event_dirs}
  return {
      'checkpoint_steps': _checkpoint_steps(model_dir),
      # The steps of the saves, once each (from the CHECKPOINT session logs).
      'saves': [r[2] for r in events['.'][1] if r[:2] == ('session_log', 'CHECKPOINT')],
      'files': _tree(model_dir),
      'final_variables': _final_variables(model_dir),
      'events': events,
  }


def _log_lines(lines, model_dir):
  """The INFO lines the hooks, sessions and estimator log (tf_log has masked
  elapsed times), with paths, rates and times masked (warnings are left out:
  TF's deprecation warnings are logged once per process, so only the first
  run has them)."""
  out = []
  for level, message in lines:
    if level != 'INFO' or message.startswith('Using config:'):
      continue
    message = message.replace(model_dir, 'DIR')
    message = re.sub(r'global_step/sec: \S+', 'global_step/sec: x', message)
    message = re.sub(r'Inference Time : \S+s', 'Inference Time : xs', message)
    # (TF 1.15 and 2.0 end the starting time with a 'Z', 2.11 and later do not.)
    message = re.sub(r'evaluation at \d{4}-\d\d-\d\d[T-][\d:]+Z?$', 'evaluation at TIME', message)
    out.append(message)
  return out


# ---------------------------------------------------------------------------
# Hooks and listeners that record what they see
# ---------------------------------------------------------------------------


class _Recorder(v1.train.SessionRunHook):
  """Records the values of `fetches` (a callable returning a dict of tensors,
  called in begin()) after every run, and which library's Coordinator the
  session has (fastmts's sessions give hooks fastmts's)."""

  def __init__(self, name, log, fetches, kinds):
    self._name = name
    self._log = log
    self._make_fetches = fetches
    self._kinds = kinds
    self._fetches = None

  def begin(self):
    self._fetches = self._make_fetches()
    self._log.append((self._name, 'begin'))

  def after_create_session(self, session, coord):
    del session
    self._kinds.append((self._name, type(coord).__module__.split('.')[0]))
    self._log.append((self._name, 'after_create_session'))

  def before_run(self, run_context):
    return v1.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    self._log.append((self._name, 'after_run', run_values.results))

  def end(self, session):
    del session
    self._log.append((self._name, 'end'))


def _global_step_fetches():
  # The read the stock hooks fetch (which _after_global_step_reads orders
  # before the train op's increment).
  return {'global_step': _global_step_read()}


class _Listener(_estimator.CheckpointSaverListener):  # TF's class, bound before patch()
  """Records its calls, with the global step they were given."""

  def __init__(self, name, log):
    self._name = name
    self._log = log

  def begin(self):
    self._log.append((self._name, 'begin'))

  def before_save(self, session, global_step_value):
    self._log.append((self._name, 'before_save', int(global_step_value)))

  def after_save(self, session, global_step_value):
    self._log.append((self._name, 'after_save', int(global_step_value)))

  def end(self, session, global_step_value):
    self._log.append((self._name, 'end', int(global_step_value)))


def _saves(log, name):
  return [entry[2] for entry in log if entry[:2] == (name, 'after_save')]


# ---------------------------------------------------------------------------
# Data, input functions, models
# ---------------------------------------------------------------------------


def _data(n=20):
  rng = np.random.RandomState(7)
  x = rng.uniform(-1, 1, size=(n, 3)).astype(np.float32)
  y = (x @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
  classes = (np.digitize(y[:, 0], [-0.5, 0.8])).astype(np.int64)
  return x, y, classes


def _after_global_step_reads(input_fn):
  """input_fn, its features made to wait for the two reads of the global
  step the training hooks fetch: `_get_or_create_global_step_read()`
  (SummarySaverHook, StepCounterHook, CheckpointSaverHook, ours) and the
  variable's own read (the estimator's LoggingTensorHook fetches the
  variable). Nothing orders those reads before the optimizer's increment
  in the estimator's graph (the model_fn does not wait for them, and
  dequeues and IteratorGetNext complete asynchronously), so stock TF itself
  logs `step = 0` in one run and `step = 1` in the next, and writes
  summaries at other steps. Through the features, the increment waits.
  (A tf.data input gets a one-shot iterator here: evaluate() and predict()
  take their tf.data input as it is.)"""

  def wrapped():
    result = input_fn()
    if isinstance(result, tf.data.Dataset):
      result = v1.data.make_one_shot_iterator(result).get_next()
    features, labels = result
    graph = v1.get_default_graph()
    reads = [_global_step_read(), graph.as_graph_element(v1.train.get_global_step())]
    with tf.control_dependencies(reads):
      features = {k: tf.identity(v) for k, v in features.items()}
    return features, labels

  return wrapped


def _dataset_input_fn(x, y, batch_size=4, repeat=True):
  def input_fn():
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y))
    if repeat:
      ds = ds.repeat()
    return ds.batch(batch_size)
  return input_fn


def _config(model_dir, **kwargs):
  settings = dict(
      model_dir=model_dir, tf_random_seed=_SEED,
      session_config=v1.ConfigProto(intra_op_parallelism_threads=1,
                                    inter_op_parallelism_threads=1),
      save_checkpoints_steps=_SAVE_STEPS, save_summary_steps=3, log_step_count_steps=4)
  settings.update(kwargs)
  return _estimator.RunConfig(**settings)


def _model_fn(extra_chief_hooks=(), log=None, kinds=None):
  """A custom model_fn: a linear model trained by gradient descent, with a
  summary of its own, LoggingTensorHook and a recording hook for training,
  a recording hook for evaluation, two metrics and two predictions."""

  def model_fn(features, labels, mode, config):
    del config
    x = features['x']
    # Resource variables, as TF 2.x makes by default: TF 1.15's default, a
    # RefVariable, is read without a copy, so its update races the
    # summaries computed from the read below (stock TF's own w_norm differs
    # from run to run).
    w = v1.get_variable('w', [3, 1], initializer=v1.glorot_uniform_initializer(),
                        use_resource=True)
    b = v1.get_variable('b', [1], initializer=v1.zeros_initializer(), use_resource=True)
    # One read of each, which the updates wait for (through the gradients):
    # summaries and hooks that read the variables again would race them.
    w_read, b_read = tf.identity(w, name='w_read'), tf.identity(b, name='b_read')
    prediction = tf.matmul(x, w_read) + b_read
    predictions = {'y': prediction, 'x_sum': tf.reduce_sum(x, axis=1)}
    if mode == _estimator.ModeKeys.PREDICT:
      return _estimator.EstimatorSpec(mode, predictions=predictions)
    loss = v1.losses.mean_squared_error(labels, prediction)
    v1.summary.scalar('w_norm', tf.norm(w_read))
    v1.summary.histogram('w', w_read)
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=v1.train.get_global_step())
    step_fetches = lambda: {'step': _global_step_read(), 'loss': loss, 'b': b_read}
    training_hooks = [v1.train.LoggingTensorHook({'loss': loss, 'w': w_read}, every_n_iter=3),
                      _Recorder('train', log, step_fetches, kinds)]
    evaluation_hooks = [_Recorder('eval', log, lambda: {'loss': loss}, kinds)]
    return _estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op, predictions=predictions,
        eval_metric_ops={'mae': v1.metrics.mean_absolute_error(labels, prediction),
                         'mean_prediction': v1.metrics.mean(prediction)},
        training_hooks=training_hooks, evaluation_hooks=evaluation_hooks,
        training_chief_hooks=list(extra_chief_hooks))

  return model_fn


def _side_by_side(fastmts, tmp_path, scenario, checkpoint_steps=_CHECKPOINT_STEPS):
  """scenario(model_dir, activate, kinds) on stock TF (activate does
  nothing), then with activate = fastmts.patch (unpatched in a finally);
  checks that the two runs' results are the same (see _check). Returns the
  stock run's."""
  stock_kinds, patched_kinds = [], []
  stock = scenario(str(tmp_path / 'stock'), lambda: None, stock_kinds)
  try:
    patched = scenario(str(tmp_path / 'patched'), fastmts.patch, patched_kinds)
  finally:
    fastmts.unpatch()
  _check(stock, patched, stock_kinds, patched_kinds, checkpoint_steps)
  return stock


def _train_evaluate_predict(est, model_dir, train_input_fn, eval_input_fn, predict_input_fn,
                            kinds, train_kwargs=None):
  """train, evaluate, predict; returns the observed results (kinds: where
  each session's Coordinator came from, appended to)."""
  log = []
  with tf_log() as lines:
    est.train(_after_global_step_reads(train_input_fn),
              hooks=[_Recorder('train-arg', log, _global_step_fetches, kinds)],
              **(train_kwargs or {}))
    metrics = est.evaluate(eval_input_fn,
                           hooks=[_Recorder('eval-arg', log, _global_step_fetches, kinds)])
    predictions = list(est.predict(
        predict_input_fn, hooks=[_Recorder('predict-arg', log, _global_step_fetches, kinds)]))
  result = _observed(model_dir)
  result.update(metrics=metrics, predictions=predictions, hook_log=log,
                log=_log_lines(lines, model_dir))
  return result


def _check(stock, patched, stock_kinds, patched_kinds, checkpoint_steps):
  """The patched run's results are the stock run's; every session of the
  patched run was fastmts's and none of the stock run's; and stock saved the
  checkpoints expected (so that nothing compares vacuously)."""
  assert stock_kinds and all(k == 'tensorflow' for _, k in stock_kinds), stock_kinds
  assert all(k == 'fastmts' for _, k in patched_kinds), patched_kinds
  assert [n for n, _ in patched_kinds] == [n for n, _ in stock_kinds]
  assert stock['checkpoint_steps'] == checkpoint_steps
  assert stock['saves'] == checkpoint_steps
  assert sorted(patched) == sorted(stock)
  # The most telling first: what was saved when, what hooks saw, the outputs.
  first = ['checkpoint_steps', 'saves', 'hook_log', 'model_fn_hooks', 'metrics', 'predictions',
           'final_variables', 'files']
  for key in [k for k in first if k in stock] + [k for k in stock if k not in first]:
    assert_same(patched[key], stock[key], 'patched %s (vs stock)' % key)


# ---------------------------------------------------------------------------
# Canned estimators
# ---------------------------------------------------------------------------


def test_canned_linear_regressor_with_tf_data(fastmts, tmp_path):
  x, y, _ = _data()

  def scenario(model_dir, activate, kinds):
    activate()
    est = _estimator_v1.LinearRegressor([v1.feature_column.numeric_column('x', shape=[3])],
                                        config=_config(model_dir))
    return _train_evaluate_predict(
        est, model_dir, _dataset_input_fn(x, y), _dataset_input_fn(x, y, 8, repeat=False),
        _dataset_input_fn(x, y, 8, repeat=False), kinds,
        dict(steps=_TRAIN_STEPS))

  stock = _side_by_side(fastmts, tmp_path, scenario)
  assert stock['metrics']['global_step'] == _TRAIN_STEPS
  assert len(stock['predictions']) == len(x)


def _adagrad():
  """Adagrad(0.05) of the kind tf.estimator.DNNClassifier takes: in TF 1.15
  (the v1 estimator) a tf.compat.v1.train optimizer; from 2.0 a Keras
  OptimizerV2, which 2.11 and later keep as tf.keras.optimizers.legacy."""
  if tf.__version__.startswith('1.'):
    return v1.train.AdagradOptimizer(0.05)
  optimizers = getattr(tf.keras.optimizers, 'legacy', tf.keras.optimizers)
  return optimizers.Adagrad(0.05)


def test_canned_dnn_classifier_with_numpy_input_fn(fastmts, tmp_path):
  """numpy_input_fn builds a _FeedingQueueRunner: a QueueRunner subclass whose
  threads feed the enqueue op from Python."""
  x, _, classes = _data()

  def scenario(model_dir, activate, kinds):
    activate()
    # An optimizer given by name fails on Python 3.11 with tensorflow-estimator
    # 2.12 (inspect.getargspec), with or without fastmts: a factory instead.
    est = _estimator.DNNClassifier(hidden_units=[4], n_classes=3,
                                   feature_columns=[tf.feature_column.numeric_column('x', [3])],
                                   optimizer=_adagrad, config=_config(model_dir))
    numpy_input = _estimator_v1.inputs.numpy_input_fn
    return _train_evaluate_predict(
        est, model_dir,
        numpy_input({'x': x}, classes, batch_size=4, num_epochs=None, shuffle=False),
        numpy_input({'x': x}, classes, batch_size=8, num_epochs=1, shuffle=False),
        numpy_input({'x': x}, batch_size=8, num_epochs=1, shuffle=False), kinds,
        dict(steps=_TRAIN_STEPS))

  stock = _side_by_side(fastmts, tmp_path, scenario)
  assert stock['metrics']['global_step'] == _TRAIN_STEPS
  assert len(stock['predictions']) == len(x)


# ---------------------------------------------------------------------------
# A custom model_fn
# ---------------------------------------------------------------------------


def test_custom_model_fn_with_tf_data(fastmts, tmp_path):
  x, y, _ = _data()

  def scenario(model_dir, activate, kinds):
    activate()
    log = []
    est = _estimator.Estimator(_model_fn(log=log, kinds=kinds), config=_config(model_dir))
    result = _train_evaluate_predict(
        est, model_dir, _dataset_input_fn(x, y), _dataset_input_fn(x, y, 8, repeat=False),
        _dataset_input_fn(x, y, 8, repeat=False), kinds,
        dict(steps=_TRAIN_STEPS, saving_listeners=[_Listener('listener', log)]))
    result['model_fn_hooks'] = log
    return result

  stock = _side_by_side(fastmts, tmp_path, scenario)
  log = stock['model_fn_hooks']
  assert _saves(log, 'listener') == _CHECKPOINT_STEPS
  # The step each run read before its increment.
  assert [e[2]['step'] for e in log if e[:2] == ('train', 'after_run')] == list(
      range(_TRAIN_STEPS))
  assert sorted(stock['metrics']) == ['global_step', 'loss', 'mae', 'mean_prediction']


class _SeededRandom(random.Random):
  """numpy_input_fn(shuffle=True) starts each epoch of its feeding thread at
  `random.randrange` after `random.seed(None)` (from the OS): this one seeds
  with a constant instead, so that both runs start at the same row."""

  def seed(self, a=None, version=2):  # pylint: disable=arguments-differ
    super().seed(_SEED if a is None else a, version)


@pytest.mark.parametrize('shuffle', [False, True], ids=['in-order', 'shuffled'])
def test_custom_model_fn_with_numpy_input_fn(fastmts, tmp_path, monkeypatch, shuffle):
  """numpy_input_fn's feeding queue runner, in order (FIFO queue, training
  for 12 steps) and shuffled (one thread; a RandomShuffleQueue seeded by the
  graph seed, two epochs of 20 rows: fewer than the queue's
  min_after_dequeue, so every dequeue waits for the whole input and the
  order does not depend on the threads' timing; training ends when the
  input does, after 10 steps of 4)."""
  x, y, _ = _data()
  monkeypatch.setattr(feeding_functions, 'random', _SeededRandom())
  steps = 2 * len(x) // 4 if shuffle else _TRAIN_STEPS

  def scenario(model_dir, activate, kinds):
    activate()
    log = []
    est = _estimator.Estimator(_model_fn(log=log, kinds=kinds),
                               config=_config(model_dir, save_checkpoints_steps=4))
    numpy_input = _estimator_v1.inputs.numpy_input_fn
    if shuffle:
      train_input = numpy_input({'x': x}, y, batch_size=4, num_epochs=2, shuffle=True,
                                num_threads=1)
      train_kwargs = {}
    else:
      train_input = numpy_input({'x': x}, y, batch_size=4, num_epochs=None, shuffle=False)
      train_kwargs = dict(steps=_TRAIN_STEPS)
    result = _train_evaluate_predict(
        est, model_dir, train_input,
        numpy_input({'x': x}, y, batch_size=8, num_epochs=1, shuffle=False),
        numpy_input({'x': x}, batch_size=8, num_epochs=1, shuffle=False), kinds, train_kwargs)
    result['model_fn_hooks'] = log
    return result

  stock = _side_by_side(fastmts, tmp_path, scenario,
                       [0, 4, 8, 10] if shuffle else [0, 4, 8, 12])
  assert stock['metrics']['global_step'] == steps


# ---------------------------------------------------------------------------
# A CheckpointSaverHook of TF's made before patch(), or tf.estimator's after it
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('how', ['made-before-patch-train-hooks',
                                 'made-before-patch-training-chief-hooks',
                                 'tf.estimator-class-after-patch'])
def test_checkpoint_saver_hook_of_tf(fastmts, tmp_path, how):
  """A CheckpointSaverHook given to the estimator (TF's, made before
  patch(); or made afterwards from tf.estimator.CheckpointSaverHook, bound
  when the estimator was imported, which patch() makes fastmts's): the
  estimator must see it as a CheckpointSaverHook and add no saver of its own, so each checkpoint is
  saved once and listeners (the hook's own and train()'s saving_listeners)
  are called once per save."""
  x, y, _ = _data()

  def scenario(model_dir, activate, kinds):
    log = []
    saver_hook = None
    if how.startswith('made-before-patch'):
      saver_hook = v1.train.CheckpointSaverHook(
          model_dir, save_steps=_SAVE_STEPS, listeners=[_Listener('hook-listener', log)])
    activate()
    if saver_hook is None:
      saver_hook = _estimator.CheckpointSaverHook(
          model_dir, save_steps=_SAVE_STEPS, listeners=[_Listener('hook-listener', log)])
      # tf.estimator's alias is patched as tf.compat.v1.train's is.
      assert (type(saver_hook) is fastmts.CheckpointSaverHook) == fastmts.is_patched()
    chief_hooks = [saver_hook] if how == 'made-before-patch-training-chief-hooks' else []
    train_hooks = [] if chief_hooks else [saver_hook]
    est = _estimator.Estimator(_model_fn(chief_hooks, log=log, kinds=kinds),
                               config=_config(model_dir))
    with tf_log() as lines:
      est.train(_after_global_step_reads(_dataset_input_fn(x, y)), steps=_TRAIN_STEPS,
                hooks=train_hooks, saving_listeners=[_Listener('train-listener', log)])
    result = _observed(model_dir)
    result.update(hook_log=log, log=_log_lines(lines, model_dir))
    return result

  stock = _side_by_side(fastmts, tmp_path, scenario)
  assert _saves(stock['hook_log'], 'hook-listener') == _CHECKPOINT_STEPS
  assert _saves(stock['hook_log'], 'train-listener') == _CHECKPOINT_STEPS
