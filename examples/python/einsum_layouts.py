#!/usr/bin/env python3
"""Runs one einsum graph on several meshes and layouts and checks each result against numpy.

    make build
    PYTHONPATH=python /usr/bin/python3 examples/python/einsum_layouts.py

The same graph, four ways: replicated, split over batch (data parallel), split over the
contracted dim (each worker computes a partial sum, an allreduce resolves it) and split over
both mesh dims. Prints what the coordinator's explain says each layout communicates.
"""

import numpy as np

import meshrt as mr


def main():
    g = mr.Graph()
    batch, d_in, d_out = mr.Dimension("batch", 8), mr.Dimension("d_in", 32), mr.Dimension("d_out", 16)
    x = g.placeholder("x", [batch, d_in])
    w = g.placeholder("w", [d_in, d_out])
    y = g.mark_output(g.einsum([x, w], [batch, d_out], name="y"))

    rng = np.random.default_rng(0)
    xv = rng.standard_normal((8, 32)).astype(np.float32)
    wv = rng.standard_normal((32, 16)).astype(np.float32)
    want = xv @ wv

    with mr.local_cluster(workers=4) as cluster:
        for mesh, layout in (("", ""), ("x:4", "batch:x"), ("x:4", "d_in:x"),
                             ("rows:2,cols:2", "batch:rows,d_in:cols")):
            with cluster.session(g, mesh=mesh, layout=layout) as s:
                got = s.run({x: xv, w: wv}, fetches=y)
                err = float(np.abs(got - want).max())
                collectives = [line.strip() for line in s.explain().splitlines()
                               if "allreduce" in line.lower() or "allgather" in line.lower()]
                print(f"mesh {mesh or '(one)':14} layout {layout or '(none)':22} "
                      f"max |error| {err:.1e}  {collectives[0] if collectives else 'no collective'}")
                assert err < 1e-4, err


if __name__ == "__main__":
    main()
