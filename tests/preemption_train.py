"""A training process for test_preemption_processes.py (run as a script).

Trains w += 1, global_step += 1 per step (w == global step in any consistent
checkpoint) with MonitoredTrainingSession of TF or fastmts, locally or as a
between-graph task of a loopback cluster (cluster_utils), and prints
``CLUSTER_EVENT`` lines: 'creating' before the session, 'step' after every
step (with the global step). At the end it prints ``CLUSTER_RESULT`` (steps
run, the error that ended it, fastmts's Preemption record) and exits with
the preemption's exit code (143 for SIGTERM) when preempted. A SIGTERM
without fastmts's preemption ends it the default way (no result).

    --cluster <json or ''> --task_index <i> --impl tf|fastmts --options <json>
options: preemption (False), checkpoint_dir, save_checkpoint_steps,
save_checkpoint_secs, last_step (None: forever), step_sleep (0.01),
max_wait_secs (7200).
"""
import argparse
import json
import os
import sys
import time

import cluster_utils

cluster_utils.start_watchdog()
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
parser = argparse.ArgumentParser()
parser.add_argument('--cluster', default='')
parser.add_argument('--task_index', type=int, default=0)
parser.add_argument('--impl', choices=['tf', 'fastmts'], required=True)
parser.add_argument('--options', default='{}')
args = parser.parse_args()
opts = json.loads(args.options)


def event(name, **kw):
  kw.update(event=name, t=time.time())
  print(cluster_utils.EVENT_PREFIX + json.dumps(kw), flush=True)


import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

tf.compat.v1.disable_eager_execution()
if args.impl == 'fastmts':
  import fastmts as impl  # pylint: disable=g-import-not-at-top
else:
  impl = tf.compat.v1.train

is_chief = args.task_index == 0
master, device, config = '', None, None
if args.cluster:
  spec = tf.train.ClusterSpec(json.loads(args.cluster))
  server = tf.distribute.Server(spec, job_name='worker', task_index=args.task_index)
  master = server.target
  device = tf.compat.v1.train.replica_device_setter(
      cluster=spec, worker_device='/job:worker/task:%d' % args.task_index)
  config = tf.compat.v1.ConfigProto(
      device_filters=['/job:ps', '/job:worker/task:%d' % args.task_index])

kwargs = {k: opts[k] for k in ('save_checkpoint_steps', 'save_checkpoint_secs', 'max_wait_secs')
          if k in opts}
if opts.get('preemption'):
  kwargs['preemption'] = True

with tf.Graph().as_default():
  with tf.compat.v1.device(device):
    global_step = tf.compat.v1.train.get_or_create_global_step()
    w = tf.compat.v1.get_variable('w', [4], initializer=tf.compat.v1.zeros_initializer())
    with tf.control_dependencies([w.assign_add(tf.ones([4]), use_locking=True)]):
      train_op = global_step.assign_add(1, use_locking=True)
  hooks = []
  if opts.get('last_step') is not None:
    hooks.append(tf.compat.v1.train.StopAtStepHook(last_step=opts['last_step']))
  steps, error, sess, raised = 0, None, None, None
  event('creating')
  try:
    with impl.MonitoredTrainingSession(master=master, is_chief=is_chief,
                                       checkpoint_dir=opts.get('checkpoint_dir'), hooks=hooks,
                                       save_summaries_steps=None, log_step_count_steps=None,
                                       config=config, **kwargs) as sess:
      event('created', global_step=int(sess.run(global_step)) if not sess.should_stop() else None)
      while not sess.should_stop():
        step = int(sess.run(train_op))
        steps += 1
        event('step', global_step=step)
        time.sleep(opts.get('step_sleep', 0.01))
  except Exception as e:  # pylint: disable=broad-except
    raised = e
    error = {'type': type(e).__name__, 'message': str(e)}

# The session's record, or a Preempted error's (raised before a session existed).
preemption = getattr(sess, 'preemption', None) or getattr(raised, 'preemption', None)
record = None
if preemption is not None:
  record = {'signal': preemption.signal.name, 'step': preemption.step,
            'checkpoint_path': preemption.checkpoint_path,
            'signals_received': preemption.signals_received,
            'seconds_to_close': preemption.seconds_to_close, 'exit_code': preemption.exit_code}
print(cluster_utils.RESULT_PREFIX + json.dumps(
    {'steps': steps, 'error': error, 'preemption': record, 't_end': time.time()}), flush=True)
if preemption is not None:
  sys.exit(preemption.exit_code)
