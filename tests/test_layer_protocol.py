"""The layers of a monitored session answer one protocol
(session_layers._WrappedSession), HookedSession, the bottom, included; each
talks only to the layer it wraps."""

import inspect

import pytest
import tensorflow as tf

v1 = tf.compat.v1


def _protocol(session_layers):
  """The names _WrappedSession declares: methods and properties."""
  base = session_layers._WrappedSession  # pylint: disable=protected-access
  return {name: member for name, member in vars(base).items()
          if not name.startswith('__') and (callable(member) or isinstance(member, property))}


def test_hooked_session_answers_every_call_of_the_protocol_itself(fastmts):
  """HookedSession does not inherit _WrappedSession's delegation (below it
  is the raw session, which answers none of it): it defines each call, with
  the same parameters."""
  del fastmts
  from fastmts import hooked_session  # pylint: disable=import-outside-toplevel
  from fastmts import session_layers  # pylint: disable=import-outside-toplevel
  protocol = _protocol(session_layers)
  assert {'graph', 'should_stop', '_check_stop', 'close', 'run', 'run_failed', 'run_steps',
          'run_step_fn', 'raw_session', 'coordinator', 'queue_runner_threads',
          'steps_run'} <= set(protocol)
  hooked = vars(hooked_session.HookedSession)
  for name, member in protocol.items():
    assert name in hooked, name
    if isinstance(member, property):
      assert isinstance(hooked[name], property), name
    else:
      assert (inspect.signature(hooked[name]).parameters.keys() ==
              inspect.signature(member).parameters.keys()), name


@pytest.mark.parametrize('kind', ['MonitoredSession', 'SingularMonitoredSession'])
def test_every_layer_answers_for_the_session_below_it(fastmts, kind):
  """Walking the chain: each layer's raw_session, coordinator and
  steps_run are the bottom's; closed, the monitored session answers None."""
  with tf.Graph().as_default():
    gs = v1.train.get_or_create_global_step()
    train = v1.assign_add(gs, 1)
    sess = getattr(fastmts, kind)()
    layers, layer = [], sess._sess  # pylint: disable=protected-access
    while not isinstance(layer, v1.Session):
      layers.append(layer)
      layer = layer._sess  # pylint: disable=protected-access
    raw = layer
    sess.run(train)
    sess.run_steps(train, max_steps=2)
    assert [type(l).__name__ for l in layers][-2:] == ['_CoordinatedSession', 'HookedSession']
    for l in layers:
      assert l.raw_session is raw and l.steps_run == 3
      assert l.coordinator is sess.coordinator is not None
      assert l.queue_runner_threads == []
    sess.close()
    assert sess._tf_sess() is None and sess.coordinator is None  # pylint: disable=protected-access
    assert layers[-1].raw_session is None  # HookedSession closed its raw session
    with pytest.raises(RuntimeError, match='closed Session'):
      raw.run(train)


def test_the_hooked_session_turns_native_errors_into_tfs(fastmts):
  """run_failed at the bottom: a native StatusError(code, message) becomes
  the tf.errors class of its code; nothing is retried there."""
  from fastmts._internal import errors  # pylint: disable=import-outside-toplevel
  with tf.Graph().as_default():
    v1.train.get_or_create_global_step()
    with fastmts.MonitoredSession() as sess:
      hooked = sess._sess._sess._sess  # pylint: disable=protected-access
      for code, error_class in ((3, tf.errors.InvalidArgumentError),
                                (10, tf.errors.AbortedError)):
        with pytest.raises(error_class, match='what went wrong'):
          hooked.run_failed(errors.StatusError(code, 'what went wrong'), None)
      with pytest.raises(KeyError):  # any other error is raised as it is
        hooked.run_failed(KeyError('x'), None)
