"""The TensorFlow distributions installed into one `tensorflow/` folder: the two-TFs trap.

`tensorflow`, `tensorflow-cpu`, `tensorflow-intel` and the like are different projects to
pip that install the same package folder. Installing a second one (an extra naming
`tensorflow-cpu` on a machine that has `tensorflow`, say) lays its files over the first's:
`import tensorflow` then fails with undefined symbols where the two differ (seen with
2.16.2 and 2.19.1), and where they match it works until either is uninstalled, which
deletes files the other one needs. pip reports no conflict. This finds the distributions
in the folder `tensorflow` is imported from, so that `import fastmts` and the main job can
say what happened and the one command that repairs it.
"""
import importlib.util
import os
import re

# The dist-info folder of a distribution: its name (normalized or not) and version.
_DIST_INFO = re.compile(r'^(?P<name>[A-Za-z0-9_.-]+?)-(?P<version>[^-]+)\.dist-info$')


def _top_level(dist_info):
  """The top-level packages a distribution installs (its top_level.txt), or None when it
  does not say."""
  try:
    with open(os.path.join(dist_info, 'top_level.txt')) as f:
      return {line.strip() for line in f if line.strip()}
  except OSError:
    return None


def installed():
  """[(distribution name, version)] of every distribution whose files are in the folder
  `tensorflow` is imported from, oldest install first; [] when TF is not installed or that
  folder cannot be read. Never raises: it only adds to what `import tensorflow` says."""
  try:
    return _installed()
  except Exception:  # pylint: disable=broad-except
    # An import hook that fails (as a broken TF's may), an unreadable folder: the
    # import of TF itself says what is wrong.
    return []


def _installed():
  spec = importlib.util.find_spec('tensorflow')
  if spec is None or not spec.submodule_search_locations:
    return []
  site = os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))
  found = []
  for entry in os.listdir(site):
    match = _DIST_INFO.match(entry)
    if not match:
      continue
    path = os.path.join(site, entry)
    top = _top_level(path)
    name = match.group('name').replace('_', '-').lower()
    if (top is not None and 'tensorflow' in top) or (top is None and name == 'tensorflow'):
      found.append((os.path.getmtime(path), name, match.group('version')))
  return [(name, version) for _, name, version in sorted(found)]


def repair_command(distributions):
  """The one command that leaves only the first-installed distribution (the user's own)."""
  keep_name, keep_version = distributions[0]
  return "pip uninstall -y %s && pip install '%s==%s'" % (
      ' '.join(name for name, _ in distributions), keep_name, keep_version)


def trap_message(distributions):
  """What to tell the user when more than one distribution shares the folder, or None."""
  if len(distributions) < 2:
    return None
  return ('%d TensorFlow distributions are installed into one tensorflow/ folder (%s): the '
          'later laid its files over the earlier one\'s, which breaks `import tensorflow` '
          'where they differ and breaks the other whenever one is uninstalled. Repair: %s'
          % (len(distributions), ', '.join('%s %s' % d for d in distributions),
             repair_command(distributions)))
