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
