"""Builds the `meshrt` wheel (pyproject.toml has the metadata): the package's Python sources plus
the pieces Bazel generates, copied from the repository's Bazel output (never built here):

    bazel-bin/python/meshrt/_proto/*.py   the gRPC stubs           (//python:stubs)
    bazel-bin/python/meshrt/_core.so      the C++ core, pybind11   (//python:meshrt/_core.so)
    bazel-bin/python/meshrt/_version.py   util/version.h's version (//python:version)
    bazel-bin/client/meshrt               the CLI local clusters run, installed as meshrt/bin/meshrt

The Bazel output is looked for beside this directory (bazel-bin, else the fastbuild or -c opt tree,
as meshrt/__init__.py does), or in $MESHRT_BAZEL_BIN when set (for a copy of python/ elsewhere).
Missing pieces stop the build with the command that makes them.
"""

import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD_COMMAND = "bazel build //python:package //client:meshrt"

# (path under the Bazel output, path in the package, file mode)
PIECES = [
    ("python/meshrt/_proto", "_proto", None),  # a directory: its *.py files
    ("python/meshrt/_core.so", "_core.so", 0o755),
    ("python/meshrt/_version.py", "_version.py", 0o644),
    ("client/meshrt", "bin/meshrt", 0o755),
]


def _output_dirs():
    explicit = os.environ.get("MESHRT_BAZEL_BIN")
    if explicit:
        # Only the one asked for: a wrong path is reported, not silently replaced by another tree.
        return [os.path.abspath(explicit)]
    return [os.path.join(REPO, d)
            for d in ("bazel-bin", "bazel-out/k8-fastbuild/bin", "bazel-out/k8-opt/bin")]


def _missing(out_dir):
    return [rel for rel, _, _ in PIECES if not os.path.exists(os.path.join(out_dir, rel))]


def bazel_output():
    """The first Bazel output directory that holds every piece (all from one build configuration,
    so the stubs and the core agree); SystemExit naming what is missing and how to build it."""
    searched = []
    for out_dir in _output_dirs():
        missing = _missing(out_dir)
        if not missing:
            return out_dir
        searched.append(f"  {out_dir}: missing {', '.join(missing)}")
    raise SystemExit(
        "error: meshrt's generated files are not built. Run, in the repository,\n"
        f"    {BUILD_COMMAND}\n"
        "(or `make build`), then install again. To use a Bazel output elsewhere, set "
        "MESHRT_BAZEL_BIN to its bazel-bin directory. Searched:\n" + "\n".join(searched))


def read_version(out_dir):
    """__version__ from the generated meshrt/_version.py (made from util/version.h)."""
    path = os.path.join(out_dir, "python/meshrt/_version.py")
    with open(path) as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if not m:
        raise SystemExit(f"error: no __version__ in {path}; rebuild it with `{BUILD_COMMAND}`")
    return m.group(1)


def _copy(src, dst, mode):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        os.remove(dst)  # Bazel's outputs are read-only; a copy from an earlier build may be too
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)


class BuildWithGenerated(build_py):
    """build_py, then the Bazel-built pieces copied into the built package."""

    def run(self):
        out_dir = bazel_output()
        package = os.path.join(self.build_lib, "meshrt")
        # python/build/ outlives a pip install: start clean, so no file of an earlier build (a
        # module since removed, an older stub) gets into this wheel.
        shutil.rmtree(package, ignore_errors=True)
        super().run()
        for rel, dest, mode in PIECES:
            src = os.path.join(out_dir, rel)
            if mode is None:
                for name in sorted(os.listdir(src)):
                    if name.endswith(".py"):
                        _copy(os.path.join(src, name), os.path.join(package, dest, name), 0o644)
            else:
                _copy(src, os.path.join(package, dest), mode)


class PlatformDistribution(Distribution):
    """The wheel holds a native module and binary: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(
    version=read_version(bazel_output()),
    packages=["meshrt"],
    distclass=PlatformDistribution,
    cmdclass={"build_py": BuildWithGenerated},
)
