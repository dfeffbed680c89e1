"""horovodrun on loopback, bounded: for tests/test_horovod.py and bench/horovod_bench.py.

    run(n, [script, args...], log_dir, timeout)   # horovodrun -np n -H localhost:n --gloo

horovodrun is the one installed beside this Python; it picks its own free
ports (its rendezvous server binds the first free port from a random one, the
ranks meet through it and Gloo's connections bind ephemeral ports): no port
is given here. It runs in a process group of its own
(start_new_session=True), its output goes to files in log_dir (no pipe can
fill up). Past the timeout, or when the caller is interrupted, its whole group
is killed, then every process that carries this launch's marker in its
environment (the ranks: Horovod starts each in a session of its own, which
the group's kill does not reach). Each rank also exits by itself when this
process is gone (FASTMTS_HOROVOD_TEST_PID, read by the rank scripts).
"""

import os
import signal
import subprocess
import sys
import time
import uuid

import compat_utils

# A rank's start (TF and Horovod imported, the ranks met at Gloo's
# rendezvous): horovodrun's --start-timeout, sized for 3 ranks beside two
# CPU-bound processes on 2 cores.
START_TIMEOUT_SECS = 180
MARKER = 'FASTMTS_HOROVOD_LAUNCH'


def horovodrun_path():
  """The horovodrun beside this Python, or None."""
  path = os.path.join(os.path.dirname(sys.executable), 'horovodrun')
  return path if os.access(path, os.X_OK) else None


def _marked(marker):
  """Pids of the processes whose environment holds MARKER=marker."""
  token = ('%s=%s' % (MARKER, marker)).encode()
  pids = []
  for name in os.listdir('/proc'):
    if not name.isdigit() or int(name) == os.getpid():
      continue
    try:
      with open('/proc/%s/environ' % name, 'rb') as f:
        if token in f.read().split(b'\0'):
          pids.append(int(name))
    except OSError:
      continue
  return pids


# How long a process horovodrun started may outlive it: its multiprocessing
# resource tracker exits a moment after it (0.1 s seen), in a session of its
# own; the ranks and Horovod's launcher processes could too.
EXIT_GRACE_SECS = 30


def _lingering(marker, log):
  """The marked processes still running EXIT_GRACE_SECS after horovodrun
  exited: 'pid command' of each. How long the others took goes to the log."""
  start = time.monotonic()
  first = _describe(_marked(marker))
  while _marked(marker) and time.monotonic() < start + EXIT_GRACE_SECS:
    time.sleep(0.1)
  if first:
    with open(log, 'a') as f:
      f.write('\n[horovod_utils] waited %.1f s after horovodrun exited for: %s\n'
              % (time.monotonic() - start, first))
  return _describe(_marked(marker))


def _describe(pids):
  left = []
  for pid in pids:
    try:
      with open('/proc/%d/cmdline' % pid, 'rb') as f:
        left.append('%d %s' % (pid, f.read().replace(b'\0', b' ').decode(errors='replace')[:300]))
    except OSError:
      continue
  return left


def _kill(popen, marker):
  try:
    os.killpg(popen.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  for pid in _marked(marker):
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
  popen.wait()


class Failed(AssertionError):
  pass


def run(n, argv, log_dir, timeout, env=None):
  """Runs `horovodrun -np n -H localhost:n --gloo <python> argv...`; returns
  its output (stdout and stderr, interleaved). Raises Failed with the output's
  tail if it exits non-zero or outlives `timeout` seconds (then killed)."""
  marker = uuid.uuid4().hex
  os.makedirs(log_dir, exist_ok=True)
  log = os.path.join(log_dir, 'horovodrun-%s.log' % marker[:8])
  child_env = compat_utils.child_env()
  child_env.update(env or {}, PYTHONUNBUFFERED='1', FASTMTS_HOROVOD_TEST_PID=str(os.getpid()),
                   FASTMTS_HOROVOD_MAX_SECS=str(timeout + 60), **{MARKER: marker})
  command = [horovodrun_path(), '-np', str(n), '-H', 'localhost:%d' % n, '--gloo',
             '--start-timeout', str(START_TIMEOUT_SECS), sys.executable] + list(argv)
  with open(log, 'w') as out:
    popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=child_env, start_new_session=True)
  try:
    returncode = popen.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    _kill(popen, marker)
    raise Failed('horovodrun did not finish within %d s (killed): %s\n%s'
                 % (timeout, ' '.join(command), _tail(log)))
  except BaseException:
    _kill(popen, marker)
    raise
  left = _lingering(marker, log)
  if left:
    _kill(popen, marker)
  with open(log, errors='replace') as f:
    output = f.read()
  if returncode != 0 or left:
    raise Failed('horovodrun exited with %s%s: %s\n%s' % (
        returncode, ' leaving processes %s (killed)' % left if left else '',
        ' '.join(command), _tail(log)))
  return output


def _tail(path, chars=6000):
  with open(path, errors='replace') as f:
    return f.read()[-chars:]
