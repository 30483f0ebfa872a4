"""`python -m meshrt`: ``--version`` prints the package's version (util/version.h's, as every
meshrt binary's --version) and where the package and its meshrt binary are; any other arguments
run the meshrt command line with them (``python -m meshrt local --workers 4``), using the binary
local clusters use (cluster.py: $MESHRT_BINARY, the copy installed with the package, ...)."""

import os
import platform
import sys

import meshrt
from meshrt import cluster, errors

USAGE = """usage: python -m meshrt --version
       python -m meshrt COMMAND [ARGS] [FLAGS]   the meshrt command line (`python -m meshrt help`)
"""


def version_line():
    """``meshrt VERSION (Python X.Y.Z, package DIR, binary PATH)``; the binary part says
    ``not found`` (and why) when there is none."""
    try:
        binary = cluster._default_binary()
    except errors.NotFoundError as e:
        binary = f"not found: {e}"
    package = os.path.dirname(os.path.abspath(meshrt.__file__))
    return (f"meshrt {meshrt.__version__} (Python {platform.python_version()}, package {package}, "
            f"binary {binary})")


def main(argv=None):
    """Runs ``python -m meshrt`` with ``argv`` (default sys.argv[1:]); returns the exit status
    (a command line's run replaces this process)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv in (["--version"], ["-V"]):
        print(version_line())
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    try:
        binary = cluster._default_binary()
    except errors.NotFoundError as e:
        print(f"python -m meshrt: {e}", file=sys.stderr)
        return 1
    try:
        os.execv(binary, [binary] + argv)
    except OSError as e:
        source = " ($MESHRT_BINARY)" if os.environ.get("MESHRT_BINARY") else ""
        print(f"python -m meshrt: cannot run the meshrt binary {binary}{source}: {e.strerror}",
              file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
