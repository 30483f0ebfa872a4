"""meshrt: Mesh-TensorFlow-style distributed training on meshrt's C++ runtime, from Python.

Every tensor dimension has a name; the cluster is a mesh of worker processes; layout rules
("batch:rows,d_ff:cols") say which dims are split over which mesh dims. The same graph runs data
parallel, model parallel or both by changing only the rules::

    import numpy as np
    import meshrt as mr

    g = mr.Graph()
    batch, d_in, hidden = mr.Dimension("batch", 8), mr.Dimension("d_in", 16), mr.Dimension("hidden", 32)
    x = g.placeholder("x", [batch, d_in])
    w = g.variable("w", [d_in, hidden], mr.initializers.glorot_uniform(seed=1))
    y = g.mark_output(g.relu(g.einsum([x, w], [batch, hidden], name="y")))

    with mr.local_cluster(workers=4) as cluster:
        with cluster.session(g, mesh="rows:2,cols:2", layout="batch:rows,hidden:cols") as s:
            print(s.run({"x": np.ones((8, 16), np.float32)}, fetches=y))
            print(s.explain())

Modules: graph (Graph, Tensor), shapes (Dimension, Shape, Mesh, layout rules), initializers,
layers, models, training (optimizers), translation (decoding the encoder-decoder), cluster
(local_cluster, connect, Session), errors.
"""

import os as _os

# The generated pieces (meshrt/_proto: the gRPC stubs; meshrt/_core.so: the C++ core;
# meshrt/_version.py) are built by Bazel (//python:package). Installed by pip (setup.py copies them
# in) and in Bazel's runfiles (the tests) they sit beside this file; in the source tree the package
# finds them in the repository's Bazel output: bazel-bin (whichever configuration built last), else
# the default (fastbuild) or -c opt output.
_repo = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
_candidates = [_os.environ.get("MESHRT_PYTHON_GENERATED", "")] + [
    _os.path.join(_repo, d, "python", "meshrt")
    for d in ("bazel-bin", "bazel-out/k8-fastbuild/bin", "bazel-out/k8-opt/bin")]
if not _os.path.exists(_os.path.join(_os.path.dirname(__file__), "_proto")):
    for _dir in _candidates:
        if _dir and _os.path.isdir(_os.path.join(_dir, "_proto")):
            __path__.append(_dir)  # noqa: F821 (the package's own __path__)
            break

# Every stub is imported now, before anything loads meshrt._core: the C++ core registers the same
# .proto files in protobuf's C++ pool, and a stub imported after it would take its message types
# from there (a second Graph class that CopyFrom refuses).
try:
    from meshrt._proto import (  # noqa: F401
        checkpoint_pb2, coordinator_pb2, coordinator_pb2_grpc, graph_pb2, mesh_pb2, program_pb2,
        session_pb2, tensor_pb2, worker_pb2)
    from meshrt._version import __version__  # util/version.h's, as every binary's --version
except ImportError as _e:
    raise ImportError(
        "meshrt's generated files (meshrt/_proto, meshrt/_version.py) are missing: run "
        "`make build` in the repository first (it generates them into bazel-bin/python/meshrt), "
        f"or install the package with pip (python/README.md) ({_e})") from _e

from meshrt import errors, initializers, layers, models, training, translation  # noqa: E402
from meshrt.cluster import Client, LocalCluster, Session, connect, local_cluster  # noqa: E402
from meshrt.errors import (  # noqa: E402
    DataLossError, DeadlineExceededError, FailedPreconditionError, InternalError,
    InvalidArgumentError, MeshrtError, NotFoundError, PermissionDeniedError,
    ResourceExhaustedError, UnauthenticatedError, UnavailableError, UnimplementedError)
from meshrt.graph import Graph, Tensor  # noqa: E402
from meshrt.shapes import Dimension, Mesh, Shape, layout_rules  # noqa: E402

__all__ = [
    "__version__", "Client", "Dimension", "Graph", "LocalCluster", "Mesh", "MeshrtError", "Session",
    "Shape", "Tensor", "connect", "errors", "initializers", "layers", "layout_rules",
    "local_cluster", "models", "training", "translation", "DataLossError", "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError", "InvalidArgumentError", "NotFoundError", "PermissionDeniedError",
    "ResourceExhaustedError", "UnauthenticatedError", "UnavailableError", "UnimplementedError",
]
