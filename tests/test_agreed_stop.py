"""fastmts.AgreedStop: a stop every rank of a data-parallel job agrees on.

In one process, with an engine of the test's own (the vote is the maximum of
this rank's wish and a variable that stands for the other ranks' wishes, set
by a hook at a chosen step): the stop step against stock TF's, the vote every
n steps, hooks' requests, the preemption signal, a peer's preemption, the
native loop, and off (nothing added to the graph or the hooks). Then real
ranks on a loopback cluster with TF's collective ops (tests/agreed_stop_rank.py),
2 and 3 processes: a StopAtStepHook on one rank only, and SIGTERMs to a random
rank at a random moment (FASTMTS_AGREED_STOP_TRIALS trials, 2 by default;
docs/distributed.md gives the 20-trial run). Horovod's engine, where Horovod is
importable, runs the same rank script under horovodrun (test_horovod_*: .ci/horovod
runs them, -k horovod, on TF 2.15 and 2.21).
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import cluster_utils
import fastmts

tf1 = tf.compat.v1
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'agreed_stop_rank.py')
TRIALS = int(os.environ.get('FASTMTS_AGREED_STOP_TRIALS', '2'))
# Hang bounds (docs/design.md, "Hang bounds in tests"), for a loaded 2-core machine:
# a rank's start (TF's import, the server) took up to 25 s there and a trial of 3
# ranks up to 40 s; each rank is killed past _RANK_HANG_BOUND_SECS, each wait on the
# ranks below it, each test above the sum of its waits.
_RANK_HANG_BOUND_SECS = 150
_WAIT_SECS = 120
_CLUSTER_TEST_SECS = 300
_LOCAL_TEST_SECS = 120


class _PeerEngine:
  """An engine in one process: the vote is the maximum of this rank's wish
  and `peer`, an int32 variable standing for the other ranks' wishes."""

  def __init__(self, peer):
    self.peer = peer

  def build_vote(self, wish):
    return tf.maximum(wish, self.peer.read_value())


class _SetAtStep(tf1.train.SessionRunHook):
  """Runs `op` (in its own session.run) after the session's `step`-th step;
  records should_stop() as seen by the caller through `seen`."""

  def __init__(self, step, op=None, stop=False, kill=None):
    self._step, self._op, self._stop, self._kill = step, op, stop, kill
    self.steps = 0

  def after_run(self, run_context, run_values):
    self.steps += 1
    if self.steps != self._step:
      return
    if self._op is not None:
      run_context.session.run(self._op)
    if self._stop:
      run_context.request_stop()
    if self._kill is not None:
      os.kill(os.getpid(), self._kill)


def _graph():
  """global_step and a train op; the peer's wish variable and its setters."""
  global_step = tf1.train.get_or_create_global_step()
  train_op = global_step.assign_add(1)
  peer = tf1.get_variable('peer_wish', [], tf.int32, tf1.zeros_initializer(),
                          collections=[tf1.GraphKeys.LOCAL_VARIABLES], use_resource=True)
  return global_step, train_op, peer


def _train(sess, train_op, loop='run', bound=1000):
  """Trains until stop (or `bound`); the steps run and when should_stop()
  first said True."""
  if loop == 'run_steps':
    sess.run_steps(train_op, max_steps=bound)
    return None
  steps = 0
  while not sess.should_stop() and steps < bound:
    sess.run(train_op)
    steps += 1
  return steps


def _run_fastmts(hooks_fn, every_n_steps=1, loop='run', agreed=True, **kwargs):
  """A fastmts MonitoredTrainingSession on a fresh graph: (steps, global step,
  agreed_stop record, preemption record)."""
  with tf.Graph().as_default():
    global_step, train_op, peer = _graph()
    hooks, extra = hooks_fn(peer)
    final = tf1.train.FinalOpsHook(global_step)
    agreed_stop = fastmts.AgreedStop(_PeerEngine(peer), every_n_steps) if agreed else None
    with fastmts.MonitoredTrainingSession(hooks=hooks + [final], agreed_stop=agreed_stop,
                                          log_step_count_steps=None,
                                          save_summaries_steps=None, **kwargs) as sess:
      steps = _train(sess, train_op, loop)
    return steps, int(final.final_ops_values), sess.agreed_stop, sess.preemption, extra


def _run_tf(hooks_fn):
  with tf.Graph().as_default():
    global_step, train_op, peer = _graph()
    hooks, _ = hooks_fn(peer)
    final = tf1.train.FinalOpsHook(global_step)
    with tf1.train.MonitoredTrainingSession(hooks=hooks + [final], log_step_count_steps=None,
                                            save_summaries_steps=None) as sess:
      steps = _train(sess, train_op)
    return steps, int(final.final_ops_values)


def _stop_at(last_step):
  return lambda peer: ([tf1.train.StopAtStepHook(last_step=last_step)], None)


@pytest.mark.timeout(_LOCAL_TEST_SECS)
@pytest.mark.parametrize('hooks_fn', [
    _stop_at(7),
    lambda peer: ([_SetAtStep(5, stop=True)], None),
    lambda peer: ([tf1.train.StopAtStepHook(last_step=9), _SetAtStep(4, stop=True)], None),
], ids=['stop_at_step', 'python_hook_request', 'two_hooks'])
def test_every_step_vote_stops_where_stock_stops_when_the_ranks_decide_alike(hooks_fn):
  steps, global_step, record, preemption, _ = _run_fastmts(hooks_fn)
  assert (steps, global_step) == _run_tf(hooks_fn)
  assert (record.step, record.exit_code, record.preempted) == (steps, 0, False)
  assert preemption is None


@pytest.mark.timeout(_LOCAL_TEST_SECS)
@pytest.mark.parametrize('loop', ['run', 'run_steps'])
@pytest.mark.parametrize('last_step, every_n_steps, stop_step',
                         [(7, 4, 8), (8, 4, 8), (1, 5, 5), (12, 1, 12)])
def test_a_wish_waits_for_the_next_vote(loop, last_step, every_n_steps, stop_step):
  _, global_step, record, _, _ = _run_fastmts(_stop_at(last_step), every_n_steps, loop)
  assert (global_step, record.step) == (stop_step, stop_step)


@pytest.mark.timeout(_LOCAL_TEST_SECS)
@pytest.mark.parametrize('loop', ['run', 'run_steps'])
def test_a_peers_wish_stops_this_rank_at_the_vote(loop):
  def hooks(peer):
    return [_SetAtStep(6, op=peer.assign(1))], None
  _, global_step, record, preemption, _ = _run_fastmts(hooks, 3, loop)
  assert (global_step, record.step, record.exit_code, preemption) == (6, 6, 0, None)


@pytest.mark.timeout(_LOCAL_TEST_SECS)
def test_nan_loss_without_failing_is_a_wish():
  with tf.Graph().as_default():
    global_step, _, peer = _graph()
    loss = tf1.where(global_step >= 4, np.float32(np.nan), np.float32(1.0))
    train_op = global_step.assign_add(1)
    hooks = [tf1.train.NanTensorHook(loss, fail_on_nan_loss=False)]
    with fastmts.MonitoredTrainingSession(
        hooks=hooks, agreed_stop=fastmts.AgreedStop(_PeerEngine(peer), 2),
        log_step_count_steps=None, save_summaries_steps=None) as sess:
      results = []
      while not sess.should_stop():
        results.append(sess.run([train_op, loss])[0])
  # The loss fetched with step 5's run is NaN (the step read before its
  # increment is 4); the vote after step 6 stops the ranks.
  assert results == [1, 2, 3, 4, 5, 6]


@pytest.mark.timeout(_LOCAL_TEST_SECS)
@pytest.mark.parametrize('loop', ['run', 'run_steps'])
def test_sigterm_is_a_wish_and_the_chief_checkpoints_the_agreed_step(tmp_path, loop):
  ckpt = str(tmp_path)

  def hooks(peer):
    return [_SetAtStep(7, kill=signal.SIGTERM)], None
  _, global_step, record, preemption, _ = _run_fastmts(
      hooks, 5, loop, checkpoint_dir=ckpt, preemption=True, save_checkpoint_secs=None)
  assert (global_step, record.step, record.exit_code) == (10, 10, 143)
  assert (preemption.step, preemption.by_peer, preemption.exit_code) == (10, False, 143)
  assert tf1.train.latest_checkpoint(ckpt).endswith('-10')
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.timeout(_LOCAL_TEST_SECS)
@pytest.mark.parametrize('agreed', [False, True], ids=['alone', 'agreed'])
def test_the_agreed_stop_decides_what_a_signal_stops(agreed):
  """What a signal means to the session is the agreed stop's decision
  (session_agreement.stop_on_signal): without one, the session and its
  coordinator stop after the signalled step; with one, the signal is this
  rank's wish: both go on to the vote (every 4 steps here), after which
  the session stops, and its coordinator at close."""
  seen = []
  with tf.Graph().as_default():
    _, train_op, peer = _graph()
    agreed_stop = fastmts.AgreedStop(_PeerEngine(peer), 4) if agreed else None
    with fastmts.MonitoredTrainingSession(hooks=[_SetAtStep(3, kill=signal.SIGTERM)],
                                          agreed_stop=agreed_stop, preemption=True,
                                          log_step_count_steps=None,
                                          save_summaries_steps=None) as sess:
      while not sess.should_stop():
        sess.run(train_op)
        seen.append((sess.should_stop(), sess.coordinator.should_stop()))
  if agreed:
    assert seen == [(False, False)] * 3 + [(True, False)]
    assert sess.agreed_stop.exit_code == 143
  else:
    assert seen == [(False, False)] * 2 + [(True, True)]
  assert (sess.preemption.exit_code, sess.preemption.by_peer) == (143, False)
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.timeout(_LOCAL_TEST_SECS)
def test_a_peers_preemption_is_this_ranks_and_the_chief_checkpoints(tmp_path):
  ckpt = str(tmp_path)

  def hooks(peer):
    return [_SetAtStep(4, op=peer.assign(143))], None
  _, global_step, record, preemption, _ = _run_fastmts(
      hooks, 1, checkpoint_dir=ckpt, preemption=True, save_checkpoint_secs=None)
  assert (global_step, record.exit_code, preemption.step) == (4, 143, 4)
  assert preemption.by_peer and preemption.signal == signal.SIGTERM
  assert tf1.train.latest_checkpoint(ckpt).endswith('-4')


@pytest.mark.timeout(_LOCAL_TEST_SECS)
def test_should_stop_stays_false_until_the_vote():
  seen = []

  class _Watch(tf1.train.SessionRunHook):
    def after_run(self, run_context, run_values):
      seen.append(run_context.stop_requested)

  with tf.Graph().as_default():
    _, train_op, peer = _graph()
    with fastmts.MonitoredSession(hooks=[tf1.train.StopAtStepHook(last_step=2), _Watch()],
                                  agreed_stop=fastmts.AgreedStop(_PeerEngine(peer), 4)) as sess:
      should_stop = []
      while not sess.should_stop():
        sess.run(train_op)
        should_stop.append(sess.should_stop())
  assert should_stop == [False, False, False, True]
  assert seen == [False, True, True, True]  # the hooks' run context is TF's


@pytest.mark.timeout(_LOCAL_TEST_SECS)
def test_off_adds_nothing_to_the_graph_or_the_hooks():
  def session_of(impl, **kwargs):
    graph = tf.Graph()
    with graph.as_default():
      _graph()
      sess = impl.MonitoredTrainingSession(log_step_count_steps=None, **kwargs)
      ops = sorted(op.name for op in graph.get_operations())
      hooks = [type(h).__name__ for h in sess._hooks]  # pylint: disable=protected-access
      sess.close()
    return ops, hooks, sess

  tf_ops, tf_hooks, _ = session_of(tf1.train)
  ops, hooks, sess = session_of(fastmts, agreed_stop=None)
  assert (ops, hooks) == (tf_ops, tf_hooks)
  assert sess.agreed_stop is None
  assert sess._hooked.agreement is None  # pylint: disable=protected-access
  on_ops, _, _ = session_of(fastmts, agreed_stop=fastmts.AgreedStop(
      fastmts.CollectiveEngine(1)))
  assert [o for o in on_ops if o not in ops] and all(
      o.startswith('fastmts_agreed_stop/') for o in on_ops if o not in ops)


def test_arguments_are_checked():
  with pytest.raises(ValueError, match="'horovod'"):
    fastmts.AgreedStop('nccl')
  with pytest.raises(TypeError, match='build_vote'):
    fastmts.AgreedStop(object())
  with pytest.raises(ValueError, match='every_n_steps'):
    fastmts.AgreedStop('horovod', every_n_steps=0)
  with pytest.raises(TypeError, match='every_n_steps'):
    fastmts.AgreedStop('horovod', every_n_steps=True)
  with pytest.raises(TypeError, match='group_size'):
    fastmts.CollectiveEngine('2')
  with tf.Graph().as_default():
    _graph()
    with pytest.raises(TypeError, match='agreed_stop must be'):
      fastmts.MonitoredSession(agreed_stop='horovod')
  assert repr(fastmts.AgreedStop(fastmts.CollectiveEngine(2), 5)) == (
      'AgreedStop(CollectiveEngine(group_size=2, group_key=522839, instance_key=522839, '
      'device=None), every_n_steps=5)')


# ---- ranks in processes: TF's collective ops on a loopback cluster ----------


def _start_ranks(c, ranks, options):
  for i in range(ranks):
    c.start_worker(i, options=options, script=SCRIPT, timeout=_RANK_HANG_BOUND_SECS)
  return ['worker%d' % i for i in range(ranks)]


def _check_agreed(results, step, exit_code, ckpt):
  """Every rank stopped after the same step with the same exit code, and
  the chief's last checkpoint is that step."""
  steps = {(r['agreed_step'], r['global_step'], r['returncode']) for r in results.values()}
  assert steps == {(step, step, exit_code)}, results
  chief = results['worker0']
  assert chief['checkpoint'] == step and chief['checkpoint_path'].endswith('-%d' % step)
  assert chief['w'] == step  # every step's allreduce is in it: 0 steps lost
  assert tf1.train.latest_checkpoint(ckpt) == chief['checkpoint_path']


@pytest.mark.timeout(_CLUSTER_TEST_SECS)
@pytest.mark.parametrize('ranks, every_n_steps, loop, last_step, stop_step',
                         [(2, 1, 'run', 30, 30), (3, 10, 'run_steps', 25, 30)],
                         ids=['2ranks_every_step', '3ranks_every_10_steps'])
def test_stop_at_step_on_one_rank_stops_every_rank(tmp_path, ranks, every_n_steps, loop,
                                                   last_step, stop_step):
  ckpt = str(tmp_path / 'ckpt')
  options = {'engine': 'collective', 'every_n_steps': every_n_steps, 'loop': loop,
             'checkpoint_dir': ckpt, 'stop_at': {str(ranks - 1): last_step}}
  with cluster_utils.Cluster(tmp_path / 'run', num_ps=0, num_workers=ranks) as c:
    names = _start_ranks(c, ranks, options)
    results = c.wait_results(names, timeout=_WAIT_SECS)
    assert not c.alive_pids()
  _check_agreed(results, stop_step, 0, ckpt)
  assert not any(r['preempted_here'] for r in results.values())


def _sigterm_trial(workdir, rng, engine_start=None):
  """One trial: SIGTERM to a random rank at a random moment of training."""
  ranks, every_n_steps = rng.choice([2, 3]), rng.choice([1, 5])
  loop = rng.choice(['run', 'run_steps'])
  ckpt = os.path.join(workdir, 'ckpt')
  options = {'engine': 'collective', 'every_n_steps': every_n_steps, 'loop': loop,
             'checkpoint_dir': ckpt, 'step_sleep': 0.002}
  with cluster_utils.Cluster(os.path.join(workdir, 'run'), num_ps=0, num_workers=ranks) as c:
    names = _start_ranks(c, ranks, options)
    for name in names:
      c.wait_event(name, lambda e: e['event'] == 'training', _WAIT_SECS)
    time.sleep(rng.uniform(0, 1.0))
    target = rng.randrange(ranks)
    os.kill(c.tasks[names[target]].pid, signal.SIGTERM)
    results = c.wait_results(names, timeout=_WAIT_SECS)
    assert not c.alive_pids()
  step = results['worker0']['agreed_step']
  assert step % every_n_steps == 0
  _check_agreed(results, step, 143, ckpt)
  assert [r['preempted_here'] for r in results.values()] == [
      i == target for i in range(ranks)]
  return dict(ranks=ranks, every_n_steps=every_n_steps, loop=loop, target=target, step=step)


@pytest.mark.timeout(_CLUSTER_TEST_SECS * TRIALS)
def test_sigterm_to_one_rank_stops_every_rank_at_one_step(tmp_path):
  rng = random.Random(int(os.environ.get('FASTMTS_AGREED_STOP_SEED', '43')))
  trials = []
  for trial in range(TRIALS):
    trials.append(_sigterm_trial(str(tmp_path / ('trial%d' % trial)), rng))
  print(json.dumps(trials))


# ---- ranks under horovodrun: Horovod's engine --------------------------------


def _horovodrun():
  """The horovodrun beside this Python, or skip: Horovod is built for a few
  TF releases only (docs/distributed.md)."""
  pytest.importorskip('horovod.tensorflow', reason='Horovod is not importable here')
  path = os.path.join(os.path.dirname(sys.executable), 'horovodrun')
  if not os.path.exists(path):
    pytest.skip('no horovodrun beside %s' % sys.executable)
  return path


def _horovod_ranks(workdir, ranks, options):
  """Starts `ranks` ranks under horovodrun --gloo, in a process group of
  their own; (Popen, stdout path)."""
  out = os.path.join(workdir, 'horovodrun.stdout')
  # horovodrun's launcher is the ranks' parent: their watchdog keeps only its lifetime cap.
  env = cluster_utils.child_env({'CLUSTER_UTILS_MAX_LIFETIME': str(_RANK_HANG_BOUND_SECS),
                                 'CLUSTER_UTILS_PARENT_PID': '0'})
  with open(out, 'w') as f:
    popen = subprocess.Popen(
        [_horovodrun(), '-np', str(ranks), '-H', 'localhost:%d' % ranks, '--gloo',
         sys.executable, SCRIPT, '--options', json.dumps(dict(options, engine='horovod'))],
        stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
        start_new_session=True, env=env)
  return popen, out


def _horovod_lines(out, prefix):
  with open(out, errors='replace') as f:
    return [json.loads(line.split(prefix, 1)[1]) for line in f if prefix in line]


def _horovod_results(popen, out, ranks):
  try:
    popen.wait(timeout=_WAIT_SECS)
  finally:
    if popen.poll() is None:
      os.killpg(popen.pid, signal.SIGKILL)
      popen.wait()
  results = {'worker%d' % r['rank']: r for r in _horovod_lines(out, cluster_utils.RESULT_PREFIX)}
  assert len(results) == ranks, open(out, errors='replace').read()[-3000:]
  for r in results.values():
    r['returncode'] = r['exit_code'] or 0
  return results


@pytest.mark.timeout(_CLUSTER_TEST_SECS)
@pytest.mark.parametrize('ranks, every_n_steps, last_step, stop_step', [(2, 1, 30, 30),
                                                                        (3, 10, 25, 30)])
def test_horovod_stop_at_step_on_one_rank_stops_every_rank(tmp_path, ranks, every_n_steps,
                                                           last_step, stop_step):
  ckpt = str(tmp_path / 'ckpt')
  popen, out = _horovod_ranks(str(tmp_path), ranks, {
      'every_n_steps': every_n_steps, 'checkpoint_dir': ckpt,
      'stop_at': {str(ranks - 1): last_step}})
  _check_agreed(_horovod_results(popen, out, ranks), stop_step, 0, ckpt)


@pytest.mark.timeout(_CLUSTER_TEST_SECS * TRIALS)
def test_horovod_sigterm_to_one_rank_stops_every_rank_at_one_step(tmp_path):
  rng = random.Random(int(os.environ.get('FASTMTS_AGREED_STOP_SEED', '43')))
  for trial in range(TRIALS):
    workdir = str(tmp_path / ('trial%d' % trial))
    os.makedirs(workdir)
    ranks, every_n_steps = rng.choice([2, 3]), rng.choice([1, 5])
    ckpt = os.path.join(workdir, 'ckpt')
    popen, out = _horovod_ranks(workdir, ranks, {
        'every_n_steps': every_n_steps, 'checkpoint_dir': ckpt, 'step_sleep': 0.002,
        'loop': rng.choice(['run', 'run_steps'])})
    try:
      deadline = time.monotonic() + _WAIT_SECS
      while len(_horovod_lines(out, cluster_utils.EVENT_PREFIX)) < ranks:
        assert popen.poll() is None and time.monotonic() < deadline, open(out).read()[-3000:]
        time.sleep(0.05)
      time.sleep(rng.uniform(0, 1.0))
      pids = {e['rank']: e['pid'] for e in _horovod_lines(out, cluster_utils.EVENT_PREFIX)}
      target = rng.randrange(ranks)
      os.kill(pids[target], signal.SIGTERM)
    finally:
      results = _horovod_results(popen, out, ranks)
    step = results['worker0']['agreed_step']
    assert step % every_n_steps == 0
    _check_agreed(results, step, 143, ckpt)
    assert [results['worker%d' % i]['preempted_here'] for i in range(ranks)] == [
        i == target for i in range(ranks)]
