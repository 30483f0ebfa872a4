"""Clusters, clients and sessions: run graphs on meshrt's daemons from Python.

    import meshrt as mr
    with mr.local_cluster(workers=4) as cluster:          # the project's own daemons, on loopback
        with cluster.session(g, mesh="rows:2,cols:2", layout="batch:rows,hidden:cols") as s:
            y = s.run({"x": x}, fetches="y")               # numpy in, numpy out

    client = mr.connect("10.0.0.5:7070", token_file="client.token")   # a running cluster

A session lives on the coordinator as long as its client renews its lease: the Client does that
from a background thread (every quarter of the lease), also while a long step runs. Errors are
meshrt exceptions (meshrt.errors) with the server's message.
"""

import ipaddress
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import grpc
import numpy as np

from meshrt import errors
from meshrt import tensors as _tensors
from meshrt.errors import InvalidArgumentError
from meshrt.graph import Graph, Tensor
from meshrt.shapes import Shape, as_mesh, layout_proto, layout_text
from meshrt.training import Optimizer

_log = logging.getLogger("meshrt")

_CHUNK_BYTES = 4 << 20           # rpc/tensor_chunks.h kChunkBytes
_MAX_MESSAGE_BYTES = 64 << 20    # rpc/grpc_util.h kMaxMessageBytes


def _credentials_dir():
    """$MESHRT_HOME, else ~/.meshrt: where daemons on this machine keep generated tokens."""
    home = os.environ.get("MESHRT_HOME")
    if home:
        return home
    return os.path.join(os.path.expanduser("~"), ".meshrt")


def _is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split_address(address):
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise InvalidArgumentError(f"coordinator address '{address}' needs the form host:port")
    return host, int(port)


def _read_token(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        raise InvalidArgumentError(f"cannot read the token file {path}: {e.strerror}") from None


class Client:
    """A connection to a coordinator (use :func:`connect`)."""

    def __init__(self, address, token=None, token_file=None, tls_ca_file=None, tls_cert_file=None,
                 tls_key_file=None, connect_timeout=5.0, rpc_timeout=600.0, checkpoint_root=None):
        from meshrt._proto import coordinator_pb2, coordinator_pb2_grpc
        self._pb = coordinator_pb2
        host, port = _split_address(address)
        if token is None and token_file:
            token = _read_token(token_file)
        if token is None and _is_loopback(host):
            generated = os.path.join(_credentials_dir(), str(port), "client.token")
            if os.path.exists(generated):
                token = _read_token(generated)
        self.address = address
        self.rpc_timeout = rpc_timeout
        # The coordinator's --checkpoint_root as this machine sees it (export, load_npz), or None.
        self.checkpoint_root = checkpoint_root
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES)]
        if tls_ca_file:
            def read(p):
                with open(p, "rb") as f:
                    return f.read()
            creds = grpc.ssl_channel_credentials(
                root_certificates=read(tls_ca_file),
                private_key=read(tls_key_file) if tls_key_file else None,
                certificate_chain=read(tls_cert_file) if tls_cert_file else None)
            self._channel = grpc.secure_channel(address, creds, options)
        else:
            self._channel = grpc.insecure_channel(address, options)
        self._stub = coordinator_pb2_grpc.CoordinatorStub(self._channel)
        self._lease_lock = threading.Condition()
        self._leased = set()
        self._lease_s = 0.0
        self._stopping = False
        self._renewer = None
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise errors.UnavailableError(
                f"cannot reach the coordinator at {address} within {connect_timeout:g} s (is it "
                "running? TLS on one side only?)") from None
        self.list_workers()  # checks the token

    # ---- calls -----------------------------------------------------------------------------------

    def _call(self, method, request, timeout=None):
        try:
            return method(request, timeout=timeout or self.rpc_timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def list_workers(self):
        """The coordinator's ListWorkersResponse (workers, sessions, who waits)."""
        return self._call(self._stub.ListWorkers, self._pb.ListWorkersRequest(), timeout=30)

    def session(self, graph=None, mesh=None, layout=None, loss=None, optimizer=None, variables=None,
                keep_gradients=None, wait=20.0, memory_limit_bytes=0, auto_layout=False,
                auto_mesh_processors=0, model=None):
        """Creates a session: the coordinator validates, lays out, lowers and loads ``graph``.

        ``graph``: a :class:`meshrt.Graph` (or a meshrt.v1.Graph). ``mesh``: "rows:2,cols:2", a
        Mesh or None (one processor: the mesh x:1). ``layout``: rules as text, dict or pairs. With ``loss`` (a
        scalar Tensor or name) and ``optimizer`` (meshrt.training: sgd, adam, ...), the
        coordinator adds the gradients and updates (the same autodiff and optimizers as C++), and
        each run of the session is one training step; ``variables`` limits what is trained.
        ``variables`` (names or Tensors) limits what is trained; by default every float32 variable
        the graph does not update itself (a data counter's assign_add makes it state, not a
        weight). ``model``: a meshrt.models.Model, giving the graph, loss, trainable variables and
        kept gradients at once. ``wait``: seconds to wait for enough free workers.
        ``auto_layout``: the coordinator's planner chooses the layout (``layout`` must then be
        None; see Session.plan).
        """
        if model is not None:
            graph = graph if graph is not None else model.graph
            loss = loss if loss is not None else model.loss
            variables = variables if variables is not None else model.variables
            keep_gradients = keep_gradients if keep_gradients is not None else model.keep_gradients
        if graph is None:
            raise InvalidArgumentError("a session needs a graph (or a model)")
        from meshrt._proto import session_pb2
        request = session_pb2.CreateSessionRequest()
        request.graph.CopyFrom(graph.to_proto() if isinstance(graph, Graph) else graph)
        if mesh is None or mesh == "":
            mesh = "" if auto_mesh_processors else "x:1"  # one processor, as `meshrt train`
        if mesh:
            request.mesh.CopyFrom(as_mesh(mesh).to_proto())
        request.rules.CopyFrom(layout_proto(layout))
        request.timeout_ms = int(wait * 1000)
        if mesh and wait > 0:
            self._say_what_the_wait_is_for(as_mesh(mesh).num_processors, wait)
        request.memory_limit_bytes = int(memory_limit_bytes)
        request.auto_layout = bool(auto_layout)
        request.auto_mesh_processors = int(auto_mesh_processors)
        if optimizer is not None or loss is not None:
            if loss is None:
                raise InvalidArgumentError("training needs a loss (a scalar float32 Tensor)")
            opt = optimizer if optimizer is not None else Optimizer("sgd")
            if not isinstance(opt, Optimizer):
                raise InvalidArgumentError("optimizer must be a meshrt.training optimizer, "
                                           "e.g. meshrt.training.adam(0.001)")
            if variables is None and isinstance(graph, Graph):
                variables = graph.trainable_variables()
            request.training.CopyFrom(opt.spec(loss, variables, keep_gradients))
        return self._create(request, graph if isinstance(graph, Graph) else None)

    def _say_what_the_wait_is_for(self, needed, wait):
        """Logs, before a session waits for workers that are not registered, what it waits for."""
        try:
            registered = len(self.list_workers().workers)
        except errors.MeshrtError:
            return  # no view of the workers: CreateSession's own error says what is missing
        if registered < needed:
            _log.warning("the mesh needs %d workers and the coordinator at %s has %d registered: "
                         "waiting up to %g s (wait=) for more to register", needed, self.address,
                         registered, wait)

    def _create(self, request, graph):
        timeout = max(self.rpc_timeout, request.timeout_ms / 1000.0 + 60)
        response = self._call(self._stub.CreateSession, request, timeout=timeout)
        session = Session(self, response, graph, request)
        self._start_lease(session.id, response.lease_ms / 1000.0)
        return session

    def close_session(self, session_id):
        """Closes session ``session_id`` on the coordinator and stops renewing its lease."""
        self._end_lease(session_id)
        from meshrt._proto import session_pb2
        self._call(self._stub.CloseSession, session_pb2.CloseSessionRequest(session=session_id),
                   timeout=30)

    def close(self):
        """Stops the lease thread and closes the channel (open sessions expire with their lease)."""
        with self._lease_lock:
            self._stopping = True
            self._lease_lock.notify_all()
        if self._renewer is not None:
            self._renewer.join(timeout=10)
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- leases (client/client.h "Leases") -------------------------------------------------------

    def _start_lease(self, session_id, lease_s):
        if lease_s <= 0:
            return
        with self._lease_lock:
            self._lease_s = lease_s
            self._leased.add(session_id)
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew, name="meshrt-lease",
                                                 daemon=True)
                self._renewer.start()

    def _end_lease(self, session_id):
        with self._lease_lock:
            self._leased.discard(session_id)

    def _renew(self):
        failing = False
        while True:
            with self._lease_lock:
                self._lease_lock.wait_for(lambda: self._stopping,
                                          timeout=max(self._lease_s / 4, 0.1))
                if self._stopping:
                    return
                ids = sorted(self._leased)
            if not ids:
                continue
            try:
                self._call(self._stub.KeepAlive, self._pb.KeepAliveRequest(sessions=ids),
                           timeout=max(self._lease_s / 4, 1.0))
                failing = False
            except errors.MeshrtError as e:
                if not failing:
                    import sys
                    print(f"meshrt: renewing session leases failed (will retry): {e}",
                          file=sys.stderr)
                failing = True


def connect(address, token=None, token_file=None, **options):
    """Connects to the coordinator at ``address`` ("host:port") and returns a :class:`Client`.

    ``token`` / ``token_file``: the client token the coordinator requires. Without either, a
    coordinator on this machine's loopback is asked with the token it generated
    ($MESHRT_HOME or ~/.meshrt, <port>/client.token). TLS: ``tls_ca_file`` (and
    ``tls_cert_file``/``tls_key_file`` for a client certificate). ``checkpoint_root``: the
    coordinator's --checkpoint_root as mounted here, for Session.export and load_npz. Raises UnavailableError when the
    coordinator cannot be reached, UnauthenticatedError for a missing or wrong token.
    """
    return Client(address, token=token, token_file=token_file, **options)


class Session:
    """A graph loaded on a mesh of workers (use :meth:`Client.session`)."""

    def __init__(self, client, response, graph, request=None):
        self.client = client
        self._request = request
        self.id = response.session
        self.graph = graph
        self.mesh = Shape.from_proto(response.mesh)
        self.layout = layout_text([(r.tensor_dim, r.mesh_dim) for r in response.rules.rules])
        self.workers = [w.address for w in response.workers]
        self._explain = response.explain
        self._plan = response.plan
        t = response.training
        self.training = {k: v for k, v in (("loss", t.loss), ("learning_rate", t.learning_rate),
                                           ("global_norm", t.global_norm),
                                           ("global_step", t.global_step)) if v}
        self.step = 0
        self._closed = False

    def explain(self):
        """The coordinator's layout report: every tensor's layout and slice shape, each op's
        collectives and bytes, and the per-worker memory (core/planning/explain.h)."""
        return self._explain

    def plan(self):
        """The planner's report when the session was created with auto_layout, else ""."""
        return self._plan

    # ---- steps -----------------------------------------------------------------------------------

    def run(self, feeds=None, fetches=None):
        """Runs one step. ``feeds``: {placeholder name or Tensor: numpy array} (whole tensors; the
        coordinator slices them). ``fetches``: a name or Tensor (returns one array), a list of them
        (returns a list), or None (returns {name: array} of the graph's outputs)."""
        return self.run_steps(1, feeds, fetches)

    def run_steps(self, num_steps, feeds=None, fetches=None):
        """Runs ``num_steps`` steps on the workers in one request (the same feeds each time: a
        training loop whose data the workers read themselves) and returns the last step's fetches,
        shaped as :meth:`run` returns them."""
        if num_steps < 1:
            raise InvalidArgumentError(f"num_steps must be >= 1, not {num_steps}")
        names, shape_result = _fetch_list(fetches)
        from meshrt._proto import session_pb2
        header = session_pb2.RunStepRequest(session=self.id, fetches=names, num_steps=num_steps)
        requests = [header] + list(self._feed_chunks(feeds or {}))
        timeout = self.client.rpc_timeout * num_steps
        try:
            responses = self.client._stub.RunStep(iter(requests), timeout=timeout,
                                                  metadata=self.client._metadata)
            fetched = _assemble(responses)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        self.step += num_steps
        return shape_result(fetched)

    def _feed_chunks(self, feeds):
        from meshrt._proto import session_pb2
        for key, value in feeds.items():
            name = key.name if isinstance(key, Tensor) else str(key)
            if self.graph is not None and name in self.graph:
                t = self.graph.find(name)
                proto = _tensors.to_proto(value, t.shape, t.dtype, f"feed '{name}'")
            elif isinstance(key, Tensor):
                proto = _tensors.to_proto(value, key.shape, key.dtype, f"feed '{name}'")
            else:
                raise InvalidArgumentError(
                    f"feed '{name}': the session's graph has no such placeholder")
            data = proto.content
            offset = 0
            while True:
                piece = data[offset:offset + _CHUNK_BYTES]
                chunk = session_pb2.TensorChunk(offset=offset, data=piece,
                                                last=offset + len(piece) >= len(data))
                if offset == 0:
                    chunk.name = name
                    chunk.dtype = proto.dtype
                    chunk.shape.CopyFrom(proto.shape)
                yield session_pb2.RunStepRequest(feed=chunk)
                offset += len(piece)
                if offset >= len(data):
                    break

    # ---- training --------------------------------------------------------------------------------

    def train(self, steps, feeds=None, log_every=1, fetches=None, callback=None, optimizer=None,
              loss=None, variables=None):
        """Runs ``steps`` training steps and returns the loss curve: a list of (step, loss) every
        ``log_every`` steps (steps counted from this session's start, 1-based).
        ``callback(step, loss)`` is called as they come; ``fetches``: more tensors fetched at each
        logged step, passed to the callback as a third argument when given.

        A session created with a loss and an optimizer trains as it was created. One created
        without them can be given ``optimizer`` and ``loss`` (and ``variables``) here before its
        first step: this one is then closed (freeing its workers) and the session created again on
        the coordinator as a training session (same graph, mesh and layout), which takes its
        place."""
        if optimizer is not None or loss is not None:
            self._become_training(optimizer, loss, variables)
        if "loss" not in self.training:
            raise errors.FailedPreconditionError(
                f"session {self.id} is not a training session: create it with "
                "client.session(graph, ..., loss=loss, optimizer=meshrt.training.adam(...)), or "
                "pass optimizer= and loss= to its first train()")
        if log_every < 1:
            raise InvalidArgumentError(f"log_every must be >= 1, not {log_every}")
        curve = []
        done = 0
        extra = [f.name if isinstance(f, Tensor) else f for f in (fetches or [])]
        while done < steps:
            n = min(log_every, steps - done)
            out = self.run_steps(n, feeds, [self.training["loss"]] + extra)
            done += n
            loss = float(out[0])
            curve.append((self.step, loss))
            if callback is not None:
                callback(self.step, loss, *([out[1:]] if extra else []))
        return curve

    def _become_training(self, optimizer, loss, variables):
        if "loss" in self.training:
            raise errors.FailedPreconditionError(
                f"session {self.id} trains already (as it was created): call train() without "
                "optimizer= and loss=")
        if self.step > 0 or self._request is None:
            raise errors.FailedPreconditionError(
                f"session {self.id} has run {self.step} step(s): its variables would be lost in a "
                "new training session; pass optimizer= and loss= when creating it, or to the first "
                "train()")
        if loss is None:
            raise InvalidArgumentError("training needs a loss (a scalar float32 Tensor)")
        opt = optimizer if optimizer is not None else Optimizer("sgd")
        if variables is None and self.graph is not None:
            variables = self.graph.trainable_variables()
        request = type(self._request)()
        request.CopyFrom(self._request)
        request.training.CopyFrom(opt.spec(loss, variables, None))
        # Free this session's workers first: on a cluster with no spare worker the training
        # session needs them (it has run no step, so nothing is lost).
        old = self.id
        self._closed = True
        self.client.close_session(old)
        try:
            replacement = self.client._create(request, self.graph)
        except errors.MeshrtError as e:
            raise type(e)(f"session {old} was closed to free its workers for a training session, "
                          f"which could not be created: {e.message}", e.code) from e
        self.__dict__.update({k: v for k, v in replacement.__dict__.items()})
        replacement._closed = True  # this object owns the new session now

    # ---- checkpoints -----------------------------------------------------------------------------

    def save(self, name, keep=2):
        """Saves every variable as checkpoint ``name`` (relative to the coordinator's
        --checkpoint_root); the last ``keep`` versions stay. Returns the saved step count."""
        from meshrt._proto import checkpoint_pb2
        r = self.client._call(self.client._stub.SaveCheckpoint, checkpoint_pb2.SaveCheckpointRequest(
            session=self.id, directory=name, keep=keep))
        return r.step

    def restore(self, name, partial=False):
        """Restores checkpoint ``name`` (saved on any mesh and layout by a session with the same
        variables) and returns its step count, which this session continues from. ``partial``:
        the checkpoint may lack some of the session's variables, which keep their values (how
        imported weights become initial values); extra or mismatched ones are still refused."""
        from meshrt._proto import checkpoint_pb2
        r = self.client._call(self.client._stub.RestoreCheckpoint,
                              checkpoint_pb2.RestoreCheckpointRequest(session=self.id,
                                                                      directory=name,
                                                                      partial=bool(partial)))
        self.step = r.step
        return r.step

    def _checkpoint_path(self, name):
        root = self.client.checkpoint_root
        if not root:
            raise errors.FailedPreconditionError(
                "export and load_npz read and write checkpoint files: pass checkpoint_root= to "
                "meshrt.connect (the coordinator's --checkpoint_root, as mounted on this machine); "
                "a local_cluster knows its own")
        return os.path.join(root, name)

    def export(self, path, variables=None, checkpoint=None):
        """Writes the variables' whole (global) values to ``path`` (.npz, one array per variable
        name, as numpy.savez writes) and returns {name: array}, without running a step: it saves
        checkpoint ``checkpoint`` (default "exports/<session id>", under the coordinator's
        --checkpoint_root) and reads it back (checksums verified). ``variables``: names (default:
        every variable the checkpoint holds: weights, optimizer slots, step counters)."""
        name = checkpoint or f"exports/{self.id}"
        self.save(name, keep=1)
        _, values = read_checkpoint(self._checkpoint_path(name))
        if variables is not None:
            names = [v.name if isinstance(v, Tensor) else v for v in variables]
            unknown = [n for n in names if n not in values]
            if unknown:
                raise errors.NotFoundError(f"export: the session has no variables {unknown}")
            values = {n: values[n] for n in names}
        np.savez(path, **values)
        return values

    def load_npz(self, path, checkpoint=None):
        """Sets variables from the arrays of the .npz file ``path`` (keyed by variable name, as
        export writes; float arrays are converted to float32): the other variables keep their
        values (e.g. their initial ones). Each key must be a variable of the session's graph with
        the same sizes, else InvalidArgumentError naming it, before anything changes. Goes through
        checkpoint ``checkpoint`` (default "imports/<session id>") and a partial restore; returns
        the session's step count (unchanged)."""
        with np.load(path) as f:
            arrays = {key: f[key] for key in f.files}
        return self.load_variables(arrays, checkpoint=checkpoint, what=path)

    def load_variables(self, arrays, checkpoint=None, what="load_variables"):
        """:meth:`load_npz` from a dict {variable name: array} (e.g. what :meth:`export` or
        read_checkpoint returned): those variables take the arrays' values, the others keep
        theirs."""
        if self.graph is None:
            raise InvalidArgumentError("loading variables needs the session's Graph (to name the "
                                       "dims)")
        variables = set(self.graph.variables())
        tensors = {}
        for key, value in arrays.items():
            if key not in variables:
                raise InvalidArgumentError(
                    f"{what}: '{key}' is not a variable of the session's graph")
            t = self.graph.find(key)
            tensors[key] = (value, t.shape, t.dtype)
        name = checkpoint or f"imports/{self.id}"
        target = self._checkpoint_path(name)
        os.makedirs(target, exist_ok=True)
        write_checkpoint(target, tensors, step=self.step)
        return self.restore(name, partial=True)

    # ---- lifetime --------------------------------------------------------------------------------

    def close(self):
        """Closes the session on the coordinator (frees its workers). Closing twice is fine."""
        if self._closed:
            return
        self._closed = True
        self.client.close_session(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.close()
        except errors.MeshrtError:
            if exc[0] is None:
                raise

    def __repr__(self):
        return f"Session({self.id}, mesh [{self.mesh}], layout '{self.layout}')"


def _fetch_list(fetches):
    """(names to fetch, a function of {name: array} giving what run returns)."""
    if fetches is None:
        return [], lambda d: d
    if isinstance(fetches, (str, Tensor)):
        name = fetches.name if isinstance(fetches, Tensor) else fetches
        return [name], lambda d: d[name]
    names = [f.name if isinstance(f, Tensor) else str(f) for f in fetches]
    return names, lambda d: [d[n] for n in names]


def _assemble(responses):
    from meshrt._proto import tensor_pb2
    parts = {}
    headers = {}
    current = None
    for r in responses:
        if r.HasField("fetch"):
            c = r.fetch
            if c.name:
                current = c.name
                headers[current] = (c.dtype, c.shape)
                parts[current] = bytearray()
            if current is None:
                raise errors.InternalError("a fetch chunk came before its tensor's first chunk")
            buf = parts[current]
            if c.offset != len(buf):
                raise errors.InternalError(
                    f"fetch '{current}': chunk at offset {c.offset}, expected {len(buf)}")
            buf.extend(c.data)
        if r.done:
            break
    out = {}
    for name, buf in parts.items():
        dtype, shape = headers[name]
        value = tensor_pb2.TensorValue(dtype=dtype, shape=shape, content=bytes(buf))
        out[name] = _tensors.from_proto(value)[0]
    return out


def read_checkpoint(directory):
    """(step, {variable name: whole numpy array}) of the committed checkpoint in ``directory`` (an
    absolute path), checksums verified (runtime/checkpoint_tensors.h)."""
    from meshrt import _native
    from meshrt._proto import tensor_pb2
    step, serialized = errors.check(_native.core().read_checkpoint(os.path.abspath(directory)))
    return step, {n: _tensors.from_proto(tensor_pb2.TensorValue.FromString(b))[0]
                  for n, b in serialized.items()}


def write_checkpoint(directory, tensors, step=0, keep=2):
    """Writes ``tensors`` ({name: (array, Shape, dtype)}) as a new committed version of the
    checkpoint in ``directory`` (which must exist): one whole shard per variable; it restores onto
    any mesh and layout (partially, into a session with more variables)."""
    from meshrt import _native
    protos = {name: _tensors.to_proto(a, shape, dtype, f"variable '{name}'").SerializeToString()
              for name, (a, shape, dtype) in tensors.items()}
    errors.check(_native.core().write_checkpoint(os.path.abspath(directory), protos, int(step),
                                                 int(keep)))


# ---- the local cluster ---------------------------------------------------------------------------

def _default_binary():
    """The meshrt binary local clusters run: $MESHRT_BINARY, else the copy pip installed with the
    package (meshrt/bin/meshrt, setup.py), else the repository's Bazel output (the package used
    from the source tree), else `meshrt` on PATH; NotFoundError saying how to get one."""
    env = os.environ.get("MESHRT_BINARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "bin", "meshrt")
    if os.path.exists(installed):
        return installed
    repo = os.path.dirname(os.path.dirname(here))
    for out in ("bazel-bin", "bazel-out/k8-fastbuild/bin", "bazel-out/k8-opt/bin"):
        built = os.path.join(repo, out, "client", "meshrt")
        if os.path.exists(built):
            return built
    found = shutil.which("meshrt")
    if found:
        return found
    raise errors.NotFoundError(
        f"cannot find the meshrt binary (looked for $MESHRT_BINARY, {installed}, the repository's "
        "bazel-bin/client/meshrt and `meshrt` on PATH): set $MESHRT_BINARY to its path or pass "
        "binary=; or build it (`make build` in the repository) and reinstall the package "
        "(`pip install --no-build-isolation ./python` copies it in)")


class LocalCluster:
    """An embedded cluster on loopback: ``meshrt local`` (one coordinator and N worker processes)
    as a child process; use :func:`local_cluster`. ``address``, ``client`` (connected),
    ``checkpoint_root``, ``dashboard_url`` (the live dashboard with the cluster's operator token
    in it, for a browser; None if ``meshrt local`` printed none); :meth:`session` creates sessions
    on it; :meth:`close` stops it."""

    def __init__(self, workers=4, data_dirs=None, checkpoint_root=None, binary=None, log_dir=None,
                 session_lease=None, startup_timeout=60.0):
        self._tmp = tempfile.mkdtemp(prefix="meshrt-local-")
        self.checkpoint_root = os.path.abspath(checkpoint_root or os.path.join(self._tmp, "ck"))
        os.makedirs(self.checkpoint_root, exist_ok=True)
        self.log_dir = os.path.abspath(log_dir or os.path.join(self._tmp, "logs"))
        os.makedirs(self.log_dir, exist_ok=True)
        cmd = [binary or _default_binary(), "local", f"--workers={int(workers)}", "--port=0",
               f"--log_dir={self.log_dir}", f"--checkpoint_root={self.checkpoint_root}"]
        for d in data_dirs or []:
            cmd.append(f"--data_dir={os.path.abspath(d)}")
        if session_lease is not None:
            cmd.append(f"--session_lease={session_lease}")
        env = dict(os.environ, MESHRT_HOME=os.path.join(self._tmp, "home"))
        self._stdout_path = os.path.join(self._tmp, "local.out")
        self._out = open(self._stdout_path, "w+")
        self._process = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        self.client = None
        self.dashboard_url = None
        try:
            self.address, token_file = self._wait_ready(startup_timeout)
            self.token_file = token_file
            self.client = connect(self.address, token_file=token_file,
                                  checkpoint_root=self.checkpoint_root)
        except BaseException:
            self.close()
            raise

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        address = token = None
        ready_at = None
        while time.monotonic() < deadline:
            with open(self._stdout_path) as f:
                text = f.read()
            m = re.search(r"coordinator at (\S+) with", text)
            t = re.search(r"client token (\S+)", text)
            d = re.search(r"^dashboard: (\S+)", text, re.M)
            if m:
                address = m.group(1)
            if t:
                token = t.group(1)
            if d:
                self.dashboard_url = d.group(1)
            if address and token:
                # The dashboard line follows the token's at once; a cluster without one is fine.
                ready_at = ready_at or time.monotonic()
                if d or time.monotonic() - ready_at > 2:
                    return address, token
            if self._process.poll() is not None:
                raise errors.UnavailableError(
                    f"meshrt local exited with status {self._process.returncode}: "
                    f"{text.strip()[-2000:]} (daemon logs in {self.log_dir})")
            time.sleep(0.05)
        raise errors.DeadlineExceededError(
            f"the local cluster did not start within {timeout:g} s (daemon logs in {self.log_dir})")

    def session(self, graph=None, **options):
        """client.session(graph, ...) on this cluster (see Client.session)."""
        return self.client.session(graph, **options)

    def close(self):
        """Stops every process of the cluster (SIGTERM, then SIGKILL after 15 s)."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(timeout=15)
        self._out.close()
        shutil.rmtree(os.path.join(self._tmp, "home"), ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def local_cluster(workers=4, **options):
    """Starts a local cluster of ``workers`` worker processes and a coordinator on loopback (the
    project's own daemons, via ``meshrt local``) and returns a :class:`LocalCluster`; use it in a
    ``with`` block, or call close(). Options: ``data_dirs`` (directories graphs may read, e.g. for
    text_windows), ``checkpoint_root`` (default a private temp dir), ``binary`` (the meshrt binary;
    default $MESHRT_BINARY, else the copy pip installed with the package, else the repository's
    bazel-bin/client/meshrt, else ``meshrt`` on PATH), ``log_dir``,
    ``session_lease`` ("10s"), ``startup_timeout`` (seconds)."""
    return LocalCluster(workers=workers, **options)
