#!/usr/bin/env python3
"""Trains a two-layer MLP on fed numpy data on a local cluster, data parallel and model parallel.

    make build
    PYTHONPATH=python /usr/bin/python3 examples/python/mlp.py [--workers 4] [--steps 50]

The graph is written with the builder (named dims); the coordinator adds the gradients and the
Adam updates (training is a request); the layout rules alone decide how the work is split.
"""

import argparse

import numpy as np

import meshrt as mr


def build(batch, d_in, d_ff):
    g = mr.Graph()
    B, D, F = mr.Dimension("batch", batch), mr.Dimension("d_in", d_in), mr.Dimension("d_ff", d_ff)
    x = g.placeholder("x", [B, D])
    target = g.placeholder("target", [B, D])
    h = mr.layers.dense(g, x, [F], name="layer1", use_bias=True, activation="relu", seed=1)
    y = mr.layers.dense(g, h, [D], reduced=["d_ff"], name="layer2", seed=1)
    err = y - target
    loss = g.reduce_mean(err * err, name="loss")
    return g, loss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()

    batch, d_in, d_ff = 64, 16, 64
    g, loss = build(batch, d_in, d_ff)
    rng = np.random.default_rng(0)
    teacher = rng.standard_normal((d_in, d_in)).astype(np.float32) / np.sqrt(d_in)
    x = rng.standard_normal((batch, d_in)).astype(np.float32)
    feeds = {"x": x, "target": np.tanh(x @ teacher)}

    with mr.local_cluster(workers=args.workers) as cluster:
        for mesh, layout in (("x:2", "batch:x"), ("x:2", "d_ff:x"),
                             ("rows:2,cols:2", "batch:rows,d_ff:cols")):
            if mr.Mesh(mesh).num_processors > args.workers:
                continue
            with cluster.session(g, mesh=mesh, layout=layout, loss=loss,
                                 optimizer=mr.training.adam(0.01)) as s:
                curve = s.train(steps=args.steps, feeds=feeds, log_every=args.steps // 5 or 1)
                print(f"mesh {mesh:14} layout {layout:22} loss " +
                      " ".join(f"{l:.4f}" for _, l in curve))


if __name__ == "__main__":
    main()
