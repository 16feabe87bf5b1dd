"""train.py - trains the small MoE of model.py on the Python documentation and exports GGUF.

Run it through train.sh, which makes the virtual environment. Steps:
  1. corpus.py: the prose of Debian's python3.11-doc, split by document into train/val/study;
  2. a SentencePiece BPE vocabulary (byte fallback, no normalisation, a dummy space prefix:
     what llama.cpp's "llama" tokenizer reproduces) trained on the train split;
  3. paragraphs encoded as BOS ... EOS, shuffled with the seed, packed into windows of
     n_ctx + 1 tokens; AdamW with warm-up and cosine decay; the loss is next-token
     cross-entropy plus AUX_COEF x the load-balancing loss;
  4. the loss curve and the validation loss (every val window) printed and kept in
     WORK/train_log.json; the weights in WORK/params.npz;
  5. GGUF: F32 in WORK, Q8_0 at --out (the file the binary embeds);
  6. WORK/study.jsonl: the study split's paragraphs, for the routing study.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpus  # noqa: E402

AUX_COEF = 0.01


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--work", default=os.path.join(HERE, "work"), help="scratch folder")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "models", "trained-moe-Q8_0.gguf"))
    ap.add_argument("--steps", type=int, default=750)
    ap.add_argument("--batch", type=int, default=16, help="windows per step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4, help="n_layer (the default model: 4)")
    ap.add_argument("--embd", type=int, default=192, help="n_embd (the default model: 192)")
    ap.add_argument("--heads", type=int, default=6,
                    help="query heads of 32 (the default model: 6; --embd need not be heads x 32)")
    ap.add_argument("--eval-every", type=int, default=150)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--export-only", action="store_true", help="export WORK/params.npz again")
    return ap.parse_args()


def sha256_text(parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\n")
    return h.hexdigest()


def train_tokenizer(work, train, vocab_size, seed):
    """SentencePiece BPE on the train paragraphs, reused while the text and size are the same."""
    import sentencepiece as spm

    prefix = os.path.join(work, "spm")
    stamp = f"{sha256_text(train)} {vocab_size} {seed}"
    stamp_path = prefix + ".stamp"
    if not (os.path.exists(prefix + ".model") and os.path.exists(stamp_path)
            and open(stamp_path).read() == stamp):
        text_path = os.path.join(work, "train.txt")
        with open(text_path, "w", encoding="utf-8") as f:
            f.write("\n".join(train) + "\n")
        spm.SentencePieceTrainer.train(
            input=text_path, model_prefix=prefix, model_type="bpe", vocab_size=vocab_size,
            character_coverage=0.9995, byte_fallback=True, split_digits=True,
            normalization_rule_name="identity", add_dummy_prefix=True,
            remove_extra_whitespaces=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            control_symbols=["<|im_start|>", "<|im_end|>"], max_sentence_length=1 << 16,
            num_threads=1, seed_sentencepiece_size=1000000, minloglevel=2)
        with open(stamp_path, "w") as f:
            f.write(stamp)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def encode_stream(sp, pars, rng=None):
    """BOS + piece ids + EOS per paragraph, concatenated (shuffled when rng is given), and
    a paragraph number per token."""
    order = rng.permutation(len(pars)) if rng is not None else np.arange(len(pars))
    ids = sp.encode([pars[i] for i in order])
    toks = np.concatenate([np.array([sp.bos_id()] + x + [sp.eos_id()], np.int32) for x in ids])
    seg = np.concatenate([np.full(len(x) + 2, i, np.int32) for i, x in enumerate(ids)])
    return toks, seg


def windows(toks, seg, n):
    m = len(toks) // n
    return toks[: m * n].reshape(m, n), seg[: m * n].reshape(m, n)


def main():
    args = parse_args()
    # GQA with 2 KV heads; Q8_0 quantises rows in blocks of 32
    if args.layers < 1 or args.heads < 2 or args.heads % 2 or args.embd < 32 or args.embd % 32:
        sys.exit("train.py: --layers must be at least 1, --heads even, --embd a multiple of 32")
    os.makedirs(args.work, exist_ok=True)
    t_start = time.time()
    c = corpus.build(args.work)
    print(f"corpus: {c['source']['package']} (sha256 {c['source']['sha256'][:16]}...), "
          f"{c['source']['files']} files; paragraphs train {len(c['train'])}, val {len(c['val'])}, "
          f"study {len(c['study'])}", flush=True)
    sp = train_tokenizer(args.work, c["train"], args.vocab, args.seed)
    rng = np.random.default_rng(args.seed)
    tr_tok, tr_seg = encode_stream(sp, c["train"], rng)
    va_tok, va_seg = encode_stream(sp, c["val"])
    chars = sum(len(p) for p in c["train"])
    print(f"tokens: train {len(tr_tok)} ({chars / len(tr_tok):.2f} chars/token), val {len(va_tok)}",
          flush=True)
    with open(os.path.join(args.work, "study.jsonl"), "w", encoding="utf-8") as f:
        for s in c["study"]:
            f.write(json.dumps(s) + "\n")

    import jax
    import jax.numpy as jnp
    import model as M
    import export_gguf

    cfg = M.Config(n_vocab=sp.get_piece_size(), n_layer=args.layers, n_embd=args.embd,
                   n_head=args.heads)
    n = cfg.n_ctx + 1
    tr_w, tr_s = windows(tr_tok, tr_seg, n)
    va_w, va_s = windows(va_tok, va_seg, n)

    @jax.jit
    def eval_batch(params, tok, seg):
        logits, _ = M.forward(cfg, params, tok[:, :-1], seg[:, :-1])
        keep = (seg[:, 1:] == seg[:, :-1]).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits, axis=-1)
        nll = -jnp.take_along_axis(logp, tok[:, 1:, None], axis=-1)[..., 0]
        return jnp.sum(nll * keep), jnp.sum(keep)

    def val_loss(params, limit=None):
        tot, cnt = 0.0, 0.0
        m = len(va_w) if limit is None else min(limit, len(va_w))
        for i in range(0, m, args.batch):
            a, b = eval_batch(params, va_w[i:min(i + args.batch, m)], va_s[i:min(i + args.batch, m)])
            tot, cnt = tot + float(a), cnt + float(b)
        return tot / cnt

    params_path = os.path.join(args.work, "params.npz")
    log = {"config": cfg.as_dict(), "args": vars(args), "corpus": c["source"],
           "corpus_text_sha256": sha256_text(c["train"] + c["val"]), "curve": [], "val": []}
    if args.export_only:
        flat = np.load(params_path)
        params = {"token_embd": flat["token_embd"], "output_norm": flat["output_norm"], "layers": []}
        for il in range(cfg.n_layer):
            params["layers"].append({k.split("/")[1]: flat[k] for k in flat.files
                                     if k.startswith(f"{il}/")})
        with open(os.path.join(args.work, "train_log.json")) as f:
            log = json.load(f)
    else:
        params = M.init_params(cfg, jax.random.PRNGKey(args.seed))
        params = train(args, cfg, M, params, tr_w, tr_s, val_loss, log)
        flat = {"token_embd": np.asarray(params["token_embd"]),
                "output_norm": np.asarray(params["output_norm"])}
        for il, lp in enumerate(params["layers"]):
            flat.update({f"{il}/{k}": np.asarray(v) for k, v in lp.items()})
        np.savez(params_path, **flat)
        vl = val_loss(params)
        log["val_loss"] = vl
        log["seconds"] = time.time() - t_start
        print(f"validation loss (all {len(va_w)} val windows): {vl:.4f} "
              f"(perplexity {math.exp(vl):.2f}); {log['seconds']:.0f} s in all", flush=True)
        with open(os.path.join(args.work, "train_log.json"), "w") as f:
            json.dump(log, f, indent=1)

    desc = (f"Small Mixtral-style MoE trained by moeinf's tools/train on the prose of "
            f"{c['source']['package']} (PSF License 2.0); validation loss {log['val_loss']:.4f}")
    f32_path = os.path.join(args.work, "trained-moe-F32.gguf")
    for path, qt in ((f32_path, "f32"), (args.out, "q8_0")):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        export_gguf.write(tmp, cfg, params, sp, qt, "moeinf trained MoE", desc)
        os.replace(tmp, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)", flush=True)


def train(args, cfg, M, params, tr_w, tr_s, val_loss, log):
    import jax
    import jax.numpy as jnp

    def lr_at(step):
        warm = jnp.minimum(1.0, (step + 1) / args.warmup)
        frac = jnp.clip((step - args.warmup) / max(1, args.steps - args.warmup), 0.0, 1.0)
        return args.lr * warm * (0.1 + 0.9 * 0.5 * (1 + jnp.cos(jnp.pi * frac)))

    b1, b2, eps, wd, clip = 0.9, 0.95, 1e-8, 0.1, 1.0
    grad_fn = jax.value_and_grad(lambda p, t, s: M.loss_fn(cfg, p, t, s, AUX_COEF), has_aux=True)

    @jax.jit
    def step_fn(params, m, v, step, tok, seg):
        (_, (ce, aux)), g = grad_fn(params, tok, seg)
        gnorm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree_util.tree_leaves(g)))
        scale = jnp.minimum(1.0, clip / (gnorm + 1e-6))
        lr = lr_at(step)
        t = step + 1

        def upd(p, g_, m_, v_):
            g_ = g_ * scale
            m_ = b1 * m_ + (1 - b1) * g_
            v_ = b2 * v_ + (1 - b2) * g_ * g_
            mh, vh = m_ / (1 - b1 ** t), v_ / (1 - b2 ** t)
            decay = wd * p if p.ndim >= 2 else 0.0
            return p - lr * (mh / (jnp.sqrt(vh) + eps) + decay), m_, v_

        out = jax.tree_util.tree_map(upd, params, g, m, v)
        treedef = jax.tree_util.tree_structure(params)
        leaves = treedef.flatten_up_to(out)
        new_p = treedef.unflatten([x[0] for x in leaves])
        new_m = treedef.unflatten([x[1] for x in leaves])
        new_v = treedef.unflatten([x[2] for x in leaves])
        return new_p, new_m, new_v, ce, aux, gnorm, lr

    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    rng = np.random.default_rng(args.seed + 1)
    order, pos, epoch = rng.permutation(len(tr_w)), 0, 0
    t0, t_last = time.time(), 0.0
    acc_ce, acc_aux, acc_n = 0.0, 0.0, 0
    print(f"training: {args.steps} steps of {args.batch} x {cfg.n_ctx} tokens; "
          f"{len(tr_w)} windows per epoch", flush=True)
    for step in range(args.steps):
        if pos + args.batch > len(order):
            order, pos, epoch = rng.permutation(len(tr_w)), 0, epoch + 1
        idx = np.sort(order[pos:pos + args.batch])
        pos += args.batch
        params, m, v, ce, aux, gnorm, lr = step_fn(params, m, v, jnp.int32(step), tr_w[idx], tr_s[idx])
        acc_ce, acc_aux, acc_n = acc_ce + float(ce), acc_aux + float(aux), acc_n + 1
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            el = time.time() - t0
            tps = acc_n * args.batch * cfg.n_ctx / (el - t_last)  # over this log interval
            t_last = el
            rec = {"step": step + 1, "epoch": epoch, "train_ce": acc_ce / acc_n,
                   "aux": acc_aux / acc_n, "lr": float(lr), "grad_norm": float(gnorm),
                   "seconds": el}
            log["curve"].append(rec)
            print(f"step {step + 1:5d} ep {epoch} ce {rec['train_ce']:.4f} aux {rec['aux']:.4f} "
                  f"lr {rec['lr']:.2e} |g| {rec['grad_norm']:.2f} {tps:.0f} tok/s {el:.0f} s",
                  flush=True)
            acc_ce, acc_aux, acc_n = 0.0, 0.0, 0
        if (step + 1) % args.eval_every == 0 and step + 1 != args.steps:
            vl = val_loss(params, limit=64)
            log["val"].append({"step": step + 1, "val_ce_64": vl})
            print(f"step {step + 1:5d} val ce (64 windows) {vl:.4f}", flush=True)
    return params


if __name__ == "__main__":
    main()
