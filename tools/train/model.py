"""model.py - the MoE that train.py trains, written in JAX as llama.cpp computes arch `llama`.

The forward pass is the one llama.cpp (and moeinf) evaluates for a Mixtral-style model, so
that the exported weights mean the same thing there:
  x = token_embd[tokens]
  per layer: x += attn(rmsnorm(x) * attn_norm); x += moe(rmsnorm(x) * ffn_norm)
  logits = (rmsnorm(x) * output_norm) @ token_embd^T      (tied lm_head)
attention: GQA, RoPE on adjacent pairs (x[2i], x[2i+1]) with theta_i = pos * base^(-2i/hd)
  ("NORM" mode, arch llama), causal softmax(q.k / sqrt(hd)) v;
moe: p = softmax(x @ router); the top-k experts by p; their weights p renormalised to sum 1;
  each expert is SwiGLU: down(silu(gate x) * up x).

Training packs paragraphs, each BOS ... EOS, into windows; attention is masked to the tokens
of the same paragraph, so each paragraph sees what inference sees: its own tokens from
position 0 (RoPE is relative, so the offset of a paragraph inside a window does not matter).

Every expert is computed for every token and the unchosen ones get weight 0: exact (no token
dropping, no capacity), and at this size cheaper to write than a dispatch; it costs
n_expert / top_k times the expert arithmetic.
"""

from dataclasses import dataclass, asdict

import jax
import jax.numpy as jnp


@dataclass(frozen=True)
class Config:
    n_vocab: int = 2048
    n_embd: int = 192
    n_layer: int = 4
    n_head: int = 6
    n_head_kv: int = 2
    head_dim: int = 32
    n_expert: int = 16
    n_expert_used: int = 2
    n_ff: int = 64  # per expert
    n_ctx: int = 256
    rope_base: float = 10000.0
    rms_eps: float = 1e-5

    def as_dict(self):
        return asdict(self)


def init_params(cfg, key):
    """Normal(0, 0.02) matrices, output projections scaled by 1/sqrt(2 n_layer), norms 1."""
    d, hd, std = cfg.n_embd, cfg.head_dim, 0.02
    proj_std = std / (2 * cfg.n_layer) ** 0.5
    keys = iter(jax.random.split(key, 2 + 8 * cfg.n_layer))

    def normal(shape, s):
        return s * jax.random.normal(next(keys), shape, jnp.float32)

    params = {
        "token_embd": normal((cfg.n_vocab, d), std),
        "output_norm": jnp.ones((d,), jnp.float32),
        "layers": [],
    }
    for _ in range(cfg.n_layer):
        params["layers"].append({
            "attn_norm": jnp.ones((d,), jnp.float32),
            "wq": normal((d, cfg.n_head * hd), std),
            "wk": normal((d, cfg.n_head_kv * hd), std),
            "wv": normal((d, cfg.n_head_kv * hd), std),
            "wo": normal((cfg.n_head * hd, d), proj_std),
            "ffn_norm": jnp.ones((d,), jnp.float32),
            "router": normal((d, cfg.n_expert), std),
            "w_gate": normal((cfg.n_expert, d, cfg.n_ff), std),
            "w_up": normal((cfg.n_expert, d, cfg.n_ff), std),
            "w_down": normal((cfg.n_expert, cfg.n_ff, d), proj_std),
        })
    return params


def rmsnorm(x, w, eps):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base):
    """x [B, T, H, hd], rotated in adjacent pairs at positions pos [B, T]."""
    hd = x.shape[-1]
    inv = base ** (-jnp.arange(0, hd, 2, dtype=jnp.float32) / hd)
    ang = pos[..., None].astype(jnp.float32) * inv  # [B, T, hd/2]
    cos, sin = jnp.cos(ang)[:, :, None, :], jnp.sin(ang)[:, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    r0, r1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    return jnp.stack([r0, r1], axis=-1).reshape(x.shape)


def attention(cfg, lp, h, pos, mask):
    B, T, d = h.shape
    hd, H, Hkv = cfg.head_dim, cfg.n_head, cfg.n_head_kv
    x = h.reshape(B * T, d)  # 2-D matrix products: XLA's CPU runs them fastest
    q = rope((x @ lp["wq"]).reshape(B, T, H, hd), pos, cfg.rope_base)
    k = rope((x @ lp["wk"]).reshape(B, T, Hkv, hd), pos, cfg.rope_base)
    v = (x @ lp["wv"]).reshape(B, T, Hkv, hd)
    # GQA: query head h uses KV head h // (H / Hkv), so each KV head is repeated H / Hkv times.
    k = jnp.repeat(k, H // Hkv, axis=2).transpose(0, 2, 3, 1)  # [B, H, hd, T]
    v = jnp.repeat(v, H // Hkv, axis=2).transpose(0, 2, 1, 3)  # [B, H, T, hd]
    s = (q.transpose(0, 2, 1, 3) @ k) / jnp.sqrt(jnp.float32(hd))  # [B, H, T, T]
    s = jnp.where(mask[:, None], s, -1e30)
    o = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(B * T, H * hd)
    return (o @ lp["wo"]).reshape(B, T, d)


def route(cfg, lp, h):
    """Router probabilities [.., E], the chosen experts [.., k] and their weights [.., k]."""
    probs = jax.nn.softmax(h @ lp["router"], axis=-1)
    top_p, top_i = jax.lax.top_k(probs, cfg.n_expert_used)
    return probs, top_i, top_p / jnp.sum(top_p, axis=-1, keepdims=True)


def moe(cfg, lp, h):
    """The MoE block and its load-balancing loss: n_expert * sum_e f_e * P_e, where f_e is the
    share of routed slots that expert e received and P_e its mean router probability."""
    shape = h.shape
    h = h.reshape(-1, shape[-1])  # [N, d]: plain matrix products run fastest on XLA's CPU
    probs, top_i, top_w = route(cfg, lp, h)
    onehot = jax.nn.one_hot(top_i, cfg.n_expert, dtype=h.dtype)  # [N, k, E]
    gates = jnp.sum(onehot * top_w[..., None], axis=-2)  # [N, E]
    # All experts as one wide FFN: two [d, E*f] matrices and one [E*f, d], so that each is
    # one large matrix product (the fastest thing a CPU does); gates zero the unchosen ones.
    N, d = h.shape
    E, f = cfg.n_expert, cfg.n_ff
    w_gate = lp["w_gate"].transpose(1, 0, 2).reshape(d, E * f)
    w_up = lp["w_up"].transpose(1, 0, 2).reshape(d, E * f)
    act = (jax.nn.silu(h @ w_gate) * (h @ w_up)).reshape(N, E, f) * gates[..., None]
    y = act.reshape(N, E * f) @ lp["w_down"].reshape(E * f, d)
    frac = jnp.mean(jnp.sum(onehot, axis=-2), axis=0) / cfg.n_expert_used
    aux = cfg.n_expert * jnp.sum(frac * jnp.mean(probs, axis=0))
    return y.reshape(shape), aux


def forward(cfg, params, tokens, seg):
    """Logits [B, T, V] and the mean load-balancing loss; seg [B, T] labels each token's
    paragraph (attention stays inside one)."""
    B, T = tokens.shape
    # Positions restart at each paragraph, as they do at inference.
    start = jnp.concatenate([jnp.ones((B, 1), bool), seg[:, 1:] != seg[:, :-1]], axis=1)
    idx = jnp.broadcast_to(jnp.arange(T), (B, T))
    pos = idx - jax.lax.cummax(jnp.where(start, idx, 0), axis=1)
    causal = jnp.tril(jnp.ones((T, T), bool))
    mask = causal[None] & (seg[:, :, None] == seg[:, None, :])
    x = params["token_embd"][tokens]
    aux = 0.0
    for lp in params["layers"]:
        x = x + attention(cfg, lp, rmsnorm(x, lp["attn_norm"], cfg.rms_eps), pos, mask)
        y, a = moe(cfg, lp, rmsnorm(x, lp["ffn_norm"], cfg.rms_eps))
        x = x + y
        aux = aux + a
    h = rmsnorm(x, params["output_norm"], cfg.rms_eps).reshape(B * T, -1)
    return (h @ params["token_embd"].T).reshape(B, T, -1), aux / cfg.n_layer


def loss_fn(cfg, params, tokens, seg, aux_coef):
    """Mean next-token cross-entropy over targets in the same paragraph, and the aux loss."""
    logits, aux = forward(cfg, params, tokens[:, :-1], seg[:, :-1])
    targets = tokens[:, 1:]
    keep = (seg[:, 1:] == seg[:, :-1]).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    ce = jnp.sum(nll * keep) / jnp.maximum(jnp.sum(keep), 1.0)
    return ce + aux_coef * aux, (ce, aux)
