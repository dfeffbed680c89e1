"""The demo job's quiet start.

``python -m fastmts`` and ``fastmts-demo`` import this package, and with it TensorFlow,
before their own code runs; TF's C++ libraries then write log lines to stderr as they load
(absl's notice, oneDNN's, the CPU features'), some of them whatever TF_CPP_MIN_LOG_LEVEL
says. For the demo, and only for it, TF's import runs with stderr captured: TF's C++ log
lines of levels I and W are dropped and anything else is printed as it came, everything
when the import fails. The later lines go by TF_CPP_MIN_LOG_LEVEL, which the demo sets to
2 where the user has not set it. A user who set it asked for TF's logging, and gets it.

Importing fastmts from any other program changes nothing: no capture, no variable set.
"""
import contextlib
import os
import re
import sys
import tempfile

# A line of TF's C++ logging below the error level (absl's and TF's format:
# level letter, date, time, thread, file:line]), the notice absl prints before
# its first line, and the continuation of the CPU-features line.
_TF_LOG_LINE = re.compile(
    r'(?:[IW]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+:\d+\] '
    r'|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR'
    r'|To enable the following instructions: )')


def demo_is_starting():
  """Whether this process is the demo job: ``python -m fastmts`` (while the package is
  imported to find __main__, sys.argv[0] is '-m'; sys.orig_argv, from Python 3.10, says
  which module) or the ``fastmts-demo`` script."""
  argv = list(getattr(sys, 'orig_argv', None) or [])
  if '-m' in argv:
    return argv[argv.index('-m') + 1:][:1] == ['fastmts']
  if sys.argv[:1] == ['-m']:
    return not argv  # before Python 3.10: the module being run is not known yet
  return bool(sys.argv) and os.path.basename(sys.argv[0]) == 'fastmts-demo'


@contextlib.contextmanager
def tf_logs_hidden_for_the_demo():
  """Around TF's first import: see the module's docstring."""
  if ('tensorflow' in sys.modules or 'TF_CPP_MIN_LOG_LEVEL' in os.environ or
      not demo_is_starting()):
    yield
    return
  os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'
  sys.stderr.flush()
  saved = os.dup(2)
  imported = False
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
      imported = True
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      lines = captured.read().decode(errors='replace').splitlines(True)
      kept = [l for l in lines if not imported or not _TF_LOG_LINE.match(l)]
      if kept:
        sys.stderr.write(''.join(kept))
        sys.stderr.flush()
