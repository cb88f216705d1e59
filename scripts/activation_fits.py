#!/usr/bin/env python3
"""Derives the polynomial and rational coefficients of src/ops/activations.c.

    python3 scripts/activation_fits.py gelu_f32     # R(a) = P(a)/Q(a), degree 4/5
    python3 scripts/activation_fits.py gelu_f64     # R(a) = t P(u), u = 8/(4+a) - 5/4, degree 23, and Q
    python3 scripts/activation_fits.py tanh_f32     # tanh(x)/x = P(x²)/Q(x²) on |x| <= 9, degree 4/4

R(a) = Φ(-a) e^(a²/2) is exact gelu's tail without its Gaussian factor, fitted for
the relative error over a in [0, 15] (float) and [0, 39] (double), where the tail
underflows. Double's polynomial in u (Remez) is also printed as P(u) = P(3/4) -
(3/4 - u) Q(u) (synthetic division), the form activations.c uses near a = 0. The float
rationals (gelu's P(a)/Q(a), tanh's x P(x²)/Q(x²)) come from Loeb's linearized
least-squares iteration with Lawson weights, then a greedy search of +-1 ulp steps of
each float coefficient against the float evaluation (numpy, an FMA per Horner step) on
a grid: rounding the fit's coefficients to float costs more than the fit's own error.
(tanh's search ends within an ulp of activations.c's coefficients: two of them differ
by one step, 5.52 ulp over every float against the kernel's 5.49.)

The exponential's polynomial is scripts/math_fit.py's fit_exp(4, 24, "exp").
Needs mpmath and numpy.
"""
import sys
from fractions import Fraction

import mpmath as mp
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import math_fit as mf  # noqa: E402

mp.mp.dps = 40


def tail(a):
    return mp.ncdf(-a) * mp.exp(a * a / 2)


def loeb(t, f, m, n, iters):
    """P(t)/Q(t) ~ f, degrees m/n, Q(0) = 1, for the relative error: Loeb's iteration
    (minimize |P - f Q| / (f Q_prev)) with Lawson weights. Returns (error, P, Q)."""
    qp, w, best = np.ones_like(t), np.ones_like(t), None
    for _ in range(iters):
        a = np.concatenate([np.vander(t, m + 1, increasing=True),
                            -(f[:, None]) * np.vander(t, n + 1, increasing=True)[:, 1:]], axis=1)
        ww = w / (f * qp)
        sol, *_ = np.linalg.lstsq(a * ww[:, None], f * ww, rcond=None)
        p, q = sol[: m + 1], np.concatenate([[1.0], sol[m + 1:]])
        pv, qv = np.polyval(p[::-1], t), np.polyval(q[::-1], t)
        err = np.abs(pv / qv / f - 1)
        qp, w = qv, w * (1 + 2 * err / err.max())
        if best is None or err.max() < best[0]:
            best = (err.max(), p.copy(), q.copy())
    return best


def horner_f32(cs, t64):
    """The float Horner sum of cs (lowest degree first) at float points t64 (as
    float64), one rounding per step, as an FMA gives."""
    r = np.float32(cs[-1])
    for k in cs[-2::-1]:
        r = (np.float64(r) * t64 + np.float64(k)).astype(np.float32)
    return r


def step_search(c, cost, fixed):
    """Greedy +-1 ulp steps of each float coefficient (but those in fixed) while
    cost(c) falls. Returns (c, cost)."""
    top, improved = cost(c), True
    while improved:
        improved = False
        for j in range(len(c)):
            if j in fixed:
                continue
            for d in (np.inf, -np.inf):
                while True:
                    trial = list(c)
                    trial[j] = np.nextafter(np.float32(c[j]), np.float32(d))
                    e = cost(trial)
                    if e >= top:
                        break
                    c, top, improved = trial, e, True
    return c, top


def gelu_f32():
    m, n, amax = 4, 5, 15.0
    ts = np.concatenate([np.linspace(0, amax, 20000), np.linspace(0, 1, 3000)])
    fit, p, q = loeb(ts, np.array([float(tail(mp.mpf(v))) for v in ts]), m, n, 100)
    grid = np.unique(np.concatenate([np.linspace(0, amax, 300001), np.logspace(-8, 0, 20000)]).astype(np.float32))
    g64 = grid.astype(np.float64)
    ref = np.array([float(tail(mp.mpf(float(v)))) for v in grid])

    def cost(c):  # the float evaluation's largest relative error, in units of 2^-24
        r = (np.float64(horner_f32(c[: m + 1], g64)) / np.float64(horner_f32(c[m + 1:], g64))).astype(np.float32)
        return np.abs(r / ref - 1).max() * 2.0**24

    c, top = step_search([np.float32(v) for v in list(p) + list(q)], cost, (0, m + 1))
    print(f"gelu_f32: R(a) = P(a)/Q(a), degree {m}/{n}, a <= {amax}: fit 2^{np.log2(fit):.2f}, "
          f"float evaluation {top:.2f} x 2^-24")
    print("    P:", ", ".join(float(v).hex() for v in c[: m + 1]))
    print("    Q:", ", ".join(float(v).hex() for v in c[m + 1:]))


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
    m = n = 4
    x_max = 9.0
    xs = np.concatenate([np.linspace(1e-4, x_max, 6000), np.linspace(0, 1, 2000)[1:]])
    s = xs**2
    f = np.array([float(mp.tanh(mp.mpf(v)) / mp.mpf(v)) for v in xs])
    best = loeb(s, f, m, n, 60)
    x = np.concatenate([np.linspace(0, x_max, 400001).astype(np.float32), np.logspace(-8, 0, 20000).astype(np.float32)])
    ref = np.tanh(x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    s64 = (x * x).astype(np.float32).astype(np.float64)

    def ulps(c):
        y = (np.float64(x) * horner_f32(c[: m + 1], s64)).astype(np.float32)
        y = np.minimum((np.float64(y) / horner_f32(c[m + 1:], s64)).astype(np.float32), 1)
        return (np.abs(y - ref) / np.where(ref == 0, 1, ulp)).max()

    c, top = step_search([np.float32(v) for v in list(best[1]) + list(best[2])], ulps, (0, m + 1))  # P(0) = Q(0) = 1
    print(f"tanh_f32: x P(x²)/Q(x²), |x| <= {x_max}: fit 2^{np.log2(best[0]):.2f}, float evaluation {top:.2f} ulp")
    print("    P:", ", ".join(float(v).hex() for v in c[: m + 1]))
    print("    Q:", ", ".join(float(v).hex() for v in c[m + 1:]))


FITS = {"gelu_f32": gelu_f32, "gelu_f64": gelu_f64, "tanh_f32": tanh_f32}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(FITS):
        FITS[name]()
