"""Opt-in: a stop every rank of a data-parallel job agrees on.

    agreed = fastmts.AgreedStop('horovod')
    with fastmts.MonitoredTrainingSession(..., preemption=True, agreed_stop=agreed) as sess:
      while not sess.should_stop():
        sess.run(train_op)
    sys.exit(sess.agreed_stop.exit_code if sess.agreed_stop else 0)  # 0, or 128 + a rank's signal

`...` is the session's other arguments. A signal is a rank's wish to stop
only where the session handles it: with `preemption=True`, a SIGTERM to any
rank stops every rank after the same step and every rank exits 143; without
it the signal kills that rank, as it kills a stock TF process, and the
others' next collective fails. (sess.agreed_stop is None only if the ranks
did not agree: a stop requested on the coordinator, such as queue runners
out of input, ends a rank at once.) tests/test_doc_examples.py runs this
example on two ranks with TF's collective ops: CollectiveEngine in place of
'horovod', `...` the ranks' servers; a SIGTERM to one, both exit 143.

Ranks that step in lockstep through a collective (Horovod's allreduce, TF's
collective ops) must stop at the same step: a rank that leaves alone makes
the others' next allreduce fail (Horovod 0.28.1 with Gloo: within 0.4-3.6 s,
12 of 12 trials), and whatever the chief had not saved is lost with them,
its final checkpoint included. With `agreed_stop`, a rank's stop
request (a hook's: StopAtStepHook, NanTensorHook(fail_on_nan_loss=False),
any hook's `run_context.request_stop()`; a SIGTERM the session was told to
watch) is only its wish: it keeps stepping (`should_stop()` stays False),
and every `every_n_steps` steps, after the step's hooks, every rank runs the
vote, one small collective of an int32 (the maximum of the ranks' wishes).
Once any rank wished, every rank stops after that same step; the chief's
CheckpointSaverHook saves that step at close.

The engine builds the vote in the graph (at the session's construction,
before the graph is finalized) and nothing else: `build_vote(wish)` returns
the maximum of the int32 scalar `wish` over the ranks. Two come with fastmts:
HorovodEngine ('horovod') and CollectiveEngine (TF's collective all_reduce,
between-graph). See docs/distributed.md, "A stop every rank agrees on".
"""
import numbers

from tensorflow.python.framework import dtypes
from tensorflow.python.framework import ops
from tensorflow.python.ops import array_ops

# What a rank's wish says (the vote is their maximum): 0 go on, 1 stop;
# a larger value is the exit code of a rank a signal took away (128 + it).
GO_ON = 0
STOP = 1


class HorovodEngine:
  """The vote as Horovod's allreduce (op Max) of the wish, under the name
  `name` (Horovod matches the ranks' tensors by name). Needs `hvd.init()`
  before the session is made."""

  def __init__(self, name='fastmts_agreed_stop'):
    self.name = name

  def build_vote(self, wish):
    """The maximum of `wish` over the ranks."""
    import horovod.tensorflow as hvd  # pylint: disable=g-import-not-at-top
    return hvd.allreduce(wish, op=hvd.Max, name=self.name)

  def __repr__(self):
    return 'HorovodEngine(name=%r)' % (self.name,)


class CollectiveEngine:
  """The vote as TF's collective all_reduce (merge op Max) between graphs:
  every rank builds it with the same `group_size`, `group_key` and
  `instance_key` (keys no other collective of the job uses), on its own
  `device` (e.g. '/job:worker/task:1/device:CPU:0'; None: where the graph
  puts it). The ranks' sessions need TF's collective setup, as for any
  collective op across processes: a ConfigProto with
  `experimental.collective_group_leader` naming one task, on servers of one
  cluster."""

  def __init__(self, group_size, group_key=0x7fa57, instance_key=0x7fa57, device=None):
    for name, value in (('group_size', group_size), ('group_key', group_key),
                        ('instance_key', instance_key)):
      if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError('%s must be an int, got %r' % (name, value))
    if group_size < 1:
      raise ValueError('group_size must be >= 1, got %d' % group_size)
    self.group_size = int(group_size)
    self.group_key = int(group_key)
    self.instance_key = int(instance_key)
    self.device = device

  def build_vote(self, wish):
    """The maximum of `wish` over the group."""
    from tensorflow.python.ops import collective_ops  # pylint: disable=g-import-not-at-top
    with ops.device(self.device):
      return collective_ops.all_reduce(wish, self.group_size, self.group_key,
                                       self.instance_key, merge_op='Max', final_op='Id')

  def __repr__(self):
    return 'CollectiveEngine(group_size=%d, group_key=%d, instance_key=%d, device=%r)' % (
        self.group_size, self.group_key, self.instance_key, self.device)


_ENGINES = {'horovod': HorovodEngine}


class AgreedStop:
  """The policy of MonitoredTrainingSession's and MonitoredSession's
  `agreed_stop` (default None: off, nothing added to the graph or the step).

  Args:
    engine: 'horovod' (HorovodEngine()), or an engine object: anything with
      `build_vote(wish)` returning the maximum over the ranks of the int32
      scalar tensor `wish` (CollectiveEngine, HorovodEngine, yours).
    every_n_steps: the vote runs after every n-th step of the session (its
      run calls, counted alike on every rank): a wish waits for the next
      vote, so the ranks stop at the first vote at or after it. 1 keeps
      stock's stop step when every rank decides alike.
  """

  def __init__(self, engine, every_n_steps=1):
    if isinstance(engine, str):
      if engine not in _ENGINES:
        raise ValueError('engine must be one of %s or an engine object, got %r'
                         % (', '.join(repr(e) for e in sorted(_ENGINES)), engine))
      engine = _ENGINES[engine]()
    if not callable(getattr(engine, 'build_vote', None)):
      raise TypeError('engine must have a build_vote(wish) method, got %r' % (engine,))
    if isinstance(every_n_steps, bool) or not isinstance(every_n_steps, numbers.Integral):
      raise TypeError('every_n_steps must be an int, got %r' % (every_n_steps,))
    if every_n_steps < 1:
      raise ValueError('every_n_steps must be >= 1, got %d' % every_n_steps)
    self.engine = engine
    self.every_n_steps = int(every_n_steps)

  def build(self):
    """The vote's ops in the default graph: (wish placeholder, vote)."""
    with ops.name_scope('fastmts_agreed_stop'):
      wish = array_ops.placeholder_with_default(
          ops.convert_to_tensor(GO_ON, dtype=dtypes.int32), shape=[], name='wish')
      vote = self.engine.build_vote(wish)
    if vote.dtype != dtypes.int32:
      raise TypeError('the engine\'s vote must be an int32 tensor, got %r' % (vote,))
    return wish, vote

  def __repr__(self):
    return 'AgreedStop(%r, every_n_steps=%d)' % (self.engine, self.every_n_steps)


class AgreedStopRecord:
  """How the ranks stopped (`MonitoredSession.agreed_stop`, once they did).

  Attributes:
    step: this session's steps (run calls) when every rank stopped: the same
      on every rank.
    exit_code: 0 when ranks stopped on a hook's request; 128 + the signal
      (143 for SIGTERM) when a rank was preempted: what every rank may exit
      with, so that the job counts as preempted whichever rank got the signal.
  """

  def __init__(self, step, vote):
    self.step = step
    self.exit_code = 0 if vote <= STOP else vote

  @property
  def preempted(self):
    """Whether a rank was preempted."""
    return self.exit_code != 0

  def __repr__(self):
    return 'AgreedStopRecord(step=%d, exit_code=%d)' % (self.step, self.exit_code)
