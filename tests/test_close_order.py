"""TF's close order with queue runners blocked in an enqueue.

TF's MonitoredSession closes in this order: request stop; the runners'
cancel ops close their queues (cancelling the enqueues blocked on them);
join the threads; then close the session. Closing the session while an
enqueue waits on a queue that is still open makes TF's queue log "Skipping
cancelled enqueue attempt with queue not closed" (queue_base.cc). Here the
cancel op is held up behind a slow enqueue (one inter-op thread, busy in a
py_func), so a close that does not wait for it shows in TF's C++ log. The
C++ log lines of the queue at close are compared, each side in its own
process (TF_CPP_MIN_LOG_LEVEL=0).
"""

import re
import subprocess
import sys

import pytest

from compat_utils import child_env

# Bounds on a hang, not on slowness, sized for a loaded 2-core machine: beside two
# CPU-bound processes a child here took up to 34 s, a test (two children, one after the
# other) 68 s. The test's bound is above both children's, so that a child's fires first.
_CHILD_HANG_BOUND_SECS = 240
pytestmark = pytest.mark.timeout(2 * _CHILD_HANG_BOUND_SECS + 60)

# Each script's start: `train` is tf.compat.v1.train, or fastmts when the
# first argument says so.
_AS_IMPL = r"""
import sys
import tensorflow as tf
v1 = tf.compat.v1
v1.disable_eager_execution()
if sys.argv[1] == 'fastmts':
  import fastmts as train
else:
  train = v1.train
"""

# Four enqueue threads into a queue of one, each enqueue waiting on a 0.4 s
# py_func on the only inter-op thread, so enqueues wait on the full queue
# while the runner's cancel op waits behind a py_func (in 3 of 4 runs longer
# than fastmts's 0.25 s patience with threads after the stop, when the
# close did not wait for the cancel op). One step dequeues, then the
# session closes; three sessions, one after the other.
_SCENARIO = _AS_IMPL + r"""
import time

def slow(x):
  time.sleep(0.4)
  return x

for attempt in range(3):
  with tf.Graph().as_default():
    queue = tf.queue.FIFOQueue(1, [tf.float32], shapes=[[]])
    value = v1.py_func(slow, [tf.constant(1.0)], tf.float32, stateful=True)
    value.set_shape([])
    v1.train.add_queue_runner(v1.train.QueueRunner(queue, [queue.enqueue(value)] * 4))
    dequeue = queue.dequeue()
    config = v1.ConfigProto(inter_op_parallelism_threads=1, intra_op_parallelism_threads=1)
    with train.MonitoredSession(session_creator=train.ChiefSessionCreator(config=config)) as sess:
      print('dequeued', sess.run(dequeue), flush=True)
    print('closed', flush=True)
"""

# TF's C++ log prefix: severity, date and time, thread id.
_PREFIX = re.compile(r'^([WEIF])\d{4} [\d:.]+ +\d+ ')


def _queue_log_at_close(impl):
  done = subprocess.run([sys.executable, '-c', _SCENARIO, impl], capture_output=True,
                        text=True, timeout=_CHILD_HANG_BOUND_SECS, check=False,
                        env=dict(child_env(), TF_CPP_MIN_LOG_LEVEL='0'))
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stdout.split() == ['dequeued', '1.0', 'closed'] * 3
  return [_PREFIX.sub(r'\1 ', line) for line in done.stderr.splitlines()
          if 'queue_base' in line]


def test_close_cancels_no_enqueue_of_an_open_queue(fastmts):
  del fastmts
  want = _queue_log_at_close('tf')
  assert want == []
  assert _queue_log_at_close('fastmts') == want


# A MonitoredSession made and never closed, on a graph whose queue runner
# (count_up_to, as TF's queue_runner_test) ends by itself, leaving the thread
# that runs the cancel op waiting for a stop; then the process exits.
_NEVER_CLOSED = _AS_IMPL + r"""
with tf.Graph().as_default():
  var = v1.Variable(tf.constant(0, tf.int64))
  queue = tf.queue.FIFOQueue(10, tf.float32)
  v1.train.add_queue_runner(v1.train.QueueRunner(queue, [var.count_up_to(3)]))
  with v1.Session() as sess:
    sess.run(v1.global_variables_initializer())
    print(v1.train.start_queue_runners(train.MonitoredSession()), flush=True)
print('exiting', flush=True)
"""


def test_exit_with_a_session_never_closed(fastmts):
  """TF's runner threads are daemons the interpreter abandons at exit; the
  native ones are stopped and joined while TF is whole (a native thread
  left to run its cancel op at teardown crashed the process)."""
  del fastmts

  def outcome(impl):
    done = subprocess.run([sys.executable, '-c', _NEVER_CLOSED, impl], capture_output=True,
                          text=True, timeout=_CHILD_HANG_BOUND_SECS, check=False, env=child_env())
    return done.returncode, done.stdout.split()

  want = outcome('tf')
  assert want == (0, ['[]', 'exiting'])
  assert outcome('fastmts') == want
