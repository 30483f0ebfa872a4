"""The models of meshrt's C++ //models, written with the Python API (layers.py).

:func:`transformer_lm` is models/transformer.h's decoder-only language model (the Mesh-TensorFlow
paper's, pre-norm, learned positions, untied output) and :func:`mlp` models/mlp.h's regression
MLP: the same variables, initializers, data and ops, so a session of either trains exactly as
``meshrt train --model ...`` does from the same seed.
"""

import numpy as np

from meshrt import initializers
from meshrt import layers as _layers
from meshrt.errors import InvalidArgumentError
from meshrt.graph import Graph
from meshrt.shapes import Dimension, Shape

DATA_STEP = "data_step"


class Model:
    """What a model adds to a graph: ``loss`` (scalar), ``output`` (logits or predictions),
    ``inputs``, ``targets``, ``data_step`` (the data counter variable, or None when data is fed),
    ``variables`` (the trainable ones, in creation order), ``keep_gradients``, ``eval_loss`` (a
    held-out loss training does not read, or None)."""

    def __init__(self, graph):
        self.graph = graph
        self.loss = self.output = self.inputs = self.targets = self.data_step = None
        self.eval_loss = None
        self.variables = []
        self.keep_gradients = []


def data_step(g):
    """The "data_step" variable (float32 scalar, zeros) and its +1 per step: the position of the
    workers' data stream, saved in checkpoints (models/model.h DataStep)."""
    step = g.variable(DATA_STEP, Shape([]))
    g.assign_add(step, g.op("ones", name="data_step/one"), name="data_step/next")
    return step


def text_windows(g, step, shape, path, offset, name, data_format="bytes", vocab=256, split="all",
                 eval_fraction=0.0):
    """Rows of token ids of the file ``path`` read on the workers (core/ops/ops_dataset.h): its bytes,
    or with ``data_format`` "npy"/"uint16" the ids of a .npy / raw uint16 file, in [0, vocab);
    with ``eval_fraction`` > 0, only ``split`` "train" (the first part) or "eval" (the last
    eval_fraction of the tokens). The attrs beyond path and offset are set only when they differ
    from the op's defaults, as the C++ model sets them."""
    attrs = dict(path=path, offset=int(offset))
    if data_format != "bytes":
        attrs.update(format=data_format, vocab=int(vocab))
    if eval_fraction > 0:
        attrs.update(split=split, eval_fraction=float(eval_fraction))
    return g.op("text_windows", step, shape=shape, name=name, **attrs)


def _check_transformer(batch, length, d_model, heads, d_kv, d_ff, layers, vocab, norm, data_path,
                       data_format, eval_fraction):
    # models/transformer.cc CheckTransformerOptions, message for message.
    for key, value in (("batch", batch), ("length", length), ("d_model", d_model),
                       ("heads", heads), ("d_kv", d_kv), ("d_ff", d_ff), ("layers", layers),
                       ("vocab", vocab)):
        if value <= 0:
            raise InvalidArgumentError(f"transformer: {key} must be positive, not {value}")
    if norm not in ("layer", "rms"):
        raise InvalidArgumentError(f"transformer: norm must be 'layer' or 'rms', not '{norm}'")
    if data_format not in ("bytes", "npy", "uint16"):
        raise InvalidArgumentError(
            f"transformer: data_format must be bytes, npy or uint16, not '{data_format}'")
    if not data_path and (data_format != "bytes" or eval_fraction != 0):
        raise InvalidArgumentError(
            "transformer: data_format npy/uint16 and eval_fraction need a data_path (synthetic ids "
            "have neither)")
    if data_path and data_format == "bytes" and vocab < 256:
        raise InvalidArgumentError(
            f"transformer: ids are bytes of {data_path}, so vocab must be >= 256, not {vocab}")
    if not 0 <= eval_fraction < 1:
        raise InvalidArgumentError(
            f"transformer: eval_fraction must be in [0, 1) (0: no eval), not {eval_fraction}")


def transformer_lm(g=None, batch=16, length=64, d_model=128, heads=4, d_kv=32, d_ff=512, layers=2,
                   vocab=256, norm="layer", epsilon=1e-5, data_path="", seed=1,
                   embedding_stddev=1.0, position_stddev=0.1, init_scale=1.0, data_format="bytes",
                   eval_fraction=0.0):
    """Adds the Transformer LM to ``g`` (a new Graph when None) and returns a :class:`Model`.

    Data: with ``data_path``, windows of the file read on the workers (inputs at offset 0,
    targets at 1) — its bytes, or with ``data_format`` "npy" (a 1-D int32/uint16 .npy) or "uint16"
    (raw, nanoGPT's .bin) token ids in [0, ``vocab``); else random ids keyed on the data step
    (synthetic). Dims: batch, length, memory, d_model, heads, d_kv, d_ff, vocab — so the paper's
    layouts are ``batch:rows`` (data parallel), ``heads:cols,d_ff:cols,vocab:cols`` (model
    parallel) and both.

    ``eval_fraction`` > 0 holds out the last part of the file's tokens: training reads split
    "train", and the model's ``eval_loss`` ("eval/loss") is the same forward pass on the same
    weights over a fixed batch of split "eval" (ops "eval/..."). It is no graph output: fetch it
    (e.g. ``session.train(..., fetches=[m.eval_loss])``) when wanted; unfetched it costs nothing.
    """
    n_layers = int(layers)
    _check_transformer(batch, length, d_model, heads, d_kv, d_ff, n_layers, vocab, norm,
                       data_path, data_format, eval_fraction)
    g = g if g is not None else Graph()
    m = Model(g)
    B, L = Dimension("batch", batch), Dimension("length", length)
    D, H, K = Dimension("d_model", d_model), Dimension("heads", heads), Dimension("d_kv", d_kv)
    F, V, M = Dimension("d_ff", d_ff), Dimension("vocab", vocab), Dimension("memory", length)
    tokens = Shape([B, L])

    def windows(step, offset, split, name):
        return text_windows(g, step, tokens, data_path, offset, name, data_format, vocab, split,
                            eval_fraction)

    def logits(ids):
        x = _layers.embedding(g, ids, V, D, name="embed", variable="embedding",
                              stddev=embedding_stddev, seed=seed)
        positions = g.variable("positions", Shape([L, D]),
                               initializers.normal(stddev=position_stddev, seed=seed))
        x = g.add(x, positions, name="embed/positions")
        mask = _layers.causal_mask(g, L, M)
        for i in range(n_layers):
            x = _layers.transformer_block(g, x, H, K, F, mask, name=f"layer_{i}", norm_kind=norm,
                                         epsilon=epsilon, seed=seed, init_scale=init_scale)
        h = _layers.norm(g, x, norm, "final_ln", epsilon)
        out = g.variable("output", Shape([D, V]), _layers.fan_in_normal(d_model, seed, init_scale))
        return g.einsum([h, out], tokens + Shape([V]), name="logits")

    def loss(output, targets):
        ce = g.normalize("softmax_cross_entropy",
                         [output, g.one_hot(targets, V, name="targets/one_hot")], ["vocab"],
                         name="cross_entropy")
        return g.reduce_mean(ce, None, name="loss")

    m.data_step = data_step(g)
    if data_path:
        m.inputs = windows(m.data_step, 0, "train", "inputs")
        m.targets = windows(m.data_step, 1, "train", "targets")
    else:
        m.inputs = g.cast(g.random_uniform(tokens, m.data_step, seed, 0.0, float(vocab),
                                           name="inputs/uniform"), "int32", name="inputs")
        m.targets = g.cast(g.random_uniform(tokens, m.data_step, seed + 1, 0.0, float(vocab),
                                            name="targets/uniform"), "int32", name="targets")
    m.output = logits(m.inputs)
    m.loss = loss(m.output, m.targets)
    if eval_fraction > 0:
        # The held-out batch: step 0's windows of the eval part, the same every time.
        with g.name_scope("eval"), g.reuse_variables():
            step = g.op("zeros", name="step")
            ids = windows(step, 0, "eval", "inputs")
            targets = windows(step, 1, "eval", "targets")
            m.eval_loss = loss(logits(ids), targets)
    m.variables = [v for v in g.variables() if v != DATA_STEP]
    return m


def mlp(g=None, batch=256, d_model=1024, d_ff=4096, seed=1, teacher_tanh=True, teacher_noise=0.0,
        biases=False, feed_data=False, fixed_data=False, input_gradient=False):
    """Adds models/mlp.h's regression MLP to ``g`` (a new Graph when None), op for op in the C++
    order, and returns a :class:`Model`: y = relu(x · w1 [+ b1]) · w2 [+ b2], loss =
    mean((y - target)^2); x and the target drawn on the workers (a teacher network), fed
    (``feed_data``: placeholders "x", "target") or fixed (``fixed_data``)."""
    if batch <= 0 or d_model <= 0 or d_ff <= 0:
        raise InvalidArgumentError(
            f"mlp: sizes must be positive (batch {batch}, d_model {d_model}, d_ff {d_ff})")
    if teacher_noise < 0:
        raise InvalidArgumentError(f"mlp: teacher_noise must be >= 0, not {teacher_noise}")
    g = g if g is not None else Graph()
    m = Model(g)
    B, D, F = Dimension("batch", batch), Dimension("d_model", d_model), Dimension("d_ff", d_ff)
    xs = Shape([B, D])
    if feed_data:
        m.inputs = g.placeholder("x", xs)
        m.targets = g.placeholder("target", xs)
    elif fixed_data:
        m.inputs = g.variable("x", xs, initializers.normal(seed=seed))
        m.targets = g.variable("target", xs, initializers.normal(seed=seed + 1))
    else:
        m.data_step = data_step(g)
        m.inputs = g.random_normal(xs, m.data_step, seed, 0.0, 1.0, name="x")
        T = Dimension("d_teacher", d_model)
        teacher = g.variable("teacher", Shape([D, T]),
                             initializers.normal(stddev=float(_layers._f32_inv_sqrt(d_model)),
                                                 seed=seed))
        t = g.einsum([m.inputs, teacher], Shape([B, T]), name="teacher/einsum")
        if teacher_tanh:
            t = g.op("tanh", t, name="teacher/tanh")
        t = g.rename_dim(t, "d_teacher", "d_model", name="teacher/out")
        if teacher_noise > 0:
            t = g.add(t, g.random_normal(xs, m.data_step, seed + 1, 0.0, teacher_noise,
                                         name="noise"), name="teacher/noisy")
        m.targets = t
    glorot = initializers.glorot_uniform(seed=seed)
    w1 = g.variable("w1", Shape([D, F]), glorot)
    w2 = g.variable("w2", Shape([F, D]), glorot)
    m.variables = [w1.name, w2.name]
    h = g.einsum([m.inputs, w1], Shape([B, F]), name="layer1")
    if biases:
        b1 = g.variable("b1", Shape([F]))
        m.variables.append(b1.name)
        h = g.add(h, b1, name="layer1/bias")
    h = g.relu(h, name="layer1/relu")
    y = g.einsum([h, w2], xs, name="layer2")
    if biases:
        b2 = g.variable("b2", Shape([D]))
        m.variables.append(b2.name)
        y = g.add(y, b2, name="layer2/bias")
    m.output = y
    if input_gradient:
        m.keep_gradients.append(m.inputs)
    err = g.sub(y, m.targets, name="error")
    m.loss = g.reduce_mean(g.mul(err, err, name="squared_error"), None, name="loss")
    return m
