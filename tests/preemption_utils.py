"""What the preemption tests read back: the latest checkpoint of models that
add 1 to w (4 floats) and to the global step per step."""
import tensorflow as tf


def latest_checkpoint(checkpoint_dir):
  """(step in the name, global_step and w read) of the latest checkpoint, or None."""
  path = tf.train.latest_checkpoint(checkpoint_dir)
  if path is None:
    return None
  reader = tf.compat.v1.train.NewCheckpointReader(path)
  return (int(path.rsplit('-', 1)[1]), int(reader.get_tensor('global_step')),
          reader.get_tensor('w').tolist())


def consistent(step):
  """What latest_checkpoint gives for a checkpoint of exactly `step`."""
  return (step, step, [float(step)] * 4)
