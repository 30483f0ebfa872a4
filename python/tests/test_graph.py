"""The graph builder offline: shapes inferred by the C++ core, errors as exceptions, every op
reachable, graphs equal to the C++ builder's, and the reference interpreter against numpy."""

import numpy as np
import pytest

import meshrt as mr
from meshrt import _native

B, D, H = mr.Dimension("batch", 4), mr.Dimension("d_in", 3), mr.Dimension("hidden", 5)


def test_shapes_are_inferred_and_broadcast_by_name():
    g = mr.Graph()
    x = g.placeholder("x", [B, D])
    w = g.variable("w", [D, H], mr.initializers.normal(seed=3))
    y = g.einsum([x, w], [B, H])
    assert y.name == "einsum_0" and y.shape == mr.Shape("batch:4,hidden:5") and y.dtype == "float32"
    b = g.variable("b", [H])
    z = y + b                      # broadcast of [hidden] over [batch, hidden] by name
    assert z.shape.names == ["batch", "hidden"]
    s = g.reduce_sum(z, ["batch"], name="s")
    assert s.shape == mr.Shape([H])
    assert (z * 2.0).shape == z.shape and (-z).name.startswith("neg_")
    assert g.reduce_mean(z).shape.rank == 0
    g.mark_output(s)
    g.mark_output(s)
    assert g.outputs == ["s"]
    assert g.variables() == ["w", "b"]
    g.validate()


def test_name_scopes_name_ops_as_the_cpp_builder_does():
    g = mr.Graph()
    x = g.placeholder("x", [B, D])
    top = g.relu(x)
    with g.name_scope("layer_0"):
        w = g.variable("layer_0/w", [D, H])          # variables keep the names given
        with g.name_scope("ffn"):
            h = g.einsum([x, w], [B, H])
            r1 = g.relu(h)
            r2 = g.relu(r1)
            gate = g.mul(r2, r2, name="gate")
    again = g.relu(x)
    assert [top.name, again.name] == ["relu_0", "relu_1"]
    assert w.name == "layer_0/w"
    assert [h.name, r1.name, r2.name, gate.name] == [
        "layer_0/ffn/einsum", "layer_0/ffn/relu", "layer_0/ffn/relu_1", "layer_0/ffn/gate"]
    g.validate()


def test_einsum_mistakes_raise_at_the_line_that_makes_them():
    g = mr.Graph()
    x = g.placeholder("x", "batch:8,d_model:4")
    w = g.variable("w", "d_model:4,d_ff:6")
    with pytest.raises(mr.InvalidArgumentError, match="dim 'batch' is 8 in 'x' but 9 in the output"):
        g.einsum([x, w], "batch:9,d_ff:6", name="h")
    with pytest.raises(mr.InvalidArgumentError, match="output dim 'dff' is in no input"):
        g.einsum([x, w], "batch:8,dff:6", name="h")
    # On purpose: a broadcast over a new dim.
    b = g.einsum([x], "batch:8,d_model:4,heads:2", broadcast=True)
    assert b.shape == mr.Shape("batch:8,d_model:4,heads:2")


def test_mesh_tensorflow_semicolons_are_accepted_in_meshes_and_rules():
    assert mr.shapes.as_mesh("rows:2;cols:2") == mr.shapes.as_mesh("rows:2,cols:2")
    assert mr.shapes.layout_rules("batch:rows;hidden:cols") == [("batch", "rows"), ("hidden", "cols")]


def test_errors_are_exceptions_naming_the_op():
    g = mr.Graph()
    x = g.placeholder("x", [B, D])
    with pytest.raises(mr.InvalidArgumentError) as e:
        g.reduce_sum(x, ["nope"], name="bad_sum")
    assert "bad_sum" in e.value.message and "nope" in e.value.message
    assert e.value.code_name == "INVALID_ARGUMENT"
    with pytest.raises(mr.InvalidArgumentError, match="two ops are called 'x'"):
        g.placeholder("x", [B])
    with pytest.raises(mr.InvalidArgumentError, match="batch"):
        g.add(x, g.placeholder("y", [mr.Dimension("batch", 7)]))  # one name, two sizes
    with pytest.raises(mr.InvalidArgumentError, match="repeats dimension 'batch'"):
        mr.Shape([B, B])
    with pytest.raises(mr.NotFoundError):
        g.find("missing")
    with pytest.raises(AttributeError, match="no method or op 'no_such_op'"):
        g.no_such_op(x)


def test_every_registered_op_is_a_method():
    g = mr.Graph()
    ops = mr.Graph.registered_ops()
    assert len(ops) > 50
    types = {o["type"] for o in ops}
    for t in ("einsum", "softmax", "layer_norm", "one_hot", "gather", "conv2d", "while_loop",
              "text_windows", "dropout", "top_k", "cumsum"):
        assert t in types, t
    for t in types:
        assert callable(getattr(g, t)), t
    x = g.placeholder("x", [B, H])
    assert g.sigmoid(x).shape == x.shape           # via the registry, no method of its own
    assert g.op("tanh", x, name="t").name == "t"


def test_the_mlp_graph_is_the_cpp_builders_op_for_op():
    options = dict(batch=8, d_model=6, d_ff=10, seed=4, biases=True)
    m = mr.models.mlp(**options)
    from meshrt._proto import graph_pb2
    cpp = graph_pb2.Graph.FromString(mr.errors.check(_native.core().model_graph("mlp", options)))
    assert len(cpp.ops) == len(m.graph.to_proto().ops) > 10
    assert cpp == m.graph.to_proto()   # same ops in the same order, same attributes


def test_the_transformer_graph_is_the_cpp_models_op_for_op():
    options = dict(batch=4, length=8, d_model=16, heads=2, d_kv=8, d_ff=32, layers=2, vocab=64,
                   seed=5)
    # Token ids with a held-out split: the eval pass ("eval/...") is the C++ one too.
    tokens = dict(options, vocab=300, data_path="/data/tokens.npy", data_format="npy",
                  eval_fraction=0.1)
    for config in (dict(options, norm="layer"), dict(options, norm="rms"),
                   dict(tokens, norm="rms"), dict(tokens, norm="layer", data_format="uint16"),
                   dict(tokens, vocab=256, data_format="bytes")):
        m = mr.models.transformer_lm(**config)
        from meshrt._proto import graph_pb2
        cpp = graph_pb2.Graph.FromString(
            mr.errors.check(_native.core().model_graph("transformer", config)))
        py = m.graph.to_proto()
        # Op order carries no meaning (meshrt sorts ops): the layers create their variables where
        # they are used, the C++ model all at once. Everything else is equal, op by op.
        by_name = {op.name: op for op in py.ops}
        assert len(by_name) == len(py.ops) == len(cpp.ops) > 60
        for op in cpp.ops:
            assert op.name in by_name, op.name
            assert by_name[op.name] == op, op.name
        assert list(py.outputs) == list(cpp.outputs)
        evals = [op.name for op in py.ops if op.name.startswith("eval/")]
        if config.get("eval_fraction"):
            assert m.eval_loss.name == "eval/loss" and "eval/loss" not in py.outputs
            forward = [op.name for op in py.ops if op.type != "variable"
                       and not op.name.startswith(("eval/", "data_step"))]
            assert sorted(evals) == sorted(["eval/step"] + [f"eval/{n}" for n in forward])
        else:
            assert m.eval_loss is None and not evals


def test_the_reference_interpreter_matches_numpy():
    rng = np.random.default_rng(0)
    g = mr.Graph()
    x = g.placeholder("x", [B, D])
    w = g.placeholder("w", [D, H])
    y = g.softmax(g.relu(g.einsum([x, w], [B, H])), ["hidden"], name="y")
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    wv = rng.standard_normal((3, 5)).astype(np.float32)
    out, _ = g.evaluate({"x": xv, "w": wv}, [y])
    r = np.maximum(xv @ wv, 0)
    want = np.exp(r - r.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6)
    with pytest.raises(mr.InvalidArgumentError, match="feed 'x'"):
        g.evaluate({"x": np.zeros((3, 4), np.float32), "w": wv}, [y])


def test_stubs_and_the_core_share_message_types_in_a_fresh_process():
    # The C++ core registers the .proto files in protobuf's C++ pool; a stub imported after it
    # loaded would take its types from there. The package imports every stub first.
    import subprocess
    import sys
    code = """
import meshrt as mr
g = mr.Graph()
g.relu(g.placeholder("x", "b:2"))          # loads meshrt._core
from meshrt._proto import session_pb2
r = session_pb2.CreateSessionRequest()
r.graph.CopyFrom(g.to_proto())
print(len(r.graph.ops))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"
