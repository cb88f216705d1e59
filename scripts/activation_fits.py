#!/usr/bin/env python3
"""Derives the polynomial and rational coefficients of src/ops/activations.c.

    python3 scripts/activation_fits.py gelu_f32     # R(a) = t P(t), t = 2/(2+a), degree 10
    python3 scripts/activation_fits.py gelu_f64     # R(a) = t P(u), u = 8/(4+a) - 5/4, degree 23, and Q
    python3 scripts/activation_fits.py tanh_f32     # tanh(x)/x = P(x²)/Q(x²) on |x| <= 9, degree 4/4

R(a) = Φ(-a) e^(a²/2) is exact gelu's tail without its Gaussian factor, fitted for
the relative error over a in [0, 15] (float) and [0, 39] (double), where the tail
underflows. The float fit rounds the coefficients to float one at a time, lowest
degree first, refitting the rest (weighted least squares with Lawson reweighting)
after each: rounding them all at once costs the fit 2-3 bits. Double's polynomial in
u is also printed as P(u) = P(3/4) - (3/4 - u) Q(u) (synthetic division), the form
activations.c uses near a = 0. tanh's rational comes from Loeb's linearized
least-squares iteration, then a greedy search of +-1 ulp steps of each float
coefficient against the float evaluation (numpy) on a grid; the search ends within
an ulp of activations.c's coefficients (two of them differ by one step: 5.52 ulp over
every float, against the kernel's 5.49).

The exponential's polynomial is scripts/math_fit.py's fit_exp(4, 24, "exp").
Needs mpmath and numpy.
"""
import sys
from fractions import Fraction

import mpmath as mp

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import math_fit as mf  # noqa: E402

mp.mp.dps = 40


def tail(a):
    return mp.ncdf(-a) * mp.exp(a * a / 2)


def seq_round_fit(f, lo, hi, deg, bits):
    """Minimax (Remez) start, then coefficients rounded lowest first, the rest refitted."""
    xs = mf.cheb_points(lo, hi, 600)
    fx = [f(x) for x in xs]
    co, _ = mf.remez(f, list(range(deg + 1)), lo, hi, lambda v: 1 / f(v), iters=60, grid=3000)
    fixed, cur = [], list(co)
    for j in range(deg + 1):
        fixed.append(mf.to_prec(cur[j], bits))
        rest = list(range(j + 1, deg + 1))
        if not rest:
            break
        res = [fx[i] - sum(c * xs[i] ** k for k, c in enumerate(fixed)) for i in range(len(xs))]
        wts = [1 / v for v in fx]
        for _ in range(8):
            a = mp.matrix(len(xs), len(rest))
            b = mp.matrix(len(xs), 1)
            for i in range(len(xs)):
                for jj, k in enumerate(rest):
                    a[i, jj] = wts[i] * xs[i] ** k
                b[i] = wts[i] * res[i]
            sol = mp.lu_solve(a.T * a, a.T * b)
            errs = [abs(res[i] - sum(sol[jj] * xs[i] ** k for jj, k in enumerate(rest))) / fx[i] for i in range(len(xs))]
            top = max(errs)
            wts = [wts[i] * (1 + 4 * errs[i] / top) for i in range(len(xs))]
        cur = fixed + [sol[jj] for jj in range(len(rest))]
    grid = mf.cheb_points(lo, hi, 5000)
    err = max(abs(sum(c * x**k for k, c in enumerate(fixed)) / f(x) - 1) for x in grid)
    return fixed, err


def gelu_f32():
    k, amax = mp.mpf(2), mp.mpf(15)
    p = lambda t: tail(k * (1 / t - 1)) / t  # noqa: E731
    coefs, err = seq_round_fit(p, k / (k + amax), mp.mpf(1), 10, 24)
    print(f"gelu_f32: R(a) = t P(t), t = 2/(2+a): relative error 2^{mp.nstr(mp.log(err, 2), 4)}")
    for j, c in enumerate(coefs):
        print(f"    t^{j}: {mf.hexf(c, 24)}")


def gelu_f64():
    k, amax, a8, b = mp.mpf(4), mp.mpf(39), mp.mpf(8), mp.mpf("1.25")
    lo, hi = a8 / (k + amax) - b, a8 / k - b

    def p(u):
        a = a8 / (u + b) - k
        return tail(a) / (k / (k + a))

    co, _ = mf.remez(p, list(range(24)), lo, hi, lambda u: 1 / p(u), iters=80, grid=6000)
    coefs = [mf.to_prec(c, 53) for c in co]
    grid = mf.cheb_points(lo, hi, 8000)
    err = max(abs(sum(c * x**j for j, c in enumerate(coefs)) / p(x) - 1) for x in grid)
    print(f"gelu_f64: R(a) = t P(u), t = 4/(4+a), u = 8/(4+a) - 5/4: relative error 2^{mp.nstr(mp.log(err, 2), 4)}")
    for j, c in enumerate(coefs):
        print(f"    u^{j}: {mf.hexf(c, 53)}")
    # P(u) = P(3/4) - (3/4 - u) Q(u): Q's coefficients by synthetic division, exact in rationals
    cs = [Fraction(float(c)) for c in coefs]
    u0, n = Fraction(3, 4), len(cs) - 1
    print("    Q, lowest degree first:")
    for i in range(n):
        d = sum(cs[j] * u0 ** (j - 1 - i) for j in range(i + 1, n + 1))
        print(f"    u^{i}: {float(d).hex()}")


def tanh_f32():
    import numpy as np

    m = n = 4
    x_max = 9.0
    xs = np.concatenate([np.linspace(1e-4, x_max, 6000), np.linspace(0, 1, 2000)[1:]])
    s = xs**2
    f = np.array([float(mp.tanh(mp.mpf(v)) / mp.mpf(v)) for v in xs])
    qp, w, best = np.ones_like(s), np.ones_like(s), None
    for _ in range(60):  # Loeb: minimize |P(s) - f Q(s)| / (f Q_prev(s)), Q(0) = 1, Lawson weights
        a = np.concatenate([np.vander(s, m + 1, increasing=True),
                            -(f[:, None]) * np.vander(s, n + 1, increasing=True)[:, 1:]], axis=1)
        ww = w / (f * qp)
        sol, *_ = np.linalg.lstsq(a * ww[:, None], f * ww, rcond=None)
        p, q = sol[: m + 1], np.concatenate([[1.0], sol[m + 1:]])
        pv, qv = np.polyval(p[::-1], s), np.polyval(q[::-1], s)
        err = np.abs(pv / qv / f - 1)
        qp, w = qv, w * (1 + 2 * err / err.max())
        if best is None or err.max() < best[0]:
            best = (err.max(), p.copy(), q.copy())
    x = np.concatenate([np.linspace(0, x_max, 400001).astype(np.float32), np.logspace(-8, 0, 20000).astype(np.float32)])
    ref = np.tanh(x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    s32 = (x * x).astype(np.float32)

    def ulps(c):
        def horner(cs):
            r = np.float32(cs[-1])
            for k in cs[-2::-1]:
                r = (np.float64(r) * s32 + np.float64(k)).astype(np.float32)  # an FMA: one rounding
            return r

        y = (np.float64(x) * horner(c[: m + 1])).astype(np.float32)
        y = np.minimum((np.float64(y) / horner(c[m + 1:])).astype(np.float32), 1)
        return (np.abs(y - ref) / np.where(ref == 0, 1, ulp)).max()

    c = [np.float32(v) for v in list(best[1]) + list(best[2])]
    top, improved = ulps(c), True
    while improved:
        improved = False
        for j in range(len(c)):
            if j in (0, m + 1):
                continue  # P(0) = Q(0) = 1
            for d in (np.inf, -np.inf):
                while True:
                    trial = list(c)
                    trial[j] = np.nextafter(np.float32(c[j]), np.float32(d))
                    e = ulps(trial)
                    if e >= top:
                        break
                    c, top, improved = trial, e, True
    print(f"tanh_f32: x P(x²)/Q(x²), |x| <= {x_max}: fit 2^{np.log2(best[0]):.2f}, float evaluation {top:.2f} ulp")
    print("    P:", ", ".join(float(v).hex() for v in c[: m + 1]))
    print("    Q:", ", ".join(float(v).hex() for v in c[m + 1:]))


FITS = {"gelu_f32": gelu_f32, "gelu_f64": gelu_f64, "tanh_f32": tanh_f32}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(FITS):
        FITS[name]()
