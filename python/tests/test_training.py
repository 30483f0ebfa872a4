"""The Transformer LM written in Python trains exactly as `meshrt train` does: the same loss
curve from the same seed under the paper's data-parallel, model-parallel and 2-D layouts."""

import csv
import os
import subprocess

import numpy as np
import pytest

import meshrt as mr

SMALL = dict(batch=8, length=16, d_model=32, heads=4, d_ff=64, layers=1, seed=3)
STEPS = 8
LAYOUTS = {
    "dp": ("rows:2,cols:2", "batch:rows"),
    "mp": ("rows:2,cols:2", "heads:cols,d_ff:cols,vocab:cols"),
    "dpmp": ("rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"),
}


def cli_curve(tmp_path, text, mesh, layout):
    out = tmp_path / "cli.csv"
    flags = [f"--{k}={v}" for k, v in SMALL.items()]
    cmd = [os.environ.get("MESHRT_BINARY", "meshrt"), "train", "--model=transformer",
           f"--steps={STEPS}", "--optimizer=sgd", "--lr=0.1", f"--data={text}", f"--mesh={mesh}",
           f"--layout={layout}", "--local=4", f"--loss_csv={out}"] + flags
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=300)
    with open(out) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_python_transformer_equals_meshrt_train(cluster, text_file, tmp_path, name):
    mesh, layout = LAYOUTS[name]
    want = cli_curve(tmp_path, text_file, mesh, layout)
    m = mr.models.transformer_lm(data_path=text_file, **SMALL)
    with cluster.session(m.graph, mesh=mesh, layout=layout, loss=m.loss, variables=m.variables,
                         optimizer=mr.training.sgd(0.1)) as s:
        got = [loss for _, loss in s.train(steps=STEPS)]
    assert len(got) == len(want) == STEPS
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    print(f"{name}: max relative loss difference over {STEPS} steps {worst:.2e}")
    assert worst <= 1e-5, (got, want)
    assert got[-1] < got[0]


def test_training_errors_name_what_is_wrong(cluster):
    m = mr.models.mlp(batch=8, d_model=4, d_ff=8)
    with pytest.raises(mr.InvalidArgumentError, match="no_such_loss"):
        cluster.session(m.graph, loss="no_such_loss", optimizer=mr.training.sgd(0.1))
    with pytest.raises(mr.InvalidArgumentError, match="beta1"):
        cluster.session(m.graph, loss=m.loss, optimizer=mr.training.adam(0.01, beta1=1.5))
    with pytest.raises(mr.InvalidArgumentError, match="unknown hyper-parameter"):
        mr.training.Optimizer("adam", nesterov=True)
    with cluster.session(m.graph) as s:
        with pytest.raises(mr.FailedPreconditionError, match="not a training session"):
            s.train(steps=1)
