"""Layers in Mesh-TensorFlow's style: functions of a Graph that add variables and ops.

Every layer takes a ``name``: its variables are called ``<name>/<variable>`` (the names a
checkpoint and an .npz export use) and its last op ``name`` or ``<name>/<step>``. Dims are named:
``dense(g, x, [d_ff], reduced=["d_model"])`` contracts d_model and produces d_ff, whatever other
dims x has (batch, length, ...); a layout rule on d_ff splits the layer's weights and output.

Defaults follow the Transformer of models/transformer.h (the Mesh-TensorFlow paper's): weights
N(0, 1/fan_in) (times ``init_scale``), norm scales ones and biases zeros, epsilon 1e-5.
"""

import numpy as np

from meshrt import initializers
from meshrt.errors import InvalidArgumentError
from meshrt.shapes import Dimension, Shape, as_shape


def _f32_inv_sqrt(n):
    # As the C++ models compute it (1.0f / std::sqrt(float(n))), so the graphs are the same.
    return np.float32(1.0) / np.sqrt(np.float32(n))


def fan_in_normal(fan_in, seed, init_scale=1.0):
    """N(0, (init_scale / sqrt(fan_in))^2), computed in float32 as the C++ models do."""
    stddev = np.float32(init_scale) * _f32_inv_sqrt(fan_in)
    return initializers.normal(stddev=float(stddev), seed=seed)


def _dims(g, x, names):
    out = []
    for n in names:
        if isinstance(n, Dimension):
            out.append(n)
        elif n in x.shape:
            out.append(x.shape[n])
        else:
            raise InvalidArgumentError(f"layer input '{x.name}' [{x.shape}] has no dim '{n}'")
    return out


def dense(g, x, output_dims, reduced=None, name="dense", use_bias=False, activation=None,
          initializer=None, seed=1, init_scale=1.0):
    """``x · w (+ b)``, w of shape reduced + output_dims (variable ``<name>/kernel``, bias
    ``<name>/bias`` of shape output_dims). ``reduced``: the dims of x to contract (default: x's
    last dim). ``activation``: None or an op type ("relu", "tanh", "gelu", ...)."""
    output_dims = list(as_shape(output_dims).dims)
    reduced = _dims(g, x, reduced if reduced is not None else [x.shape.dims[-1].name])
    fan_in = int(np.prod([d.size for d in reduced]))
    init = initializer or fan_in_normal(fan_in, seed, init_scale)
    w = g.variable(f"{name}/kernel", Shape(reduced + output_dims), init)
    y = g.einsum([x, w], (x.shape - [d.name for d in reduced]) + Shape(output_dims),
                 name=f"{name}/einsum" if (use_bias or activation) else name)
    if use_bias:
        b = g.variable(f"{name}/bias", Shape(output_dims), initializers.zeros())
        y = g.add(y, b, name=f"{name}/bias_add" if activation else name)
    if activation:
        y = g.op(activation, y, name=name)
    return y


def layer_norm(g, x, dim="d_model", name="layer_norm", epsilon=1e-5):
    """(x - mean) / sqrt(var + epsilon) * scale + bias over ``dim``; variables ``<name>/scale``
    (ones) and ``<name>/bias`` (zeros) of shape [dim]."""
    d = _dims(g, x, [dim])[0]
    scale = g.variable(f"{name}/scale", Shape([d]), initializers.ones())
    bias = g.variable(f"{name}/bias", Shape([d]), initializers.zeros())
    return g.normalize("layer_norm", [x, scale, bias], [d.name], epsilon, name=name)


def rms_norm(g, x, dim="d_model", name="rms_norm", epsilon=1e-5):
    """x / sqrt(mean(x^2) + epsilon) * scale over ``dim``; variable ``<name>/scale`` (ones)."""
    d = _dims(g, x, [dim])[0]
    scale = g.variable(f"{name}/scale", Shape([d]), initializers.ones())
    return g.normalize("rms_norm", [x, scale], [d.name], epsilon, name=name)


def dropout(g, x, rate, seed=0, name=None):
    """x / (1 - rate) where a uniform draw keyed on (seed, name, index) >= rate, else 0."""
    if not 0 <= rate < 1:
        raise InvalidArgumentError(f"dropout rate must be in [0, 1), not {rate}")
    return g.op("dropout", x, rate=float(rate), seed=int(seed), name=name)


def embedding(g, ids, vocab_dim, output_dim, name="embed", variable="embedding", stddev=1.0,
              seed=1):
    """The rows of ``variable`` [vocab_dim, output_dim] (N(0, stddev^2)) picked by int32 ``ids``:
    one_hot(ids) · embedding (ops ``<name>/one_hot`` and ``name``)."""
    table = g.variable(variable, Shape([vocab_dim, output_dim]),
                       initializers.normal(stddev=stddev, seed=seed))
    one_hot = g.one_hot(ids, vocab_dim, name=f"{name}/one_hot")
    return g.einsum([one_hot, table], ids.shape + Shape([output_dim]), name=name)


def causal_mask(g, length_dim, memory_dim, name="mask"):
    """[memory, length]: -1e9 where memory > length (a future position), else 0 — added to
    attention logits so exp underflows to exactly 0 there."""
    future = g.op("greater", g.range(memory_dim, name=f"{name}/memory"),
                  g.range(length_dim, name=f"{name}/length"), name=f"{name}/future")
    return g.scalar_op("mul", future, -1e9, name=name)


def multihead_attention(g, x, heads, d_kv, mask=None, name="attention", length="length",
                        memory="memory", seed=1, init_scale=1.0, model_dim="d_model"):
    """Self-attention of ``x`` (dims ... length, model_dim): variables ``<name>/{q,k,v}``
    [d_model, heads, d_kv] and ``<name>/o`` [heads, d_kv, d_model]; keys and values run over
    ``memory`` (``length`` renamed); q is scaled by d_kv^-1/2; ``mask`` ([memory, length]) is
    added to the logits; the softmax runs over memory. ``heads``, ``d_kv``: Dimensions. Returns
    the output (x's shape), op ``<name>/output``."""
    d_model = _dims(g, x, [model_dim])[0]
    if length not in x.shape:
        raise InvalidArgumentError(f"attention input '{x.name}' [{x.shape}] has no dim '{length}'")
    qkv_init = fan_in_normal(d_model.size, seed, init_scale)
    wq = g.variable(f"{name}/q", Shape([d_model, heads, d_kv]), qkv_init)
    wk = g.variable(f"{name}/k", Shape([d_model, heads, d_kv]), qkv_init)
    wv = g.variable(f"{name}/v", Shape([d_model, heads, d_kv]), qkv_init)
    wo = g.variable(f"{name}/o", Shape([heads, d_kv, d_model]),
                    fan_in_normal(heads.size * d_kv.size, seed, init_scale))
    p = x.shape - [model_dim]                  # e.g. [batch, length]
    pm = p.rename(length, memory)              # [batch, memory]
    outer = p - [length]                       # [batch]
    hm = g.rename_dim(x, length, memory, name=f"{name}/h_memory")
    q = g.einsum([x, wq], p + Shape([heads, d_kv]), name=f"{name}/q_proj")
    q = g.scale(q, float(_f32_inv_sqrt(d_kv.size)), name=f"{name}/q_scaled")
    k = g.einsum([hm, wk], pm + Shape([heads, d_kv]), name=f"{name}/k_proj")
    v = g.einsum([hm, wv], pm + Shape([heads, d_kv]), name=f"{name}/v_proj")
    logits = g.einsum([q, k], outer + Shape([heads, x.shape[length],
                                             Dimension(memory, x.shape[length].size)]),
                      name=f"{name}/logits")
    if mask is not None:
        logits = g.add(logits, mask, name=f"{name}/masked")
    weights = g.softmax(logits, [memory], name=f"{name}/weights")
    att = g.einsum([weights, v], p + Shape([heads, d_kv]), name=f"{name}/values")
    return g.einsum([att, wo], x.shape, name=f"{name}/output")


def dense_relu_dense(g, x, d_ff, name="ffn", seed=1, init_scale=1.0, model_dim="d_model"):
    """relu(x · w1 [d_model, d_ff]) · w2 [d_ff, d_model] (variables ``<name>/w1``, ``<name>/w2``;
    no biases). Returns x's shape, op ``<name>/output``."""
    d_model = _dims(g, x, [model_dim])[0]
    w1 = g.variable(f"{name}/w1", Shape([d_model, d_ff]),
                    fan_in_normal(d_model.size, seed, init_scale))
    w2 = g.variable(f"{name}/w2", Shape([d_ff, d_model]), fan_in_normal(d_ff.size, seed, init_scale))
    h = g.einsum([x, w1], (x.shape - [model_dim]) + Shape([d_ff]), name=f"{name}/hidden")
    h = g.relu(h, name=f"{name}/relu")
    return g.einsum([h, w2], x.shape, name=f"{name}/output")


def norm(g, x, kind, name, epsilon=1e-5, dim="d_model"):
    """layer_norm (kind "layer") or rms_norm (kind "rms")."""
    if kind == "layer":
        return layer_norm(g, x, dim, name, epsilon)
    if kind == "rms":
        return rms_norm(g, x, dim, name, epsilon)
    raise InvalidArgumentError(f"norm must be 'layer' or 'rms', not '{kind}'")


def transformer_block(g, x, heads, d_kv, d_ff, mask=None, name="layer", norm_kind="layer",
                      epsilon=1e-5, seed=1, init_scale=1.0):
    """A pre-norm decoder block: x += attention(norm(x)); x += ffn(norm(x)) (norms ``<name>/ln1``
    and ``<name>/ln2``, ``<name>/attention``, ``<name>/ffn``). ``heads``, ``d_kv``, ``d_ff``:
    Dimensions."""
    h = norm(g, x, norm_kind, f"{name}/ln1", epsilon)
    a = multihead_attention(g, h, heads, d_kv, mask, name=f"{name}/attention", seed=seed,
                            init_scale=init_scale)
    x = g.add(x, a, name=f"{name}/attention/residual")
    h = norm(g, x, norm_kind, f"{name}/ln2", epsilon)
    f = dense_relu_dense(g, h, d_ff, name=f"{name}/ffn", seed=seed, init_scale=init_scale)
    return g.add(x, f, name=f"{name}/ffn/residual")


# ---- layers over given weights (the encoder-decoder, models/transformer_encdec.cc) -------------
#
# models.transformer_encdec makes all its variables first, in the C++ model's order, then builds
# the forward pass from them: these layers take their weights as Tensors instead of making them.


def norm_with(g, x, kind, scale, bias=None, epsilon=1e-6, dim="d_model", name=None):
    """layer_norm (kind "layer": ``scale`` and ``bias``) or rms_norm (kind "rms": ``scale`` only)
    of ``x`` over ``dim`` with the given weights."""
    if kind == "layer":
        return g.normalize("layer_norm", [x, scale, bias], [dim], epsilon, name=name)
    if kind == "rms":
        return g.normalize("rms_norm", [x, scale], [dim], epsilon, name=name)
    raise InvalidArgumentError(f"norm must be 'layer' or 'rms', not '{kind}'")


def keyed_dropout(g, x, rate, step, seed, name):
    """Drops elements of ``x`` with probability ``rate`` and scales the rest by 1/(1 - rate); the
    mask is a uniform draw keyed on (``seed``, the scalar ``step`` tensor, the element), so it is
    new every step and the same on every layout (ops ``<name>/uniform``, ``<name>/keep``,
    ``<name>/mask`` and ``name``). Returns ``x`` itself when rate is 0 or step is None."""
    if not 0 <= rate < 1:
        raise InvalidArgumentError(f"dropout rate must be in [0, 1), not {rate}")
    if rate == 0 or step is None:
        return x
    u = g.random_uniform(x.shape, step, seed, 0.0, 1.0, name=f"{name}/uniform")
    keep = g.scalar_op("greater", u, float(np.float32(rate)), name=f"{name}/keep")
    scale = np.float32(1.0) / (np.float32(1.0) - np.float32(rate))
    return g.mul(x, g.scale(keep, float(scale), name=f"{name}/mask"), name=name)


def project(g, memory, w, name, model_dim="d_model"):
    """Keys or values: ``memory`` (dims [..., memory_length, d_model]) times ``w`` [d_model, heads,
    d_kv], giving [..., memory_length, heads, d_kv]."""
    heads_kv = Shape([d for d in w.shape if d.name != model_dim])
    return g.einsum([memory, w], (memory.shape - [model_dim]) + heads_kv, name=name)


def attend(g, x, wq, k, v, wo, bias=None, name="attention", memory="memory_length",
           model_dim="d_model"):
    """Multi-head attention of queries from ``x`` ([..., d_model], with or without a length dim)
    under ``wq`` [d_model, heads, d_kv] over keys ``k`` and values ``v`` ([..., memory, heads,
    d_kv]: :func:`project`), q scaled by d_kv^-1/2, ``bias`` (e.g. -1e9 where masked) added to the
    logits, softmax over ``memory``, output through ``wo`` [heads, d_kv, d_model]. Returns x's
    shape (ops ``<name>/q_proj``, ``q_scaled``, ``logits``, ``masked``, ``weights``, ``values``,
    ``output``)."""
    heads_kv = Shape([d for d in wq.shape if d.name != model_dim])
    d_kv = heads_kv.dims[-1]
    qs = (x.shape - [model_dim]) + heads_kv
    q = g.scale(g.einsum([x, wq], qs, name=f"{name}/q_proj"), float(_f32_inv_sqrt(d_kv.size)),
                name=f"{name}/q_scaled")
    logits = g.einsum([q, k], (qs - [d_kv.name]) + Shape([k.shape[memory]]),
                      name=f"{name}/logits")
    if bias is not None:
        logits = g.add(logits, bias, name=f"{name}/masked")
    weights = g.softmax(logits, [memory], name=f"{name}/weights")
    context = g.einsum([weights, v], qs, name=f"{name}/values")
    return g.einsum([context, wo], x.shape, name=f"{name}/output")


def ffn_with(g, h, w1, w2, name="ffn", model_dim="d_model"):
    """relu(h · w1 [d_model, d_ff]) · w2 [d_ff, d_model] with the given weights (ops
    ``<name>/hidden``, ``<name>/relu``, ``<name>/output``)."""
    d_ff = [d for d in w1.shape if d.name != model_dim]
    f = g.relu(g.einsum([h, w1], (h.shape - [model_dim]) + Shape(d_ff), name=f"{name}/hidden"),
               name=f"{name}/relu")
    return g.einsum([f, w2], h.shape, name=f"{name}/output")


def embed_with(g, ids, table, name="embed"):
    """one_hot(ids) · ``table`` [vocab, d_model]: ids' dims + [d_model] (ops ``<name>/one_hot``
    and ``name``)."""
    vocab, d_model = table.shape.dims
    one_hot = g.one_hot(ids, vocab, name=f"{name}/one_hot")
    return g.einsum([one_hot, table], ids.shape + Shape([d_model]), name=name)


def padding_bias(g, ids, name, pad_id=0, length="length", memory="memory_length"):
    """-1e9 where int32 ``ids`` is ``pad_id``, with ``length`` renamed ``memory``: the bias of
    attention over those positions (ops ``<name>/is_pad``, ``<name>/memory``, ``name``)."""
    pad = g.scalar_op("equal", ids, float(pad_id), name=f"{name}/is_pad")
    return g.scale(g.rename_dim(pad, length, memory, name=f"{name}/memory"), -1e9, name=name)


def shift_right(g, ids, name, dim="length"):
    """``ids`` shifted by one along ``dim``, 0 first (the decoder's inputs: pad is the start)."""
    return g.op("shift", ids, dims=[dim], offset=1, name=name)


def smoothed_one_hot(g, targets, vocab_dim, smoothing, name):
    """Label-smoothed one-hot targets along ``vocab_dim``: 1 - s + s/V at the target, s/V elsewhere
    (computed in float32, as the C++ model)."""
    off = np.float32(smoothing) / np.float32(vocab_dim.size)
    on = np.float32(1.0) - np.float32(smoothing) + off
    return g.op("one_hot", targets, shape=[vocab_dim], on_value=float(on), off_value=float(off),
                name=name)
