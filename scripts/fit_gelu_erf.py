#!/usr/bin/env python3
"""Fits the coefficients of kiln_gelu_erf_fast (codegen/templates/pointwise.cuh), then
checks the result.

With z = |x| / sqrt(2) the kernel computes erfc(z) = exp(z Q(z) - z^2), where Q is a
polynomial. Q is the Chebyshev interpolant of (log(erfc(z)) + z^2) / z on [0, ZMAX],
written in powers of z. The script prints Q's coefficients (highest power first, the
kernel's Horner order) and the largest relative error of 0.5 erfc(z) on [0, ZMAX]. It
then evaluates the kernel's fp32 steps on every fp16 input in [-9, 9] and prints the
worst distance, in fp16 ulps, of the rounded result from GELU in double precision.

    scripts/fit_gelu_erf.py            # degree 6 on [0, 4.5], as in the kernel
"""
import math
import struct

DEGREE = 6
ZMAX = 4.5


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def f16(x):
    return struct.unpack("e", struct.pack("e", x))[0]


def fit():
    half = ZMAX / 2
    n = DEGREE + 1
    g = lambda z: (math.log(math.erfc(z)) + z * z) / z
    nodes = [math.cos(math.pi * (k + 0.5) / n) for k in range(n)]
    values = [g(half + half * s) for s in nodes]
    cheb = [2 / n * sum(values[k] * math.cos(math.pi * j * (k + 0.5) / n) for k in range(n)) for j in range(n)]
    cheb[0] /= 2
    # Chebyshev polynomials T_j in powers of s, then s = (z - half) / half.
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
    in_z = [0.0] * n
    for i, c in enumerate(in_s):
        for k in range(i + 1):
            in_z[k] += c * math.comb(i, k) * (-half) ** (i - k) / half ** i
    return [f32(c) for c in reversed(in_z)]  # highest power first


def half_erfc(q_coefs, z):
    """The kernel's 0.5 erfc(z), step by step in fp32 (ex2.approx taken as exact)."""
    zq = min(z, ZMAX)
    q = q_coefs[0]
    for c in q_coefs[1:]:
        q = f32(q * zq + c)
    arg = f32(f32(q * zq - f32(z * z)) * f32(1.4426950408889634) - 1)
    return f32(2.0 ** arg)


def main():
    q = fit()
    print("Q (Horner order):", ", ".join(f"{c:.9g}f" for c in q))
    worst = max(abs(half_erfc(q, z) / (0.5 * math.erfc(z)) - 1) for z in (ZMAX * i / 20000 for i in range(1, 20001)))
    print(f"largest relative error of 0.5 erfc(z) on [0, {ZMAX}]: {worst:.2e}")
    ulps = 0.0
    for bits in range(1 << 16):
        x = struct.unpack("e", struct.pack("H", bits))[0]
        if not math.isfinite(x) or abs(x) > 9:
            continue
        h = half_erfc(q, f32(abs(x) * f32(0.7071067811865476)))
        got = f16(f32(x * (h if x < 0 else f32(1 - h))))
        exact = 0.5 * x * math.erfc(-x / math.sqrt(2))
        a = abs(exact)
        ulp = 2.0 ** (max(math.floor(math.log2(a)) if a > 0 else -14, -14) - 10)
        ulps = max(ulps, abs(got - exact) / ulp)
    print(f"every fp16 x in [-9, 9]: within {ulps:.2f} fp16 ulp of GELU in double precision")


if __name__ == "__main__":
    main()
