"""One process of a docstring example that test_doc_examples.py signals (run as a script).

The example's source comes in `--options` ({'example': ..., 'source': ...,
'checkpoint_dir': ...}), already with the harness's substitutions made; this
script builds what the example names and runs it with exec, as the body of a
user's script:

- 'preemption' (fastmts/preemption.py's module example): one process; `d`
  the checkpoint directory, `train_op` global_step += 1 (and a py_func that
  counts the steps run, prints CLUSTER_EVENT 'training' at the first and
  sleeps 2 ms, so that the signal finds the loop running).
- 'agreed_stop' (fastmts/agreed_stop.py's module example): one rank of a
  loopback cluster with TF's collective ops (as tests/agreed_stop_rank.py):
  `engine` a CollectiveEngine, `train_op` w += all_reduce(1) / ranks and
  global_step += 1 (the same py_func), `session_args` what the example's
  `...` stands for: the rank's server and collective config, rank 0's
  checkpoint_dir, and the SIGTERM option.

When the example exits (its `sys.exit`), the script prints CLUSTER_RESULT
(the exit code, the steps run, the latest checkpoint's global step) and
exits with that code.
"""
import json
import os
import sys
import threading
import time

import cluster_utils

cluster_utils.start_watchdog()
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
args = cluster_utils.worker_args()
opts = args.options

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

import fastmts  # pylint: disable=g-import-not-at-top,wrong-import-position

tf1 = tf.compat.v1
tf1.disable_eager_execution()
STEP_SLEEP_SECS = 0.002
_steps = [0]
_lock = threading.Lock()


def _count_step(_):
  with _lock:
    _steps[0] += 1
    first = _steps[0] == 1
  if first:
    print(cluster_utils.EVENT_PREFIX + json.dumps(
        {'event': 'training', 'pid': os.getpid(), 't': time.time()}), flush=True)
  time.sleep(STEP_SLEEP_SECS)
  return np.int32(0)


def _train_op(update):
  """global_step += 1 with `update`, and the step counter."""
  global_step = tf1.train.get_or_create_global_step()
  with tf1.control_dependencies([update, global_step.assign_add(1)]):
    counted = tf1.py_func(_count_step, [global_step], tf.int32, stateful=True)
  return tf.group(counted)


def preemption_names():
  ckpt = opts['checkpoint_dir']
  return ckpt, {'d': ckpt, 'train_op': _train_op(tf.no_op())}


def agreed_stop_names():
  from tensorflow.python.ops import collective_ops  # pylint: disable=g-import-not-at-top
  rank, ranks, server, config, device = cluster_utils.collective_worker(args)
  with tf1.device(device):
    w = tf1.get_variable('w', [], tf.float32, tf1.zeros_initializer())
    mean = collective_ops.all_reduce(tf.constant(1.0), ranks, 101, 101, 'Add', 'Div')
    train_op = _train_op(w.assign_add(mean))
  ckpt = opts['checkpoint_dir'] if rank == 0 else None
  session_args = dict(master=server.target, config=config, is_chief=True,
                      checkpoint_dir=ckpt, save_checkpoint_secs=None,
                      save_summaries_steps=None, log_step_count_steps=None)
  return ckpt, {'engine': fastmts.CollectiveEngine(ranks, device=device),
                'train_op': train_op, 'session_args': session_args}


def main():
  names = {'preemption': preemption_names, 'agreed_stop': agreed_stop_names}
  ckpt, namespace = names[opts['example']]()
  namespace.update(fastmts=fastmts, sys=sys, __name__='__main__')
  code = None
  try:
    exec(compile(opts['source'], opts['example'] + ' example', 'exec'), namespace)  # pylint: disable=exec-used
  except SystemExit as e:
    code = e.code
  latest = tf1.train.latest_checkpoint(ckpt) if ckpt else None
  print(cluster_utils.RESULT_PREFIX + json.dumps({
      'exit_code': code, 'steps': _steps[0],
      'checkpoint_step': latest and int(tf1.train.load_variable(latest, 'global_step')),
  }), flush=True)
  sys.exit(code)


if __name__ == '__main__':
  main()
