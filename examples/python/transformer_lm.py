#!/usr/bin/env python3
"""Trains the Mesh-TensorFlow paper's Transformer language model on a text file, then samples.

    make build
    PYTHONPATH=python /usr/bin/python3 examples/python/transformer_lm.py \\
        [--text /usr/share/games/fortunes/cookie] [--layout batch:rows,heads:cols,d_ff:cols,vocab:cols]

The model is meshrt.models.transformer_lm, written with meshrt.layers; the workers read their own
slices of the text (text_windows), so the client sends nothing per step. With the same seed and
flags it gives the loss curve of `meshrt train --model transformer` (python/tests/test_training.py
checks that).
"""

import argparse
import os

import meshrt as mr


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--text", default="/usr/share/games/fortunes/cookie")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--mesh", default="rows:2,cols:2")
    p.add_argument("--layout", default="batch:rows,heads:cols,d_ff:cols,vocab:cols")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--save", default="", help="checkpoint name (under the cluster's root)")
    p.add_argument("--export", default="", help="write the trained weights to this .npz")
    args = p.parse_args()
    text = os.path.abspath(args.text)

    m = mr.models.transformer_lm(batch=16, length=64, d_model=128, heads=4, d_ff=512, layers=2,
                                 data_path=text, seed=1)
    with mr.local_cluster(workers=args.workers, data_dirs=[os.path.dirname(text)]) as cluster:
        with cluster.session(model=m, mesh=args.mesh, layout=args.layout,
                             optimizer=mr.training.adam(args.lr)) as s:
            print(s.explain().splitlines()[0])
            s.train(steps=args.steps, log_every=10,
                    callback=lambda step, loss: print(f"step {step:5d}  loss {loss:.4f}"))
            if args.save:
                s.save(args.save)
                print(f"saved checkpoint {args.save} under {cluster.checkpoint_root}")
            if args.export:
                s.export(args.export)
                print(f"wrote {args.export}")


if __name__ == "__main__":
    main()
