"""One rank of a data-parallel job for test_agreed_stop.py (run as a script).

Each rank trains its own w += allreduce(1) / ranks and global_step += 1 per
step, in lockstep with the others through the engine's collective (TF's
collective all_reduce between graphs on a loopback cluster, or Horovod under
horovodrun), with fastmts.MonitoredTrainingSession(agreed_stop=...,
preemption=True). Rank 0 is the chief with the checkpoint_dir (no periodic
save: only the one at the stop). It prints ``CLUSTER_EVENT`` 'training'
after its first step, then ``CLUSTER_RESULT`` (steps, global step, the
AgreedStopRecord, the Preemption record, the latest checkpoint) and exits
with the agreed stop's exit code (143 when a rank got SIGTERM).

    [--cluster <json> --task_index <i>] --options <json>
options: engine ('collective' or 'horovod'), every_n_steps (1), agreed
(True: with agreed_stop), stop_at ({rank: last_step}: a StopAtStepHook on
those ranks only), step_sleep (0: seconds per step), loop ('run' or
'run_steps'), checkpoint_dir (rank 0's), max_steps (a bound: 100000).
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
parser.add_argument('--impl', default='fastmts')
parser.add_argument('--options', default='{}')
args = parser.parse_args()
opts = json.loads(args.options)

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

import fastmts  # pylint: disable=g-import-not-at-top,wrong-import-position

tf1 = tf.compat.v1
tf1.disable_eager_execution()
TRAIN_KEYS = (101, 101)  # the training allreduce's group and instance keys


def event(name, **kw):
  kw.update(event=name, t=time.time())
  print(cluster_utils.EVENT_PREFIX + json.dumps(kw), flush=True)


def collective_setup():
  """(rank, ranks, master, config, engine, allreduce) of a loopback cluster."""
  from tensorflow.python.ops import collective_ops  # pylint: disable=g-import-not-at-top
  rank, ranks, server, config, device = cluster_utils.collective_worker(args)
  engine = fastmts.CollectiveEngine(ranks, device=device)

  def allreduce(t):
    with tf1.device(device):
      return collective_ops.all_reduce(t, ranks, TRAIN_KEYS[0], TRAIN_KEYS[1], 'Add', 'Div')
  return rank, ranks, server.target, config, engine, allreduce, device


def horovod_setup():
  import horovod.tensorflow as hvd  # pylint: disable=g-import-not-at-top
  hvd.init()
  return (hvd.rank(), hvd.size(), '', None, fastmts.HorovodEngine(),
          lambda t: hvd.allreduce(t, op=hvd.Average, name='train_allreduce'), None)


def results_printed():
  """A Horovod barrier: every rank has printed its result."""
  import horovod.tensorflow as hvd  # pylint: disable=g-import-not-at-top
  with tf.Graph().as_default():
    barrier = hvd.allreduce(tf.constant(0), op=hvd.Sum, name='results_printed')
    with tf1.Session() as sess:
      sess.run(barrier)


def main():
  setup = horovod_setup if opts.get('engine') == 'horovod' else collective_setup
  rank, ranks, master, config, engine, allreduce, device = setup()
  with tf1.device(device):
    global_step = tf1.train.get_or_create_global_step()
    w = tf1.get_variable('w', [], tf.float32, tf1.zeros_initializer())
    train_op = tf.group(w.assign_add(allreduce(tf.constant(1.0))),
                        global_step.assign_add(1))
  hooks = []
  stop_at = opts.get('stop_at', {}).get(str(rank))
  if stop_at is not None:
    hooks.append(tf1.train.StopAtStepHook(last_step=stop_at))
  agreed = (fastmts.AgreedStop(engine, every_n_steps=opts.get('every_n_steps', 1))
            if opts.get('agreed', True) else None)
  ckpt = opts.get('checkpoint_dir') if rank == 0 else None
  final = tf1.train.FinalOpsHook(global_step)  # the global step at the stop
  hooks.append(final)
  bound, sleep = opts.get('max_steps', 100000), opts.get('step_sleep', 0)
  with fastmts.MonitoredTrainingSession(
      master=master, is_chief=True, checkpoint_dir=ckpt, config=config, hooks=hooks,
      save_checkpoint_secs=None if ckpt is None else 10**6, save_summaries_steps=None,
      log_step_count_steps=None, preemption=True, agreed_stop=agreed) as sess:
    sess.run(train_op)
    event('training', rank=rank, pid=os.getpid())
    if opts.get('loop', 'run') == 'run_steps':
      sess.run_steps(train_op, max_steps=bound - 1)
    else:
      steps = 1
      while not sess.should_stop() and steps < bound:
        sess.run(train_op)
        steps += 1
        if sleep:
          time.sleep(sleep)
  record, preemption = sess.agreed_stop, sess.preemption
  latest = tf1.train.latest_checkpoint(ckpt) if ckpt else None
  result = {
      'rank': rank, 'ranks': ranks, 'global_step': int(final.final_ops_values),
      'agreed_step': record and record.step, 'exit_code': record and record.exit_code,
      'preempted_here': bool(preemption and not preemption.by_peer),
      'preemption_step': preemption and preemption.step,
      'checkpoint': latest and int(tf1.train.load_variable(latest, 'global_step')),
      'checkpoint_path': latest,
      'w': latest and float(tf1.train.load_variable(latest, 'w')),
  }
  print(cluster_utils.RESULT_PREFIX + json.dumps(result), flush=True)
  if opts.get('engine') == 'horovod':  # horovodrun ends the job at the first exit of 143
    results_printed()
  sys.exit(record.exit_code if record is not None else 0)


if __name__ == '__main__':
  main()
