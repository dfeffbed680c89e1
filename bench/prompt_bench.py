"""Prompt close and start-up: stock MonitoredTrainingSession vs fastmts.

The two places where fastmts deliberately differs from TF (README.md, "Where
fastmts deliberately differs from TF"), measured for both in one run:

1. sync close   -- a 1 ps + 2 worker loopback cluster (tests/cluster_utils.py,
   one process per task) trains with ``SyncReplicasOptimizer(
   replicas_to_aggregate=2, total_num_replicas=2)`` + its
   ``make_session_run_hook(is_chief)`` + ``StopAtStepHook(last_step=10)``,
   default ``stop_grace_period_secs`` (120 s). Measured on the chief, in the
   worker script (cluster_utils.TRAIN_SCRIPT): wall time from the return of
   its last ``run`` to the return of ``close()`` (leaving the ``with``
   block). Stock TF sits out the grace period (its chief queue runner is
   blocked in ``take_grad``); fastmts cancels the op.
2. stuck-op close -- in one process (a child of this one), a queue-fed
   model whose QueueRunner is blocked in an enqueue to a full capacity-1
   queue that nobody reads while its cancel op closes another queue (as
   ``_graph_with_stuck_queue_runner`` in tests/test_prompt_start_stop.py),
   ``StopAtStepHook(last_step=3)``, default grace period. Same measure.
3. worker first -- the non-chief worker creates its session first; ~2 s
   later the chief does. Measured: the chief's ``MonitoredTrainingSession``
   constructor returning -> the worker's first step returning. Stock TF's
   worker sleeps ``recovery_wait_secs`` (30 s) between readiness checks;
   fastmts polls every 0.05 s, doubling.

The stock close cases take ~2 minutes each (mostly idle waiting), so every
stock case runs in a background thread (its own processes) while the fastmts
cases run one after another; the fastmts cases start once the stock ones
are past their busy part (training) and only waiting, so the timed fastmts
parts do not compete with stock's start-up for the CPU. One repetition
each: these are latencies of ~1 s vs ~30-120 s.

    python bench/prompt_bench.py            # ~2.5 min; prints a Markdown table
    python bench/prompt_bench.py --quick    # stock closes with a 10 s grace period
    python bench/prompt_bench.py --json out.json

``--quick`` gives stock TF ``stop_grace_period_secs=10`` in cases 1 and 2
(fastmts keeps the default 120 s): stock's figure then just measures the
10 s grace period it was given, not TF's default behaviour. Case 3 is
unchanged (stock: up to 30 s).

Every process is started by cluster_utils and killed (process group,
SIGKILL) when its cluster is left, on success or failure; children also exit
by themselves when this process goes away. As a script with ``--cluster
...`` this file is the child of case 2 (cluster_utils passes ``--cluster
--task_index --impl --options``) and prints one ``CLUSTER_RESULT <json>``.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import tests_on_path  # noqa: E402,F401  (tests/ on sys.path)

import cluster_utils  # noqa: E402  (tests/cluster_utils.py)

IMPLS = ('tf', 'fastmts')           # cluster_utils's names: stock, fastmts
TF_DEFAULT_GRACE_SECS = 120
QUICK_STOCK_GRACE_SECS = 10
CHIEF_DELAY_SECS = 2.0              # case 3: the worker's head start
SYNC_LAST_STEP = 10
STUCK_LAST_STEP = 3
CLOSE_TARGET_SECS = 5.0
FIRST_STEP_TARGET_SECS = 2.0
# Start-up of a TF process on a loaded 2-core machine can take a while.
STARTUP_SECS = 150

CASES = (
    ('sync_close', 'sync-replicas chief: last step -> close() returned '
                   '(1 ps + 2 workers)'),
    ('stuck_op_close', 'queue runner stuck in a TF op: last step -> close() '
                       'returned (in-process)'),
    ('worker_first', 'worker started ~2 s before the chief: chief ready -> '
                     "worker's first step"),
)
TARGETS = {'sync_close': ('close', CLOSE_TARGET_SECS),
           'stuck_op_close': ('close', CLOSE_TARGET_SECS),
           'worker_first': ('first step', FIRST_STEP_TARGET_SECS)}


# ---------------------------------------------------------------------------
# Parent side
# ---------------------------------------------------------------------------

class _Clusters:
  """Every Cluster made during a run, so all are killed at the end whatever
  thread made them (each case also leaves its own ``with`` block)."""

  def __init__(self, workdir, max_lifetime_secs):
    self.workdir = workdir
    self.max_lifetime_secs = max_lifetime_secs
    self._lock = threading.Lock()
    self._all = []

  def new(self, name, num_workers=2):
    c = cluster_utils.Cluster(os.path.join(self.workdir, name),
                              num_workers=num_workers,
                              max_lifetime_secs=self.max_lifetime_secs)
    with self._lock:
      self._all.append(c)
    return c

  def kill_all(self):
    with self._lock:
      clusters = list(self._all)
    for c in clusters:
      c.kill_all()

  def alive_pids(self):
    with self._lock:
      return [p for c in self._all for p in c.alive_pids()]


def _touch(path):
  open(path, 'w').close()


def _wait_exit_quietly(task, timeout):
  """Waits up to ``timeout`` for ``task`` to exit; never kills it."""
  end = time.monotonic() + timeout
  while task.poll() is None and time.monotonic() < end:
    time.sleep(0.05)


def _is(name):
  return lambda e: e['event'] == name


def case_sync_close(clusters, impl, grace, idle):
  """Case 1. Returns (seconds, info). ``idle`` is set once training is over
  (only waiting is left)."""
  c = clusters.new('sync_close_' + impl)
  workdir = c.workdir
  opts = {'last_step': SYNC_LAST_STEP, 'sync_replicas': True,
          'step_sleep': 0.05, 'read_final': False}
  if grace is not None:
    opts['stop_grace_period_secs'] = grace
  timeout = STARTUP_SECS + (grace or TF_DEFAULT_GRACE_SECS) + 60
  chief_go = os.path.join(workdir, 'chief_go')
  worker_go = os.path.join(workdir, 'worker_go')
  with c:
    c.start_ps()
    # Both workers import TF meanwhile; the worker creates its session only
    # once the chief's exists (no recovery_wait_secs sleep in this case).
    c.start_worker(0, impl, dict(opts, go_file=chief_go,
                                 checkpoint_dir=os.path.join(workdir, 'ckpt')),
                   timeout=timeout)
    c.start_worker(1, impl, dict(opts, go_file=worker_go), timeout=timeout)
    for name in ('worker0', 'worker1'):
      c.wait_event(name, _is('waiting_for_go'), STARTUP_SECS)
    _touch(chief_go)
    c.wait_event('worker0', _is('session_created'), 60)
    _touch(worker_go)
    _wait_exit_quietly(c.tasks['worker1'], 90)
    idle.set()
    results = c.wait_results(['worker0', 'worker1'], timeout=timeout)
  chief, worker = results['worker0'], results['worker1']
  info = {'steps_run': {'chief': chief['steps_run'],
                        'worker': worker['steps_run']},
          'last_global_step_seen_by_chief': chief['last_global_step'],
          'worker_close_secs': _close_secs(worker),
          'stop_grace_period_secs': grace if grace is not None
                                    else '%d (default)' % TF_DEFAULT_GRACE_SECS}
  for who, r in (('chief', chief), ('worker', worker)):
    if r['error']:
      raise RuntimeError('%s: %s: %s' % (who, r['error']['type'],
                                         r['error']['message']))
  secs = _close_secs(chief)
  if secs is None:
    raise RuntimeError('the chief ran no step: %r' % (chief,))
  return secs, info


def _close_secs(r):
  if r.get('t_last_step') is None or r.get('t_closed') is None:
    return None
  return r['t_closed'] - r['t_last_step']


def case_stuck_op_close(clusters, impl, grace, idle):
  """Case 2: this file as a child process (one process, no cluster)."""
  c = clusters.new('stuck_op_close_' + impl)
  opts = {'last_step': STUCK_LAST_STEP,
          'checkpoint_dir': os.path.join(c.workdir, 'ckpt')}
  if grace is not None:
    opts['stop_grace_period_secs'] = grace
  timeout = STARTUP_SECS + (grace or TF_DEFAULT_GRACE_SECS) + 60
  with c:
    c.start_worker(0, impl, opts, script=os.path.abspath(__file__),
                   timeout=timeout)
    try:
      c.wait_event('worker0', _is('closing'), STARTUP_SECS)
    finally:
      idle.set()
    r = c.wait_results(['worker0'], timeout=timeout)['worker0']
  if r['error']:
    raise RuntimeError('%s: %s' % (r['error']['type'], r['error']['message']))
  info = {'steps_run': r['steps_run'], 'checkpoint': r['checkpoint'],
          'live_native_threads_after_close': r.get('live_native_threads'),
          'stop_grace_period_secs': grace if grace is not None
                                    else '%d (default)' % TF_DEFAULT_GRACE_SECS}
  return _close_secs(r), info


def case_worker_first(clusters, impl, idle):
  """Case 3: worker1 creates its session, ~2 s later the chief does."""
  c = clusters.new('worker_first_' + impl)
  workdir = c.workdir
  chief_go = os.path.join(workdir, 'chief_go')
  worker_go = os.path.join(workdir, 'worker_go')
  timeout = STARTUP_SECS + 120
  with c:
    c.start_ps()
    # The worker trains until it is killed (its first step is what counts);
    # the chief trains a few steps and exits (the variables stay on the ps).
    c.start_worker(1, impl, {'last_step': 10 ** 9, 'go_file': worker_go,
                             'step_events': True, 'step_sleep': 0.1,
                             'read_final': False}, timeout=timeout)
    c.start_worker(0, impl, {'last_step': 5, 'go_file': chief_go,
                             'read_final': False}, timeout=timeout)
    for name in ('worker0', 'worker1'):
      c.wait_event(name, _is('waiting_for_go'), STARTUP_SECS)
    _touch(worker_go)
    waiting = c.wait_event('worker1', _is('creating_session'), 30)
    time.sleep(CHIEF_DELAY_SECS)
    _touch(chief_go)
    try:
      chief = c.wait_results(['worker0'], timeout=90)['worker0']
    finally:
      idle.set()
    if chief['error']:
      raise RuntimeError('chief: %s: %s' % (chief['error']['type'],
                                            chief['error']['message']))
    first = c.wait_event('worker1', _is('step'), 90)
    created = c.wait_event('worker1', _is('session_created'), 5)
  ready = chief['t_mts_created']
  info = {'worker_waiting_since_secs_before_chief_ready': ready - waiting['t'],
          'chief_session_creation_secs': ready - chief['t_mts_start'],
          'worker_session_created_after_chief_ready_secs': created['t'] - ready}
  return first['t'] - ready, info


def _record(results, key, fn, *args):
  t0 = time.monotonic()
  try:
    value, info = fn(*args)
    results[key] = {'secs': value, 'error': None, 'info': info}
  except BaseException as e:  # pylint: disable=broad-except
    results[key] = {'secs': None, 'error': '%s: %s' % (type(e).__name__, e),
                    'info': {}}
    if not isinstance(e, Exception):
      raise
  finally:
    results[key]['wall_secs'] = time.monotonic() - t0


def _record_then_set(event, *args):
  try:
    _record(*args)
  finally:
    event.set()  # a failed case must not hold the fastmts cases back


def run(workdir, quick=False, log=None):
  """Runs the three cases for stock and fastmts; returns a dict:
  ``results[case][impl] = {'secs', 'error', 'info', 'wall_secs'}``,
  ``quick``, ``stock_grace_secs``, ``total_secs``. Every process started is
  dead when it returns (or raises)."""
  log = log or (lambda msg: None)
  t0 = time.monotonic()
  stock_grace = QUICK_STOCK_GRACE_SECS if quick else None
  grace_max = stock_grace or TF_DEFAULT_GRACE_SECS
  clusters = _Clusters(workdir, max_lifetime_secs=2 * STARTUP_SECS + grace_max + 120)
  flat = {}
  runs = {  # (case, impl) -> (function, args after clusters)
      ('sync_close', 'tf'): (case_sync_close, ('tf', stock_grace)),
      ('stuck_op_close', 'tf'): (case_stuck_op_close, ('tf', stock_grace)),
      ('worker_first', 'tf'): (case_worker_first, ('tf',)),
      ('sync_close', 'fastmts'): (case_sync_close, ('fastmts', None)),
      ('stuck_op_close', 'fastmts'): (case_stuck_op_close, ('fastmts', None)),
      ('worker_first', 'fastmts'): (case_worker_first, ('fastmts',)),
  }
  try:
    threads, idles = [], []
    for key in [k for k in runs if k[1] == 'tf']:
      fn, args = runs[key]
      idle = threading.Event()
      idles.append(idle)
      t = threading.Thread(target=_record_then_set, name='stock-%s' % key[0],
                           daemon=True,
                           args=(idle, flat, key, fn, clusters) + args + (idle,))
      t.start()
      threads.append(t)
    log('stock cases started in the background (grace period: %s)'
        % (stock_grace or '%d s, the default' % TF_DEFAULT_GRACE_SECS))
    end = time.monotonic() + STARTUP_SECS
    for idle in idles:
      idle.wait(max(0.0, end - time.monotonic()))
    log('stock cases are past training (%.0f s); fastmts cases now'
        % (time.monotonic() - t0))
    for key in [k for k in runs if k[1] == 'fastmts']:
      fn, args = runs[key]
      _record(flat, key, fn, clusters, *(args + (threading.Event(),)))
      log('  fastmts %s: %s' % (key[0], _fmt(flat[key])))
    join_end = time.monotonic() + STARTUP_SECS + grace_max + 90
    for t in threads:
      t.join(max(0.0, join_end - time.monotonic()))
    for key in [k for k in runs if k[1] == 'tf']:
      if key not in flat:
        flat[key] = {'secs': None, 'error': 'did not finish in time',
                     'info': {}, 'wall_secs': None}
      log('  stock %s: %s' % (key[0], _fmt(flat[key])))
  finally:
    clusters.kill_all()
  left = clusters.alive_pids()
  results = {case: {impl: flat.get((case, impl)) for impl in IMPLS}
             for case, _ in CASES}
  return {'results': results, 'quick': quick,
          'stock_grace_secs': stock_grace or TF_DEFAULT_GRACE_SECS,
          'fastmts_grace_secs': TF_DEFAULT_GRACE_SECS,
          'chief_delay_secs': CHIEF_DELAY_SECS,
          'processes_left': left,
          'total_secs': time.monotonic() - t0}


def _fmt(r):
  if r is None:
    return 'n/a'
  if r['secs'] is None:
    return 'error (%s)' % r['error'].splitlines()[0][:120]
  return '%.2f' % r['secs']


def met(case, secs):
  """True/False: ``secs`` meets the case's target (None if not measured)."""
  if secs is None:
    return None
  return secs < TARGETS[case][1]


def table(out):
  """The Markdown table of ``run``'s result."""
  grace = ('stock grace period %d s (--quick: stock measures the grace it was '
           'given)' % out['stock_grace_secs'] if out['quick']
           else 'default grace period (%d s) for both' % out['stock_grace_secs'])
  lines = ['| scenario | stock (s) | fastmts (s) | target |',
           '|---|---:|---:|---|']
  for case, label in CASES:
    r = out['results'][case]
    what, target = TARGETS[case]
    ok = met(case, (r['fastmts'] or {}).get('secs'))
    verdict = {True: 'met', False: 'MISSED', None: 'not measured'}[ok]
    lines.append('| %s | %s | %s | %s < %g s: fastmts %s |' % (
        label, _fmt(r['tf']), _fmt(r['fastmts']), what, target, verdict))
  lines.append('')
  lines.append('One run each; %s; the chief starts %.0f s after the worker in '
               'the last row; whole bench %.0f s.' % (
                   grace, out['chief_delay_secs'], out['total_secs']))
  if out['processes_left']:
    lines.append('WARNING: processes still alive: %s' % out['processes_left'])
  return '\n'.join(lines)


def main(argv=None):
  import shutil  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--quick', action='store_true',
                 help='stock TF closes with stop_grace_period_secs=%d (it then '
                      'measures that grace period)' % QUICK_STOCK_GRACE_SECS)
  p.add_argument('--json', help='also write the full results here')
  p.add_argument('--workdir', help='keep the processes\' files here')
  args = p.parse_args(argv)

  def on_term(signum, frame):  # leave the clusters (and kill them) on SIGTERM
    raise SystemExit(128 + signum)
  signal.signal(signal.SIGTERM, on_term)

  workdir = args.workdir or tempfile.mkdtemp(prefix='fastmts-prompt-bench-')
  try:
    out = run(workdir, quick=args.quick,
              log=lambda m: print(m, file=sys.stderr, flush=True))
  finally:
    if not args.workdir:
      shutil.rmtree(workdir, ignore_errors=True)
  print(table(out))
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(out, f, indent=2, sort_keys=True)
  missing = [(c, i) for c, rs in out['results'].items() for i, r in rs.items()
             if r is None or r['secs'] is None]
  for c, i in missing:
    print('%s / %s: %s' % (c, i, (out['results'][c][i] or {}).get('error')),
          file=sys.stderr)
  return 1 if missing else 0


# ---------------------------------------------------------------------------
# Child side (case 2): one process, a queue runner stuck in a TF op
# ---------------------------------------------------------------------------

def _stuck_queue_child(argv):
  p = argparse.ArgumentParser()
  p.add_argument('--cluster')           # given by cluster_utils; unused
  p.add_argument('--task_index', type=int, default=0)
  p.add_argument('--impl', choices=IMPLS, required=True)
  p.add_argument('--options', default='{}')
  args = p.parse_args(argv)
  opts = json.loads(args.options)
  cluster_utils.start_watchdog()
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.compat.v1.disable_eager_execution()
  if args.impl == 'fastmts':
    import fastmts as impl  # pylint: disable=g-import-not-at-top
  else:
    impl = tf.compat.v1.train

  def event(name, **kw):
    kw.update(event=name, t=time.time())
    print(cluster_utils.EVENT_PREFIX + json.dumps(kw), flush=True)

  result = {'impl': args.impl, 'error': None, 'steps_run': 0}
  kwargs = {}
  if 'stop_grace_period_secs' in opts:
    kwargs['stop_grace_period_secs'] = opts['stop_grace_period_secs']
  with tf.Graph().as_default():
    from test_prompt_start_stop import _graph_with_stuck_queue_runner  # pylint: disable=g-import-not-at-top
    train = _graph_with_stuck_queue_runner()
    try:
      with impl.MonitoredTrainingSession(
          checkpoint_dir=opts['checkpoint_dir'], save_summaries_steps=None,
          log_step_count_steps=None,
          hooks=[tf.compat.v1.train.StopAtStepHook(last_step=opts['last_step'])],
          **kwargs) as sess:
        while not sess.should_stop():
          sess.run(train)
          result['steps_run'] += 1
          result['t_last_step'] = time.time()
        event('closing')
    except Exception as e:  # pylint: disable=broad-except
      result['error'] = {'type': type(e).__name__, 'message': str(e)}
      event('closing')
    result['t_closed'] = time.time()
  result['checkpoint'] = tf.train.latest_checkpoint(opts['checkpoint_dir'])
  if args.impl == 'fastmts':
    result['live_native_threads'] = impl._native.live_native_threads()  # pylint: disable=protected-access
  print(cluster_utils.RESULT_PREFIX + json.dumps(result), flush=True)
  sys.stderr.flush()
  # Stock's queue-runner thread may still be unwinding; nothing else to do.
  os._exit(1 if result['error'] else 0)


if __name__ == '__main__':
  if '--cluster' in sys.argv[1:]:
    _stuck_queue_child(sys.argv[1:])
  sys.exit(main())
