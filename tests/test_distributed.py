"""Real multi-process distributed training on loopback gRPC.

One ps process and up to two worker processes (tests/cluster_utils.py), the
workers training a between-graph replicated model (variables on the ps by
``replica_device_setter``) with ``MonitoredTrainingSession`` of stock TF or
fastmts; plus in-process recovery tests (session re-creation after
AbortedError, fastmts's RecoveryPolicy).

The default training model is deterministic: w (4 floats) on the ps, loss =
sum(w), SGD with learning rate 1 and locking, so every applied step lowers w
by exactly 1 and, without restores, w == -global_step on the ps.

Every cluster lives in a ``with cluster_utils.Cluster(...)`` block that kills
all its processes on the way out, whatever happens in the test.
"""

import os
import time

import pytest
import tensorflow as tf

import cluster_utils
from compat_utils import assert_same
from compat_utils import ckpt_files

try:
  import fastmts
except Exception:  # pylint: disable=broad-except
  fastmts = None

LAST_STEP = 30
# Bounds on a hang, not on slowness, sized for a loaded 2-core machine: beside two
# CPU-bound processes a cluster's processes took up to 22 s to start and report (or to
# end), a worker lived up to 38 s and a cluster test took up to 38 s. Each wait on a
# cluster's processes has _WAIT_HANG_BOUND_SECS, each worker process
# _WORKER_HANG_BOUND_SECS (cluster_utils kills it past this), and a cluster test a bound
# above both, so that theirs fire first, with what the processes printed.
_WAIT_HANG_BOUND_SECS = 120
_WORKER_HANG_BOUND_SECS = 180
_CLUSTER_TEST_BOUND_SECS = 240
PS_VARIABLES = {'global_step': (tf.int64, []), 'w': (tf.float32, [4])}


def _needs_fastmts():
  if fastmts is None:
    pytest.skip('fastmts is not importable')


def _read_ps(c):
  vals = cluster_utils.read_ps_variables(c.cluster_spec, PS_VARIABLES)
  return int(vals['global_step']), [float(x) for x in vals['w']]


def _checkpoint_steps(ckpt_dir):
  """Global steps of the checkpoints listed in ckpt_dir's checkpoint state,
  each one loaded (a restore would fail on an unreadable one)."""
  state = tf.train.get_checkpoint_state(ckpt_dir)
  assert state is not None, os.listdir(ckpt_dir)
  steps = []
  for path in state.all_model_checkpoint_paths:
    reader = tf.train.load_checkpoint(path)
    steps.append(int(reader.get_tensor('global_step')))
    assert reader.get_tensor('w').shape == (4,)
  return steps


def _no_process_left(c):
  assert c.alive_pids() == []


def _start_chief_then_worker(c, impl, chief_opts, worker_opts, workdir):
  """ps + both workers started together (imports overlap); the worker's
  session is created only once the chief's exists, so stock TF's worker
  never sleeps its 30 s recovery_wait_secs (this is not the test of a
  worker waiting for the chief)."""
  chief_go, worker_go = (os.path.join(str(workdir), n)
                         for n in ('chief_go', 'worker_go'))
  c.start_ps()
  c.start_worker(0, impl, dict(chief_opts, go_file=chief_go), timeout=_WORKER_HANG_BOUND_SECS)
  c.start_worker(1, impl, dict(worker_opts, go_file=worker_go), timeout=_WORKER_HANG_BOUND_SECS)
  for name in ('worker0', 'worker1'):
    c.wait_event(name, lambda e: e['event'] == 'waiting_for_go', _WAIT_HANG_BOUND_SECS)
  open(chief_go, 'w').close()
  c.wait_event('worker0', lambda e: e['event'] == 'session_created', _WAIT_HANG_BOUND_SECS)
  open(worker_go, 'w').close()


# ---------------------------------------------------------------------------
# Between-graph training, chief + 1 worker, stock TF and fastmts
# ---------------------------------------------------------------------------

_between_graph = {}


def _observe_between_graph(results, ps_step, ps_w, ckpt_dir):
  """What must be the same for TF and fastmts (nothing timing-dependent)."""
  obs = {}
  total_steps = 0
  for name, r in sorted(results.items()):
    steps = r['steps_run']
    total_steps += steps
    obs[name] = {
        'is_chief': r['is_chief'],
        'error': r['error'],
        'returncode': r['returncode'],
        'ran_steps': steps > 0,
        # StopAtStepHook stopped it at or after last_step.
        'stopped_at_or_after_last_step': r['final']['global_step'] >= LAST_STEP,
        'hooks': {
            hook: {m: (c == steps if m in ('before_run', 'after_run') and c
                       else c) for m, c in counts.items()}
            for hook, counts in r['hooks'].items()},
        'sessions_created': len(r['creation_global_steps']),
        'preemptions': r['preemptions'],
    }
  latest = tf.train.latest_checkpoint(ckpt_dir)
  obs['ps'] = {
      # Each worker stops on its own read (StopAtStepHook re-reads the step
      # only once the stale value it fetched says last_step is near): after
      # the increment that reached LAST_STEP, the other worker can finish
      # its run in flight and run one more, and the one that made it one
      # more, in TF as in fastmts. Usually the overshoot is 0 or 1.
      'global_step_at_most_three_past_last_step': LAST_STEP <= ps_step <= LAST_STEP + 3,
      'w_is_minus_global_step': ps_w == [-float(ps_step)] * 4,
      'global_step_is_sum_of_steps_run': ps_step == total_steps,
  }
  obs['checkpoint_dir'] = {
      'latest_checkpoint_at_or_after_last_step':
          latest is not None and
          int(latest.rsplit('-', 1)[1]) >= LAST_STEP,
      'all_checkpoints_readable': bool(_checkpoint_steps(ckpt_dir)),
      'has_event_file': any(f.startswith('events.out.tfevents')
                            for f in os.listdir(ckpt_dir)),
      'has_graph': 'graph.pbtxt' in ckpt_files(ckpt_dir),
  }
  return obs


_ONE = {'begin': 1, 'after_create_session': 1, 'before_run': True,
        'after_run': True, 'end': 1}
_NONE = dict.fromkeys(_ONE, 0)
_EXPECTED_BETWEEN_GRAPH = {
    'worker0': {'is_chief': True, 'error': None, 'returncode': 0,
                'ran_steps': True, 'stopped_at_or_after_last_step': True,
                'hooks': {'all': _ONE, 'chief_only': _ONE},
                'sessions_created': 1, 'preemptions': []},
    'worker1': {'is_chief': False, 'error': None, 'returncode': 0,
                'ran_steps': True, 'stopped_at_or_after_last_step': True,
                'hooks': {'all': _ONE, 'chief_only': _NONE},
                'sessions_created': 1, 'preemptions': []},
    'ps': {'global_step_at_most_three_past_last_step': True,
           'w_is_minus_global_step': True,
           'global_step_is_sum_of_steps_run': True},
    'checkpoint_dir': {'latest_checkpoint_at_or_after_last_step': True,
                       'all_checkpoints_readable': True,
                       'has_event_file': True, 'has_graph': True},
}


@pytest.mark.timeout(_CLUSTER_TEST_BOUND_SECS)
@pytest.mark.parametrize('impl', ['tf', 'fastmts'])
def test_between_graph_chief_and_worker(impl, tmp_path):
  if impl == 'fastmts':
    _needs_fastmts()
  ckpt_dir = str(tmp_path / 'ckpt')
  common = {'last_step': LAST_STEP, 'step_sleep': 0.05}
  with cluster_utils.Cluster(tmp_path / 'cluster') as c:
    _start_chief_then_worker(
        c, impl, dict(common, checkpoint_dir=ckpt_dir, save_checkpoint_steps=10,
                      save_summaries_steps=10), common, tmp_path)
    results = c.wait_results(['worker0', 'worker1'], timeout=_WAIT_HANG_BOUND_SECS)
    ps_step, ps_w = _read_ps(c)
  _no_process_left(c)
  obs = _observe_between_graph(results, ps_step, ps_w, ckpt_dir)
  _between_graph[impl] = obs
  assert_same(obs, _EXPECTED_BETWEEN_GRAPH, '%s observed' % impl)
  # Each worker saw the other's steps: the final value it read after its
  # own close is at least last_step, at most the ps's final value.
  for r in results.values():
    assert LAST_STEP <= r['final']['global_step'] <= ps_step


def test_between_graph_tf_and_fastmts_agree():
  if set(_between_graph) != {'tf', 'fastmts'}:
    pytest.skip('needs both between-graph runs (got %s)' % sorted(_between_graph))
  assert_same(_between_graph['fastmts'], _between_graph['tf'], 'fastmts vs tf')


@pytest.mark.timeout(_CLUSTER_TEST_BOUND_SECS)
@pytest.mark.parametrize('impl', ['tf', 'fastmts'])
def test_worker_without_chief_times_out(impl, tmp_path):
  """No chief ever comes: the worker's MonitoredTrainingSession raises TF's
  DeadlineExceededError after max_wait_secs (stock TF at once, since
  max_wait_secs < recovery_wait_secs; fastmts after polling ~max_wait_secs)."""
  if impl == 'fastmts':
    _needs_fastmts()
  with cluster_utils.Cluster(tmp_path) as c:
    c.start_ps()
    c.start_worker(1, impl, {'last_step': 5, 'max_wait_secs': 3}, timeout=_WORKER_HANG_BOUND_SECS)
    r = c.wait_results(['worker1'], timeout=_WAIT_HANG_BOUND_SECS)['worker1']
  _no_process_left(c)
  assert_same(
      {'error': r['error'], 'hooks': r['hooks'], 'steps_run': r['steps_run'],
       'returncode': r['returncode']},
      {'error': {'type': 'DeadlineExceededError',
                 'message': 'Session was not ready after waiting 3 secs.'},
       'hooks': {'all': {'begin': 1, 'after_create_session': 0,
                         'before_run': 0, 'after_run': 0, 'end': 0},
                 'chief_only': _NONE},
       'steps_run': 0, 'returncode': 1})
  waited = r['t_closed'] - r['t_mts_start']
  assert waited < 3 + 10, waited


# ---------------------------------------------------------------------------
# A worker that starts before the chief (fastmts only: stock TF's worker
# sleeps recovery_wait_secs = 30 s between readiness checks)
# ---------------------------------------------------------------------------

@pytest.mark.timeout(_CLUSTER_TEST_BOUND_SECS)
def test_worker_started_before_chief_starts_promptly(tmp_path):
  _needs_fastmts()
  worker_go = str(tmp_path / 'worker_go')
  chief_go = str(tmp_path / 'chief_go')
  with cluster_utils.Cluster(tmp_path / 'cluster') as c:
    c.start_ps()
    c.start_worker(1, 'fastmts', {'last_step': 10, 'go_file': worker_go},
                   timeout=_WORKER_HANG_BOUND_SECS)
    c.start_worker(0, 'fastmts', {'last_step': 10, 'go_file': chief_go},
                   timeout=_WORKER_HANG_BOUND_SECS)
    for name in ('worker0', 'worker1'):
      c.wait_event(name, lambda e: e['event'] == 'waiting_for_go', _WAIT_HANG_BOUND_SECS)
    open(worker_go, 'w').close()   # the worker starts waiting for the chief
    c.wait_event('worker1', lambda e: e['event'] == 'creating_session', _WAIT_HANG_BOUND_SECS)
    time.sleep(1.0)
    open(chief_go, 'w').close()    # ~1 s later the chief creates the model
    results = c.wait_results(['worker0', 'worker1'], timeout=_WAIT_HANG_BOUND_SECS)
  _no_process_left(c)
  chief, worker = results['worker0'], results['worker1']
  assert chief['error'] is None and worker['error'] is None, results
  chief_ready = chief['t_first_create']
  worker_ready = worker['t_first_create']
  # The worker really waited for the chief...
  assert worker['t_mts_start'] < chief_ready - 0.8, results
  # ...and noticed it promptly (stock TF: up to 30 s).
  assert worker_ready - chief_ready < 2.0, (
      'worker started %.2f s after the chief was ready'
      % (worker_ready - chief_ready))
  assert worker['final']['global_step'] >= 10


# ---------------------------------------------------------------------------
# SyncReplicasOptimizer (fastmts)
# ---------------------------------------------------------------------------

_sync_close_secs = {}


@pytest.mark.timeout(_CLUSTER_TEST_BOUND_SECS)
@pytest.mark.parametrize('impl', ['tf', 'fastmts'])
def test_sync_replicas_trains_and_closes_promptly(impl, tmp_path):
  """Two gradients aggregated per global step (the chief alone can supply
  both: the init op queues 2 tokens). After the last step the chief's
  queue runner is blocked in take_grad: stock TF's close waits out the whole
  stop_grace_period_secs for it (120 s by default, so the stock run here
  uses 3 s); fastmts must close promptly with the default 120 s."""
  if impl == 'fastmts':
    _needs_fastmts()
  last_step = 10
  ckpt_dir = str(tmp_path / 'ckpt')
  opts = {'last_step': last_step, 'sync_replicas': True, 'step_sleep': 0.05}
  if impl == 'tf':
    opts['stop_grace_period_secs'] = 3
  with cluster_utils.Cluster(tmp_path / 'cluster') as c:
    _start_chief_then_worker(c, impl, dict(opts, checkpoint_dir=ckpt_dir),
                             opts, tmp_path)
    results = c.wait_results(['worker0', 'worker1'], timeout=_WAIT_HANG_BOUND_SECS)
    ps_step, ps_w = _read_ps(c)
  _no_process_left(c)
  _sync_close_secs[impl] = {n: round(r['t_closed'] - r['t_loop_done'], 2)
                            for n, r in results.items()}
  for name, r in results.items():
    assert r['error'] is None and r['returncode'] == 0, (name, r)
    assert r['final']['global_step'] == last_step, (name, r)
    exit_after = r['exit_time'] - r['t_last_step']
    assert exit_after < 15, '%s exited %.1f s after its last step (close %.1f s)' % (
        name, exit_after, r['t_closed'] - r['t_loop_done'])
  # Every global step aggregated one gradient (of 1) from each replica.
  assert ps_step == last_step
  assert ps_w == [-float(last_step)] * 4
  assert max(_checkpoint_steps(ckpt_dir)) == last_step
  if impl == 'fastmts':
    # Not a benchmark: the chief's close must not sit out a grace period.
    assert _sync_close_secs[impl]['worker0'] < 10, _sync_close_secs


# ---------------------------------------------------------------------------
# Recovery: in one process
# ---------------------------------------------------------------------------

def _abort_scenario(impl, workdir, raise_on=(4,), last_step=8):
  """A hook's before_run raises AbortedError on the calls in `raise_on`
  (1-based); returns the hook call log, run results and checkpoints."""
  log, results = [], []
  with tf.Graph().as_default():
    gs = tf.compat.v1.train.get_or_create_global_step()
    train = tf.compat.v1.assign_add(gs, 1)

    class AbortingHook(impl.SessionRunHook):
      calls = 0

      def begin(self):
        log.append(('begin',))

      def after_create_session(self, session, coord):
        log.append(('after_create_session', int(session.run(gs))))

      def before_run(self, run_context):
        self.calls += 1
        log.append(('before_run', self.calls))
        if self.calls in raise_on:
          raise tf.errors.AbortedError(None, None, 'abort')

      def after_run(self, run_context, run_values):
        # Read after the step: a fetch of gs in the step's own run would race
        # with the assign_add.
        log.append(('after_run', int(run_context.session.run(gs))))

      def end(self, session):
        log.append(('end', int(session.run(gs))))

    with impl.MonitoredTrainingSession(
        checkpoint_dir=workdir, save_checkpoint_steps=2,
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=last_step),
               AbortingHook()]) as sess:
      while not sess.should_stop():
        results.append(sess.run(train))
  latest = tf.train.latest_checkpoint(workdir)
  return {'log': log, 'results': results, 'ckpts': ckpt_files(workdir),
          'latest': os.path.basename(latest)}


@pytest.mark.timeout(60)
def test_aborted_in_hook_recreates_session(check):
  """TF's recovery: the session is closed and re-created (the chief restores
  the last checkpoint, step 2), the hooks see after_create_session again, and
  training completes."""
  result = check(_abort_scenario)
  log = result['log']
  assert log[:2] == [('begin',), ('after_create_session', 0)]
  assert ('after_create_session', 2) in log
  assert log[-1] == ('end', 8)
  assert result['latest'] == 'model.ckpt-8'


def _policy(**kw):
  return fastmts.RecoveryPolicy(**kw)


@pytest.mark.timeout(60)
@pytest.mark.parametrize('method', ['run', 'run_steps'])
@pytest.mark.parametrize('where', ['before_run', 'after_run'])
def test_recovery_policy_gives_up_after_max_recreations(tmp_path, method, where):
  """Also when the error comes after the step ran (after_run): a step whose
  hooks failed is not one that ran, so it does not reset the count."""
  _needs_fastmts()
  log = []
  with tf.Graph().as_default():
    gs = tf.compat.v1.train.get_or_create_global_step()
    train = tf.compat.v1.assign_add(gs, 1)

    class AlwaysAbort(fastmts.SessionRunHook):

      def after_create_session(self, session, coord):
        log.append('after_create_session')

      def before_run(self, run_context):
        log.append('before_run')
        if where == 'before_run':
          raise tf.errors.AbortedError(None, None, 'abort')

      def after_run(self, run_context, run_values):
        raise tf.errors.AbortedError(None, None, 'abort')

    policy = _policy(max_recreations=2, backoff_secs=0.1, max_backoff_secs=1.0)
    start = None
    with pytest.raises(tf.errors.AbortedError, match='abort'):
      with fastmts.MonitoredTrainingSession(
          checkpoint_dir=str(tmp_path), hooks=[AlwaysAbort()],
          recovery=policy) as sess:
        start = time.monotonic()
        if method == 'run':
          sess.run(train)
        else:
          sess.run_steps(train, max_steps=10)
    elapsed = time.monotonic() - start
  # The first session and 2 re-creations, each tried once.
  assert log == ['after_create_session', 'before_run'] * 3
  # Backoff before re-creation 1 and 2: 0.1 s then 0.2 s.
  assert elapsed >= 0.3 * 0.95, elapsed


@pytest.mark.timeout(60)
def test_recovery_policy_backoff_is_capped(tmp_path):
  """The pause between an abort and the next creation's start (not the
  creation itself, whose length a loaded machine stretches) is the capped
  backoff each time: 0.5, 0.5, 0.5 (uncapped: 0.5, 1.0, 2.0)."""
  _needs_fastmts()
  events = []
  with tf.Graph().as_default():
    gs = tf.compat.v1.train.get_or_create_global_step()
    train = tf.compat.v1.assign_add(gs, 1)

    class AlwaysAbort(fastmts.SessionRunHook):

      def before_run(self, run_context):
        events.append(('abort', time.monotonic()))
        raise tf.errors.AbortedError(None, None, 'abort')

    class TimedCreator(fastmts.ChiefSessionCreator):

      def create_session(self):
        events.append(('create', time.monotonic()))
        return super().create_session()

    policy = _policy(max_recreations=3, backoff_secs=0.5, max_backoff_secs=0.5)
    sess = fastmts.MonitoredSession(session_creator=TimedCreator(), hooks=[AlwaysAbort()],
                                    recovery=policy)
    try:
      with pytest.raises(tf.errors.AbortedError):
        sess.run(train)
    finally:
      sess.close()
  assert [kind for kind, _ in events] == ['create', 'abort'] * 4, events
  pauses = [events[i + 1][1] - events[i][1] for i in range(1, len(events) - 1, 2)]
  assert all(0.48 <= p < 0.95 for p in pauses), pauses


@pytest.mark.timeout(60)
@pytest.mark.parametrize('factory', ['MonitoredTrainingSession', 'MonitoredSession'])
def test_recovery_policy_successful_step_resets_count(tmp_path, factory):
  """Aborting every other step: never two re-creations in a row, so even
  max_recreations=1 trains to completion (6 aborts, 6 re-creations, each
  restoring the checkpoint of the step before)."""
  _needs_fastmts()
  ckpt_dir = str(tmp_path)
  log, results = [], []
  with tf.Graph().as_default():
    gs = tf.compat.v1.train.get_or_create_global_step()
    train = tf.compat.v1.assign_add(gs, 1)

    class AbortEveryOther(fastmts.SessionRunHook):
      calls = 0

      def after_create_session(self, session, coord):
        log.append(('create', int(session.run(gs))))

      def before_run(self, run_context):
        self.calls += 1
        if self.calls % 2:
          raise tf.errors.AbortedError(None, None, 'abort')

    hooks = [tf.compat.v1.train.StopAtStepHook(last_step=6), AbortEveryOther()]
    policy = _policy(max_recreations=1, backoff_secs=0.01, max_backoff_secs=0.05)
    if factory == 'MonitoredTrainingSession':
      sess = fastmts.MonitoredTrainingSession(
          checkpoint_dir=ckpt_dir, save_checkpoint_steps=1, hooks=hooks,
          recovery=policy)
    else:
      scaffold = fastmts.Scaffold()
      sess = fastmts.MonitoredSession(
          session_creator=fastmts.ChiefSessionCreator(
              scaffold=scaffold, checkpoint_dir=ckpt_dir),
          hooks=hooks + [tf.compat.v1.train.CheckpointSaverHook(
              ckpt_dir, save_steps=1, scaffold=scaffold)],
          recovery=policy)
    with sess:
      while not sess.should_stop():
        results.append(int(sess.run(train)))
  assert results == [1, 2, 3, 4, 5, 6]
  assert log == [('create', s) for s in (0, 0, 1, 2, 3, 4, 5)]


def test_recovery_is_keyword_only():
  _needs_fastmts()
  policy = _policy(max_recreations=1)
  with pytest.raises(TypeError):
    fastmts.MonitoredSession(None, [], 120, policy)  # pylint: disable=too-many-function-args


# ---------------------------------------------------------------------------
# Recovery: the ps process killed and restarted mid-training (fastmts)
# ---------------------------------------------------------------------------

@pytest.mark.timeout(_CLUSTER_TEST_BOUND_SECS)
def test_ps_restart_mid_training_recovers(tmp_path):
  _needs_fastmts()
  last_step = 60
  ckpt_dir = str(tmp_path / 'ckpt')
  opts = {'last_step': last_step, 'step_sleep': 0.1, 'step_events': True}
  with cluster_utils.Cluster(tmp_path / 'cluster') as c:
    c.start_ps()
    c.start_worker(0, 'fastmts', dict(opts, checkpoint_dir=ckpt_dir,
                                      save_checkpoint_steps=5),
                   timeout=_WORKER_HANG_BOUND_SECS)
    c.start_worker(1, 'fastmts', opts, timeout=_WORKER_HANG_BOUND_SECS)
    c.wait_event('worker0', lambda e: e['event'] == 'step' and
                 (e['global_step'] or 0) >= 15, _WAIT_HANG_BOUND_SECS)
    # Worker 1 too has run steps on this ps (a worker that had not run one
    # yet would meet the new ps as its first, without an error).
    c.wait_event('worker1', lambda e: e['event'] == 'step', _WAIT_HANG_BOUND_SECS)
    assert max(_checkpoint_steps(ckpt_dir)) >= 5
    t_kill = time.time()
    c.restart_ps()
    results = c.wait_results(['worker0', 'worker1'], timeout=_WAIT_HANG_BOUND_SECS)
    ps_step, _ = _read_ps(c)
  _no_process_left(c)
  chief, worker = results['worker0'], results['worker1']
  for name, r in results.items():
    assert r['error'] is None and r['returncode'] == 0, (name, r)
    assert r['final']['global_step'] >= last_step, (name, r)
    # Its runs failed with the ps gone, and the session was re-created.
    assert r['preemptions'], (name, r)
    assert set(r['preemptions']) <= {'UnavailableError', 'AbortedError'}, r
    assert len(r['creation_global_steps']) >= 2, (name, r)
    assert r['t_last_step'] > t_kill
  # The chief restored its last checkpoint (not a fresh initialization).
  assert all(s >= 5 for s in chief['creation_global_steps'][1:]), chief
  assert ps_step >= last_step
  steps = _checkpoint_steps(ckpt_dir)   # every listed checkpoint loads
  assert max(steps) >= last_step, steps
