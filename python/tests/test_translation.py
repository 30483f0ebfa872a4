"""The encoder-decoder Transformer (models.transformer_encdec) and its decoding from Python: the
graph is the C++ model's op for op; training on a local cluster gives the reference
interpreter's losses on two layouts; greedy and beam-search decodes on the cluster are the
reference interpreter's token for token; the SentencePiece helper when sentencepiece is there."""

import os

import numpy as np
import pytest

import meshrt as mr
from meshrt import _native

TINY = dict(batch=4, length=8, d_model=16, heads=2, d_kv=8, d_ff=32, encoder_layers=1,
            decoder_layers=1, vocab=32, seed=3)
MESH = "rows:2,cols:2"
LAYOUTS = {"dp": "batch:rows", "mp": "heads:cols,vocab:cols"}
STEPS = 4


def cpp_graph(options):
    from meshrt._proto import graph_pb2
    return graph_pb2.Graph.FromString(
        mr.errors.check(_native.core().model_graph("transformer_encdec", options)))


def test_the_encdec_graph_is_the_cpp_models_op_for_op():
    data = dict(inputs_path="/data/train.en.ids.npy", targets_path="/data/train.fr.ids.npy")
    configs = [dict(TINY), dict(TINY, dropout=0.0, label_smoothing=0.0), dict(TINY, norm="rms"),
               dict(TINY, **data), dict(TINY, **data, norm="rms", dropout=0.0,
                                        encoder_layers=2, decoder_layers=3, epsilon=1e-5)]
    for config in configs:
        m = mr.models.transformer_encdec(**config)
        py, cpp = m.graph.to_proto(), cpp_graph(config)
        by_name = {op.name: op for op in py.ops}
        assert len(by_name) == len(py.ops) == len(cpp.ops) > 100, config
        for op in cpp.ops:
            assert op.name in by_name, (config, op.name)
            assert by_name[op.name] == op, (config, op.name)
        # The same order too, but for the loss' last ops: C++ evaluates the arguments of
        # Div(ReduceSum(...), ReduceSum(...)) in an order of the compiler's choosing.
        def order(g):
            return [op.name for op in g.ops if not op.name.startswith("loss/")]
        assert order(py) == order(cpp), config
        assert list(py.outputs) == list(cpp.outputs)
        assert m.variables == [op.name for op in cpp.ops if op.type == "variable"
                               and op.name != "data_step"]
        assert m.loss.name == "loss" and m.output.shape.names == ["batch", "length", "vocab"]
        dropout_ops = [op.name for op in py.ops if op.name.endswith("dropout/uniform")]
        assert bool(dropout_ops) == (config.get("dropout", 0.1) > 0)
        kinds = {op.type for op in py.ops}
        assert ("token_rows" in kinds) == ("inputs_path" in config)


def test_the_decoder_reads_the_training_models_variables():
    m = mr.models.transformer_encdec(**TINY)
    for beam in (1, 2):
        d = mr.models.encdec_decoder(**TINY, beam=beam, scores=True)
        assert d.variables == m.variables
        for name in d.variables:
            assert d.graph.find(name).shape == m.graph.find(name).shape, name
        assert d.inputs == "inputs" and d.decoded == "decoded"
        assert d.graph.find("inputs").dtype == "int32"
        if beam == 1:
            assert d.scores == "decoded_scores"
            assert d.graph.find(d.decoded).shape.names == ["length", "batch"]
        else:
            assert d.scores is None and d.beam_search
            assert d.graph.find(d.decoded).shape.sizes == (4, 9)  # ids, then the score
        assert d.graph.outputs == d.fetches
        d.graph.validate()


def test_options_are_checked_and_nothing_aborts():
    with pytest.raises(mr.InvalidArgumentError, match="vocab must be >= 2"):
        mr.models.transformer_encdec(**dict(TINY, vocab=1))
    with pytest.raises(mr.InvalidArgumentError, match="give both inputs_path and targets_path"):
        mr.models.transformer_encdec(**TINY, inputs_path="/x.npy")
    with pytest.raises(mr.InvalidArgumentError, match="dropout must be in"):
        mr.models.transformer_encdec(**TINY, dropout=1.0)
    core = _native.core()
    for options, message in ((dict(TINY, vocab=1), "vocab must be >= 2"),
                             (dict(TINY, nope=1), "no option 'nope'"),
                             (dict(TINY, batch="four"), "'batch' has the wrong type")):
        code, text, result = core.model_graph("transformer_encdec", options)
        assert code == 3 and message in text and result is None, (code, text)
        code, text, result = core.encdec_decoder(options, {})
        assert code == 3 and message in text and result is None, (code, text)
    code, text, _ = core.model_graph("transformer", dict(batch="four"))
    assert code == 3 and "wrong type" in text
    for decode, message in ((dict(beam=17), "beam must be >= 1"),
                            (dict(max_length=9), "max_length"), (dict(beam=0), "beam must be"),
                            (dict(bogus=True), "'bogus'"),
                            (dict(alpha="x"), "'alpha' has the wrong type")):
        code, text, result = core.encdec_decoder(TINY, decode)
        assert code == 3 and message in text and result is None, (decode, code, text)
    with pytest.raises(mr.InvalidArgumentError, match="max_length"):
        mr.models.encdec_decoder(**TINY, max_length=9)


@pytest.fixture(scope="module")
def parallel_data(text_file):
    """A tiny parallel corpus as the CLI writes one (2-D int32 .npy, one padded sentence a row,
    EOS-terminated): each target is its source reversed, beside the text (the cluster's workers
    may read that directory)."""
    rng = np.random.default_rng(11)
    n, length = 64, TINY["length"]
    inputs = np.zeros((n, length), np.int32)
    targets = np.zeros((n, length), np.int32)
    for r in range(n):
        k = int(rng.integers(2, length))
        ids = rng.integers(2, TINY["vocab"], size=k - 1)
        inputs[r, :k] = list(ids) + [1]
        targets[r, :k] = list(ids[::-1]) + [1]
    d = os.path.dirname(text_file)
    paths = (os.path.join(d, "encdec.in.npy"), os.path.join(d, "encdec.out.npy"))
    np.save(paths[0], inputs)
    np.save(paths[1], targets)
    return dict(inputs_path=paths[0], targets_path=paths[1], inputs=inputs)


def train_model(parallel_data):
    return mr.models.transformer_encdec(**TINY, inputs_path=parallel_data["inputs_path"],
                                        targets_path=parallel_data["targets_path"])


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_training_on_the_cluster_gives_the_reference_losses(cluster, parallel_data, name):
    m = train_model(parallel_data)
    opt = mr.training.adam(0.01)
    reference = mr.training.reference_training(m.graph, m.loss, opt, m.variables)
    want = [loss for _, loss in reference.train(STEPS)]
    with cluster.session(model=m, mesh=MESH, layout=LAYOUTS[name], optimizer=opt) as s:
        got = [loss for _, loss in s.train(steps=STEPS)]
    assert len(got) == len(want) == STEPS
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    print(f"{name}: losses {got}, max relative difference from the reference {worst:.2e}")
    assert worst <= 1e-5, (got, want)
    # Step 1 is the untrained model's: label-smoothed cross-entropy near ln(vocab).
    assert abs(want[0] - np.log(TINY["vocab"])) < 1.0, want


@pytest.fixture(scope="module")
def trained_weights(cluster, parallel_data, tmp_path_factory):
    """The model's weights after 200 steps on the cluster (Session.export): far enough for
    translations of several tokens, different from greedy to beam search."""
    m = train_model(parallel_data)
    with cluster.session(model=m, mesh=MESH, layout="batch:rows",
                         optimizer=mr.training.adam(0.01)) as s:
        s.run_steps(200)
        return s.export(str(tmp_path_factory.mktemp("encdec") / "w.npz"))


def sources(parallel_data, n=6):
    """The first n inputs as id lists without EOS (translate adds it)."""
    out = []
    for row in parallel_data["inputs"][:n]:
        ids = [int(i) for i in row]
        out.append(ids[:ids.index(1)])
    return out


def test_greedy_and_beam_decodes_on_the_cluster_are_the_reference_interpreters(
        cluster, parallel_data, trained_weights):
    src = sources(parallel_data)
    for beam in (1, 2):
        want = mr.translation.translate(None, trained_weights, src, beam=beam, scores=True,
                                        batch=4)
        assert len(want) == len(src)
        assert any(len(ids) > 1 for ids, _ in want), want    # not all empty translations
        assert len({tuple(ids) for ids, _ in want}) > 1, want  # nor all the same
        for layout in ("batch:rows,heads:cols,vocab:cols", "d_ff:rows,heads:cols"):
            got = mr.translation.translate(cluster, trained_weights, src, beam=beam, scores=True,
                                           batch=4, mesh=MESH, layout=layout)
            assert [ids for ids, _ in got] == [ids for ids, _ in want], (beam, layout, got, want)
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-4,
                                       atol=1e-5)
        print(f"beam {beam}:", want)


def test_greedy_decoding_is_the_argmax_of_the_teacher_forced_logits(parallel_data,
                                                                    trained_weights):
    # The loop's key/value cache against the whole forward pass: feeding the greedy output back
    # as targets, each position's argmax is the token the loop chose there (up to its EOS).
    d = mr.models.encdec_decoder(**TINY, teacher_forcing=True)
    inputs, _ = next(d.batches(sources(parallel_data, 4)))
    weights = {k: trained_weights[k] for k in d.variables}
    unused = np.zeros_like(inputs)
    out, _ = d.graph.evaluate({d.inputs: inputs, d.forced_targets: unused}, [d.decoded], weights)
    decoded = out[d.decoded].T                                   # [batch, length]
    out, _ = d.graph.evaluate({d.inputs: inputs, d.forced_targets: decoded}, [d.forced_logits],
                              weights)
    argmax = out[d.forced_logits].argmax(-1)
    for r in range(4):
        row = list(decoded[r])
        end = row.index(1) + 1 if 1 in row else len(row)
        assert list(argmax[r, :end]) == row[:end], (r, row, list(argmax[r]))


def test_translator_reuses_its_session_and_checks_weights(cluster, parallel_data,
                                                          trained_weights, tmp_path):
    src = sources(parallel_data, 5)
    want = mr.translation.translate(None, trained_weights, src)
    np.savez(str(tmp_path / "w.npz"), **trained_weights)
    with mr.translation.Translator(cluster, str(tmp_path / "w.npz"), batch=2, mesh="x:2",
                                   layout="batch:x") as t:
        assert t.translate(src) == want          # three steps of 2 rows, the last one padded
        assert t.translate(src[:1]) == want[:1]
    bad = dict(trained_weights)
    bad["decoder/layer_0/ffn/w2"] = bad["decoder/layer_0/ffn/w2"][:8]
    with pytest.raises(mr.InvalidArgumentError, match="no variable decoder/layer_0/ffn/w2"):
        mr.translation.translate(None, bad, src)
    with pytest.raises(mr.InvalidArgumentError, match="not a transformer_encdec"):
        mr.translation.translate(None, {"w1": np.zeros(3, np.float32)}, src)


def test_sentencepiece_vocabulary(tmp_path, trained_weights):
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(5)
    letters = list("abcdefgh")
    words = ["".join(rng.choice(letters, size=int(rng.integers(2, 6)))) for _ in range(40)]
    with open(corpus, "w") as f:
        for _ in range(400):
            f.write(" ".join(rng.choice(words, size=int(rng.integers(2, 6)))) + "\n")
    prefix = str(tmp_path / "vocab")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=prefix,
                                   vocab_size=TINY["vocab"], pad_id=0, eos_id=1, unk_id=2,
                                   bos_id=-1, character_coverage=1.0, num_threads=1)
    v = mr.translation.Vocabulary(prefix + ".model")
    assert v.size == TINY["vocab"]
    line = " ".join(words[:3])
    ids = v.encode(line)
    assert ids and all(2 <= i < v.size for i in ids)
    assert v.decode(ids + [1, 5, 6]) == line  # up to EOS
    assert v.decode([0] + ids) == line        # pads skipped
    t = mr.translation.Translator(None, trained_weights)
    lines = [" ".join(words[3:5]), " ".join(words[5:9])]
    out = v.translate(t, lines)
    assert len(out) == 2 and all(isinstance(s, str) for s in out)
    assert out == [v.decode(ids) for ids in t.translate([v.encode(s) for s in lines])]
    prefix2 = str(tmp_path / "bos")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=prefix2, vocab_size=32,
                                   num_threads=1)  # SentencePiece's defaults: unk 0, bos 1, eos 2
    with pytest.raises(mr.InvalidArgumentError, match="needs pad 0 and EOS 1"):
        mr.translation.Vocabulary(prefix2 + ".model")
