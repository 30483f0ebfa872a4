#!/usr/bin/env python3
"""The PyTorch peer's side of kernels/blas_probe.h: how fast and how right torch.mm is under the
OpenBLAS core this process was started with (OPENBLAS_CORETYPE, read once when torch loads its
BLAS: Debian's torch 1.13.1 uses the system libblas.so.3, OpenBLAS 0.3.21).

Run by bench/train_bench once per candidate core, in a fresh process each:
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/peer_core_probe.py
Prints one line, as blas_probe's child does:
  corename=SkylakeX correct=1 error=2.1e-07 gflops=151.3 library=/usr/lib/.../libblas.so.3
or "error=..." when torch or OpenBLAS cannot be found.

Checks (one thread, like the peers' ranks): torch.mm / addmm / bmm on small, odd, transposed,
strided (sub-matrix), accumulating and batched shapes, each repeated 3 times, against a float64
product computed by broadcasting and summing (elementwise ops, no BLAS, so a wrong kernel cannot
fix its own reference); worst |C - ref| / (|alpha| sum|a||b| + |beta C0|) must be <= 1e-5.
Timing: torch.mm of two 1024 x 1024 float32 matrices, one warm-up then the best of 3, as
blas_probe times cblas_sgemm.
"""
import ctypes
import re
import sys
import time


def blas_lib():
    maps = open("/proc/self/maps").read()
    paths = sorted(set(re.findall(r"(/\S*(?:libopenblas|libblas)\S*\.so\S*)", maps)))
    for path in paths:
        lib = ctypes.CDLL(path)
        if hasattr(lib, "openblas_get_corename"):
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib, path
    return None, ""


def worst_error(torch, gen):
    shapes = [  # m, n, k, trans_a, trans_b, alpha, beta, pad (as kernels/blas_probe.cc)
        (1, 1, 1, False, False, 1.0, 0.0, 0), (7, 13, 5, False, False, 1.0, 0.0, 3),
        (33, 17, 129, True, False, 1.0, 0.0, 0), (33, 17, 129, False, True, 0.5, 1.0, 2),
        (33, 17, 129, True, True, 1.0, 0.0, 1), (64, 64, 64, False, False, 1.0, 1.0, 0),
        (256, 96, 300, False, False, 1.0, 0.0, 0), (127, 255, 63, False, True, -2.0, 0.25, 5),
        (8, 1024, 16, False, False, 1.0, 0.0, 0), (1024, 8, 16, True, False, 1.0, 0.0, 0),
    ]
    u = lambda *s: torch.rand(*s, generator=gen) * 2 - 1
    worst = 0.0
    for _ in range(3):
        for m, n, k, ta, tb, alpha, beta, pad in shapes:
            # Stored operands with `pad` extra columns; op(A) is m x k, op(B) is k x n.
            a_store = u(k, m + pad) if ta else u(m, k + pad)
            b_store = u(n, k + pad) if tb else u(k, n + pad)
            a = a_store[:, :m].t() if ta else a_store[:, :k]
            b = b_store[:, :k].t() if tb else b_store[:, :n]
            c0 = u(m, n)
            c = torch.addmm(c0, a, b, beta=beta, alpha=alpha) if (beta != 0 or alpha != 1) \
                else torch.mm(a, b)
            ad, bd = a.double(), b.double()
            prod = ad[:, :, None] * bd[None, :, :]
            ref = alpha * prod.sum(1) + beta * c0.double()
            scale = abs(alpha) * prod.abs().sum(1) + (beta * c0.double()).abs() + 1e-30
            worst = max(worst, ((c.double() - ref).abs() / scale).max().item())
        # Batched: 4 products of 31 x 47 x 65, the second operand transposed.
        a, b = u(4, 31, 65), u(4, 47, 65).transpose(1, 2)
        c = torch.bmm(a, b)
        prod = a.double()[:, :, :, None] * b.double()[:, None, :, :]
        ref, scale = prod.sum(2), prod.abs().sum(2) + 1e-30
        worst = max(worst, ((c.double() - ref).abs() / scale).max().item())
    return worst


def main():
    try:
        import torch
    except ImportError as e:
        print(f"error=cannot import torch ({e})")
        return
    torch.set_num_threads(1)
    lib, path = blas_lib()
    if lib is None:
        print("error=torch loaded no OpenBLAS")
        return
    lib.openblas_set_num_threads(1)
    gen = torch.Generator().manual_seed(12345)
    worst = worst_error(torch, gen)
    n = 1024
    a = torch.full((n, n), 0.5)
    b, c = a.clone(), torch.empty(n, n)
    best = 1e30
    for rep in range(4):  # the first is a warm-up
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        dt = time.perf_counter() - t0
        if rep > 0:
            best = min(best, dt)
    print(f"corename={lib.openblas_get_corename().decode()} correct={int(worst <= 1e-5)} "
          f"error={worst:.3g} gflops={2.0 * n ** 3 / best / 1e9:.1f} library={path}")


if __name__ == "__main__":
    main()
    sys.stdout.flush()
