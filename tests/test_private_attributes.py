"""TF's private names on each layer of a monitored session, as code in the
wild and TF's own tests reach them: monitored -> recoverable -> coordinated
-> hooked -> raw session (`sess._sess._sess._sess._sess`), `_tf_sess()`,
`_coordinated_creator.tf_sess`, `_hooks`, the coordinator as `_coord`.
Each scenario runs against stock TF and fastmts and must observe the same."""

import pytest
import tensorflow as tf

from compat_utils import raised

v1 = tf.compat.v1


def _graph():
  gs = v1.train.get_or_create_global_step()
  return v1.assign_add(gs, 1)


def _make(impl, kind, workdir):
  hook = v1.train.StopAtStepHook(last_step=10)
  if kind == 'MonitoredSession':
    return impl.MonitoredSession(hooks=[hook])
  if kind == 'SingularMonitoredSession':
    return impl.SingularMonitoredSession(hooks=[hook])
  return impl.MonitoredTrainingSession(checkpoint_dir=workdir, hooks=[hook])


def _chain(sess, kind):
  """The layers down to the raw session, by TF's private names. Only
  MonitoredSession and MonitoredTrainingSession recover (a
  SingularMonitoredSession has no _RecoverableSession layer)."""
  coordinated = sess._sess if kind == 'SingularMonitoredSession' else sess._sess._sess  # pylint: disable=protected-access
  hooked = coordinated._sess  # pylint: disable=protected-access
  return coordinated, hooked, hooked._sess  # pylint: disable=protected-access


@pytest.mark.parametrize('kind', ['MonitoredSession', 'SingularMonitoredSession',
                                  'MonitoredTrainingSession'])
def test_the_attribute_chain_reaches_the_raw_session(check, kind):
  def scenario(impl, workdir):
    with tf.Graph().as_default():
      train = _graph()
      with _make(impl, kind, workdir) as sess:
        coordinated, hooked, raw = _chain(sess, kind)
        seen = (
            type(raw) is v1.Session,
            raw is sess._tf_sess(),  # pylint: disable=protected-access
            raw is sess._coordinated_creator.tf_sess,  # pylint: disable=protected-access
            coordinated._coord is sess._coordinated_creator.coord,  # pylint: disable=protected-access
            coordinated._coord.should_stop(),  # pylint: disable=protected-access
            sorted(type(h).__name__ for h in hooked._hooks),  # pylint: disable=protected-access
            sorted(type(h).__name__ for h in sess._hooks),  # pylint: disable=protected-access
            raw.run(train),  # the raw session runs no hooks
            sess.run(train),
        )
      return seen + (sess._tf_sess() is None, raised(sess.run, train))  # pylint: disable=protected-access

  got = check(scenario)
  assert got[:5] == (True, True, True, True, False)
  assert 'StopAtStepHook' in got[5] and got[7:9] == (1, 2)


def test_closing_the_raw_session_through_the_chain(check):
  """What TF's RecoverableSessionTest does to simulate a dead session:
  closing the raw session under a running MonitoredSession, whose next run
  then fails as TF's does."""
  def scenario(impl, workdir):
    del workdir
    with tf.Graph().as_default():
      train = _graph()
      sess = impl.MonitoredSession()
      first = sess.run(train)
      sess._sess._sess._sess._sess.close()  # pylint: disable=protected-access
      after = raised(sess.run, train)
      closing = raised(sess.close)
      return first, after, closing

  first, after, _ = check(scenario)
  assert first == 1 and after.type is RuntimeError
