"""fastmts classes that stand for TF's classes of the same public name.

fastmts's MonitoredSession, SingularMonitoredSession, WorkerSessionCreator
and CheckpointSaverHook subclass TF's classes of the same names, so
fastmts's objects pass TF's isinstance checks. patch() binds the public
names to fastmts's classes, and code then checks TF's objects against those
names: an estimator's CheckpointSaverHook made before patch() must still be
a `tf.compat.v1.train.CheckpointSaverHook`, or the estimator adds a second
saver. So the exact fastmts class also accepts the instances and subclasses
of the TF class it stands for, whichever existed first; subclasses of
fastmts's class (users') follow the plain rules.
"""
import abc

# fastmts class -> the TF class it stands for (classes live as long as the
# process, so plain references).
_TF_CLASS_OF = {}


class _StandsFor:
  """Metaclass behaviour: isinstance/issubclass against a standing-in class
  also accept what TF's class accepts."""

  def __new__(mcs, name, bases, namespace, stands_for=None, **kwargs):
    cls = super().__new__(mcs, name, bases, namespace, **kwargs)
    if stands_for is not None:
      _TF_CLASS_OF[cls] = stands_for
    return cls

  def __init__(cls, name, bases, namespace, stands_for=None, **kwargs):
    del stands_for  # taken by __new__
    super().__init__(name, bases, namespace, **kwargs)

  def __instancecheck__(cls, instance):
    if super().__instancecheck__(instance):
      return True
    tf_class = _TF_CLASS_OF.get(cls)
    return tf_class is not None and isinstance(instance, tf_class)

  def __subclasscheck__(cls, subclass):
    if super().__subclasscheck__(subclass):
      return True
    tf_class = _TF_CLASS_OF.get(cls)
    return tf_class is not None and issubclass(subclass, tf_class)


class StandsFor(_StandsFor, type):
  """The metaclass of a fastmts class standing for a plain TF class:
  `class X(tf_X, metaclass=StandsFor, stands_for=tf_X)`."""


class AbstractStandsFor(_StandsFor, abc.ABCMeta):
  """StandsFor for a TF class whose metaclass is abc.ABCMeta (the session
  creators)."""
