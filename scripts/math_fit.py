#!/usr/bin/env python3
"""Derives the polynomial coefficients of include/opforge_math.h.

A weighted minimax (Remez exchange) fit in mpmath, then the coefficients are
rounded to the target precision one at a time, lowest degree first, refitting
the remaining ones after each rounding. Prints each fit's weighted error
(the approximation error alone, before the evaluation's own rounding) and the
coefficients as C hex-float literals.

    python3 scripts/math_fit.py            # every fit
    python3 scripts/math_fit.py exp_f32    # one of them

Needs only mpmath.
"""
import sys

import mpmath as mp

mp.mp.dps = 60


def cheb_points(a, b, n):
    return [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (n - 1 - i) / (n - 1)) for i in range(n)]


def remez(f, powers, a, b, w, iters=60, grid=3000):
    """Minimizes max |w(t) (f(t) - sum c_j t^powers[j])| over [a, b]."""
    n = len(powers)
    w0 = w
    w = lambda t: abs(w0(t))
    ref = cheb_points(a, b, n + 1)
    xs = cheb_points(a, b, grid)
    fx = [f(x) for x in xs]
    wx = [w(x) for x in xs]
    best = None
    wmax = max(abs(v) for v in wx)
    # no initial reference point where the weight vanishes
    ref = [(x + (ref[i + 1] if i + 1 < len(ref) else b)) / 2 if abs(w(x)) < wmax * 1e-6 else x
           for i, x in enumerate(ref)]
    for _ in range(iters):
        m = mp.matrix(n + 1, n + 1)
        rhs = mp.matrix(n + 1, 1)
        for i, x in enumerate(ref):
            for j, p in enumerate(powers):
                m[i, j] = x**p
            wi = w(x)
            m[i, n] = (-1) ** i / wi if wi != 0 else 0
            rhs[i] = f(x)
        sol = mp.lu_solve(m, rhs)
        c = [sol[j] for j in range(n)]
        err = [wx[k] * (fx[k] - sum(c[j] * xs[k] ** p for j, p in enumerate(powers))) for k in range(grid)]
        # alternating extrema: the largest |err| in each run of one sign
        ext = []
        k = 0
        while k < grid:
            s = mp.sign(err[k])
            best_k = k
            while k < grid and mp.sign(err[k]) == s:
                if abs(err[k]) > abs(err[best_k]):
                    best_k = k
                k += 1
            ext.append(best_k)
        emax = max(abs(e) for e in err)
        # drop negligible runs (where the weight vanishes), keep alternation
        big = [k for k in ext if abs(err[k]) > emax / 1000]
        merged = []
        for k in big:
            if merged and mp.sign(err[merged[-1]]) == mp.sign(err[k]):
                if abs(err[k]) > abs(err[merged[-1]]):
                    merged[-1] = k
            else:
                merged.append(k)
        if len(merged) >= n + 1:
            ext = merged
        while len(ext) > n + 1:
            if abs(err[ext[0]]) < abs(err[ext[-1]]):
                ext.pop(0)
            else:
                ext.pop()
        best = (c, emax)
        if len(ext) < n + 1:
            break
        emin = min(abs(err[k]) for k in ext)
        ref = [xs[k] for k in ext]
        if emax / emin - 1 < mp.mpf("1e-4"):
            break
    return best


def to_prec(x, bits):
    m, e = mp.frexp(x)
    return mp.ldexp(mp.nint(mp.ldexp(m, bits)), e - bits)


def fit_rounded(f, powers, a, b, w, bits):
    """Minimax fit, coefficients rounded to nearest, then improved by a greedy
    search of +-1 ulp steps on each coefficient (max error on a dense grid)."""
    c, _ = remez(f, powers, a, b, w)
    c = [to_prec(v, bits) for v in c]
    xs = cheb_points(a, b, 2000)
    fx = [f(x) for x in xs]
    wx = [abs(w(x)) for x in xs]
    pw = [[x**p for p in powers] for x in xs]

    def emax(cs):
        return max(wx[k] * abs(fx[k] - sum(cj * pj for cj, pj in zip(cs, pw[k]))) for k in range(len(xs)))

    best = emax(c)
    improved = bits < 53  # rounding to double costs nothing measurable

    while improved:
        improved = False
        for j in range(len(c)):
            u = mp.ldexp(1, mp.frexp(c[j])[1] - bits)
            for step in (u, -u):
                while True:
                    trial = c[:j] + [c[j] + step] + c[j + 1:]
                    e = emax(trial)
                    if e >= best:
                        break
                    c, best, improved = trial, e, True
    xs = cheb_points(a, b, 6000)
    final = max(abs(w(x)) * abs(f(x) - sum(cj * x**p for cj, p in zip(c, powers))) for x in xs)
    return list(zip(powers, c)), final


def hexf(x, bits):
    v = float(x)
    m, e = v.hex().split("p")
    return m.rstrip("0").rstrip(".") + "p" + e + ("f" if bits == 24 else "")


def show(name, coefs, emax, bits):
    print(f"{name}: weighted max error {mp.nstr(emax, 4)} = 2^{mp.nstr(mp.log(emax, 2), 4)}")
    for p, c in coefs:
        print(f"    t^{p}: {hexf(c, bits)}  /* {mp.nstr(c, 20)} */")


def safe(fn, series):
    """fn(t), or its series at 0 where fn would divide by ~0."""

    def g(t):
        if abs(t) < mp.mpf("1e-12"):
            return series(t)
        return fn(t)

    return g


# exp(r) = 1 + r + r^2 P(r), |r| <= ln2/2: P(r) ~ (e^r - 1 - r) / r^2.
EXP_G = safe(lambda r: (mp.exp(r) - 1 - r) / r**2, lambda r: mp.mpf(1) / 2 + r / 6 + r**2 / 24)
R_EXP = mp.log(2) / 2 * mp.mpf("1.0005")


def fit_exp(deg, bits, weight):
    if weight == "exp":
        w = lambda r: r**2 / mp.exp(r)
    else:  # relative to expm1(r)
        w = lambda r: r**2 / mp.expm1(r) if r != 0 else 0
    return fit_rounded(EXP_G, list(range(deg + 1)), -R_EXP, R_EXP, w, bits)


# log1p(f) = f - f^2/2 + s (f^2/2 + z H(z)), s = f / (2 + f), z = s^2, over
# f in [sqrt(1/2) - 1, sqrt(2) - 1]: H(z) ~ (2 atanh(s) / s - 2) / z.
S_MAX = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)
Z_MAX = S_MAX**2 * mp.mpf("1.002")
LOG_H = safe(lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2) / z,
             lambda z: mp.mpf(2) / 3 + 2 * z / 5 + 2 * z**2 / 7)


def fit_log(deg, bits):
    return fit_rounded(LOG_H, list(range(deg + 1)), mp.mpf(0), Z_MAX, lambda z: z / 2, bits)


# log1p(f) = f - f^2/2 + f^3 P(f) without the division (float only).
LOG_P = safe(lambda f: (mp.log1p(f) - f + f**2 / 2) / f**3, lambda f: mp.mpf(1) / 3 - f / 4 + f**2 / 5)


def fit_log_nodiv(deg, bits):
    lo, hi = (mp.sqrt(2) / 2 - 1) * mp.mpf("1.002"), (mp.sqrt(2) - 1) * mp.mpf("1.002")
    return fit_rounded(LOG_P, list(range(deg + 1)), lo, hi, lambda f: f**3 / mp.log1p(f) if f != 0 else 0, bits)


# tanh(x) = x + x^3 P(x^2), |x| <= c: P(w) ~ (tanh(sqrt w) - sqrt w) / w^1.5.
TANH_P = safe(lambda w: (mp.tanh(mp.sqrt(w)) - mp.sqrt(w)) / w**mp.mpf(1.5),
              lambda w: -mp.mpf(1) / 3 + 2 * w / 15 - 17 * w**2 / 315)


def fit_tanh(deg, bits, c):
    w = lambda v: v**mp.mpf(1.5) / mp.tanh(mp.sqrt(v)) if v != 0 else 0
    return fit_rounded(TANH_P, list(range(deg + 1)), mp.mpf(0), mp.mpf(c) ** 2, w, bits)


# erf(x) = x + x P(x^2), |x| <= c, relative error: P(w) ~ erf(sqrt w) / sqrt w - 1.
ERF_Q = safe(lambda w: mp.erf(mp.sqrt(w)) / mp.sqrt(w), lambda w: 2 / mp.sqrt(mp.pi) * (1 - w / 3 + w**2 / 10))


def fit_erf_small(deg, bits, c):
    return fit_rounded(lambda v: ERF_Q(v) - 1, list(range(deg + 1)), mp.mpf(0), mp.mpf(c) ** 2,
                       lambda v: 1 / ERF_Q(v), bits)


# erf(a) = 1 - exp(-a^2 + Q(a)), a in [c, amax]: Q(a) ~ log(erfc(a)) + a^2,
# weighted by erfc(a) / erf(a) (an error in Q is that relative error of erfc).
def fit_erf_large(deg, bits, c, amax, shift=0):
    q = lambda a: mp.log(mp.erfc(a + shift)) + (a + shift) ** 2
    w = lambda a: mp.erfc(a + shift) / mp.erf(a + shift)
    return fit_rounded(q, list(range(deg + 1)), mp.mpf(c) - shift, mp.mpf(amax) - shift, w, bits)


# softplus: log1p(z) = z Q(z) for z = e^-|x| in (0, 1], relative error; the
# header evaluates z + z^2 (Q(z) - 1) / z with Q's coefficients of degree >= 1.
SOFTPLUS_Q = safe(lambda z: mp.log1p(z) / z, lambda z: 1 - z / 2 + z**2 / 3)


def fit_softplus(deg, bits):
    return fit_rounded(SOFTPLUS_Q, list(range(deg + 1)), mp.mpf(0), mp.mpf(1), lambda z: 1 / SOFTPLUS_Q(z), bits)


FITS = {
    "exp_f32": lambda: fit_exp(4, 24, "expm1"),
    "exp_f64": lambda: fit_exp(10, 53, "expm1"),
    "log_f32": lambda: fit_log(2, 24),
    "log_f64": lambda: fit_log(6, 53),
    "tanh_f32": lambda: fit_tanh(4, 24, "0.5625"),
    "tanh_f64": lambda: fit_tanh(10, 53, "0.5625"),
    "erf_small_f32": lambda: fit_erf_small(6, 24, "1.0"),
    "erf_large_f32": lambda: fit_erf_large(6, 24, "1.0", "4.0"),
    "erf_small_f64": lambda: fit_erf_small(11, 53, "1.0"),
    "erf_large_f64": lambda: fit_erf_large(16, 53, "1.0", "6.0"),
    "erf_large17_f64": lambda: fit_erf_large(17, 53, "1.0", "6.0"),
    "softplus_f32": lambda: fit_softplus(9, 24),
}

if __name__ == "__main__":
    names = sys.argv[1:] or list(FITS)
    for name in names:
        coefs, emax = FITS[name]()
        show(name, coefs, emax, 24 if name.endswith("f32") else 53)
