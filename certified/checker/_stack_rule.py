"""Kind ``stack`` v1, v2 (proofs/stack.md §4): the image of a weighted token measure under a
stack of layers (attention, MLP, layer norm; v2: attention and MLP may carry a pre-norm, ``[x] +
h f(LN(x))``). The hints give, for every layer but the last, boxes ``B_l`` (n x d x [lo, hi]);
the claim gives the output boxes ``B_L``. The replay evaluates each layer in ball arithmetic
at ``hints.prec`` bits on ``B_{l-1}`` (``B_0``: the exact tokens) and requires the result
inside ``B_l``; by induction the output of the stack lies in ``B_L``.
Score convention: key ``y`` at query ``x`` scores ``s <Q y, K x>``."""

from __future__ import annotations

from typing import Any

import flint

from ._parse import (
    Rejected,
    array,
    box_rows,
    charge,
    exact,
    exact_product,
    fields,
    matrix,
    show,
    small_integer,
    string,
    top,
    vector,
)

MAX_STACK_COST = 2 * 10**8
_ZERO = flint.arb(0)  # ball operations of one replay (n^2 d per head, n d p per MLP, ...)


def _keys(value: Any, where: str, required: tuple, optional: tuple) -> dict:
    if not isinstance(value, dict):
        raise Rejected(f"{where}: expected an object")
    for key in value:
        if key not in required and key not in optional:
            raise Rejected(f"{where}: unknown field {show(key)}")
    for key in required:
        if key not in value:
            raise Rejected(f"{where}: missing field {key!r}")
    return value


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool) or value not in (0, 1):
        raise Rejected(f"{where}: expected 1 or 0")
    return value == 1


def _pos(value: Any, where: str) -> flint.fmpq:
    q = exact(value, where)
    if not q > 0:
        raise Rejected(f"{where}: must be > 0")
    return q


def _mat(rows: list) -> flint.arb_mat:
    return flint.arb_mat([[flint.arb(x) for x in r] for r in rows])


def _matq(rows: list) -> flint.fmpq_mat:
    return flint.fmpq_mat(rows)


def _options(prenorm: bool, *names: str) -> tuple:
    return (*names, "norm") if prenorm else names


def _norm(obj: dict, where: str, d: int) -> tuple | None:
    """The pre-normalisation ``(gamma, beta, eps)`` of an attention or MLP layer, or None."""
    if "norm" not in obj:
        return None
    return _layernorm(obj["norm"], f"{where}.norm", d, kind=False)[1:]


def _attention(obj: dict, where: str, d: int, n: int, prenorm: bool) -> tuple:
    _keys(obj, where, ("type", "heads"), _options(prenorm, "mask", "scale", "residual", "step"))
    scale = _pos(obj.get("scale", 1), f"{where}.scale")
    step = _pos(obj.get("step", 1), f"{where}.step")
    residual = _flag(obj.get("residual", 1), f"{where}.residual")
    mask = obj.get("mask")
    if mask == "causal":
        pass  # token i sees tokens 0..i (rows formed during the replay)
    elif mask is not None:
        rows = matrix(mask, f"{where}.mask", n, n)
        if any(v != 0 and v != 1 for r in rows for v in r):
            raise Rejected(f"{where}.mask: entries must be 0 or 1")
        mask = [[v == 1 for v in r] for r in rows]
        if not all(any(r) for r in mask):
            raise Rejected(f"{where}.mask: a token sees no token")
    blocks = []
    for k, h in enumerate(array(obj["heads"], f"{where}.heads")):
        hw = f"{where}.heads[{k}]"
        _keys(h, hw, ("Q", "K", "V"), ("W",))
        Q = matrix(h["Q"], f"{hw}.Q", None, d)
        K = matrix(h["K"], f"{hw}.K", len(Q), d)
        V = matrix(h["V"], f"{hw}.V", None, d)
        if "W" not in h and len(V) != d:
            raise Rejected(f"{hw}.V: without W it must be d x d")
        # exact products, charged before: s Kᵀ Q (k d + d² k) and h W V (d_v d + d² d_v)
        charge(len(Q) * d + len(V) * d, 2 * top(), hw)
        Q = [[x * scale for x in r] for r in Q]
        V = [[x * step for x in r] for r in V]
        # score of x_j at query x_i: x_iᵀ A x_j
        A = exact_product([list(c) for c in zip(*K, strict=True)], Q, f"{hw}: K^T Q")
        W = matrix(h["W"], f"{hw}.W", d, len(V)) if "W" in h else None
        blocks.append((A, _matq(V) if W is None else exact_product(W, V, f"{hw}: W V")))
    return ("attention", blocks, mask, residual, _norm(obj, where, d))


def _mlp(obj: dict, where: str, d: int, prenorm: bool) -> tuple:
    _keys(obj, where, ("type", "W1", "b1", "W2", "b2", "activation"),
          _options(prenorm, "residual", "step"))  # fmt: skip
    W1 = matrix(obj["W1"], f"{where}.W1", None, d)
    p = len(W1)
    b1 = vector(obj["b1"], f"{where}.b1", p)
    W2 = matrix(obj["W2"], f"{where}.W2", d, p)
    b2 = vector(obj["b2"], f"{where}.b2", d)
    act = string(obj["activation"], f"{where}.activation", ("relu", "tanh", "gelu"))
    step = _pos(obj.get("step", 1), f"{where}.step")
    residual = _flag(obj.get("residual", 1), f"{where}.residual")
    charge(d * p + d, 2 * top(), where)  # h W2, h b2 (exact)
    return ("mlp", _matq(W1), b1, _matq(W2) * step, [b * step for b in b2], act, residual,
            _norm(obj, where, d))  # fmt: skip


def _layernorm(obj: dict, where: str, d: int, kind: bool = True) -> tuple:
    _keys(obj, where, ("type",) if kind else (), ("gamma", "beta", "eps"))
    gamma = vector(obj["gamma"], f"{where}.gamma", d) if "gamma" in obj else [flint.fmpq(1)] * d
    beta = vector(obj["beta"], f"{where}.beta", d) if "beta" in obj else [flint.fmpq(0)] * d
    eps = exact(obj.get("eps", 0), f"{where}.eps")
    if eps < 0:
        raise Rejected(f"{where}.eps: must be >= 0")
    return ("layernorm", gamma, beta, eps)


def _model(obj: Any, n: int, prenorm: bool, limit: int) -> tuple[int, list]:
    fields(obj, "instance.model", ("dimension", "layers"))
    d = small_integer(obj["dimension"], "instance.model.dimension", 1, 4096)
    layers, cost = [], 0
    for i, layer in enumerate(array(obj["layers"], "instance.model.layers")):
        where = f"instance.model.layers[{i}]"
        kind = string(layer.get("type") if isinstance(layer, dict) else None, f"{where}.type",
                      ("attention", "mlp", "layernorm"))  # fmt: skip
        if kind == "attention":
            layers.append(_attention(layer, where, d, n, prenorm))
            cost += len(layers[-1][1]) * (n * n * (d + 4) + 2 * n * d * d)
        elif kind == "mlp":
            layers.append(_mlp(layer, where, d, prenorm))
            cost += 2 * n * d * layers[-1][1].nrows()
        else:
            layers.append(_layernorm(layer, where, d))
            cost += 8 * n * d
        if kind != "layernorm" and layers[-1][-1] is not None:
            cost += 8 * n * d  # the pre-normalisation
        cost += 4 * n * d + 512  # its boxes read, compared and made balls; a layer's overhead
        if cost > limit:  # checked as the layers are read (each parsed layer costs memory)
            raise Rejected(
                "resource limit: the replay would exceed the cost limit (tokens, layers, precision)"
            )
    return d, layers


# --- the replay: one layer on ball tokens ----------------------------------------------------


def _visible(mask: Any, i: int, n: int) -> list | None:
    if mask is None:
        return None
    return [j <= i for j in range(n)] if mask == "causal" else mask[i]


def _relu(z: flint.arb) -> flint.arb:
    if z >= 0:
        return z
    if z <= 0:
        return flint.arb(0)
    return z.union(0)


def _activate(name: str, z: flint.arb) -> flint.arb:
    if name == "relu":
        return _relu(z)
    if name == "tanh":
        return z.tanh()
    return z * (-z / flint.arb(2).sqrt()).erfc() / 2  # gelu(t) = t Φ(t)


def _normalise(norm: tuple, X: flint.arb_mat, what: str) -> flint.arb_mat:
    """``γ ⊙ (x − mean x) / √(var x + ε) + β`` per row; Rejected if a variance ball is not
    > 0."""
    gamma, beta, eps = norm
    n, d = X.nrows(), X.ncols()
    gamma, beta, rows = [flint.arb(g) for g in gamma], [flint.arb(b) for b in beta], []
    for i in range(n):
        x = [X[i, a] for a in range(d)]
        mean = sum(x, flint.arb(0)) / d
        c = [xa - mean for xa in x]
        var = sum((ca * ca for ca in c), flint.arb(0)) / d + flint.arb(eps)
        if not var > 0:
            raise Rejected(f"{what}: the layer norm's variance of token {i} is not > 0")
        r = var.rsqrt()
        rows.append([ca * r * g + b for ca, g, b in zip(c, gamma, beta, strict=True)])
    return flint.arb_mat(rows)


def _layer(layer: tuple, X: flint.arb_mat, w: list | None, index: int) -> flint.arb_mat:
    n, d = X.nrows(), X.ncols()
    if layer[0] == "layernorm":
        return _normalise(layer[1:], X, f"layer {index}")
    # [x] + h f(Y), Y = LN(X) with a pre-normalisation (proofs/stack.md#prenorm), else Y = X
    norm, residual = layer[-1], layer[-2]
    Y = X if norm is None else _normalise(norm, X, f"layer {index} (pre-norm)")
    if layer[0] == "attention":
        # Σ_h (Σ_j w_j e_ij G y_j) / Σ_j w_j e_ij, e_ij = exp(y_iᵀ A y_j) if visible
        _, blocks, mask, _, _ = layer
        out = flint.arb_mat(n, d)
        Yt = Y.transpose()
        ws = [flint.arb(1)] * n if w is None else w
        Wd = flint.arb_mat(n, n)
        for j in range(n):
            Wd[j, j] = ws[j]
        wcol = flint.arb_mat([[x] for x in ws])
        for A, G in blocks:
            S = (Y * _mat(A.tolist()) * Yt).tolist()
            E = []
            for i in range(n):
                vis = _visible(mask, i, n)
                E.append([x.exp() if vis is None or vis[j] else _ZERO for j, x in enumerate(S[i])])
            E = flint.arb_mat(E)
            num = (E * (Wd * (Y * _mat(G.transpose().tolist())))).tolist()
            den = (E * wcol).tolist()
            out = out + flint.arb_mat([[v / den[i][0] for v in num[i]] for i in range(n)])
    else:
        _, W1, b1, W2, b2, act, _, _ = layer
        Z = Y * _mat(W1.transpose().tolist()) + _mat([b1] * n)
        H = flint.arb_mat([[_activate(act, Z[i, k]) for k in range(Z.ncols())] for i in range(n)])
        out = H * _mat(W2.transpose().tolist()) + _mat([b2] * n)
    return X + out if residual else out


def _balls(boxes: list) -> flint.arb_mat:
    return flint.arb_mat([[flint.arb(lo).union(flint.arb(hi)) for lo, hi in row] for row in boxes])


def _inside(M: flint.arb_mat, boxes: list, where: str) -> None:
    for i, row in enumerate(boxes):
        for a, (lo, hi) in enumerate(row):
            b = M[i, a]
            if not (b.is_finite() and b.lower() >= lo and b.upper() <= hi):
                raise Rejected(f"{where}[{i}][{a}]: the replay {b.str(5, radius=True)} is not "
                               "inside the box")  # fmt: skip


def check_stack_v1(instance: Any, claim: Any, hints: Any) -> str:
    """Replay a version-1 layer stack certificate (no pre-normalisation); return a summary
    (Rejected on any failure)."""
    return _check_stack(instance, claim, hints, prenorm=False)


def check_stack_v2(instance: Any, claim: Any, hints: Any) -> str:
    """Replay a version-2 layer stack certificate (attention and MLP layers may carry a
    ``norm``); return a summary (Rejected on any failure)."""
    return _check_stack(instance, claim, hints, prenorm=True)


def _check_stack(instance: Any, claim: Any, hints: Any, prenorm: bool) -> str:
    _keys(instance, "instance", ("model", "tokens"), ("weights",))
    fields(claim, "claim", ("output",))
    fields(hints, "hints", ("prec", "layers"))
    tokens = matrix(instance["tokens"], "instance.tokens", None, None)
    n = len(tokens)
    if n > 4096:
        raise Rejected("instance.tokens: more than 4096 tokens")
    w = None
    if "weights" in instance:
        wq = vector(instance["weights"], "instance.weights", n)
        if any(not x > 0 for x in wq):
            raise Rejected("instance.weights: every weight must be > 0")
        w = wq
    prec = small_integer(hints["prec"], "hints.prec", 53, 4096)
    d, layers = _model(instance["model"], n, prenorm, MAX_STACK_COST // (1 + prec // 64))
    if len(tokens[0]) != d:
        raise Rejected(f"instance.tokens: {len(tokens[0])} coordinates, the model has d = {d}")
    L = len(layers)
    inner = array(hints["layers"], "hints.layers", L - 1, 0)
    boxes = [box_rows(b, f"hints.layers[{k}]", n, d) for k, b in enumerate(inner)]
    boxes.append(box_rows(claim["output"], "claim.output", n, d))
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        wa = None if w is None else [flint.arb(x) for x in w]
        X = flint.arb_mat([[flint.arb(x) for x in row] for row in tokens])
        for index, layer in enumerate(layers):
            Y = _layer(layer, X, wa, index)
            where = "claim.output" if index == L - 1 else f"hints.layers[{index}]"
            _inside(Y, boxes[index], where)
            X = _balls(boxes[index])
    finally:
        flint.ctx.prec = old
    return f"{L} layers, {n} tokens in R^{d}: every layer's image inside its boxes ({prec} bits)"
