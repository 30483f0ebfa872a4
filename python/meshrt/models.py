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


# ---- the encoder-decoder Transformer (models/transformer_encdec.h) ------------------------------

PAD_ID = 0  # the translation model's id contract (text/vocab): pad (also the decoder's start)
EOS_ID = 1  # and end of sentence


def _check_encdec(batch, length, d_model, heads, d_kv, d_ff, encoder_layers, decoder_layers, vocab,
                  norm, epsilon, dropout, label_smoothing, inputs_path, targets_path):
    # models/transformer_encdec.cc CheckEncDecOptions, message for message.
    for key, value in (("batch", batch), ("length", length), ("d_model", d_model),
                       ("heads", heads), ("d_kv", d_kv), ("d_ff", d_ff),
                       ("encoder_layers", encoder_layers), ("decoder_layers", decoder_layers)):
        if value <= 0:
            raise InvalidArgumentError(
                f"transformer_encdec: {key} must be positive, not {value}")
    if vocab < 2:
        raise InvalidArgumentError(
            f"transformer_encdec: vocab must be >= 2 (pad 0 and EOS 1), not {vocab}")
    if norm not in ("layer", "rms"):
        raise InvalidArgumentError(
            f"transformer_encdec: norm must be 'layer' or 'rms', not '{norm}'")
    if not 0 <= dropout < 1:
        raise InvalidArgumentError(f"transformer_encdec: dropout must be in [0, 1), not {dropout}")
    if not 0 <= label_smoothing < 1:
        raise InvalidArgumentError(
            f"transformer_encdec: label_smoothing must be in [0, 1), not {label_smoothing}")
    if bool(inputs_path) != bool(targets_path):
        raise InvalidArgumentError(
            "transformer_encdec: give both inputs_path and targets_path (or neither: synthetic "
            "ids)")
    if not epsilon > 0:
        raise InvalidArgumentError(f"transformer_encdec: epsilon must be > 0, not {epsilon}")


class _EncDecWeights:
    """The encoder-decoder's variables, made in the C++ model's order (AddWeights): the shared
    embedding, the encoder's positions, layers and final norm, then the decoder's."""

    def __init__(self, g, d, norm, seed):
        B, L, D, H, K, F, V = (d[n] for n in ("batch", "length", "d_model", "heads", "d_kv", "d_ff",
                                              "vocab"))
        self.norm_kind = norm

        def normal(stddev):
            return initializers.normal(stddev=float(np.float32(stddev)), seed=seed)

        def fan_in(n):
            return initializers.normal(stddev=float(_layers._f32_inv_sqrt(n)), seed=seed)

        def norm_weights(p):
            scale = g.variable(f"{p}/scale", Shape([D]), initializers.ones())
            bias = (g.variable(f"{p}/bias", Shape([D]), initializers.zeros())
                    if norm == "layer" else None)
            return scale, bias

        def attention(p):
            return {w: g.variable(f"{p}/{w}", Shape([D, H, K]), fan_in(D.size))
                    for w in ("q", "k", "v")} | {
                        "o": g.variable(f"{p}/o", Shape([H, K, D]), fan_in(H.size * K.size))}

        def ffn(p):
            return (g.variable(f"{p}/w1", Shape([D, F]), fan_in(D.size)),
                    g.variable(f"{p}/w2", Shape([F, D]), fan_in(F.size)))

        self.embedding = g.variable("shared/embedding", Shape([V, D]), normal(1.0))
        self.encoder_positions = g.variable("encoder/positions", Shape([L, D]), normal(0.1))
        self.encoder = []
        for i in range(d["encoder_layers"]):
            p = f"encoder/layer_{i}/"
            layer = {"ln1": norm_weights(p + "ln1"), "attention": attention(p + "attention"),
                     "ln2": norm_weights(p + "ln2")}
            layer["ffn"] = ffn(p + "ffn")
            self.encoder.append(layer)
        self.encoder_final = norm_weights("encoder/final_ln")
        self.decoder_positions = g.variable("decoder/positions", Shape([L, D]), normal(0.1))
        self.decoder = []
        for i in range(d["decoder_layers"]):
            p = f"decoder/layer_{i}/"
            layer = {"ln1": norm_weights(p + "ln1"),
                     "self_attention": attention(p + "self_attention"),
                     "ln2": norm_weights(p + "ln2")}
            layer["encdec_attention"] = attention(p + "encdec_attention")
            layer["ln3"] = norm_weights(p + "ln3")
            layer["ffn"] = ffn(p + "ffn")
            self.decoder.append(layer)
        self.decoder_final = norm_weights("decoder/final_ln")


def transformer_encdec(g=None, batch=32, length=32, d_model=128, heads=4, d_kv=32, d_ff=512,
                       encoder_layers=2, decoder_layers=2, vocab=8000, norm="layer", epsilon=1e-6,
                       dropout=0.1, label_smoothing=0.1, inputs_path="", targets_path="", seed=1):
    """Adds the encoder-decoder Transformer (the Mesh-TensorFlow paper's translation model,
    models/transformer_encdec.h: Bitransformer-style, shared embedding and softmax) with its
    training loss to ``g`` (a new Graph when None) and returns a :class:`Model`, op for op the C++
    model (``meshrt train --model transformer_encdec``), so a session trains as it does.

    Data: ``inputs_path`` and ``targets_path``, 2-D int32 .npy files [N, length] of token ids (pad
    0, EOS 1; row i of one the translation of row i of the other) read on the workers a batch per
    step; or neither: synthetic ids in [0, vocab) keyed on the data step. Dropout (``dropout``) on
    the embeddings and on every block's output, drawn from the data step; label smoothing on the
    targets; the loss is the mean cross-entropy over non-pad target positions. Dims: batch, length,
    memory_length, d_model, heads, d_kv, d_ff, vocab (the paper's layouts: ``batch:rows``,
    ``heads:cols,d_ff:cols,vocab:cols``). ``Model.output`` is the logits [batch, length, vocab].
    Decoding: :func:`encdec_decoder` and meshrt.translation.
    """
    encoder_layers, decoder_layers = int(encoder_layers), int(decoder_layers)
    _check_encdec(batch, length, d_model, heads, d_kv, d_ff, encoder_layers, decoder_layers, vocab,
                  norm, epsilon, dropout, label_smoothing, inputs_path, targets_path)
    g = g if g is not None else Graph()
    m = Model(g)
    d = {"batch": Dimension("batch", batch), "length": Dimension("length", length),
         "d_model": Dimension("d_model", d_model), "heads": Dimension("heads", heads),
         "d_kv": Dimension("d_kv", d_kv), "d_ff": Dimension("d_ff", d_ff),
         "vocab": Dimension("vocab", vocab), "encoder_layers": encoder_layers,
         "decoder_layers": decoder_layers}
    V, L, M = d["vocab"], d["length"], Dimension("memory_length", length)
    tokens = Shape([d["batch"], L])
    eps = float(np.float32(epsilon))

    m.data_step = step = data_step(g)
    if inputs_path:
        m.inputs = g.op("token_rows", step, shape=tokens, path=inputs_path, vocab=int(vocab),
                        name="inputs")
        m.targets = g.op("token_rows", step, shape=tokens, path=targets_path, vocab=int(vocab),
                         name="targets")
    else:
        m.inputs = g.cast(g.random_uniform(tokens, step, seed, 0.0, float(vocab),
                                           name="inputs/uniform"), "int32", name="inputs")
        m.targets = g.cast(g.random_uniform(tokens, step, seed + 1, 0.0, float(vocab),
                                            name="targets/uniform"), "int32", name="targets")
    w = _EncDecWeights(g, d, norm, seed)

    def norm_(x, weights, name):
        return _layers.norm_with(g, x, norm, weights[0], weights[1], eps, name=name)

    def drop(x, name):
        return _layers.keyed_dropout(g, x, dropout, step, seed, name)

    def attention(a, h, k, v, bias, name):
        return _layers.attend(g, h, a["q"], k, v, a["o"], bias, name=name)

    # The encoder (models/transformer_encdec.cc Encode).
    bias = _layers.padding_bias(g, m.inputs, "encoder/padding_bias", PAD_ID)
    x = g.add(_layers.embed_with(g, m.inputs, w.embedding, "encoder/embed"), w.encoder_positions,
              name="encoder/embed/positions")
    x = drop(x, "encoder/embed/dropout")
    for i, layer in enumerate(w.encoder):
        n = f"encoder/layer_{i}/"
        h = norm_(x, layer["ln1"], n + "ln1")
        hm = g.rename_dim(h, "length", "memory_length", name=n + "attention/memory")
        a = layer["attention"]
        k = _layers.project(g, hm, a["k"], n + "attention/k_proj")
        v = _layers.project(g, hm, a["v"], n + "attention/v_proj")
        x = g.add(x, drop(attention(a, h, k, v, bias, n + "attention"), n + "attention/dropout"),
                  name=n + "attention/residual")
        h = norm_(x, layer["ln2"], n + "ln2")
        f = _layers.ffn_with(g, h, *layer["ffn"], name=n + "ffn")
        x = g.add(x, drop(f, n + "ffn/dropout"), name=n + "ffn/residual")
    encoded = norm_(x, w.encoder_final, "encoder/final_ln")

    # The decoder, teacher-forced (DecodeAll).
    ids = _layers.shift_right(g, m.targets, "decoder/inputs")
    future = g.op("greater", g.range(M, name="decoder/mask/memory"),
                  g.range(L, name="decoder/mask/length"), name="decoder/mask/future")
    causal = g.scale(future, -1e9, name="decoder/mask")
    memory = g.rename_dim(encoded, "length", "memory_length", name="decoder/memory")
    x = g.add(_layers.embed_with(g, ids, w.embedding, "decoder/embed"), w.decoder_positions,
              name="decoder/embed/positions")
    x = drop(x, "decoder/embed/dropout")
    for i, layer in enumerate(w.decoder):
        n = f"decoder/layer_{i}/"
        h = norm_(x, layer["ln1"], n + "ln1")
        hm = g.rename_dim(h, "length", "memory_length", name=n + "self_attention/memory")
        a = layer["self_attention"]
        k = _layers.project(g, hm, a["k"], n + "self_attention/k_proj")
        v = _layers.project(g, hm, a["v"], n + "self_attention/v_proj")
        x = g.add(x, drop(attention(a, h, k, v, causal, n + "self_attention"),
                          n + "self_attention/dropout"), name=n + "self_attention/residual")
        h = norm_(x, layer["ln2"], n + "ln2")
        a = layer["encdec_attention"]
        k = _layers.project(g, memory, a["k"], n + "encdec_attention/k_proj")
        v = _layers.project(g, memory, a["v"], n + "encdec_attention/v_proj")
        x = g.add(x, drop(attention(a, h, k, v, bias, n + "encdec_attention"),
                          n + "encdec_attention/dropout"), name=n + "encdec_attention/residual")
        h = norm_(x, layer["ln3"], n + "ln3")
        f = _layers.ffn_with(g, h, *layer["ffn"], name=n + "ffn")
        x = g.add(x, drop(f, n + "ffn/dropout"), name=n + "ffn/residual")
    h = norm_(x, w.decoder_final, "decoder/final_ln")
    scaled = g.scale(h, float(_layers._f32_inv_sqrt(d_model)), name="decoder/output_scaled")
    m.output = g.einsum([scaled, w.embedding], ids.shape + Shape([V]), name="logits")

    # The loss: label-smoothed cross-entropy over the non-pad target positions.
    ce = g.normalize("softmax_cross_entropy",
                     [m.output, _layers.smoothed_one_hot(g, m.targets, V, label_smoothing,
                                                         "targets/smoothed")],
                     ["vocab"], name="cross_entropy")
    weight = g.scalar_op("minimum", g.cast(m.targets, "float32", name="targets/float"), 1.0,
                         name="targets/weight")
    m.loss = g.div(g.reduce_sum(g.mul(ce, weight, name="loss/weighted"), name="loss/sum"),
                   g.reduce_sum(weight, name="loss/tokens"), name="loss")
    m.variables = [v for v in g.variables() if v != DATA_STEP]
    return m


class EncDecDecoder:
    """The encoder-decoder's decoding program (:func:`encdec_decoder`): ``graph`` (a Graph whose
    variables are the training model's, names and shapes), the tensor names ``inputs`` (int32
    [batch, length] source ids placeholder), ``decoded`` and ``scores`` (None unless asked, or
    beam search: then the score is decoded's last column), ``variables`` (the weights it reads, in
    creation order); ``options`` (the model's) and ``decode`` (the decoding options).
    ``forced_targets`` and ``forced_logits``: with teacher_forcing, a placeholder of target ids and
    the training forward pass' logits on them (no dropout), else None."""

    def __init__(self, graph, names, options, decode):
        self.graph = graph
        self.inputs = names["inputs"]
        self.decoded = names["decoded"]
        self.scores = names["scores"] or None
        self.forced_targets = names["forced_targets"] or None
        self.forced_logits = names["forced_logits"] or None
        self.variables = list(names["variables"])
        self.options = dict(options)
        self.decode = dict(decode)
        self.batch = int(self.options.get("batch", 32))
        self.length = int(self.options.get("length", 32))
        self.beam_search = self.decode["beam"] > 1 or self.decode.get("beam_search", False)

    @property
    def fetches(self):
        """What a decoding step fetches: decoded, then the scores when there are any."""
        return [self.decoded] + ([self.scores] if self.scores else [])

    def batches(self, sources, add_eos=True):
        """The int32 [batch, length] input arrays of ``sources`` (lists of ids), ``batch`` rows at a
        time: each source cut to length - 1 ids and ended with EOS (``add_eos``; else cut to
        length), pad 0 after; rows past the sources are empty sentences (EOS only), as the CLI
        fills them. Yields (array, number of real rows)."""
        rows = []
        for s in sources:
            ids = [int(i) for i in s]
            if add_eos:
                ids = ids[:self.length - 1] + [EOS_ID]
            rows.append(ids[:self.length])
        for first in range(0, len(rows), self.batch):
            a = np.full((self.batch, self.length), PAD_ID, np.int32)
            chunk = rows[first:first + self.batch]
            for r in range(self.batch):
                if r < len(chunk):
                    a[r, :len(chunk[r])] = chunk[r]
                else:
                    a[r, 0] = EOS_ID
            yield a, len(chunk)

    def hypotheses(self, fetched, rows):
        """[(ids, score)] of the first ``rows`` rows of a step's fetches ({name: array}): each
        row's ids up to (without) its first EOS or pad; score None for greedy without scores."""
        decoded = np.asarray(fetched[self.decoded])
        out = []
        for r in range(rows):
            if self.beam_search:
                column = decoded[r, :self.length].astype(np.int32)
                score = float(decoded[r, self.length])
            else:
                column = decoded[:, r]
                score = float(fetched[self.scores][r]) if self.scores else None
            ids = []
            for t in column:
                if int(t) in (EOS_ID, PAD_ID):
                    break
                ids.append(int(t))
            out.append((ids, score))
        return out


def encdec_decoder(batch=32, length=32, d_model=128, heads=4, d_kv=32, d_ff=512, encoder_layers=2,
                   decoder_layers=2, vocab=8000, norm="layer", epsilon=1e-6, seed=1, beam=1,
                   alpha=0.6, max_length=0, scores=False, beam_search=False,
                   teacher_forcing=False):
    """The encoder-decoder's decoding program for a model of these sizes, built by the C++ builder
    (models/transformer_encdec.h BuildEncDecDecoder, through meshrt._core) and returned as an
    :class:`EncDecDecoder`. One program on the mesh: the encoder once, then a while_loop over the
    output positions (``max_length``, 0: length) with a key/value cache per decoder layer.
    ``beam`` 1: greedy, "decoded" int32 [length, batch] (``scores``: also "decoded_scores" float32
    [batch], the sum of the decoded tokens' log-probabilities up to EOS); ``beam`` k > 1 (or
    ``beam_search``): Mesh-TensorFlow's beam search with length penalty ((5 + i + 1) / 6)^alpha,
    "decoded" float32 [batch, length + 1], the best hypothesis' ids then its score. Its weights
    are the training model's variables: load them into a session (Session.load_npz or
    load_variables) or pass them to Graph.evaluate; meshrt.translation does both."""
    options = dict(batch=batch, length=length, d_model=d_model, heads=heads, d_kv=d_kv, d_ff=d_ff,
                   encoder_layers=encoder_layers, decoder_layers=decoder_layers, vocab=vocab,
                   norm=norm, epsilon=float(epsilon), dropout=0.0, label_smoothing=0.0, seed=seed)
    options = {k: (int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v)
               for k, v in options.items()}
    decode = dict(beam=int(beam), alpha=float(alpha), max_length=int(max_length),
                  scores=bool(scores), beam_search=bool(beam_search),
                  teacher_forcing=bool(teacher_forcing))
    from meshrt import _native
    from meshrt.errors import check
    graph_bytes, names = check(_native.core().encdec_decoder(options, decode))
    return EncDecDecoder(Graph.from_proto(graph_bytes), names, options, decode)
