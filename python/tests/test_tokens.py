"""The Transformer on token ids (a .npy written with numpy, vocab 300) with a held-out eval loss:
the Python model trains on a local cluster as `meshrt train --data_format npy --vocab 300
--eval_fraction 0.1` does (the same train and eval losses from one seed), its first eval loss is
the reference interpreter's on the initial weights and near ln(300), and training lowers it."""

import csv
import math
import os
import subprocess

import numpy as np
import pytest

import meshrt as mr

VOCAB = 300
SMALL = dict(batch=8, length=16, d_model=32, heads=4, d_ff=64, layers=1, seed=3, vocab=VOCAB)
MESH, LAYOUT = "rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"


@pytest.fixture(scope="module")
def token_file(text_file):
    """4000 int32 ids in [0, 300), mostly id + 7 after id, beside the text (the cluster's workers
    may read that directory)."""
    rng = np.random.default_rng(7)
    ids = np.empty(4000, np.int32)
    ids[0] = 3
    for i in range(1, len(ids)):
        ids[i] = rng.integers(0, VOCAB) if rng.random() < 0.2 else (ids[i - 1] + 7) % VOCAB
    path = os.path.join(os.path.dirname(text_file), "tokens.npy")
    np.save(path, ids)
    return path


def cli_evals(tmp_path, path):
    """(step, loss, eval_loss) of `meshrt train` at its evaluated steps 1, 4, 8."""
    out = tmp_path / "cli.csv"
    cmd = [os.environ.get("MESHRT_BINARY", "meshrt"), "train", "--model=transformer",
           "--steps=8", "--optimizer=adam", "--lr=0.01", f"--data={path}", "--data_format=npy",
           "--eval_fraction=0.1", "--eval_every=4", f"--mesh={MESH}", f"--layout={LAYOUT}",
           "--local=4", f"--loss_csv={out}"] + [f"--{k}={v}" for k, v in SMALL.items()]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=300)
    with open(out) as f:
        return [(int(r["step"]), float(r["loss"]), float(r["eval_loss"]))
                for r in csv.DictReader(f) if r["eval_loss"]]


def test_token_transformer_eval_loss(cluster, token_file, tmp_path):
    m = mr.models.transformer_lm(data_path=token_file, data_format="npy", eval_fraction=0.1,
                                 **SMALL)
    assert m.eval_loss.name == "eval/loss" and m.eval_loss.name not in m.graph.outputs
    # The reference interpreter on the initial weights (every initializer keyed by seed and name).
    reference, _ = m.graph.evaluate(fetches=[m.eval_loss])
    initial = float(reference["eval/loss"])
    assert abs(initial - math.log(VOCAB)) < 1.0, (initial, math.log(VOCAB))

    got = []  # (step, loss, eval_loss) after each train() call, as the CLI logs them
    with cluster.session(m.graph, mesh=MESH, layout=LAYOUT, loss=m.loss, variables=m.variables,
                         optimizer=mr.training.adam(0.01)) as s:
        for steps in (1, 3, 4, 22):
            s.train(steps=steps, log_every=steps, fetches=[m.eval_loss],
                    callback=lambda step, loss, extra: got.append(
                        (step, loss, float(extra[0]))))
    assert [step for step, _, _ in got] == [1, 4, 8, 30]
    evals = [e for _, _, e in got]
    assert all(math.isfinite(e) for e in evals), evals
    assert abs(evals[0] - initial) <= 1e-5 * initial, (evals[0], initial)
    assert evals[-1] < initial - 0.5, evals  # the held-out ids follow the train part's rule

    want = cli_evals(tmp_path, token_file)
    assert [w[0] for w in want] == [1, 4, 8]
    for (step, loss, e), (_, want_loss, want_e) in zip(got, want):
        assert abs(loss - want_loss) <= 1e-5 * want_loss, (step, loss, want_loss)
        assert abs(e - want_e) <= 1e-5 * want_e, (step, e, want_e)
    print("eval losses", evals)


def test_token_options_are_checked():
    with pytest.raises(mr.InvalidArgumentError, match="data_format must be"):
        mr.models.transformer_lm(data_path="/x.npy", data_format="text")
    with pytest.raises(mr.InvalidArgumentError, match="need a data_path"):
        mr.models.transformer_lm(eval_fraction=0.1)
    with pytest.raises(mr.InvalidArgumentError, match=r"eval_fraction must be in \[0, 1\)"):
        mr.models.transformer_lm(data_path="/x.npy", data_format="npy", vocab=300,
                                 eval_fraction=1.0)
    g = mr.Graph()
    g.variable("w", [mr.Dimension("a", 2)])
    with g.reuse_variables():
        assert g.variable("w", [mr.Dimension("a", 2)]).name == "w"
        with pytest.raises(mr.InvalidArgumentError, match="reused variable 'w'"):
            g.variable("w", [mr.Dimension("a", 3)])
    with g.name_scope("eval"):
        assert g.op("zeros", name="z").name == "eval/z"
