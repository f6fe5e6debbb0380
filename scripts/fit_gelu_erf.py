#!/usr/bin/env python3
"""Fits the coefficients of kiln_gelu_erf_fast (codegen/templates/pointwise.cuh), then
checks the result.

The kernel computes GELU(x) = relu(x) - |x| Phi(-|x|), with Phi(-|x|) = 0.5 erfc(|x| /
sqrt(2)) = 2^P(|x|) and |x| held at XMAX. P is the Chebyshev interpolant of
log2(0.5 erfc(x / sqrt(2))) on [0, XMAX], written in powers of x. The script prints P's
coefficients (highest power first, the kernel's Horner order) and the largest relative
error of 2^P on [0, XMAX]. It then evaluates the kernel's fp32 steps on every finite
fp16 and bf16 input with |x| <= 20 and prints the worst distance, in ulps of the
result's type, of the rounded result from GELU in double precision, less the 1e-9
that the negative tail past XMAX may be off by (the result there is -XMAX 2^P(XMAX)).

    scripts/fit_gelu_erf.py            # degree 7 on [0, 6.36], as in the kernel
    scripts/fit_gelu_erf.py 6 6.36     # another degree or range
"""
import math
import struct
import sys

DEGREE = 7
XMAX = 6.36
TAIL_SLACK = 1e-9


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def f16(x):
    return struct.unpack("e", struct.pack("e", x))[0]


def bf16(x):
    """fp32 -> bf16, round to nearest even (finite inputs)."""
    bits = struct.unpack("I", struct.pack("f", f32(x)))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", bits))[0]


def fit(degree, xmax):
    half = xmax / 2
    n = degree + 1
    g = lambda x: math.log2(0.5 * math.erfc(x / math.sqrt(2)))
    nodes = [math.cos(math.pi * (k + 0.5) / n) for k in range(n)]
    values = [g(half + half * s) for s in nodes]
    cheb = [2 / n * sum(values[k] * math.cos(math.pi * j * (k + 0.5) / n) for k in range(n)) for j in range(n)]
    cheb[0] /= 2
    # Chebyshev polynomials T_j in powers of s, then s = (x - half) / half.
    t = [[1.0], [0.0, 1.0]]
    for j in range(2, n):
        nxt = [0.0] * (j + 1)
        for i, v in enumerate(t[j - 1]):
            nxt[i + 1] += 2 * v
        for i, v in enumerate(t[j - 2]):
            nxt[i] -= v
        t.append(nxt)
    in_s = [0.0] * n
    for j in range(n):
        for i, v in enumerate(t[j]):
            in_s[i] += cheb[j] * v
    in_x = [0.0] * n
    for i, c in enumerate(in_s):
        for k in range(i + 1):
            in_x[k] += c * math.comb(i, k) * (-half) ** (i - k) / half**i
    return [f32(c) for c in reversed(in_x)]  # highest power first


def horner(p_coefs, xq):
    p = p_coefs[0]
    for c in p_coefs[1:]:
        p = f32(p * xq + c)
    return p


def gelu(p_coefs, xmax, x):
    """The kernel's steps in fp32 (ex2.approx taken as exact; the last fma rounds once)."""
    xq = f32(min(abs(x), xmax))
    h = f32(2.0 ** horner(p_coefs, xq))
    relu = x if (x != x or x > 0) else 0.0
    return f32(relu - xq * h)


def worst_ulps(p_coefs, xmax, name):
    mantissa, min_exp = (10, -14) if name == "fp16" else (7, -126)
    worst, where = 0.0, None
    for bits in range(1 << 16):
        if name == "fp16":
            x, rounded = struct.unpack("e", struct.pack("H", bits))[0], f16
        else:
            x, rounded = struct.unpack("f", struct.pack("I", bits << 16))[0], bf16
        if not math.isfinite(x) or abs(x) > 20:
            continue
        got = rounded(gelu(p_coefs, xmax, x))
        exact = 0.5 * x * math.erfc(-x / math.sqrt(2))
        a = abs(exact)
        ulp = 2.0 ** (max(math.floor(math.log2(a)) if a > 0 else min_exp, min_exp) - mantissa)
        off = max(abs(got - exact) - TAIL_SLACK, 0.0) / ulp
        if off > worst:
            worst, where = off, x
    return worst, where


def main():
    degree = int(sys.argv[1]) if len(sys.argv) > 1 else DEGREE
    xmax = float(sys.argv[2]) if len(sys.argv) > 2 else XMAX
    p = fit(degree, xmax)
    print("P (Horner order):", ", ".join(f"{c:.9g}f" for c in p))
    rel = max(
        abs(2.0 ** horner(p, f32(x)) / (0.5 * math.erfc(f32(x) / math.sqrt(2))) - 1)
        for x in (xmax * i / 20000 for i in range(20001))
    )
    print(f"largest relative error of 2^P against 0.5 erfc(x / sqrt(2)) on [0, {xmax}]: {rel:.2e}")
    print(f"the tail past {xmax}: -{xmax} 2^P({xmax}) = {-xmax * 2.0 ** horner(p, f32(xmax)):.2e}")
    for name in ("fp16", "bf16"):
        ulps, where = worst_ulps(p, xmax, name)
        print(f"every {name} x with |x| <= 20: within {ulps:.2f} {name} ulp of GELU in double precision"
              f" (worst at x = {where})")


if __name__ == "__main__":
    main()
