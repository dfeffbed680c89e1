"""A real TensorFlow cluster on loopback gRPC, one process per task.

    with cluster_utils.Cluster(workdir) as c:          # 1 ps + 2 workers
      c.start_ps()
      c.start_worker(0, impl='fastmts', options={'last_step': 20,
                                                 'checkpoint_dir': d})
      c.start_worker(1, impl='fastmts', options={'last_step': 20})
      results = c.wait_results(['worker0', 'worker1'], timeout=60)

Ports are picked at run time (a socket bound to port 0). Every task runs in
its own process, ``subprocess.Popen([sys.executable, script, ...],
start_new_session=True)``, with ``PYTHONPATH`` leading to this process's
fastmts (compat_utils.child_env) and ``TF_CPP_MIN_LOG_LEVEL=2``; stdout and stderr go to files in
the work directory (no pipe can fill up). The ps runs
``tf.distribute.Server(cluster, job_name='ps', task_index=0).join()``; a
worker runs a training script (``TRAIN_SCRIPT`` by default, or any Python
source string or file) that gets ``--cluster <json> --task_index <i> --impl
<tf|fastmts> --options <json>`` and prints one result line
``CLUSTER_RESULT <json>`` on stdout (and ``CLUSTER_EVENT <json>`` progress
lines).

Leaving the ``with`` block (normally, or by an exception or pytest-timeout's
signal) kills every process's group with SIGKILL and waits for it.  As a
second line of defence, the scripts generated from source exit by themselves
when their parent process goes away or after ``max_lifetime_secs``.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import compat_utils


RESULT_PREFIX = 'CLUSTER_RESULT '
EVENT_PREFIX = 'CLUSTER_EVENT '
# How long a hung task is given to print its stacks before the SIGKILL: the
# dump is a few writes from a signal handler; 1 s leaves room for a loaded
# machine.
STACK_DUMP_SECS = 1.0

# Prepended to every script given as source: the child exits on its own when
# the test process is gone (start_new_session=True detaches it from the
# terminal's signals) or after a hard lifetime cap, and prints its threads'
# stacks when told to (SIGUSR1).
WATCHDOG_PRELUDE = r'''
import faulthandler as _wd_fh, os as _wd_os, signal as _wd_signal, sys as _wd_sys
import threading as _wd_threading, time as _wd_time
# SIGUSR1 (Task.dump_stacks, before a hung task's SIGKILL) prints every thread's Python
# stack to stderr: a hung task's failure then says where it waited.
_wd_fh.register(_wd_signal.SIGUSR1, file=_wd_sys.stderr, all_threads=True)
def _wd_watch(parent=int(_wd_os.environ.get('CLUSTER_UTILS_PARENT_PID', '0')),
              deadline=_wd_time.monotonic() + float(
                  _wd_os.environ.get('CLUSTER_UTILS_MAX_LIFETIME', '600'))):
  while True:
    if (parent and _wd_os.getppid() != parent) or _wd_time.monotonic() > deadline:
      _wd_os._exit(70)
    _wd_time.sleep(0.5)
_wd_threading.Thread(target=_wd_watch, name='cluster-utils-watchdog', daemon=True).start()
del _wd_watch
'''



def start_watchdog():
  """For a script run from a file (no prelude): the same watchdog thread."""
  exec(compile(WATCHDOG_PRELUDE, '<cluster_utils watchdog>', 'exec'), {})


PS_SCRIPT = r'''
import argparse, json, os, sys, time
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
p = argparse.ArgumentParser()
p.add_argument('--cluster', required=True)
p.add_argument('--job_name', default='ps')
p.add_argument('--task_index', type=int, default=0)
args, _ = p.parse_known_args()
import tensorflow as tf
cluster = tf.train.ClusterSpec(json.loads(args.cluster))
server = tf.distribute.Server(cluster, job_name=args.job_name,
                              task_index=args.task_index, start=True)
print('CLUSTER_EVENT ' + json.dumps({'event': 'server_started', 't': time.time(),
                                     'target': server.target}), flush=True)
server.join()
'''

# The default worker: between-graph replication of a tiny deterministic
# model (w: 4 floats on the ps, loss = sum(w), SGD with learning rate 1 and
# locking, so each applied step lowers every w by exactly 1 and w == -global
# step), MonitoredTrainingSession of tf.compat.v1.train or fastmts.
#
# options (JSON):
#   last_step (int, 20)            StopAtStepHook(last_step=...)
#   checkpoint_dir (None)          passed on the chief only
#   save_checkpoint_steps, save_summaries_steps, save_checkpoint_secs,
#   log_step_count_steps, stop_grace_period_secs, max_wait_secs
#                                  passed on when present
#   sync_replicas (False)          SyncReplicasOptimizer(replicas_to_aggregate=
#                                  n, total_num_replicas=n), n = #workers, with
#                                  make_session_run_hook(is_chief) in hooks
#   recovery (None)                fastmts.RecoveryPolicy(**recovery)
#   step_sleep (0.0)               seconds slept after every step
#   go_file (None)                 wait for this file to exist before creating
#                                  the session (event 'waiting_for_go' first)
#   device_filters (True)          ConfigProto(device_filters=[ps, own task])
#   step_events (False)            print a 'step' event after every step
#
# Result: task_index, is_chief, impl, error ({type, message} or None),
# steps_run, last_global_step (fetched by this worker's hook in its last step's
# run: unordered with that step's increment), t_* wall times,
# hooks {name: {method: count}}, creation_global_steps (global step read in
# every after_create_session), preemptions (error classes TF/fastmts logged
# before re-creating a session), final (global_step, w) read after close.
TRAIN_SCRIPT = r'''
import argparse, json, logging, os, sys, time
T_START = time.time()
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
p = argparse.ArgumentParser()
p.add_argument('--cluster', required=True)
p.add_argument('--task_index', type=int, required=True)
p.add_argument('--impl', choices=['tf', 'fastmts'], required=True)
p.add_argument('--options', default='{}')
args = p.parse_args()
opts = json.loads(args.options)

def event(name, **kw):
  kw.update(event=name, t=time.time())
  print('CLUSTER_EVENT ' + json.dumps(kw), flush=True)

import tensorflow as tf
tf.compat.v1.disable_eager_execution()
tf.get_logger().setLevel(logging.INFO)
if args.impl == 'fastmts':
  import fastmts as impl
else:
  impl = tf.compat.v1.train

preemptions = []
class _PreemptionLog(logging.Handler):
  def emit(self, record):
    msg = str(record.msg)
    if 'preemption' in msg:
      errs = [type(a).__name__ for a in (record.args or ())
              if isinstance(a, BaseException)]
      preemptions.append(errs[0] if errs else msg[:60])
tf.get_logger().addHandler(_PreemptionLog())

cluster_def = json.loads(args.cluster)
cluster = tf.train.ClusterSpec(cluster_def)
idx = args.task_index
is_chief = idx == 0
num_workers = len(cluster_def['worker'])
server = tf.distribute.Server(cluster, job_name='worker', task_index=idx, start=True)
t_server = time.time()
config = None
if opts.get('device_filters', True):
  config = tf.compat.v1.ConfigProto(
      device_filters=['/job:ps', '/job:worker/task:%d' % idx])

counts = {}
creation_global_steps = []
state = {'last_global_step': None, 't_first_create': None}

class Recorder(impl.SessionRunHook):
  def __init__(self, name):
    self.name = name
    counts[name] = dict.fromkeys(
        ['begin', 'after_create_session', 'before_run', 'after_run', 'end'], 0)
  def _count(self, method):
    counts[self.name][method] += 1
  def begin(self):
    self._count('begin')
  def after_create_session(self, session, coord):
    self._count('after_create_session')
    if self.name == 'all':
      if state['t_first_create'] is None:
        state['t_first_create'] = time.time()
      creation_global_steps.append(int(session.run(global_step)))
      event('session_created', global_step=creation_global_steps[-1])
  def before_run(self, run_context):
    self._count('before_run')
    return tf.compat.v1.train.SessionRunArgs(global_step)
  def after_run(self, run_context, run_values):
    self._count('after_run')
    if self.name == 'all':
      state['last_global_step'] = int(run_values.results)
  def end(self, session):
    self._count('end')

with tf.Graph().as_default():
  with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
      cluster=cluster, worker_device='/job:worker/task:%d' % idx)):
    global_step = tf.compat.v1.train.get_or_create_global_step()
    w = tf.compat.v1.get_variable('w', [4], initializer=tf.compat.v1.zeros_initializer())
    loss = tf.reduce_sum(w, name='loss')
    opt = tf.compat.v1.train.GradientDescentOptimizer(1.0, use_locking=True)
    if opts.get('sync_replicas'):
      opt = tf.compat.v1.train.SyncReplicasOptimizer(
          opt, replicas_to_aggregate=num_workers, total_num_replicas=num_workers)
    train_op = opt.minimize(loss, global_step=global_step)
  hooks = [tf.compat.v1.train.StopAtStepHook(last_step=opts.get('last_step', 20)),
           Recorder('all')]
  if opts.get('sync_replicas'):
    hooks.append(opt.make_session_run_hook(is_chief))
  kwargs = {}
  for k in ('save_checkpoint_steps', 'save_summaries_steps', 'save_checkpoint_secs',
            'log_step_count_steps', 'stop_grace_period_secs', 'max_wait_secs'):
    if k in opts:
      kwargs[k] = opts[k]
  if opts.get('recovery') is not None:
    kwargs['recovery'] = impl.RecoveryPolicy(**opts['recovery'])
  if opts.get('go_file'):
    event('waiting_for_go')
    while not os.path.exists(opts['go_file']):
      time.sleep(0.01)
  step_sleep = opts.get('step_sleep', 0.0)
  step_events = opts.get('step_events', False)
  result = {'task_index': idx, 'is_chief': is_chief, 'impl': args.impl,
            'error': None, 'steps_run': 0, 't_start': T_START, 't_server': t_server}
  event('creating_session')
  result['t_mts_start'] = time.time()
  try:
    with impl.MonitoredTrainingSession(
        master=server.target, is_chief=is_chief,
        checkpoint_dir=opts.get('checkpoint_dir') if is_chief else None,
        hooks=hooks, chief_only_hooks=[Recorder('chief_only')], config=config,
        **kwargs) as sess:
      result['t_mts_created'] = time.time()
      while not sess.should_stop():
        sess.run(train_op)
        result['steps_run'] += 1
        result['t_last_step'] = time.time()
        if step_events:
          event('step', global_step=state['last_global_step'])
        if step_sleep:
          time.sleep(step_sleep)
      result['t_loop_done'] = time.time()
  except Exception as e:  # reported, not raised: the test reads the result
    result['error'] = {'type': type(e).__name__, 'message': str(e)}
  result['t_closed'] = time.time()
  result.update(hooks=counts, creation_global_steps=creation_global_steps,
                last_global_step=state['last_global_step'],
                t_first_create=state['t_first_create'], preemptions=preemptions)
  if result['error'] is None and opts.get('read_final', True):
    try:
      read_config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=10000)
      if config is not None:
        read_config.MergeFrom(config)
      with tf.compat.v1.Session(server.target, config=read_config) as s:
        g, wv = s.run([global_step, w])
      result['final'] = {'global_step': int(g), 'w': [float(x) for x in wv]}
    except Exception as e:
      result['final'] = {'error': '%s: %s' % (type(e).__name__, e)}
print('CLUSTER_RESULT ' + json.dumps(result), flush=True)
result['t_printed'] = time.time()
sys.exit(1 if result['error'] else 0)
'''


def worker_args(argv=None):
  """The arguments a worker script gets from Cluster.start_worker:
  cluster (the JSON text), task_index, impl, and options (parsed)."""
  import argparse  # pylint: disable=g-import-not-at-top
  p = argparse.ArgumentParser()
  p.add_argument('--cluster', required=True)
  p.add_argument('--task_index', type=int, required=True)
  p.add_argument('--impl', default='fastmts')
  p.add_argument('--options', default='{}')
  args = p.parse_args(argv)
  args.options = json.loads(args.options)
  return args


def collective_worker(args):
  """This worker's part of a between-graph cluster of workers only, with TF's
  collective ops led by worker 0 (`args` from worker_args()): (rank, ranks,
  server, config, device), the server started and `config` the one every
  session of the worker must use."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  spec = json.loads(args.cluster)
  ranks, rank = len(spec['worker']), args.task_index
  config = tf.compat.v1.ConfigProto()
  config.experimental.collective_group_leader = '/job:worker/replica:0/task:0'
  server = tf.distribute.Server(tf.train.ClusterSpec(spec), job_name='worker',
                                task_index=rank, config=config)
  return rank, ranks, server, config, '/job:worker/task:%d/device:CPU:0' % rank


def free_ports(n):
  """``n`` distinct TCP ports that were free a moment ago (bound to port 0)."""
  socks, ports = [], []
  try:
    while len(ports) < n:
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind(('', 0))
      socks.append(s)
      ports.append(s.getsockname()[1])
  finally:
    for s in socks:
      s.close()
  return ports


def make_cluster_spec(num_ps=1, num_workers=2, host='localhost'):
  """A cluster dict {'ps': [...], 'worker': [...]} on fresh loopback ports."""
  ports = free_ports(num_ps + num_workers)
  return {
      'ps': ['%s:%d' % (host, p) for p in ports[:num_ps]],
      'worker': ['%s:%d' % (host, p) for p in ports[num_ps:]],
  }


def child_env(extra=None):
  """compat_utils.child_env (the children import this process's fastmts),
  unbuffered, and told their parent's pid."""
  env = compat_utils.child_env()
  env['PYTHONUNBUFFERED'] = '1'
  env['CLUSTER_UTILS_PARENT_PID'] = str(os.getpid())
  if extra:
    env.update(extra)
  return env


class ProcessFailed(AssertionError):
  pass


class ProcessTimedOut(ProcessFailed):
  """A task still running past its deadline (a hang, or a very slow task)."""


class Task:
  """One process of the cluster."""

  def __init__(self, name, popen, stdout_path, stderr_path, timeout):
    self.name = name
    self.popen = popen
    self.stdout_path = stdout_path
    self.stderr_path = stderr_path
    self.started = time.time()
    self.deadline = time.monotonic() + timeout
    self.exit_time = None  # wall time the exit was first seen

  @property
  def pid(self):
    return self.popen.pid

  def poll(self):
    rc = self.popen.poll()
    if rc is not None and self.exit_time is None:
      self.exit_time = time.time()
    return rc

  def stdout(self):
    with open(self.stdout_path, errors='replace') as f:
      return f.read()

  def stderr_tail(self, n=40):
    try:
      with open(self.stderr_path, errors='replace') as f:
        lines = [l for l in f.read().splitlines()
                 if not l.startswith(('I0000', 'W0000', 'E0000'))]
    except OSError:
      return ''
    return '\n'.join(lines[-n:])

  def events(self):
    out = []
    for line in self.stdout().splitlines():
      if line.startswith(EVENT_PREFIX):
        out.append(json.loads(line[len(EVENT_PREFIX):]))
    return out

  def result(self):
    """The parsed CLUSTER_RESULT line, or None."""
    for line in self.stdout().splitlines():
      if line.startswith(RESULT_PREFIX):
        return json.loads(line[len(RESULT_PREFIX):])
    return None

  def dump_stacks(self):
    """SIGUSR1: the watchdog prelude prints every thread's Python stack to
    stderr (faulthandler, from the signal handler: a thread hung in TF's C++
    does not stop it). The process runs on."""
    if self.popen.poll() is None:
      try:
        os.kill(self.popen.pid, signal.SIGUSR1)
      except ProcessLookupError:
        pass

  def kill(self, wait_secs=10.0):
    """SIGKILL the process group, then wait for the process."""
    if self.popen.poll() is None:
      try:
        os.killpg(self.popen.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
      except PermissionError:
        self.popen.kill()
    try:
      self.popen.wait(timeout=wait_secs)
    except subprocess.TimeoutExpired:
      pass
    self.poll()

  def describe(self, n=40):
    return '%s (pid %d, rc %r)\n--- stderr tail ---\n%s' % (
        self.name, self.pid, self.popen.poll(), self.stderr_tail(n))


class Cluster:
  """A loopback cluster; a context manager that kills all its processes."""

  def __init__(self, workdir, num_ps=1, num_workers=2, max_lifetime_secs=300,
               cluster_spec=None):
    self.workdir = str(workdir)
    os.makedirs(self.workdir, exist_ok=True)
    self.cluster_spec = cluster_spec or make_cluster_spec(num_ps, num_workers)
    self.max_lifetime_secs = max_lifetime_secs
    self.tasks = {}          # name -> current Task
    self.all_tasks = []      # every Task ever started (restarts included)
    self._n = 0

  # -- context manager ------------------------------------------------------
  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.kill_all()
    return False

  def kill_all(self):
    for t in self.all_tasks:
      t.kill()

  def alive_pids(self):
    return [t.pid for t in self.all_tasks if t.popen.poll() is None]

  # -- starting -------------------------------------------------------------
  def _script_file(self, script, stem):
    if os.path.isfile(script):
      return script
    self._n += 1
    path = os.path.join(self.workdir, '%s_%d.py' % (stem, self._n))
    with open(path, 'w') as f:
      f.write(WATCHDOG_PRELUDE + script)
    return path

  def _launch(self, name, script, args, timeout, env=None):
    self._n += 1
    out = os.path.join(self.workdir, '%s_%d.stdout' % (name, self._n))
    err = os.path.join(self.workdir, '%s_%d.stderr' % (name, self._n))
    path = self._script_file(script, name)
    with open(out, 'w') as fo, open(err, 'w') as fe:
      popen = subprocess.Popen(
          [sys.executable, path] + list(args), stdout=fo, stderr=fe,
          stdin=subprocess.DEVNULL, cwd=self.workdir, start_new_session=True,
          env=child_env(dict(env or {}, CLUSTER_UTILS_MAX_LIFETIME=str(
              self.max_lifetime_secs))))
    task = Task(name, popen, out, err, timeout)
    self.tasks[name] = task
    self.all_tasks.append(task)
    return task

  def cluster_json(self):
    return json.dumps(self.cluster_spec)

  def start_ps(self, task_index=0, timeout=None):
    """Starts ps task ``task_index`` (``Server(...).join()``)."""
    return self._launch('ps%d' % task_index, PS_SCRIPT,
                        ['--cluster', self.cluster_json(), '--job_name', 'ps',
                         '--task_index', str(task_index)],
                        timeout or self.max_lifetime_secs)

  def restart_ps(self, task_index=0, timeout=None):
    """SIGKILLs ps ``task_index`` and starts it again on the same port."""
    self.tasks['ps%d' % task_index].kill()
    return self.start_ps(task_index, timeout)

  def start_worker(self, task_index, impl='fastmts', options=None,
                   script=TRAIN_SCRIPT, timeout=120, env=None):
    """Starts worker ``task_index`` running ``script`` (source or a file)."""
    return self._launch(
        'worker%d' % task_index, script,
        ['--cluster', self.cluster_json(), '--task_index', str(task_index),
         '--impl', impl, '--options', json.dumps(options or {})],
        timeout, env)

  # -- waiting --------------------------------------------------------------
  def wait_exit(self, names, timeout=None, poll_secs=0.05):
    """Waits for the processes ``names`` to exit (each until its own
    deadline, and all within ``timeout`` if given); records their exit
    times. A process past its deadline is killed and ProcessTimedOut raised
    (every running one, after a dump of its threads' stacks)."""
    tasks = [self.tasks[n] for n in names]
    end = None if timeout is None else time.monotonic() + timeout
    while True:
      pending = [t for t in tasks if t.poll() is None]
      if not pending:
        return {t.name: t.popen.returncode for t in tasks}
      now = time.monotonic()
      late = [t for t in pending
              if now > t.deadline or (end is not None and now > end)]
      if late:
        # Every task of the wait, with the stacks of those still running: a
        # late one often waits on another (that ended, with an error or a
        # result, or that waits too).
        for t in pending:
          t.dump_stacks()
        time.sleep(STACK_DUMP_SECS)
        for t in pending:
          t.kill()
        raise ProcessTimedOut('timed out waiting for: %s\n%s' % (
            ', '.join(t.name for t in late), '\n'.join(
                t.describe(80) + '\n--- stdout ---\n' + t.stdout()[-2000:]
                for t in tasks)))
      time.sleep(poll_secs)

  def wait_results(self, names, timeout=None):
    """wait_exit, then {name: result dict}; ProcessFailed if one printed no
    result."""
    self.wait_exit(names, timeout)
    results = {}
    for n in names:
      r = self.tasks[n].result()
      if r is None:
        raise ProcessFailed('no result from ' + self.tasks[n].describe())
      r['exit_time'] = self.tasks[n].exit_time
      r['returncode'] = self.tasks[n].popen.returncode
      results[n] = r
    return results

  def wait_event(self, name, predicate, timeout, poll_secs=0.02):
    """Waits until task ``name`` printed an event with ``predicate(event)``;
    returns it. ProcessFailed if the process exits or the time runs out."""
    task = self.tasks[name]
    end = time.monotonic() + timeout
    while True:
      for e in task.events():
        if predicate(e):
          return e
      if task.poll() is not None:
        raise ProcessFailed('%s exited before the event\n%s\n--- stdout ---\n%s'
                            % (name, task.describe(), task.stdout()[-2000:]))
      if time.monotonic() > end:
        raise ProcessFailed('no such event from %s within %s s\n%s'
                            % (name, timeout, task.describe()))
      time.sleep(poll_secs)


@contextlib.contextmanager
def cluster(workdir, **kwargs):
  """``with cluster(dir) as c:`` -- the same as ``with Cluster(dir) as c:``."""
  with Cluster(workdir, **kwargs) as c:
    yield c


def read_ps_variables(cluster_spec, variables, task_index=0, timeout_ms=10000):
  """Reads variables living on ps ``task_index`` from this process.

  ``variables``: {name: (dtype, shape)}. Builds a graph with variables of
  those names on the ps (never initialized here: the handles find the
  existing resources) and runs their values in a session whose master is
  the ps itself, restricted to the ps (other tasks may be gone).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  ps = cluster_spec['ps'][task_index]
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:ps/task:%d' % task_index):
      # Of the kind the training made (this process's default, as theirs):
      # resource variables in TF 2, ref variables in 1.15.
      handles = {name: tf.compat.v1.get_variable(name, shape, dtype)
                 for name, (dtype, shape) in variables.items()}
    config = tf.compat.v1.ConfigProto(
        device_filters=['/job:ps/task:%d' % task_index],
        operation_timeout_in_ms=timeout_ms)
    with tf.compat.v1.Session('grpc://' + ps, config=config) as sess:
      return sess.run({n: v.read_value() for n, v in handles.items()})
