"""Horovod's TF1 recipes under MonitoredTrainingSession, side by side with stock TF.

Each scenario (tests/horovod_rank.py says what each runs) is launched with
`horovodrun -np N -H localhost:N --gloo` (tests/horovod_utils.py), N = 2 and 3,
once with stock tf.compat.v1.train and once with fastmts (fastmts's
MonitoredTrainingSession, or the stock code after fastmts.patch()), each in a
directory of its own, and compared:

- every rank's results: the loss of every step (or what run_steps returned),
  the variables every rank starts with (after the broadcast) and ends with;
- rank 0's model directory: the checkpoints' data and index files and
  graph.pbtxt byte for byte, the .meta files as MetaGraphDefs, the
  `checkpoint` file's paths (it holds save times), the event records (kind,
  tag, step and value; rates and the input queue's fullness left out);
- what every rank wrote in its own directory (its cwd and TMPDIR): nothing
  under MonitoredTrainingSession; the estimator's temporary model directory
  on ranks other than 0 (Horovod's recipe gives them model_dir=None), the same
  files compared the same way.

Every launch, stock's and fastmts's alike, runs with Horovod's tensor fusion
off (HOROVOD_ENV): with 3 ranks, Gloo's ring allreduce sums an element in an
order set by its offset in the buffer reduced, and whether Horovod's
background thread fuses w's and b's gradients into one buffer depends on
timing; under load a run's values then differed from another's by an ulp
(docs/distributed.md, "Horovod", says what was measured). Unfused, every
allreduce is of one tensor alone, its order fixed, and the comparison stays
bitwise.

On TF >= 2.16 the estimator's tests skip (tf.estimator does not exist there)
and the ranks use a broadcast hook of their own (tests/horovod_rank.py).

Skipped where Horovod is not installed (.ci/horovod builds it, for TF 2.15 or
2.21, and runs this file: docs/distributed.md, "Horovod").
"""

import hashlib
import os
import re

import pytest

hvd = pytest.importorskip(
    'horovod.tensorflow',
    reason='Horovod is not installed (.ci/horovod builds it and runs this file)')

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

import horovod_utils  # pylint: disable=g-import-not-at-top,wrong-import-position
from compat_utils import assert_same  # pylint: disable=g-import-not-at-top,wrong-import-position
from hook_test_utils import events  # pylint: disable=g-import-not-at-top,wrong-import-position

# Hang bounds, not speed: one launch (horovodrun start to exit) of 3 ranks took
# at most 26 s beside two CPU-bound processes on 2 cores with other jobs
# running (9 s for 2 ranks, quiet). A test runs at most two launches.
LAUNCH_BOUND_SECS = 240
pytestmark = [
    pytest.mark.timeout(2 * LAUNCH_BOUND_SECS + 60),
    pytest.mark.skipif(horovod_utils.horovodrun_path() is None,
                       reason='no horovodrun beside this Python'),
]

# Horovod's settings for every launch (stock's and fastmts's): no tensor
# fusion, so that every allreduce sums its elements in one order whatever the
# timing (the module's docstring).
HOROVOD_ENV = {'HOROVOD_FUSION_THRESHOLD': '0'}
# tf.estimator is gone from TF 2.16 on (tensorflow-estimator's last release is
# 2.15): the estimator recipe cannot run there, with stock TF or fastmts.
_NO_ESTIMATOR = tuple(int(v) for v in tf.__version__.split('.')[:2]) >= (2, 16)
_RANK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'horovod_rank.py')
_LAST_STEP = 6
_SAVES = (0, 2, 4, 6)
_MODEL_FILES = ['checkpoint', 'graph.pbtxt'] + [
    'model.ckpt-%d.%s' % (step, ext) for step in _SAVES
    for ext in ('data-00000-of-00001', 'index', 'meta')]
# The keys of a rank's result that name the library (the rest must be equal).
_LIBRARY_KEYS = ('impl', 'session', 'session_coordinator')


def _file_content(path):
  """What is compared of a file: its records (event files), its
  MetaGraphDef (.meta), its checkpoint paths (`checkpoint`), else its bytes'
  digest."""
  name = os.path.basename(path)
  if name == 'checkpoint':
    state = tf.train.get_checkpoint_state(os.path.dirname(path))
    return [os.path.basename(p) for p in state.all_model_checkpoint_paths]
  with open(path, 'rb') as f:
    data = f.read()
  if name.endswith('.meta'):
    data = tf.compat.v1.MetaGraphDef.FromString(data).SerializeToString(deterministic=True)
  return hashlib.sha256(data).hexdigest()


# Timing values (rates are left out by events(rates=False)): how full the
# estimator's input queue was when a summary was taken.
_QUEUE_FULLNESS = re.compile(r'fraction_over_\d+_of_\d+_full$')


def _settled(records):
  """events()'s (number of files, records) with the queue's fullness as None."""
  count, records = records
  return count, [r[:3] + (None,) if r[0] == 'summary' and _QUEUE_FULLNESS.search(r[1]) else r
                 for r in records]


def _tree(directory):
  """{relative path: content} of every file under `directory`; event files
  as one entry per directory (their records; their names hold the host and
  time); an estimator's temporary directory (tempfile.mkdtemp's name) as
  <mkdtemp>."""
  out = {}
  for root, _, files in sorted(os.walk(directory)):
    where = re.sub(r'^tmp/tmp[^/]+', 'tmp/<mkdtemp>', os.path.relpath(root, directory))
    where = '' if where == '.' else where
    for name in sorted(files):
      if not name.startswith('events.out.tfevents.'):
        out[os.path.join(where, name)] = _file_content(os.path.join(root, name))
    if any(name.startswith('events.out.tfevents.') for name in files):
      out[os.path.join(where, 'events.out.tfevents.*')] = _settled(events(root, rates=False))
  return out


def _launch(workdir, ranks, scenario, impl):
  """The ranks' results and what they wrote: {'results': [per rank],
  'model': rank 0's model directory, 'rank<r>': rank r's own directory}."""
  import json  # pylint: disable=g-import-not-at-top
  try:
    horovod_utils.run(ranks, [_RANK_SCRIPT, scenario, impl, workdir],
                      os.path.join(workdir, 'logs'), LAUNCH_BOUND_SECS, env=HOROVOD_ENV)
  except horovod_utils.Failed as e:
    pytest.fail('%s %s with %d ranks: %s' % (scenario, impl, ranks, e), pytrace=False)
  results = []
  for r in range(ranks):
    with open(os.path.join(workdir, 'results', 'rank%d.json' % r)) as f:
      results.append(json.load(f))
  out = {'results': results, 'model': _tree(os.path.join(workdir, 'model'))}
  for r in range(ranks):
    out['rank%d' % r] = _tree(os.path.join(workdir, 'rank%d' % r))
  return out


@pytest.fixture(scope='module')
def stock_runs(tmp_path_factory):
  """stock_runs(scenario, ranks): the stock run's observations, made once."""
  made = {}

  def get(scenario, ranks):
    if (scenario, ranks) not in made:
      workdir = str(tmp_path_factory.mktemp('stock-%s-%d' % (scenario, ranks)))
      made[scenario, ranks] = _launch(workdir, ranks, scenario, 'tf')
    return made[scenario, ranks]

  return get


def _without_library(result):
  return {k: v for k, v in result.items() if k not in _LIBRARY_KEYS}


def _assert_like_stock(got, stock):
  """fastmts's run observed as stock's; each run's session from its library."""
  for r, (g, s) in enumerate(zip(got['results'], stock['results'])):
    assert s['error'] is None and g['error'] is None, (s['error'], g['error'])
    # Horovod's own hook wherever Horovod defines it (TF < 2.16).
    assert s['broadcast_hook'] == ('own' if _NO_ESTIMATOR else 'horovod'), s['broadcast_hook']
    assert s['session'].startswith('tensorflow'), s['session']
    assert g['session'].startswith('fastmts'), g['session']
    assert_same(_without_library(g), _without_library(s), 'rank %d result (vs stock)' % r)
  assert_same({k: v for k, v in got.items() if k != 'results'},
              {k: v for k, v in stock.items() if k != 'results'}, 'files (vs stock)')


def _assert_broadcast(results, keys):
  """Every rank started each session with rank 0's variables and ended with
  the same ones (the allreduce averages the same gradients everywhere)."""
  for key in keys:
    for r in results[1:]:
      assert r[key] == results[0][key], (key, r['rank'])


def _assert_only_rank0_wrote(observed, ranks):
  for r in range(ranks):
    assert observed['rank%d' % r] == {}, ('rank %d wrote' % r, observed['rank%d' % r])


@pytest.mark.parametrize('ranks', [2, 3])
@pytest.mark.parametrize('impl', ['fastmts', 'patched'])
def test_monitored_training_session_recipe(stock_runs, tmp_path, ranks, impl):
  stock = stock_runs('mts', ranks)
  results = stock['results']
  assert [len(r['run_returned']) for r in results] == [_LAST_STEP] * ranks
  assert all(r['run_end']['global_step'] == _LAST_STEP for r in results)
  _assert_broadcast(results, ['run_start', 'run_end'])
  assert sorted(stock['model']) == sorted(_MODEL_FILES + ['events.out.tfevents.*'])
  _assert_only_rank0_wrote(stock, ranks)
  _assert_like_stock(_launch(str(tmp_path), ranks, 'mts', impl), stock)


@pytest.mark.parametrize('ranks', [2, 3])
@pytest.mark.parametrize('impl', ['fastmts', 'patched'])
def test_resume_from_rank0s_checkpoint_then_broadcast(stock_runs, tmp_path, ranks, impl):
  stock = stock_runs('resume', ranks)
  results = stock['results']
  _assert_broadcast(results, ['run0_start', 'run0_end', 'run1_start', 'run1_end'])
  # The second session starts where the first ended, on every rank: rank 0
  # restored it, the others got it by the broadcast.
  assert all(r['run1_start'] == r['run0_end'] for r in results)
  assert [len(r['run1_returned']) for r in results] == [4] * ranks
  assert results[0]['run1_end']['global_step'] == 8
  _assert_only_rank0_wrote(stock, ranks)
  _assert_like_stock(_launch(str(tmp_path), ranks, 'resume', impl), stock)


@pytest.mark.parametrize('ranks', [2, 3])
def test_run_steps_as_the_same_steps_one_by_one(stock_runs, tmp_path, ranks):
  stock = stock_runs('run_steps', ranks)
  results = stock['results']
  assert all(r['run_end']['global_step'] == _LAST_STEP for r in results)
  assert [len(r['run_returned']) for r in results] == [_LAST_STEP // 3] * ranks
  _assert_broadcast(results, ['run_start', 'run_end'])
  _assert_only_rank0_wrote(stock, ranks)
  _assert_like_stock(_launch(str(tmp_path), ranks, 'run_steps', 'fastmts'), stock)


@pytest.mark.skipif(_NO_ESTIMATOR, reason='tf.estimator does not exist in TensorFlow >= 2.16 '
                    '(TF %s here): the estimator recipe cannot run' % tf.__version__)
@pytest.mark.parametrize('ranks', [2, 3])
def test_estimator_recipe_after_patch(stock_runs, tmp_path, ranks):
  stock = stock_runs('estimator', ranks)
  results = stock['results']
  assert [len(r['run_returned']) for r in results] == [_LAST_STEP] * ranks
  _assert_broadcast(results, ['run_start', 'run_end'])
  assert results[0]['run_end']['global_step'] == _LAST_STEP
  assert stock['rank0'] == {}
  # The other ranks' estimators write in a temporary directory of their own.
  for r in range(1, ranks):
    assert sorted(stock['rank%d' % r]) == sorted(
        os.path.join('tmp/<mkdtemp>', name) for name in list(stock['model']))
  _assert_like_stock(_launch(str(tmp_path), ranks, 'estimator', 'patched'), stock)
