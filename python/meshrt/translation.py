"""Translation with the encoder-decoder Transformer (models.transformer_encdec) from Python, as
``meshrt translate`` does it: the decoding program (models.encdec_decoder: greedy or beam search,
one program on the mesh) run on a cluster's workers, or in this process on the reference
interpreter, with weights from a training session's export, an .npz or a checkpoint::

    import meshrt as mr
    weights = session.export("/tmp/w.npz")     # a transformer_encdec training session's
    ids = mr.translation.translate(cluster, weights, [[5, 9, 7], [12, 4]], beam=4,
                                   mesh="rows:2,cols:2", layout="batch:rows,heads:cols")
    # or in process: mr.translation.translate(None, weights, ...)

Sources and results are token ids (pad 0, EOS 1: the vocabulary's contract); :class:`Vocabulary`
turns lines of text into ids and back with a SentencePiece model file when the sentencepiece
module is installed (Debian's python3-sentencepiece).
"""

import os

import numpy as np

from meshrt import errors
from meshrt.errors import InvalidArgumentError
from meshrt.models import EOS_ID, PAD_ID, encdec_decoder


def _weights_of(weights):
    """{name: array} from a dict, an .npz path or a checkpoint directory."""
    if isinstance(weights, dict):
        return {k: np.asarray(v) for k, v in weights.items()}
    if isinstance(weights, (str, os.PathLike)):
        path = os.fspath(weights)
        if os.path.isdir(path):
            from meshrt.cluster import read_checkpoint
            return read_checkpoint(path)[1]
        if os.path.isfile(path):
            with np.load(path) as f:
                return {k: f[k] for k in f.files}
        raise errors.NotFoundError(f"weights: no checkpoint directory or .npz file {path}")
    raise InvalidArgumentError(
        "weights must be a dict {variable name: array}, an .npz path or a checkpoint directory")


def model_options(weights):
    """The transformer_encdec options (length, d_model, heads, d_kv, d_ff, encoder_layers,
    decoder_layers, vocab, norm) of a model's weights ({name: array}), read from the variables'
    shapes as ``meshrt translate`` reads a checkpoint's; InvalidArgumentError when they are not an
    encoder-decoder's."""
    def need(name, rank):
        a = weights.get(name)
        if a is None or np.ndim(a) != rank:
            raise InvalidArgumentError(
                f"the weights have no {rank}-D variable {name}: they are not a transformer_encdec "
                "model's")
        return np.shape(a)
    vocab, d_model = need("shared/embedding", 2)
    length, _ = need("encoder/positions", 2)
    _, heads, d_kv = need("encoder/layer_0/attention/q", 3)
    _, d_ff = need("encoder/layer_0/ffn/w1", 2)
    encoder_layers = decoder_layers = 0
    while f"encoder/layer_{encoder_layers}/ffn/w1" in weights:
        encoder_layers += 1
    while f"decoder/layer_{decoder_layers}/ffn/w1" in weights:
        decoder_layers += 1
    if decoder_layers == 0:
        raise InvalidArgumentError("the weights have no decoder layers")
    return dict(length=int(length), d_model=int(d_model), heads=int(heads), d_kv=int(d_kv),
                d_ff=int(d_ff), encoder_layers=encoder_layers, decoder_layers=decoder_layers,
                vocab=int(vocab), norm="layer" if "encoder/final_ln/bias" in weights else "rms")


class Translator:
    """A decoder ready to translate batches: the decoding program of the weights' model with its
    weights, on a cluster (a session on ``mesh`` and ``layout``, kept until :meth:`close`) or in
    this process (``target`` None: the reference interpreter).

    ``target``: None, a LocalCluster or a Client. ``weights``: {name: array} (e.g.
    Session.export's), an .npz path or a checkpoint directory; only the model's variables are
    used (not optimizer slots or counters). ``beam``, ``alpha``, ``max_length``, ``scores``: the
    decoding (models.encdec_decoder); ``batch``: sentences per decoding step (default 32; rows
    past the sources are empty sentences); ``epsilon``: the model's norm epsilon (the default is
    the model's default, which the weights do not record).
    """

    def __init__(self, target, weights, beam=1, alpha=0.6, max_length=0, scores=False, batch=32,
                 mesh=None, layout=None, epsilon=1e-6):
        values = _weights_of(weights)
        options = model_options(values)
        if int(batch) < 1:
            raise InvalidArgumentError(f"batch must be >= 1, not {batch}")
        self.decoder = encdec_decoder(batch=int(batch), epsilon=epsilon, beam=beam, alpha=alpha,
                                      max_length=max_length, scores=scores, **options)
        self.weights = {}
        for name in self.decoder.variables:
            t = self.decoder.graph.find(name)
            if name not in values or tuple(np.shape(values[name])) != t.shape.sizes:
                raise InvalidArgumentError(
                    f"the weights have no variable {name} of shape [{t.shape}]")
            self.weights[name] = np.asarray(values[name], np.float32)
        self.session = None
        if target is not None:
            if not hasattr(target, "session"):
                raise InvalidArgumentError(
                    "target must be None (in process), a LocalCluster or a Client")
            self.session = target.session(self.decoder.graph, mesh=mesh, layout=layout)
            try:
                self.session.load_variables(self.weights, what="weights")
            except BaseException:
                self.session.close()
                raise

    def decode_ids(self, sources, add_eos=True):
        """[(ids, score)] of each source (a list of ids; see EncDecDecoder.batches for
        ``add_eos``): the translation's ids up to its EOS, and its score (beam search: the
        log-probability divided by the length penalty; greedy with ``scores``: the
        log-probability; else None)."""
        d = self.decoder
        out = []
        for inputs, rows in d.batches(sources, add_eos):
            if self.session is not None:
                fetched = self.session.run({d.inputs: inputs}, fetches=d.fetches)
                fetched = dict(zip(d.fetches, fetched))
            else:
                fetched, _ = d.graph.evaluate({d.inputs: inputs}, d.fetches, self.weights)
            out.extend(d.hypotheses(fetched, rows))
        return out

    def translate(self, sources, add_eos=True):
        """The translations' ids (lists, without EOS) of ``sources`` (lists of ids)."""
        return [ids for ids, _ in self.decode_ids(sources, add_eos)]

    def close(self):
        """Closes the cluster session (if any)."""
        if self.session is not None:
            self.session.close()
            self.session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def translate(target, weights, sources, beam=1, alpha=0.6, max_length=0, scores=False, batch=None,
              mesh=None, layout=None, add_eos=True):
    """Translates ``sources`` (lists of token ids, without EOS unless ``add_eos`` is False) with a
    transformer_encdec model's ``weights`` on ``target`` (None: in this process; a LocalCluster or
    a Client: a session on ``mesh`` and ``layout``, closed after) and returns the translations'
    ids (``scores``: [(ids, score)]). Greedy (``beam`` 1) or beam search (``beam`` k, length
    penalty exponent ``alpha``); ``max_length`` output positions (0: the model's length);
    ``batch`` sentences per decoding step (default 32, as ``meshrt translate``; a layout that
    splits batch needs it divisible). See :class:`Translator` to decode many times with one
    session."""
    sources = [list(s) for s in sources]
    batch = batch or 32
    with Translator(target, weights, beam=beam, alpha=alpha, max_length=max_length,
                    scores=scores, batch=batch, mesh=mesh, layout=layout) as t:
        hyps = t.decode_ids(sources, add_eos)
    return hyps if scores else [ids for ids, _ in hyps]


class Vocabulary:
    """A SentencePiece model file with the translation model's id contract (pad 0, EOS 1, as
    ``meshrt vocab train`` makes them): :meth:`encode` a line to ids (no EOS), :meth:`decode`
    ids to a line (up to the first EOS, pads skipped). Needs the ``sentencepiece`` module
    (FailedPreconditionError without it)."""

    def __init__(self, path):
        try:
            import sentencepiece
        except ImportError:
            raise errors.FailedPreconditionError(
                "meshrt.translation.Vocabulary needs the sentencepiece module (Debian: "
                "python3-sentencepiece; tools/setup.sh installs it)") from None
        if not os.path.isfile(path):
            raise errors.NotFoundError(f"no SentencePiece model file {path}")
        self.path = path
        self._sp = sentencepiece.SentencePieceProcessor()
        if not self._sp.Load(path):
            raise InvalidArgumentError(f"{path} is not a SentencePiece model")
        if self._sp.pad_id() != PAD_ID or self._sp.eos_id() != EOS_ID:
            raise InvalidArgumentError(
                f"{path} has pad id {self._sp.pad_id()} and EOS id {self._sp.eos_id()}; the "
                f"translation model needs pad {PAD_ID} and EOS {EOS_ID} (meshrt vocab train)")

    @property
    def size(self):
        """Pieces in the vocabulary (the model's vocab), the special ones included."""
        return self._sp.GetPieceSize()

    def encode(self, line):
        """The ids of ``line``, without EOS."""
        return list(self._sp.EncodeAsIds(line))

    def decode(self, ids):
        """The text of ``ids`` up to the first EOS, pads skipped; ids outside the vocabulary
        decode as unknown."""
        kept = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i != PAD_ID:
                kept.append(i if 0 <= i < self.size else self._sp.unk_id())
        return self._sp.DecodeIds(kept)

    def translate(self, translator, lines):
        """The translations (text) of ``lines`` (text) by ``translator`` (a :class:`Translator`
        of a model trained with this vocabulary)."""
        if translator.decoder.options["vocab"] != self.size:
            raise InvalidArgumentError(
                f"the vocabulary {self.path} has {self.size} pieces; the translator's model "
                f"{translator.decoder.options['vocab']}")
        return [self.decode(ids) for ids in translator.translate([self.encode(s) for s in lines])]
