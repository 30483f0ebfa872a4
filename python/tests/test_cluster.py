"""Sessions on a real local cluster: ops against numpy on several meshes and layouts, errors as
exceptions, save/restore, export to .npz."""

import os

import numpy as np
import pytest

import meshrt as mr

B, D, H = mr.Dimension("batch", 8), mr.Dimension("d_in", 6), mr.Dimension("hidden", 4)

LAYOUTS = [
    ("", ""),                                    # one processor
    ("x:2", "batch:x"),                          # data parallel
    ("x:2", {"hidden": "x"}),                    # model parallel (hidden split), rules as a dict
    ("x:2", "d_in:x"),                           # the contracted dim split: a partial sum
    ("rows:2,cols:2", "batch:rows,hidden:cols"),
    ("rows:2,cols:2", "d_in:rows,hidden:cols"),
]


def ops_graph():
    g = mr.Graph()
    x = g.placeholder("x", [B, D])
    w = g.placeholder("w", [D, H])
    b = g.placeholder("b", [H])
    h = g.relu(g.einsum([x, w], [B, H], name="h") + b)
    g.mark_output(
        h,
        g.softmax(h, ["hidden"], name="p"),
        g.reduce_sum(h, ["batch"], name="col_sums"),
        g.reduce_max(h, ["hidden"], name="row_max"),
        g.layer_norm(h, dims=["hidden"], epsilon=1e-5, name="ln"),
        g.scale(g.exp(g.neg(h)), 0.5, name="e"),
    )
    return g


def numpy_ops(x, w, b):
    h = np.maximum(x @ w + b, 0)
    p = np.exp(h - h.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    mean = h.mean(1, keepdims=True)
    var = ((h - mean) ** 2).mean(1, keepdims=True)
    return {"p": p, "col_sums": h.sum(0), "row_max": h.max(1),
            "ln": (h - mean) / np.sqrt(var + 1e-5), "e": 0.5 * np.exp(-h)}


@pytest.mark.parametrize("mesh,layout", LAYOUTS)
def test_ops_equal_numpy_on_every_layout(cluster, mesh, layout):
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((8, 6)).astype(np.float32),
             "w": rng.standard_normal((6, 4)).astype(np.float32),
             "b": rng.standard_normal(4).astype(np.float32)}
    g = ops_graph()
    with cluster.session(g, mesh=mesh, layout=layout) as s:
        out = s.run(feeds)
        assert s.mesh == mr.Mesh(mesh or "x:1") and s.layout == mr.shapes.layout_text(layout)
        assert s.explain().startswith(f"mesh {mesh or 'x:1'}")
    want = numpy_ops(feeds["x"], feeds["w"], feeds["b"])
    assert set(want) <= set(out)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    ref, _ = g.evaluate(feeds)   # and the single-process reference interpreter
    for name in want:
        np.testing.assert_allclose(out[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_fetch_forms_and_int_tensors(cluster):
    g = mr.Graph()
    ids = g.placeholder("ids", [B], dtype="int32")
    oh = g.one_hot(ids, H, name="oh")
    back = g.argmax(oh, dims=["hidden"], name="back")
    with cluster.session(g, mesh="x:2", layout="batch:x") as s:
        v = np.arange(8, dtype=np.int32) % 4
        one = s.run({ids: v}, fetches=back)
        assert one.dtype == np.int32 and one.tolist() == v.tolist()
        a, b = s.run({"ids": v}, fetches=["oh", back])
        np.testing.assert_array_equal(a, np.eye(4, dtype=np.float32)[v])
        assert b.tolist() == v.tolist()


def test_server_errors_are_exceptions_naming_what_is_wrong(cluster):
    g = ops_graph()
    with pytest.raises(mr.InvalidArgumentError) as e:
        cluster.session(g, mesh="x:2", layout="batch:nowhere")
    assert "nowhere" in e.value.message
    with cluster.session(g, mesh="x:2", layout="batch:x") as s:
        with pytest.raises(mr.InvalidArgumentError, match="feed 'x'"):
            s.run({"x": np.zeros((8, 5), np.float32)})             # checked before sending
        with pytest.raises(mr.InvalidArgumentError, match="'w'"):
            s.run({"x": np.zeros((8, 6), np.float32)}, fetches="h")  # w, b not fed: the server
        with pytest.raises(mr.InvalidArgumentError, match="no_such_tensor"):
            s.run({"x": np.zeros((8, 6), np.float32), "w": np.zeros((6, 4), np.float32),
                   "b": np.zeros(4, np.float32)}, fetches="no_such_tensor")
    with pytest.raises(mr.NotFoundError):
        s.run({}, fetches="h")                                     # closed: unknown session


def test_a_wrong_token_is_refused(cluster):
    with pytest.raises(mr.UnauthenticatedError):
        mr.connect(cluster.address, token="not-the-token")


def test_an_unreachable_coordinator_is_unavailable():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(mr.UnavailableError, match=str(port)):
        mr.connect(f"127.0.0.1:{port}", connect_timeout=0.5)


def regression_graph():
    m = mr.models.mlp(batch=16, d_model=8, d_ff=16, seed=2)
    return m


def test_train_save_and_restore_on_another_layout(cluster):
    m = regression_graph()
    opt = mr.training.adam(0.01)
    with cluster.session(m.graph, mesh="x:2", layout="batch:x", loss=m.loss, optimizer=opt,
                         variables=m.variables) as s:
        curve = s.train(steps=6, log_every=2)
        assert [step for step, _ in curve] == [2, 4, 6]
        assert all(np.isfinite(loss) for _, loss in curve)
        assert curve[-1][1] < curve[0][1]
        assert s.save("py/ck") == 6
        later = s.train(steps=2)
    # On another mesh and layout: restore step 6 and continue exactly as the first session did.
    with cluster.session(m.graph, mesh="rows:2,cols:2", layout="batch:rows,d_ff:cols",
                         loss=m.loss, optimizer=opt, variables=m.variables) as s:
        assert s.restore("py/ck") == 6
        again = s.train(steps=2)
        np.testing.assert_allclose([l for _, l in again], [l for _, l in later], rtol=1e-5)
        with pytest.raises(mr.InvalidArgumentError):
            s.restore("/etc")
    assert os.path.isdir(os.path.join(cluster.checkpoint_root, "py", "ck"))


def test_train_with_an_optimizer_given_at_the_first_train(cluster):
    m = mr.models.mlp(batch=16, d_model=8, d_ff=16, seed=2)
    opt = mr.training.adam(0.01)
    with cluster.session(model=m, mesh="x:2", layout="batch:x", optimizer=opt) as s:
        want = s.train(steps=3)
    with cluster.session(m.graph, mesh="x:2", layout="batch:x") as s:
        first = s.id
        got = s.train(steps=3, optimizer=opt, loss=m.loss, variables=m.variables)
        assert s.id != first and s.training["loss"] == "loss"
        with pytest.raises(mr.FailedPreconditionError, match="trains already"):
            s.train(steps=1, optimizer=opt, loss=m.loss)
    assert got == want
    with cluster.session(m.graph, mesh="x:2", layout="batch:x") as s:
        s.run(fetches="loss")
        with pytest.raises(mr.FailedPreconditionError, match="would be lost"):
            s.train(steps=1, optimizer=opt, loss=m.loss)


def test_train_given_an_optimizer_on_a_session_holding_every_worker(cluster):
    # The plain session's workers are freed before the training session is created: with no
    # spare worker in the cluster this works at once (it used to wait and fail, 0 free).
    m = mr.models.mlp(batch=16, d_model=8, d_ff=16, seed=2)
    with cluster.session(m.graph, mesh="x:4", layout="batch:x", wait=3) as s:
        first = s.id
        curve = s.train(steps=2, optimizer=mr.training.sgd(0.05), loss=m.loss,
                        variables=m.variables)
        assert s.id != first and len(curve) == 2 and all(np.isfinite(l) for _, l in curve)


def test_a_mesh_larger_than_the_cluster_says_what_it_waits_for(cluster, caplog):
    m = mr.models.mlp(batch=16, d_model=8, d_ff=16, seed=2)
    with caplog.at_level("WARNING", logger="meshrt"):
        with pytest.raises(mr.InvalidArgumentError, match="waited 1s for workers to register"):
            cluster.session(m.graph, mesh="x:8", layout="batch:x", wait=1)
    assert "the mesh needs 8 workers" in caplog.text and "has 4 registered" in caplog.text


def test_run_steps_runs_the_steps_on_the_workers(cluster):
    m = mr.models.mlp(batch=16, d_model=8, d_ff=16, seed=2)
    with cluster.session(model=m, mesh="x:2", layout="batch:x",
                         optimizer=mr.training.sgd(0.05)) as s:
        step, loss = s.run_steps(5, fetches=[m.data_step, m.loss])
        assert step == 4 and s.step == 5          # the data counter at the start of step 5
        assert np.isfinite(loss)
        with pytest.raises(mr.InvalidArgumentError, match="num_steps"):
            s.run_steps(0)


def test_export_then_load_npz_reproduces_the_weights(cluster, tmp_path):
    m = mr.models.mlp(batch=16, d_model=8, d_ff=16, seed=2)
    opt = mr.training.adam(0.01)
    with cluster.session(model=m, mesh="x:2", layout="batch:x", optimizer=opt) as s:
        s.train(steps=4)
        exported = s.export(str(tmp_path / "w.npz"))
        assert s.step == 4                               # exporting ran no step
        next_loss = s.train(steps=1)[0][1]               # step 5, from the exported weights
    assert {"w1", "w2", "teacher", "data_step", "global_step"} <= set(exported)
    assert exported["data_step"] == 4
    with np.load(str(tmp_path / "w.npz")) as f:
        assert set(f.files) == set(exported)
        for name, value in exported.items():
            np.testing.assert_array_equal(f[name], value)
    # Only the model's weights and the data counter, into a fresh forward-only session on another
    # layout: its loss is the trained session's fifth step's, its variables the file's.
    subset = tmp_path / "model.npz"
    np.savez(str(subset), **{k: exported[k] for k in ("w1", "w2", "teacher", "data_step")})
    with cluster.session(m.graph, mesh="rows:2,cols:2", layout="batch:rows,d_ff:cols") as s:
        s.load_npz(str(subset))
        w1, w2, loss = s.run(fetches=["w1", "w2", "loss"])
        np.testing.assert_array_equal(w1, exported["w1"])
        np.testing.assert_array_equal(w2, exported["w2"])
        np.testing.assert_allclose(loss, next_loss, rtol=1e-5)
        bad = tmp_path / "bad.npz"
        np.savez(str(bad), no_such_variable=np.zeros(3, np.float32))
        with pytest.raises(mr.InvalidArgumentError, match="no_such_variable"):
            s.load_npz(str(bad))
        np.savez(str(bad), w1=np.zeros((3, 3), np.float32))
        with pytest.raises(mr.InvalidArgumentError, match="w1"):
            s.load_npz(str(bad))


def test_the_local_cluster_serves_its_dashboard(cluster):
    import json
    import urllib.error
    import urllib.parse
    import urllib.request
    url = urllib.parse.urlsplit(cluster.dashboard_url)
    assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.path == "/"
    token = urllib.parse.parse_qs(url.query)["token"][0]
    api = f"http://127.0.0.1:{url.port}/api/cluster"
    with urllib.request.urlopen(f"{api}?token={token}", timeout=10) as r:
        snapshot = json.load(r)
    assert len(snapshot["workers"]) == 4
    assert {w["state"] for w in snapshot["workers"]} <= {"idle", "busy"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(api, timeout=10)
    assert refused.value.code == 401
