"""Preemption benchmark: SIGTERM at random moments of a 1 ps + 2 worker job,
stock MonitoredTrainingSession vs fastmts's ``preemption=True``.

Each *trial* is a whole job on loopback gRPC (tests/cluster_utils.py, one
process per task, ports picked at run time): a ps (``tf.distribute.Server``
that ignores SIGTERM, as a real job's ps is stopped last) and two workers,
between-graph replication with ``replica_device_setter``. The model is an
embedding table of ``--size-mb`` MB on the ps (4 float32 variables
[rows, 64], random-initialized) and a small dense head: each step looks up
64 random rows of each table, and SGD updates those rows (sparse
scatter-adds on the ps) and the dense part, so steps stay fast while each
checkpoint is the whole table. The chief's ``MonitoredTrainingSession``
has ``checkpoint_dir`` (one per implementation and size, kept across its
trials: each trial's chief restores what the previous one left, as a
restarted job does) and ``save_checkpoint_secs=60``; the default Scaffold's
sharded Saver has the ps write its own shard. fastmts's sessions (chief and
worker) get ``preemption=fastmts.PreemptionPolicy(grace_period_secs=25)``;
the task script then exits with ``sess.preemption.exit_code`` (143). Stock
TF has no such thing: SIGTERM's default action kills it.

Per trial, in this process:

1. start the ps, the chief and worker 1 (worker 1 creates its session once
   the chief's exists, so stock's worker never sleeps its 30 s readiness
   wait); wait until both have run a first step (t0);
2. a monitoring client (a ``tf.compat.v1.Session`` on the ps, restricted to
   the ps) reads ``global_step`` every ``--poll-ms`` ms until t0 + the
   trial's random moment (uniform over ``--window``, the same draws for
   both implementations: trial i of stock and of fastmts get the same
   moment);
3. right after a read, SIGTERM to the chief, to worker 1 and to the ps (which
   ignores it), all at once: the *global step at the signal* is that read's;
4. wait for the chief's exit (a pidfd, so the exit time is exact) and
   worker 1's; a chief still alive ``--kill-after`` s (default 30, the
   Kubernetes grace period) after the signal is SIGKILLed, as a cluster
   would;
5. with the ps still up (the trained state as the job left it): its global
   step and an exact checksum of every variable (sum of the float32 bit
   patterns as int64, computed on the ps); then the ps is SIGKILLed (every
   process group of the trial is SIGKILLed on the way out, failure or not);
6. the checkpoint: ``tf.train.latest_checkpoint`` of the chief's directory,
   its global step read from the checkpoint (``tf.train.load_variable``, not
   the file name), then restored in this process by a fresh ``Saver`` into a
   fresh graph (the checksums again: the checkpoint equals the ps's state
   when they match).

Figures per trial: ``lost_steps = max(0, step at the signal - the latest
checkpoint's step after the chief exited)`` (also the seconds of training
since that checkpoint's step, from the monitor's reads); ``exit_secs``:
signal -> the chief's process exit; whether the checkpoint restored (this
process's Saver; and the next trial's chief, whose restored global step,
read in its ``after_create_session``, must equal it); whether the
checkpoint equals the ps's final state (fastmts must: the step it saves is
the last one the job ran). The size-scaling runs (``--scaling-sizes``) are
the same trials at other sizes, fewer of them, over ``--scaling-window``
(fastmts only by default: stock's exit is SIGTERM's default action, with no
size in it). A trial that could not be measured (the job failed before the
signal: TF's gRPC runtime flakes now and then under load) is kept in
``failed_attempts`` and run again at the same moment (``--retries``).

    python bench/preemption_bench.py --help
    python bench/preemption_bench.py                     # the full run, ~40 min
    python bench/preemption_bench.py --quick             # 2 trials each, 64 MB, ~2 min
    python bench/preemption_bench.py --trials 20 --size-mb 512 \\
        --scaling-sizes 64,256,1024 --json bench/results/preemption_512mb.json

Wall times on a shared machine: read medians. As a script with
``--cluster ...`` this file is a worker task (cluster_utils passes
``--cluster --task_index --impl --options``).
"""

import argparse
import json
import os
import random
import select
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import tests_on_path  # noqa: E402,F401  (tests/ on sys.path)

import cluster_utils  # noqa: E402  (tests/cluster_utils.py)

IMPLS = ('stock', 'fastmts')
_CLUSTER_IMPL = {'stock': 'tf', 'fastmts': 'fastmts'}   # cluster_utils's --impl
DEFAULT_TRIALS = 20
DEFAULT_SIZE_MB = 512
DEFAULT_WINDOW = (5.0, 70.0)
DEFAULT_SCALING_SIZES = (64, 256, 1024)
DEFAULT_SCALING_TRIALS = 2
DEFAULT_SCALING_WINDOW = (5.0, 20.0)
DEFAULT_SCALING_IMPLS = ('fastmts',)   # stock's exit is SIGTERM's: no size in it
SAVE_CHECKPOINT_SECS = 60
GRACE_PERIOD_SECS = 25.0        # fastmts.PreemptionPolicy's
KILL_AFTER_SECS = 30.0          # the cluster's SIGKILL (Kubernetes' default)
EXIT_TARGET_SECS = 5.0
POLL_MS = 10.0
STARTUP_SECS = 300              # process start + session creation, loaded machine
QUICK = dict(trials=2, size_mb=64, window=(5.0, 20.0), scaling_sizes=())

N_TABLES = 4
EMB_DIM = 64
BATCH = 64
HIDDEN = 32


def rows_for(size_mb):
  """Rows of each of the N_TABLES float32 [rows, EMB_DIM] tables."""
  return max(1, int(round(size_mb * 2 ** 20 / (N_TABLES * EMB_DIM * 4))))


# ---------------------------------------------------------------------------
# The model (both sides: tasks train it, this process reads and restores it)
# ---------------------------------------------------------------------------

def make_variables(tf, size_mb):
  """The model's variables in the default graph, by name (the global step
  included, created as get_or_create_global_step creates it)."""
  v1 = tf.compat.v1
  rows = rows_for(size_mb)
  out = {'global_step': v1.train.get_or_create_global_step()}
  for i in range(N_TABLES):
    out['emb_%d' % i] = v1.get_variable(
        'emb_%d' % i, [rows, EMB_DIM],
        initializer=v1.random_uniform_initializer(-0.05, 0.05, seed=i))
  with v1.variable_scope('dense'):
    out['dense/w1'] = v1.get_variable(
        'w1', [N_TABLES * EMB_DIM, HIDDEN],
        initializer=v1.glorot_uniform_initializer(seed=10))
    out['dense/b1'] = v1.get_variable('b1', [HIDDEN], initializer=v1.zeros_initializer())
    out['dense/w2'] = v1.get_variable(
        'w2', [HIDDEN, 1], initializer=v1.glorot_uniform_initializer(seed=11))
    out['dense/b2'] = v1.get_variable('b2', [1], initializer=v1.zeros_initializer())
  return out


def build_train_op(tf, variables):
  """One step: BATCH random ids per table, embedding lookups, the dense
  head, squared error against a fixed function of the ids, SGD (sparse
  updates of the looked-up rows, dense ones of the head) + the global step."""
  rows = int(variables['emb_0'].shape[0])
  embedded, targets = [], []
  for i in range(N_TABLES):
    ids = tf.random.uniform([BATCH], 0, rows, dtype=tf.int64)
    embedded.append(tf.nn.embedding_lookup(variables['emb_%d' % i], ids))
    targets.append(tf.cast(ids % 7, tf.float32) / 7.0)
  x = tf.concat(embedded, axis=1)
  h = tf.nn.relu(tf.matmul(x, variables['dense/w1']) + variables['dense/b1'])
  y = tf.squeeze(tf.matmul(h, variables['dense/w2']) + variables['dense/b2'], 1)
  loss = tf.reduce_mean(tf.square(y - tf.add_n(targets)), name='loss')
  opt = tf.compat.v1.train.GradientDescentOptimizer(0.05)
  return opt.minimize(loss, global_step=variables['global_step'], name='train_op')


def checksum_ops(tf, variables):
  """name -> an int64 scalar: the global step's value; for a float variable
  the exact sum of its float32 bit patterns (order-free, so the ps and a
  restore in this process agree bit for bit)."""
  out = {}
  for name, v in variables.items():
    value = v.read_value()
    if value.dtype == tf.int64:
      out[name] = value
    else:
      out[name] = tf.reduce_sum(tf.cast(tf.bitcast(value, tf.int32), tf.int64))
  return out


# ---------------------------------------------------------------------------
# Task side (this file as a worker script)
# ---------------------------------------------------------------------------

# A job's ps outlives the workers' grace period: it ignores SIGTERM and is
# SIGKILLed at the end of the trial. Otherwise it is cluster_utils's ps.
PS_SCRIPT = ('import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n' +
             cluster_utils.PS_SCRIPT)


def _event(name, **kw):
  kw.update(event=name, t=time.time())
  print(cluster_utils.EVENT_PREFIX + json.dumps(kw), flush=True)


def _task_main(argv):
  """A worker task: trains until a signal (or an error); prints one result."""
  p = argparse.ArgumentParser()
  p.add_argument('--cluster', required=True)
  p.add_argument('--task_index', type=int, required=True)
  p.add_argument('--impl', choices=['tf', 'fastmts'], required=True)
  p.add_argument('--options', default='{}')
  args = p.parse_args(argv)
  opts = json.loads(args.options)
  cluster_utils.start_watchdog()
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import logging  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1
  v1.disable_eager_execution()
  tf.get_logger().setLevel(logging.INFO)
  kwargs = {}
  if args.impl == 'fastmts':
    import fastmts  # pylint: disable=g-import-not-at-top
    factory = fastmts.MonitoredTrainingSession
    kwargs['preemption'] = fastmts.PreemptionPolicy(
        signals=(signal.SIGTERM,), grace_period_secs=opts.get('grace', GRACE_PERIOD_SECS))
  else:
    factory = v1.train.MonitoredTrainingSession

  cluster = tf.train.ClusterSpec(json.loads(args.cluster))
  idx = args.task_index
  is_chief = idx == 0
  server = tf.distribute.Server(cluster, job_name='worker', task_index=idx, start=True)
  config = v1.ConfigProto(device_filters=['/job:ps', '/job:worker/task:%d' % idx])
  result = {'task_index': idx, 'impl': args.impl, 'error': None, 'steps_run': 0,
            'preemption': None}
  with tf.Graph().as_default():
    with v1.device(v1.train.replica_device_setter(
        cluster=cluster, worker_device='/job:worker/task:%d' % idx)):
      variables = make_variables(tf, opts['size_mb'])
      train_op = build_train_op(tf, variables)
    global_step = variables['global_step']

    class Events(v1.train.SessionRunHook):
      def after_create_session(self, session, coord):
        _event('session_created', global_step=int(session.run(global_step)))

    if opts.get('go_file'):
      _event('waiting_for_go')
      end = time.monotonic() + opts.get('go_timeout', STARTUP_SECS)
      while not os.path.exists(opts['go_file']):
        if time.monotonic() > end:
          raise SystemExit('no go file')
        time.sleep(0.01)
    sess = None
    try:
      sess = factory(
          master=server.target, is_chief=is_chief,
          checkpoint_dir=opts.get('checkpoint_dir') if is_chief else None,
          save_checkpoint_secs=opts.get('save_secs', SAVE_CHECKPOINT_SECS),
          hooks=[Events()], config=config, **kwargs)
      with sess:
        sess.run(train_op)
        result['steps_run'] = 1
        _event('first_step')
        while not sess.should_stop():
          sess.run(train_op)
          result['steps_run'] += 1
    except Exception as e:  # pylint: disable=broad-except
      result['error'] = {'type': type(e).__name__, 'message': str(e)[:2000]}
  record = getattr(sess, 'preemption', None)
  if record is not None:
    result['preemption'] = {
        'signal': record.signal.name, 'signals_received': record.signals_received,
        'received_at': record.received_at, 'step': record.step,
        'checkpoint_path': record.checkpoint_path,
        'seconds_to_checkpoint': record.seconds_to_checkpoint,
        'seconds_to_close': record.seconds_to_close, 'exit_code': record.exit_code}
  result['t_closed'] = time.time()
  print(cluster_utils.RESULT_PREFIX + json.dumps(result), flush=True)
  if record is not None:
    sys.exit(record.exit_code)   # as fastmts's docs say a job should
  sys.exit(1 if result['error'] else 0)


# ---------------------------------------------------------------------------
# Parent side
# ---------------------------------------------------------------------------

class _Cluster(cluster_utils.Cluster):
  """cluster_utils.Cluster with a ps that ignores SIGTERM."""

  def start_ps_ignoring_sigterm(self, timeout=None):
    return self._launch('ps0', PS_SCRIPT,   # pylint: disable=protected-access
                        ['--cluster', self.cluster_json(), '--job_name', 'ps',
                         '--task_index', '0'], timeout or self.max_lifetime_secs)


def _is(name):
  return lambda e: e['event'] == name


def _wait_exits(tasks, timeout):
  """{name: monotonic time of its exit, or None if still running after
  ``timeout`` s} for the tasks {name: Task}, all watched at once (pidfds:
  each exit time is exact)."""
  end = time.monotonic() + timeout
  exits = {name: None for name in tasks}
  fds = {}
  try:
    for name, task in tasks.items():
      try:
        fds[os.pidfd_open(task.pid)] = name
      except (AttributeError, OSError):
        pass
    while True:
      for name, task in tasks.items():
        if exits[name] is None and name not in fds.values() and task.poll() is not None:
          exits[name] = time.monotonic()   # no pidfd: polled (every ms)
      pending = [fd for fd, name in fds.items() if exits[name] is None]
      polled = [n for n in tasks if exits[n] is None and n not in fds.values()]
      if not pending and not polled:
        break
      left = end - time.monotonic()
      if left <= 0:
        break
      ready, _, _ = select.select(pending, [], [], min(left, 0.001) if polled else left)
      now = time.monotonic()
      for fd in ready:
        exits[fds[fd]] = now
        tasks[fds[fd]].poll()   # reaps it
  finally:
    for fd in fds:
      os.close(fd)
  return exits


class _Monitor:
  """A client of the ps: the global step, and the variables' checksums."""

  def __init__(self, tf, cluster_spec, size_mb, timeout_ms=20000):
    v1 = tf.compat.v1
    self.graph = tf.Graph()
    with self.graph.as_default():
      with v1.device('/job:ps/task:0'):
        variables = make_variables(tf, size_mb)
        self.step_tensor = variables['global_step'].read_value()
        self.sums = checksum_ops(tf, variables)
    config = v1.ConfigProto(device_filters=['/job:ps/task:0'],
                            operation_timeout_in_ms=timeout_ms)
    self.sess = v1.Session('grpc://' + cluster_spec['ps'][0], graph=self.graph,
                           config=config)

  def step(self):
    return int(self.sess.run(self.step_tensor))

  def checksums(self):
    return {name: int(self.sess.run(t)) for name, t in sorted(self.sums.items())}

  def close(self):
    self.sess.close()


def restore_check(tf, checkpoint, size_mb):
  """Restores ``checkpoint`` in a fresh graph of this process with a Saver:
  (checksums, None) or (None, error)."""
  v1 = tf.compat.v1
  try:
    graph = tf.Graph()
    with graph.as_default():
      variables = make_variables(tf, size_mb)
      sums = checksum_ops(tf, variables)
      saver = v1.train.Saver(var_list=list(variables.values()))
      with v1.Session(graph=graph) as s:
        saver.restore(s, checkpoint)
        return {name: int(s.run(t)) for name, t in sorted(sums.items())}, None
  except Exception as e:  # pylint: disable=broad-except
    return None, '%s: %s' % (type(e).__name__, str(e)[:500])


def _unlisted_saves(tf, checkpoint_dir):
  """Saves a killed process left half done: *_temp directories, and
  checkpoint prefixes with files but not in the `checkpoint` state file
  (e.g. the data and index written, the .meta and the state not)."""
  try:
    names = os.listdir(checkpoint_dir)
  except OSError:
    return []
  state = tf.train.get_checkpoint_state(checkpoint_dir)
  listed = set(os.path.basename(p) for p in (state.all_model_checkpoint_paths if state else ()))
  if state and state.model_checkpoint_path:
    listed.add(os.path.basename(state.model_checkpoint_path))
  out = set(n for n in names if '_temp' in n)
  for n in names:
    if n.startswith('model.ckpt-') and n.endswith('.index'):
      prefix = n[:-len('.index')]
      if prefix not in listed:
        out.add(prefix)
  return sorted(out)


def run_trial(tf, impl, size_mb, moment, checkpoint_dir, workdir, opts, log):
  """One whole-job preemption; a dict of what was measured (``error`` set
  if the trial could not be measured). Every process is SIGKILLed on the
  way out."""
  rec = {'impl': impl, 'size_mb': size_mb, 'moment_secs': moment, 'error': None}
  poll = opts['poll_ms'] / 1000.0
  kill_after = opts['kill_after']
  os.makedirs(checkpoint_dir, exist_ok=True)
  unlisted_before = set(_unlisted_saves(tf, checkpoint_dir))
  go_file = os.path.join(workdir, 'go')
  task_opts = {'size_mb': size_mb, 'save_secs': opts['save_secs'],
               'grace': opts['grace']}
  lifetime = STARTUP_SECS + moment + kill_after + 240
  monitor = None
  c = None
  t_trial = time.monotonic()
  try:
    with _Cluster(workdir, num_workers=2, max_lifetime_secs=lifetime) as c:
      ps = c.start_ps_ignoring_sigterm()
      chief = c.start_worker(0, _CLUSTER_IMPL[impl],
                             dict(task_opts, checkpoint_dir=checkpoint_dir),
                             script=os.path.abspath(__file__), timeout=lifetime)
      worker = c.start_worker(1, _CLUSTER_IMPL[impl], dict(task_opts, go_file=go_file),
                              script=os.path.abspath(__file__), timeout=lifetime)
      created = c.wait_event('worker0', _is('session_created'), STARTUP_SECS)
      rec['restored_step'] = created['global_step']
      open(go_file, 'w').close()
      first = c.wait_event('worker0', _is('first_step'), STARTUP_SECS)
      c.wait_event('worker1', _is('first_step'), STARTUP_SECS)
      rec['startup_secs'] = time.monotonic() - t_trial
      monitor = _Monitor(tf, c.cluster_spec, size_mb)
      # t0: the chief's first step (wall clock, one machine).
      t0 = time.monotonic() - (time.time() - first['t'])
      deadline = t0 + moment
      history = []   # (monotonic, global step)
      while True:
        history.append((time.monotonic(), monitor.step()))
        if time.monotonic() >= deadline:
          break
        if chief.poll() is not None or worker.poll() is not None:
          raise cluster_utils.ProcessFailed('a worker exited before the signal:\n'
                                            + chief.describe() + '\n' + worker.describe())
        time.sleep(poll)
      step_at_signal = history[-1][1]
      t_signal = time.monotonic()
      t_signal_wall = time.time()
      for task in (chief, worker, ps):
        os.kill(task.pid, signal.SIGTERM)
      rec['signal_read_age_ms'] = (t_signal - history[-1][0]) * 1e3
      rec['step_at_signal'] = step_at_signal
      rec['step_after_signal'] = monitor.step()   # an upper bound
      rec['steps_per_sec'] = ((history[-1][1] - history[0][1]) /
                              max(1e-9, history[-1][0] - history[0][0]))
      rec['t_signal_wall'] = t_signal_wall
      # The cluster's SIGKILL comes kill_after s after its SIGTERM.
      exits = _wait_exits({'worker0': chief, 'worker1': worker},
                          kill_after - (time.monotonic() - t_signal))
      for name, task in (('worker0', chief), ('worker1', worker)):
        if exits[name] is None:
          task.kill()
          log('    %s still alive %.0f s after SIGTERM: SIGKILLed' % (name, kill_after))
      rec['chief_killed_after_grace'] = exits['worker0'] is None
      rec['worker_killed_after_grace'] = exits['worker1'] is None
      rec['exit_secs'] = None if exits['worker0'] is None else exits['worker0'] - t_signal
      rec['worker_exit_secs'] = (None if exits['worker1'] is None
                                 else exits['worker1'] - t_signal)
      rec['chief_returncode'] = chief.popen.returncode
      rec['worker_returncode'] = worker.popen.returncode
      rec['ps_survived'] = ps.poll() is None
      # The job's state as it left it, read on the ps.
      rec['ps_final_step'] = monitor.step()
      rec['ps_checksums'] = monitor.checksums()
      chief_result = chief.result()
      worker_result = worker.result()
      rec['chief_result'] = chief_result
      rec['worker_result'] = worker_result
      pre = (chief_result or {}).get('preemption')
      if pre and pre.get('received_at') is not None:
        # Python runs a signal handler only between bytecodes: a signal
        # that lands in a long TF call (a periodic save) waits for its end.
        rec['handler_delay_secs'] = pre['received_at'] - t_signal_wall
        if rec['exit_secs'] is not None and chief_result.get('t_closed') is not None:
          rec['close_to_exit_secs'] = rec['exit_secs'] - (chief_result['t_closed'] -
                                                          t_signal_wall)
      rec['polls'] = len(history)
      monitor.close()
      monitor = None
  except Exception as e:  # pylint: disable=broad-except
    rec['error'] = '%s: %s' % (type(e).__name__, str(e)[:3000])
    return rec
  finally:
    if monitor is not None:
      try:
        monitor.close()
      except Exception:  # pylint: disable=broad-except
        pass
    rec['processes_left'] = c.alive_pids() if c is not None else []
  rec['trial_secs_before_checks'] = time.monotonic() - t_trial
  # The checkpoint the job left.
  latest = tf.train.latest_checkpoint(checkpoint_dir)
  rec['checkpoint'] = latest and os.path.basename(latest)
  rec['unlisted_saves_left'] = sorted(set(_unlisted_saves(tf, checkpoint_dir)) -
                                       unlisted_before)
  if latest is None:
    rec['checkpoint_step'] = None
    rec['lost_steps'] = step_at_signal
    rec['restore_ok'] = False
    rec['restore_error'] = 'no checkpoint'
    return rec
  ckpt_step = int(tf.train.load_variable(latest, 'global_step'))
  rec['checkpoint_step'] = ckpt_step
  rec['lost_steps'] = max(0, step_at_signal - ckpt_step)
  rec['checkpoint_minus_signal_steps'] = ckpt_step - step_at_signal
  # Seconds of training since the checkpoint's step, from the monitor's reads
  # (before the first read: since the chief's first step, the trial's
  # checkpoint then being the one its session saved when it was created).
  at_ckpt = [t for t, s in history if s <= ckpt_step]
  rec['lost_secs'] = (0.0 if ckpt_step >= step_at_signal else
                      t_signal - (at_ckpt[-1] if at_ckpt else t0))
  t0 = time.monotonic()
  sums, error = restore_check(tf, latest, size_mb)
  rec['restore_secs'] = time.monotonic() - t0
  rec['restore_error'] = error
  rec['restore_ok'] = sums is not None and sums.get('global_step') == ckpt_step
  rec['checkpoint_equals_ps_state'] = sums is not None and sums == rec['ps_checksums']
  return rec


def _median(xs):
  xs = [x for x in xs if x is not None]
  return statistics.median(xs) if xs else None


def _max(xs):
  xs = [x for x in xs if x is not None]
  return max(xs) if xs else None


def summarize(records, impl, size_mb, failed_attempts=()):
  rs = [r for r in records if r['impl'] == impl and r['size_mb'] == size_mb]
  retried = [r for r in failed_attempts if r['impl'] == impl and r['size_mb'] == size_mb]
  ok = [r for r in rs if not r.get('error')]
  lost = [r['lost_steps'] for r in ok if r.get('lost_steps') is not None]
  exits = [r.get('exit_secs') for r in ok]
  chained = [r for r in ok if r.get('restored_by_next_chief') is not None]
  fast = [r['chief_result']['preemption'] for r in ok
          if r.get('chief_result') and r['chief_result'].get('preemption')]
  return {
      'impl': impl, 'size_mb': size_mb, 'trials': len(rs), 'measured': len(ok),
      'errors': [r['error'] for r in rs if r.get('error')],
      'retried_errors': [r['error'] for r in retried],
      'lost_steps': lost,
      'lost_steps_median': _median(lost), 'lost_steps_max': _max(lost),
      'lost_steps_mean': statistics.mean(lost) if lost else None,
      'lost_secs_median': _median([r.get('lost_secs') for r in ok]),
      'lost_secs_max': _max([r.get('lost_secs') for r in ok]),
      'exit_secs': exits,
      'exit_secs_median': _median(exits), 'exit_secs_max': _max(exits),
      'exits_within_target': sum(1 for x in exits if x is not None and x <= EXIT_TARGET_SECS),
      'killed_after_grace': sum(1 for r in ok if r.get('chief_killed_after_grace')),
      'worker_exit_secs_median': _median([r.get('worker_exit_secs') for r in ok]),
      'seconds_to_checkpoint_median': _median([p.get('seconds_to_checkpoint') for p in fast]),
      'seconds_to_checkpoint_max': _max([p.get('seconds_to_checkpoint') for p in fast]),
      'seconds_to_close_median': _median([p.get('seconds_to_close') for p in fast]),
      'restore_ok': sum(1 for r in ok if r.get('restore_ok')),
      'restored_by_next_chief_ok': sum(1 for r in chained if r['restored_by_next_chief']),
      'restored_by_next_chief_checked': len(chained),
      'checkpoint_equals_ps_state': sum(1 for r in ok if r.get('checkpoint_equals_ps_state')),
      'ps_survived': sum(1 for r in ok if r.get('ps_survived')),
      'unlisted_saves_left': sum(len(r.get('unlisted_saves_left') or ()) for r in ok),
      'handler_delay_secs_max': _max([r.get('handler_delay_secs') for r in ok]),
      'close_to_exit_secs_median': _median([r.get('close_to_exit_secs') for r in ok]),
      'close_to_exit_secs_max': _max([r.get('close_to_exit_secs') for r in ok]),
      'chief_returncodes': sorted({r.get('chief_returncode') for r in ok},
                                  key=lambda x: (x is None, x)),
      'steps_per_sec_median': _median([r.get('steps_per_sec') for r in ok]),
      'restore_secs_median': _median([r.get('restore_secs') for r in ok]),
  }


def _f(x, fmt='%.2f'):
  return 'n/a' if x is None else fmt % x


def _n(x):
  return 'n/a' if x is None else ('%d' % x if float(x).is_integer() else '%.1f' % x)


def table(out):
  """Markdown: the summary per size and implementation, the per-trial
  figures of the main size, and the size scaling."""
  lines = ['| model | impl | preemptions | lost steps: median | max | mean | '
           'training lost (s): median | max | signal -> chief exit (s): median | max | '
           'exits <= %g s | checkpoints restored (Saver) | restored by next chief | '
           'checkpoint == ps state at exit | steps/s |' % EXIT_TARGET_SECS,
           '|---|---|' + '---:|' * 13]
  for s in out['summaries']:
    lines.append('| %d MB | %s | %d/%d%s | %s | %s | %s | %s | %s | %s | %s | %d/%d | %d/%d | '
                 '%d/%d | %d/%d | %s |' % (
                     s['size_mb'], s['impl'], s['measured'], s['trials'],
                     ' (+%d failed, retried)' % len(s['retried_errors'])
                     if s.get('retried_errors') else '',
                     _n(s['lost_steps_median']), _n(s['lost_steps_max']),
                     _f(s['lost_steps_mean'], '%.1f'),
                     _f(s['lost_secs_median'], '%.1f'), _f(s['lost_secs_max'], '%.1f'),
                     _f(s['exit_secs_median']), _f(s['exit_secs_max']),
                     s['exits_within_target'], s['measured'],
                     s['restore_ok'], s['measured'],
                     s['restored_by_next_chief_ok'], s['restored_by_next_chief_checked'],
                     s['checkpoint_equals_ps_state'], s['measured'],
                     _f(s['steps_per_sec_median'], '%.0f')))
  main = out['config']['size_mb']
  by_trial = {}
  for r in out['records']:
    if r['size_mb'] == main:
      by_trial.setdefault(r['trial'], {})[r['impl']] = r
  lines += ['', 'Per trial, %d MB (trial i of each implementation: the same moment):' % main,
            '',
            '| trial | moment (s) | stock: lost steps | stock: lost (s) | stock: exit (s) | '
            'fastmts: lost steps | fastmts: ckpt - signal step | fastmts: handler delay (s) | '
            'fastmts: handler -> checkpoint (s) | fastmts: close -> exit (s) | '
            'fastmts: exit (s) | fastmts: restored |',
            '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|']
  for i in sorted(by_trial):
    st, fa = by_trial[i].get('stock', {}), by_trial[i].get('fastmts', {})
    moment = (st or fa).get('moment_secs')
    pre = ((fa.get('chief_result') or {}).get('preemption') or {})
    lines.append('| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |' % (
        i + 1, _f(moment, '%.1f'),
        'error' if st.get('error') else _n(st.get('lost_steps')),
        _f(st.get('lost_secs'), '%.1f'), _f(st.get('exit_secs'), '%.3f'),
        'error' if fa.get('error') else _n(fa.get('lost_steps')),
        _n(fa.get('checkpoint_minus_signal_steps')),
        _f(fa.get('handler_delay_secs')), _f(pre.get('seconds_to_checkpoint')),
        _f(fa.get('close_to_exit_secs')), _f(fa.get('exit_secs')),
        {True: 'yes', False: 'NO'}.get(fa.get('restore_ok'), 'n/a')))
  fast = [s for s in out['summaries'] if s['impl'] == 'fastmts']
  if fast:
    lines += ['', 'fastmts, signal -> chief exit by size (handler -> checkpoint: the '
              "Preemption record's seconds_to_checkpoint; close -> exit: the process's "
              'exit after the session closed):', '',
              '| model | trials | exit (s): median | max | handler -> checkpoint (s): median | '
              'max | close -> exit (s): median | max | handler delay (s): max |',
              '|---|---:|---:|---:|---:|---:|---:|---:|---:|']
    for s in sorted(fast, key=lambda s: s['size_mb']):
      lines.append('| %d MB | %d | %s | %s | %s | %s | %s | %s | %s |' % (
          s['size_mb'], s['measured'], _f(s['exit_secs_median']), _f(s['exit_secs_max']),
          _f(s['seconds_to_checkpoint_median']), _f(s['seconds_to_checkpoint_max']),
          _f(s['close_to_exit_secs_median']), _f(s['close_to_exit_secs_max']),
          _f(s['handler_delay_secs_max'])))
    fit = out.get('fastmts_exit_fit')
    if fit:
      lines += ['', 'Least squares over every fastmts trial: signal -> exit ~ %.2f s + %.2f s/GB '
                'x size; handler -> checkpoint ~ %.2f s + %.2f s/GB x size.' % (
                    fit['exit_intercept_secs'], fit['exit_secs_per_gb'],
                    fit['checkpoint_intercept_secs'], fit['checkpoint_secs_per_gb'])]
  return '\n'.join(lines)


def _fit(points):
  """Least squares y = a + b x; (a, b) or None."""
  if len({x for x, _ in points}) < 2:
    return None
  mx = statistics.mean(x for x, _ in points)
  my = statistics.mean(y for _, y in points)
  b = (sum((x - mx) * (y - my) for x, y in points) /
       sum((x - mx) ** 2 for x, _ in points))
  return my - b * mx, b


def run(workdir, trials=DEFAULT_TRIALS, size_mb=DEFAULT_SIZE_MB, impls=IMPLS,
        window=DEFAULT_WINDOW, scaling_sizes=DEFAULT_SCALING_SIZES,
        scaling_trials=DEFAULT_SCALING_TRIALS, scaling_window=DEFAULT_SCALING_WINDOW,
        scaling_impls=DEFAULT_SCALING_IMPLS, seed=0, poll_ms=POLL_MS,
        save_secs=SAVE_CHECKPOINT_SECS, grace=GRACE_PERIOD_SECS, kill_after=KILL_AFTER_SECS,
        retries=1, keep=False, log=print, json_path=None):
  """All the trials; a dict: config, records (one per trial), summaries."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.compat.v1.disable_eager_execution()
  tf.get_logger().setLevel('ERROR')
  impls = list(impls)
  config = {'trials': trials, 'size_mb': size_mb, 'impls': impls, 'window': list(window),
            'scaling_sizes': list(scaling_sizes), 'scaling_trials': scaling_trials,
            'scaling_window': list(scaling_window), 'scaling_impls': list(scaling_impls),
            'seed': seed, 'poll_ms': poll_ms,
            'save_checkpoint_secs': save_secs, 'grace_period_secs': grace,
            'kill_after_secs': kill_after, 'retries': retries, 'tables': N_TABLES, 'emb_dim': EMB_DIM,
            'batch': BATCH, 'tf_version': tf.__version__, 'cpus': os.cpu_count(),
            'argv': sys.argv, 'commit': _commit(), 'fastmts_file': _fastmts_file()}
  opts = {'poll_ms': poll_ms, 'save_secs': save_secs, 'grace': grace,
          'kill_after': kill_after}
  rng = random.Random(seed)
  plan = [(size_mb, trials, window, impls)] + [
      (s, scaling_trials, scaling_window, [i for i in impls if i in scaling_impls])
      for s in scaling_sizes if s != size_mb]
  records = []
  out = {'config': config, 'records': records, 'summaries': [], 'failed_attempts': []}
  t_run = time.monotonic()
  for size, n, (lo, hi), size_impls in plan:
    if n <= 0 or not size_impls:
      continue
    moments = [rng.uniform(lo, hi) for _ in range(n)]
    ckpt_dirs = {impl: os.path.join(workdir, '%dmb_%s_ckpt' % (size, impl))
                 for impl in size_impls}
    previous = {}
    for i, moment in enumerate(moments):
      for impl in size_impls:
        for attempt in range(retries + 1):
          tdir = os.path.join(workdir, '%dmb_%s_trial%02d_%d' % (size, impl, i, attempt))
          log('%4.0f s  %d MB  %-7s trial %d/%d%s: SIGTERM at %.1f s' % (
              time.monotonic() - t_run, size, impl, i + 1, n,
              ' (attempt %d)' % (attempt + 1) if attempt else '', moment))
          rec = run_trial(tf, impl, size, moment, ckpt_dirs[impl], tdir, opts, log)
          rec['trial'] = i
          rec['attempt'] = attempt
          prev = previous.get(impl)
          if prev is not None and rec.get('restored_step') is not None and \
              prev.get('checkpoint_step') is not None:
            prev['restored_by_next_chief'] = rec['restored_step'] == prev['checkpoint_step']
          previous[impl] = rec
          if rec.get('error'):
            log('    ERROR: %s' % rec['error'][:1500])
          if not rec.get('error') or attempt == retries:
            break
          # Not measured (e.g. the job failed before the signal): kept apart,
          # and the trial is run again at the same moment.
          out['failed_attempts'].append(rec)
        records.append(rec)
        if not rec.get('error'):
          pre = (rec.get('chief_result') or {}).get('preemption') or {}
          log('    step at signal %d, checkpoint %s (step %s): lost %s steps (%.1f s); '
              'chief exit %s s (rc %s)%s; restore %s; ckpt == ps: %s; %.0f steps/s' % (
                  rec['step_at_signal'], rec.get('checkpoint'), rec.get('checkpoint_step'),
                  rec.get('lost_steps'), rec.get('lost_secs') or 0.0,
                  _f(rec.get('exit_secs'), '%.3f'), rec.get('chief_returncode'),
                  ', to checkpoint %.2f s' % pre['seconds_to_checkpoint']
                  if pre.get('seconds_to_checkpoint') is not None else '',
                  'ok' if rec.get('restore_ok') else 'FAILED %s' % rec.get('restore_error'),
                  rec.get('checkpoint_equals_ps_state'), rec.get('steps_per_sec') or 0))
        if json_path:
          _write_json(json_path, out)
    if not keep:
      for d in ckpt_dirs.values():
        shutil.rmtree(d, ignore_errors=True)
  out['summaries'] = [summarize(records, impl, size, out['failed_attempts'])
                      for size, n, _, size_impls in plan if n > 0 for impl in size_impls]
  fa = [r for r in records if r['impl'] == 'fastmts' and not r.get('error')]
  ex = _fit([(r['size_mb'] / 1024.0, r['exit_secs']) for r in fa
             if r.get('exit_secs') is not None])
  ck = _fit([(r['size_mb'] / 1024.0, r['chief_result']['preemption']['seconds_to_checkpoint'])
             for r in fa if ((r.get('chief_result') or {}).get('preemption') or {}).get(
                 'seconds_to_checkpoint') is not None])
  if ex and ck:
    out['fastmts_exit_fit'] = {'exit_intercept_secs': ex[0], 'exit_secs_per_gb': ex[1],
                               'checkpoint_intercept_secs': ck[0],
                               'checkpoint_secs_per_gb': ck[1]}
  out['processes_left'] = [p for r in records for p in r.get('processes_left', ())]
  out['total_secs'] = time.monotonic() - t_run
  if json_path:
    _write_json(json_path, out)
  return out


def _fastmts_file():
  try:
    import fastmts  # pylint: disable=g-import-not-at-top
    return fastmts.__file__
  except Exception as e:  # pylint: disable=broad-except
    return 'not importable: %s' % e


def _commit():
  import subprocess  # pylint: disable=g-import-not-at-top
  try:
    return subprocess.run(['git', '-C', HERE, 'rev-parse', 'HEAD'], capture_output=True,
                          text=True, timeout=10).stdout.strip() or None
  except Exception:  # pylint: disable=broad-except
    return None


def _write_json(path, out):
  d = os.path.dirname(os.path.abspath(path))
  os.makedirs(d, exist_ok=True)
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    json.dump(out, f, indent=1, sort_keys=True, default=str)
  os.replace(tmp, path)


def _pair(text):
  lo, hi = (float(x) for x in text.split(','))
  if not 0 <= lo <= hi:
    raise argparse.ArgumentTypeError('want LO,HI with 0 <= LO <= HI')
  return lo, hi


def _sizes(text):
  return tuple(int(x) for x in text.split(',') if x.strip())


def main(argv=None):
  p = argparse.ArgumentParser(
      description='SIGTERM at random moments of a 1 ps + 2 worker job: steps lost, '
                  'signal -> chief exit, checkpoints that restore; stock TF vs fastmts '
                  '(preemption=True).')
  p.add_argument('--trials', type=int, default=DEFAULT_TRIALS,
                 help='preemptions per implementation at --size-mb (default %(default)s)')
  p.add_argument('--size-mb', type=int, default=DEFAULT_SIZE_MB,
                 help='model (embedding tables) size in MB (default %(default)s)')
  p.add_argument('--impls', default=','.join(IMPLS),
                 help='comma-separated, of stock,fastmts (default %(default)s)')
  p.add_argument('--window', type=_pair, default=DEFAULT_WINDOW,
                 help='LO,HI: the signal comes uniformly in [LO, HI] s after the '
                      "chief's first step (default 5,70)")
  p.add_argument('--scaling-sizes', type=_sizes, default=DEFAULT_SCALING_SIZES,
                 help='other sizes in MB, comma-separated, "" for none (default 64,256,1024)')
  p.add_argument('--scaling-trials', type=int, default=DEFAULT_SCALING_TRIALS,
                 help='preemptions per implementation at each scaling size (default %(default)s)')
  p.add_argument('--scaling-window', type=_pair, default=DEFAULT_SCALING_WINDOW,
                 help='LO,HI for the scaling sizes (default 5,20)')
  p.add_argument('--scaling-impls', default=','.join(DEFAULT_SCALING_IMPLS),
                 help='implementations run at the scaling sizes (default %(default)s)')
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--poll-ms', type=float, default=POLL_MS,
                 help="the monitoring client's period (default %(default)s)")
  p.add_argument('--save-secs', type=float, default=SAVE_CHECKPOINT_SECS,
                 help='save_checkpoint_secs (default %(default)s)')
  p.add_argument('--grace', type=float, default=GRACE_PERIOD_SECS,
                 help="fastmts PreemptionPolicy's grace_period_secs (default %(default)s)")
  p.add_argument('--kill-after', type=float, default=KILL_AFTER_SECS,
                 help='SIGKILL a chief still alive this long after SIGTERM (default %(default)s)')
  p.add_argument('--retries', type=int, default=1,
                 help='run a trial that could not be measured (the job failed before the '
                      'signal, ...) again at the same moment, this many times (default 1)')
  p.add_argument('--quick', action='store_true',
                 help='2 trials per implementation, 64 MB, window 5,20, no scaling sizes')
  p.add_argument('--json', dest='json_path', default=None,
                 help='write all records and summaries here (rewritten after every trial)')
  p.add_argument('--table', default=None, help='also write the markdown table here')
  p.add_argument('--workdir', default=None,
                 help='where the trials run (default: a temporary directory, removed)')
  p.add_argument('--keep', action='store_true', help='keep checkpoints and the workdir')
  args = p.parse_args(argv)
  if args.quick:
    for k, v in QUICK.items():
      setattr(args, k, v)
  impls = [x for x in args.impls.split(',') if x]
  bad = [x for x in impls if x not in IMPLS]
  if bad:
    p.error('unknown impls %s' % bad)
  workdir = args.workdir or tempfile.mkdtemp(prefix='fastmts-preemption-bench-')
  os.makedirs(workdir, exist_ok=True)
  try:
    out = run(workdir, trials=args.trials, size_mb=args.size_mb, impls=impls,
              window=args.window, scaling_sizes=args.scaling_sizes,
              scaling_trials=args.scaling_trials, scaling_window=args.scaling_window,
              scaling_impls=[x for x in args.scaling_impls.split(',') if x],
              seed=args.seed, poll_ms=args.poll_ms, save_secs=args.save_secs, grace=args.grace,
              kill_after=args.kill_after, retries=args.retries, keep=args.keep,
              log=lambda m: print(m, flush=True), json_path=args.json_path)
  finally:
    if not args.keep and not args.workdir:
      shutil.rmtree(workdir, ignore_errors=True)
  text = table(out)
  text += '\n\nTotal %.1f min.' % (out['total_secs'] / 60.0)
  print('\n' + text)
  if args.table:
    with open(args.table, 'w') as f:
      f.write(text + '\n')
  return 0


if __name__ == '__main__':
  if '--cluster' in sys.argv[1:]:
    sys.exit(_task_main(sys.argv[1:]))
  sys.exit(main())
