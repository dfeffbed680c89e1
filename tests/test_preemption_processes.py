"""Preemption with real SIGTERMs sent to real training processes: one
process beside stock TF, and a loopback 1 ps + 2 worker cluster.

Stock TF (and fastmts without `preemption`) die of the signal: what is left
is the last periodic checkpoint. With `preemption=True` the chief stops
after the step in flight, checkpoints that step and exits with 143; a worker
stops and writes nothing; a restarted chief resumes from that step. Each
process is tests/preemption_train.py; cluster_utils kills whatever is left.
"""
import os
import signal
import time

import pytest
import tensorflow as tf

import cluster_utils
import preemption_utils

pytest.importorskip('fastmts')

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'preemption_train.py')
EXIT_BUDGET_SECS = 20.0  # a hang bound: this machine may be loaded
# Bounds on a hang, not on slowness, sized for a loaded 2-core machine: beside two
# CPU-bound processes a test here took up to 44 s, a wait on its processes up to 17 s.
# Each training process has _WORKER_HANG_BOUND_SECS (cluster_utils kills it past this),
# and each test a bound above it and above any of its waits (up to 90 s) plus four times
# the rest of the test, so that theirs fire first.
_WORKER_HANG_BOUND_SECS = 150
_TEST_HANG_BOUND_SECS = 240


def _saved_while_others_trained(checkpoint, step):
  """A checkpoint the chief wrote while another worker still trained (as a
  periodic save in TF, it is no snapshot of one instant): named by the step
  the chief read before saving, holding that step's values or a few later
  updates, read one variable after the other."""
  name, global_step, w = checkpoint
  return (name == step and step <= global_step <= step + 3 and
          all(abs(v - global_step) <= 3 for v in w))


def _start(c, index, impl, options):
  return c.start_worker(index, impl, options, script=SCRIPT, timeout=_WORKER_HANG_BOUND_SECS)


def _wait_step(c, name, at_least, timeout=90):
  return c.wait_event(name, lambda e: e['event'] == 'step' and e['global_step'] >= at_least,
                      timeout)['global_step']


def _sigterm_and_wait(c, names):
  """SIGTERMs the tasks at once; {name: (return code, seconds to exit)}."""
  t0 = time.monotonic()
  for name in names:
    os.kill(c.tasks[name].pid, signal.SIGTERM)
  codes = c.wait_exit(names, timeout=EXIT_BUDGET_SECS)
  return {n: (codes[n], time.monotonic() - t0) for n in names}


class _LocalCluster(cluster_utils.Cluster):
  """A Cluster whose tasks train alone, in their own process (no --cluster)."""

  def cluster_json(self):
    return ''


@pytest.mark.timeout(_TEST_HANG_BOUND_SECS)
@pytest.mark.parametrize('impl, opt_in', [('tf', False), ('fastmts', False), ('fastmts', True)],
                         ids=['tf', 'fastmts', 'fastmts_preemption'])
def test_sigterm_stock_dies_opted_in_checkpoints_the_last_step(tmp_path, impl, opt_in):
  ckpt = str(tmp_path / 'ckpt')
  options = {'checkpoint_dir': ckpt, 'save_checkpoint_steps': 50, 'preemption': opt_in}
  with _LocalCluster(tmp_path / 'run', num_ps=0, num_workers=1) as c:
    _start(c, 0, impl, options)
    _wait_step(c, 'worker0', 120)
    (code, secs), = _sigterm_and_wait(c, ['worker0']).values()
    task = c.tasks['worker0']
    last_printed = max(e['global_step'] for e in task.events() if e['event'] == 'step')
    result = task.result()
  step, global_step, w = preemption_utils.latest_checkpoint(ckpt)
  assert (global_step, w) == (step, [float(step)] * 4)
  if not opt_in:  # as stock TF: killed, the last periodic checkpoint remains
    assert code == -signal.SIGTERM and result is None
    assert step % 50 == 0 and step <= last_printed + 1
    assert last_printed - step < 50 + 1
  else:
    assert code == 143, task.describe()
    assert result['error'] is None
    assert result['preemption']['step'] == step == result['steps']  # nothing lost
    assert last_printed <= step <= last_printed + 1  # the step in flight, no more
    assert result['preemption']['seconds_to_close'] < secs < EXIT_BUDGET_SECS


def _cluster_options(ckpt, **kw):
  return dict({'checkpoint_dir': ckpt, 'save_checkpoint_secs': 600, 'preemption': True,
               'step_sleep': 0.02}, **kw)


def _start_training(c, ckpt, worker_steps):
  """The ps, then the chief, then worker 1 once the chief trains; returns
  when worker 1 has run `worker_steps` steps."""
  c.start_ps()
  _start(c, 0, 'fastmts', _cluster_options(ckpt))
  _wait_step(c, 'worker0', 5)
  _start(c, 1, 'fastmts', _cluster_options(ckpt))
  _wait_step(c, 'worker1', worker_steps)


@pytest.mark.timeout(_TEST_HANG_BOUND_SECS)
def test_cluster_whole_job_preempted_then_the_chief_resumes(tmp_path):
  """SIGTERM to the chief and the worker at once (the ps lives on): the
  chief checkpoints its last step, the worker writes nothing, both exit
  with 143; a chief started again resumes at that step."""
  ckpt = str(tmp_path / 'ckpt')
  with cluster_utils.Cluster(tmp_path / 'cluster', num_ps=1, num_workers=2) as c:
    _start_training(c, ckpt, worker_steps=10)
    exits = _sigterm_and_wait(c, ['worker0', 'worker1'])
    chief, worker = c.tasks['worker0'].result(), c.tasks['worker1'].result()
    assert exits['worker0'][0] == exits['worker1'][0] == 143, exits
    assert chief['error'] is None and worker['error'] is None
    step = chief['preemption']['step']
    saved = preemption_utils.latest_checkpoint(ckpt)
    # The worker's step in flight may end during the chief's save.
    assert _saved_while_others_trained(saved, step), saved
    assert worker['preemption']['step'] is None
    assert worker['preemption']['checkpoint_path'] is None
    # Every step both ran is in it, but for a worker's step that ended
    # after the save.
    assert saved[1] >= chief['steps'] + worker['steps'] - 1

    _start(c, 0, 'fastmts', _cluster_options(ckpt, last_step=saved[1] + 5))
    created = c.wait_event('worker0', lambda e: e['event'] == 'created', 90)
    resumed = c.wait_results(['worker0'], timeout=60)['worker0']
  assert created['global_step'] == saved[1]  # restored, not initialized
  assert resumed['error'] is None and resumed['preemption'] is None
  assert resumed['steps'] == 5
  assert preemption_utils.latest_checkpoint(ckpt) == (saved[1] + 5, saved[1] + 5, [v + 5 for v in saved[2]])


@pytest.mark.timeout(_TEST_HANG_BOUND_SECS)
def test_cluster_chief_preempted_while_a_worker_trains_on(tmp_path):
  """As TF: a worker does not depend on the chief once started; it trains
  on after the chief's preempted stop, and stops on its own signal."""
  ckpt = str(tmp_path / 'ckpt')
  with cluster_utils.Cluster(tmp_path / 'cluster', num_ps=1, num_workers=2) as c:
    _start_training(c, ckpt, worker_steps=5)
    exits = _sigterm_and_wait(c, ['worker0'])
    assert exits['worker0'][0] == 143
    step = c.tasks['worker0'].result()['preemption']['step']
    assert _saved_while_others_trained(preemption_utils.latest_checkpoint(ckpt), step), preemption_utils.latest_checkpoint(ckpt)
    _wait_step(c, 'worker1', step + 10)  # training goes on
    exits = _sigterm_and_wait(c, ['worker1'])
    worker = c.tasks['worker1'].result()
  assert exits['worker1'][0] == 143
  assert worker['error'] is None and worker['preemption']['checkpoint_path'] is None
  assert preemption_utils.latest_checkpoint(ckpt)[0] == step  # the worker wrote nothing


@pytest.mark.timeout(_TEST_HANG_BOUND_SECS)
def test_worker_waiting_for_the_chief_stops_waiting(tmp_path):
  """A worker waits up to max_wait_secs for a chief to initialize the
  model; the signal ends the wait at once with Preempted."""
  with cluster_utils.Cluster(tmp_path / 'cluster', num_ps=1, num_workers=2) as c:
    c.start_ps()
    _start(c, 1, 'fastmts', _cluster_options(None, max_wait_secs=600))
    c.wait_event('worker1', lambda e: e['event'] == 'creating', 60)
    time.sleep(1.0)  # well into the wait
    exits = _sigterm_and_wait(c, ['worker1'])
    worker = c.tasks['worker1'].result()
  code, secs = exits['worker1']
  assert code == 143
  assert worker['error']['type'] == 'Preempted'
  assert worker['error']['message'] == 'Waiting for the model to be ready ended: SIGTERM received'
  assert worker['steps'] == 0 and worker['preemption']['step'] is None
  assert secs < EXIT_BUDGET_SECS
