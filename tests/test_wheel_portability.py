"""The extension runs where the wheels say it runs: manylinux2014, glibc 2.17.

For the portable wheels (.ci/portable_wheels [--arch aarch64] DIR; give DIR in the
environment as FASTMTS_WHEEL_DIR, else those checks skip), x86_64's and aarch64's
alike, each wheel's extension module is read as an ELF file (binutils' `readelf`),
must be built for the architecture its tag names, and must need:
- no glibc symbol version above 2.17 (what manylinux2014 promises);
- no libstdc++ or C++ ABI version at all (GLIBCXX_, CXXABI_): the C++ runtime,
  Zig's libc++, is linked in, so the wheel runs beside any TensorFlow's libstdc++
  and on systems older than the one TF's own libstdc++ needs;
- only glibc's own libraries (libc, libm, libpthread, libdl, librt and the
  dynamic loader), present on every glibc system: no libstdc++, libgcc_s or
  anything auditwheel would have to graft in.
Any build of the extension, the installed one included, exports PyInit__native
only (cpp/binding/exports.map): nothing of its C++ runtime can bind to TF's.
"""
import glob
import os
import re
import shutil
import subprocess
import zipfile

import pytest

import fastmts
from fastmts import _native

GLIBC_MAX = (2, 17)
ALLOWED_NEEDED = {'libc.so.6', 'libm.so.6', 'libpthread.so.0', 'libdl.so.2', 'librt.so.1',
                  'ld-linux-x86-64.so.2', 'ld-linux-aarch64.so.1'}
WHEEL_DIR = os.environ.get('FASTMTS_WHEEL_DIR')
PYTHONS = ['cp37', 'cp38', 'cp39', 'cp310', 'cp311', 'cp312', 'cp313']
# The wheels' architectures: their tag's name, and readelf's name of the ELF machine.
MACHINES = {'x86_64': 'Advanced Micro Devices X86-64', 'aarch64': 'AArch64'}

pytestmark = pytest.mark.skipif(not shutil.which('readelf'), reason='no readelf (binutils)')
needs_wheels = pytest.mark.skipif(
    not WHEEL_DIR, reason='no FASTMTS_WHEEL_DIR: build the wheels with .ci/portable_wheels DIR')


def _readelf(path, *options):
  return subprocess.run(['readelf', '-W'] + list(options) + [path], check=True,
                        stdout=subprocess.PIPE, universal_newlines=True).stdout


def _needed(path):
  return set(re.findall(r'\(NEEDED\)\s+Shared library: \[([^\]]+)\]', _readelf(path, '-d')))


def _symbol_versions(path):
  """The versions named in the module's version-needs section (GLIBC_2.14, ...)."""
  return set(re.findall(r'Name: ((?:GLIBC|GLIBCXX|CXXABI)\w*_[\d.]+)', _readelf(path, '-V')))


def _machine(path):
  return re.search(r'Machine:\s+(.+)', _readelf(path, '-h')).group(1).strip()


def _arch_of(wheel):
  """The architecture of a wheel's manylinux2014 tag (x86_64 or aarch64)."""
  platforms = os.path.basename(wheel)[:-len('.whl')].split('-')[4].split('.')
  [arch] = [p[len('manylinux2014_'):] for p in platforms if p.startswith('manylinux2014_')]
  return arch


def _exported(path):
  """The names of the defined global and weak dynamic symbols."""
  names = []
  for line in _readelf(path, '--dyn-syms').splitlines():
    fields = line.split()
    if len(fields) >= 8 and fields[4] in ('GLOBAL', 'WEAK') and fields[6] != 'UND':
      names.append(fields[7].split('@')[0])
  return names


def _wheels():
  return sorted(glob.glob(os.path.join(WHEEL_DIR or '', 'fastmts-*.whl')))


def _extension_of(wheel, tmp_path):
  with zipfile.ZipFile(wheel) as zf:
    [name] = [n for n in zf.namelist() if re.match(r'fastmts/_native\..*\.so$', n)]
    return zf.extract(name, str(tmp_path))


def test_the_installed_extension_exports_only_its_init():
  assert _exported(_native.__file__) == ['PyInit__native'], fastmts.__file__


@needs_wheels
def test_wheels_are_tagged_manylinux2014_one_per_python_and_architecture():
  tags = [os.path.basename(w)[:-len('.whl')].split('-')[2:] for w in _wheels()]
  assert tags, 'no wheel in %s' % WHEEL_DIR
  kinds = []
  for python, _, platform in tags:
    archs = [a for a in MACHINES if 'manylinux2014_' + a in platform.split('.')]
    assert len(archs) == 1, platform
    kinds.append((python, archs[0]))
  assert len(set(kinds)) == len(kinds), kinds
  assert {python for python, _ in kinds} <= set(PYTHONS), kinds


@needs_wheels
def test_wheels_need_glibc_2_17_and_no_cpp_runtime(tmp_path):
  assert _wheels(), 'no wheel in %s' % WHEEL_DIR
  for wheel in _wheels():
    module = _extension_of(wheel, tmp_path / os.path.basename(wheel))
    assert _machine(module) == MACHINES[_arch_of(wheel)], (wheel, _machine(module))
    assert _needed(module) <= ALLOWED_NEEDED, (wheel, _needed(module))
    versions = _symbol_versions(module)
    assert versions and all(v.startswith('GLIBC_') for v in versions), (wheel, versions)
    newest = max(tuple(int(p) for p in v[len('GLIBC_'):].split('.')) for v in versions)
    assert newest <= GLIBC_MAX, (wheel, sorted(versions))
    assert _exported(module) == ['PyInit__native'], wheel
