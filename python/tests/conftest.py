"""Fixtures of the Python tests: one local cluster (4 workers) shared by every test of a run."""

import os
import shutil
import tempfile

import pytest

import meshrt as mr

TEXT = "/usr/share/games/fortunes/cookie"


@pytest.fixture(scope="session")
def text_file():
    """A text to train on: Debian's fortunes (tools/setup.sh installs it), else a generated one
    (said in the test output, never silently)."""
    d = tempfile.mkdtemp(prefix="meshrt-text-")
    path = os.path.join(d, "text.txt")
    if os.path.exists(TEXT):
        shutil.copy(TEXT, path)
    else:
        print(f"NOTE: {TEXT} is missing; training on a generated text")
        with open(path, "w") as f:
            for i in range(400):
                f.write(f"The quick brown fox {i} jumps over the lazy dog.\n")
    yield path
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(text_file):
    """A local cluster of 4 workers that may read the text's directory."""
    with mr.local_cluster(workers=4, data_dirs=[os.path.dirname(text_file)]) as c:
        yield c
