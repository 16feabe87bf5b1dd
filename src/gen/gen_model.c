/*
 * gen_model.c - moeinf_gen_model: a GGUF model with random weights, in the layout llama.cpp
 * loads for arch "llama" (Mixtral-style routed experts, or dense Llama when n_expert = 0),
 * "qwen2moe" (q/k/v biases ~ N(0, 0.2), one shared expert of width n_expert_shared x n_ff
 * behind its sigmoid gate), "qwen3moe" (per-head q/k RMSNorm), "olmoe" (q/k RMSNorm over
 * the whole projection), "gpt-oss" (biases, attention sinks, a sliding window, YaRN; see
 * plan_layer_gpt_oss), "deepseek2" (multi-head latent attention; see plan_layer_deepseek2),
 * "glm4moe" (see plan_layer_glm4moe), and the hybrid "qwen35moe" and "qwen3next" (Gated DeltaNet
 * layers with a gated full-attention layer every full_attn_interval, a shared expert; see
 * plan_layer_hybrid). It sits in src/gen/ with its tensor types (quant_mix.c), not in
 * src/gguf/: it writes through the GGUF writer and quantises through quant/, which the GGUF
 * reader does not depend on.
 *
 * DESIGN. The tensor list and the metadata are built first (small), then every tensor is
 * generated and written in chunks of whole rows through the streaming GGUF writer, so memory
 * stays at a few MB per thread whatever the model size. Chunks are generated in parallel
 * (round by round: threads fill their chunk, this thread writes the round in order), each from
 * its own PRNG stream keyed by (seed, tensor, chunk), so the bytes depend only on the
 * parameters, not on the thread count or timing. Weight scales follow
 * ../shared/testdata/README.md 1.6: matrices ~ N(0, 1/sqrt(fan_in)) (router x2), RMSNorm
 * weights 1 + 0.1 N(0,1), token_embd ~ N(0, 0.1), untied output.weight ~ N(0, 8/sqrt(n_embd));
 * with a tied lm_head, output_norm is scaled by 80/sqrt(n_embd) so that logits again have a
 * standard deviation near 8 (0.1 * sqrt(n_embd) * w = 8) instead of crowding around zero.
 */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/rng.h"
#include "base/status.h"
#include "base/tensor_type.h"
#include "gen/gen_header.h"
#include "gen/quant_mix.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "moeinf.h"
#include "quant/quant.h"

#define CHUNK_ELEMS (1 << 18) /* weights per chunk (at least one row): 1 MB of floats */
#define MAX_THREADS 64
#define MAX_DIM     (1 << 20) /* bound on every width, to keep all products far from overflow */

struct moeinf_gen_params moeinf_gen_params_default(void) {
    struct moeinf_gen_params p = {0};
    p.arch = "llama";
    p.n_layer = 4;
    p.n_expert = 8;
    p.n_expert_used = 2;
    p.n_expert_shared = 0;
    p.n_embd = 256;
    p.n_ff = 512;
    p.n_head = 8;
    p.n_head_kv = 4;
    p.n_ctx_train = 4096;
    p.type = MOEINF_TYPE_Q8_0;
    p.seed = 42;
    p.vocab_from = NULL;
    p.n_embd_head = 0;
    p.tied_output = false;
    p.rope_freq_base = 1e6f;
    p.rms_eps = 1e-5f;
    p.n_threads = 0;
    p.n_vocab = 0;
    p.n_rot = 0;
    p.ssm_d_conv = 4;
    p.ssm_d_state = 32;
    p.ssm_n_group = 2;
    p.ssm_dt_rank = 4;
    p.full_attn_interval = 4;
    p.n_swa = 128;
    p.rope_yarn_factor = 32.0f;
    p.rope_yarn_orig_ctx = 4096;
    p.n_dense_lead = 0;
    p.n_ff_dense = 0;
    p.n_nextn = 0;
    p.q_lora_rank = 0;
    p.kv_lora_rank = 512;
    p.v_head_dim = 128;
    p.expert_gating = 0;
    p.expert_weights_scale = 1.0f;
    p.expert_weights_norm = false;
    p.n_expert_groups = 0;
    p.n_group_used = 0;
    p.rope_yarn_log_mul = 0.0f;
    return p;
}

enum gen_arch {
    ARCH_LLAMA,
    ARCH_QWEN2MOE,
    ARCH_QWEN3MOE,
    ARCH_OLMOE,
    ARCH_QWEN35MOE,
    ARCH_QWEN3NEXT,
    ARCH_GPT_OSS,
    ARCH_DEEPSEEK2,
    ARCH_GLM4MOE,
    ARCH_UNKNOWN
};

static const char *const arch_names[] = {"llama",   "qwen2moe",  "qwen3moe",
                                         "olmoe",   "qwen35moe", "qwen3next",
                                         "gpt-oss", "deepseek2", "glm4moe"};

/* Leading dense layers, ungated shared experts, sigmoid routing with a selection bias. */
static bool is_ds_family(enum gen_arch a) {
    return a == ARCH_DEEPSEEK2 || a == ARCH_GLM4MOE;
}

/* Gated DeltaNet layers with a full-attention layer every full_attn_interval. */
static bool is_hybrid(enum gen_arch a) {
    return a == ARCH_QWEN35MOE || a == ARCH_QWEN3NEXT;
}

/* One shared expert of width n_expert_shared x n_ff behind a sigmoid gate. */
static bool has_shared_expert(enum gen_arch a) {
    return a == ARCH_QWEN2MOE || is_hybrid(a);
}

static enum gen_arch arch_of(const struct moeinf_gen_params *p) {
    if (!p->arch) return ARCH_LLAMA;
    for (int a = 0; a < ARCH_UNKNOWN; a++) {
        if (!strcmp(p->arch, arch_names[a])) return (enum gen_arch)a;
    }
    return ARCH_UNKNOWN;
}

/* Blocks in the file: the model's layers and glm4moe's next-token-prediction blocks. */
static int n_blocks(const struct moeinf_gen_params *p) {
    return p->n_layer + (arch_of(p) == ARCH_GLM4MOE ? p->n_nextn : 0);
}

/* The selection bias exp_probs_b (sigmoid routing; glm4moe's loader requires it). */
static bool has_probs_bias(const struct moeinf_gen_params *p) {
    return arch_of(p) == ARCH_GLM4MOE || p->expert_gating == 2;
}

static int head_dim(const struct moeinf_gen_params *p) {
    return p->n_embd_head > 0 ? p->n_embd_head : p->n_embd / p->n_head;
}

static bool in_range(int v, int lo, int hi) {
    return v >= lo && v <= hi;
}

/* The hybrid archs' rotary dims (n_rot; 0 = the whole head). */
static int rot_dims(const struct moeinf_gen_params *p) {
    if (p->n_rot > 0) return p->n_rot;
    return is_ds_family(arch_of(p)) ? head_dim(p) / 2 : head_dim(p);
}

/* qwen35moe's rope.dimension_sections: as given, or n_rot/2 split as the converter's default
 * [11, 11, 10, 0] (of 32) when all are 0. */
static void rope_sections(const struct moeinf_gen_params *p, int32_t out[4]) {
    int given = 0;
    for (int i = 0; i < 4; i++) {
        out[i] = p->rope_sections[i];
        given |= p->rope_sections[i];
    }
    if (given) return;
    const int half = rot_dims(p) / 2;
    out[0] = out[1] = half * 11 / 32;
    out[2] = half - 2 * out[0];
    out[3] = 0;
}

/* Linear-attention widths: key_dim = d_state x key heads, value_dim = d_state x value heads. */
static int64_t key_dim(const struct moeinf_gen_params *p) {
    return (int64_t)p->ssm_d_state * p->ssm_n_group;
}

static int64_t value_dim(const struct moeinf_gen_params *p) {
    return (int64_t)p->ssm_d_state * p->ssm_dt_rank;
}

/* Layer l of a hybrid arch is full attention (else Gated DeltaNet), as llama.cpp reads
 * full_attention_interval. */
static bool is_full_attn(const struct moeinf_gen_params *p, int l) {
    return (l + 1) % p->full_attn_interval == 0;
}

static enum moeinf_status check_hybrid(const struct moeinf_gen_params *p,
                                       struct moeinf_error *err) {
    const enum moeinf_status arg = MOEINF_ERR_ARG;
    if (p->n_rot < 0 || rot_dims(p) > head_dim(p) || rot_dims(p) % 2 != 0) {
        return moeinf_fail(err, arg, "gen-model: rotary dims %d not even and in [0, head dim %d]",
                           p->n_rot, head_dim(p));
    }
    if (!in_range(p->ssm_d_conv, 1, 64) || !in_range(p->ssm_d_state, 1, 4096) ||
        !in_range(p->ssm_n_group, 1, 4096) || !in_range(p->ssm_dt_rank, 1, 4096)) {
        return moeinf_fail(err, arg,
                           "gen-model: linear attention conv %d not in [1, 64], or head dim %d / "
                           "key heads %d / value heads %d not in [1, 4096]",
                           p->ssm_d_conv, p->ssm_d_state, p->ssm_n_group, p->ssm_dt_rank);
    }
    if (p->ssm_dt_rank % p->ssm_n_group != 0) {
        return moeinf_fail(err, arg, "gen-model: %d linear key heads do not divide %d value heads",
                           p->ssm_n_group, p->ssm_dt_rank);
    }
    if (2 * key_dim(p) + value_dim(p) > MAX_DIM) {
        return moeinf_fail(err, arg, "gen-model: the linear attention is too wide");
    }
    if (!in_range(p->full_attn_interval, 1, 4096)) {
        return moeinf_fail(err, arg, "gen-model: full attention interval %d not in [1, 4096]",
                           p->full_attn_interval);
    }
    int32_t sec[4];
    rope_sections(p, sec);
    int64_t sum = 0;
    for (int i = 0; i < 4; i++) {
        if (sec[i] < 0) return moeinf_fail(err, arg, "gen-model: rope section %d < 0", sec[i]);
        sum += sec[i];
    }
    if (arch_of(p) == ARCH_QWEN35MOE && sum * 2 != rot_dims(p)) {
        return moeinf_fail(err, arg,
                           "gen-model: rope sections sum to %lld, not rotary dims / 2 = %d",
                           (long long)sum, rot_dims(p) / 2);
    }
    return MOEINF_OK;
}

/* deepseek2's and glm4moe's own geometry: dense lead, ranks, rotary dims, routing. */
static enum moeinf_status check_ds(const struct moeinf_gen_params *p, struct moeinf_error *err) {
    const enum moeinf_status arg = MOEINF_ERR_ARG;
    const bool ds = arch_of(p) == ARCH_DEEPSEEK2;
    if (!in_range(p->n_expert_shared, 1, 64)) {
        return moeinf_fail(err, arg, "gen-model: arch '%s' needs 1 to 64 shared experts (got %d)",
                           p->arch, p->n_expert_shared);
    }
    if (!in_range(p->n_dense_lead, 0, p->n_layer) ||
        (p->n_dense_lead > 0 && !in_range(p->n_ff_dense, 1, MAX_DIM)) ||
        !in_range(p->n_ff_dense, 0, MAX_DIM)) {
        return moeinf_fail(err, arg,
                           "gen-model: %d dense layers not in [0, layers = %d], or dense FFN "
                           "width %d not in [1, %d]",
                           p->n_dense_lead, p->n_layer, p->n_ff_dense, MAX_DIM);
    }
    if (!in_range(p->n_nextn, 0, ds ? 0 : 16)) {
        return moeinf_fail(err, arg, "gen-model: %d prediction blocks (glm4moe only, at most 16)",
                           p->n_nextn);
    }
    if (p->n_rot < 0 || rot_dims(p) >= head_dim(p) || rot_dims(p) % 2 != 0) {
        return moeinf_fail(err, arg, "gen-model: rotary dims %d not even and in [0, head dim %d)",
                           p->n_rot, head_dim(p));
    }
    if (ds &&
        (!in_range(p->q_lora_rank, 0, MAX_DIM) || !in_range(p->kv_lora_rank, 1, MAX_DIM) ||
         !in_range(p->v_head_dim, 1, 65536) || (int64_t)p->n_head * p->v_head_dim > MAX_DIM)) {
        return moeinf_fail(err, arg,
                           "gen-model: query rank %d, KV rank %d or value head dim %d out of range",
                           p->q_lora_rank, p->kv_lora_rank, p->v_head_dim);
    }
    if (p->expert_gating != 0 && p->expert_gating != 1 && p->expert_gating != 2) {
        return moeinf_fail(err, arg,
                           "gen-model: expert gating %d is not 1 (softmax) or 2 (sigmoid)",
                           p->expert_gating);
    }
    if (!(p->expert_weights_scale > 0) || !isfinite(p->expert_weights_scale) ||
        !isfinite(p->rope_yarn_log_mul) || !(p->rope_yarn_factor >= 1.0f) ||
        !isfinite(p->rope_yarn_factor) || !in_range(p->rope_yarn_orig_ctx, 1, 1 << 24)) {
        return moeinf_fail(err, arg,
                           "gen-model: expert weights scale %g not positive, or YaRN factor %g "
                           "below 1 or original context %d not in [1, %d]",
                           (double)p->expert_weights_scale, (double)p->rope_yarn_factor,
                           p->rope_yarn_orig_ctx, 1 << 24);
    }
    if (p->n_expert_groups < 0 ||
        (p->n_expert_groups > 0 && (p->n_expert % p->n_expert_groups != 0 ||
                                    !in_range(p->n_group_used, 1, p->n_expert_groups)))) {
        return moeinf_fail(err, arg,
                           "gen-model: %d expert groups do not divide %d experts, or %d groups "
                           "used not in [1, groups]",
                           p->n_expert_groups, p->n_expert, p->n_group_used);
    }
    return MOEINF_OK;
}

/* The type is known, and every quantized row (ne[0]) is whole blocks: the mix falls back to
 * 32-element types where a row is not whole super-blocks, as llama-quantize does. */
static enum moeinf_status check_rows(const struct moeinf_gen_params *p, struct moeinf_error *err) {
    const enum moeinf_status arg = MOEINF_ERR_ARG;
    const enum gen_arch arch = arch_of(p);
    const bool mix = moeinf_gen_type_is_mix(p->type);
    if (!mix && !moeinf_gen_type_is_plain(p->type)) {
        return moeinf_fail(err, arg, "gen-model: type %d is not one of %s", p->type,
                           moeinf_gen_type_names());
    }
    const int64_t block = mix ? 32 : moeinf_type_traits_get(p->type)->block_size;
    if (block > 1) {
        /* the hybrid archs' ssm_out rows are value_dim (in range: check_hybrid bounds it) */
        const bool ds = arch == ARCH_DEEPSEEK2;
        /* deepseek2: attn_k_b's rows are the nope dims, attn_v_b's the latent, attn_output's
         * heads x value dim; the leading dense FFN's rows are n_ff_dense */
        int rows[8] = {p->n_embd,
                       p->n_ff,
                       ds ? p->n_head * p->v_head_dim : p->n_head * head_dim(p),
                       is_hybrid(arch) ? (int)value_dim(p) : p->n_embd,
                       p->n_dense_lead > 0 ? p->n_ff_dense : p->n_embd,
                       ds ? head_dim(p) - rot_dims(p) : p->n_embd,
                       ds ? p->kv_lora_rank : p->n_embd,
                       ds && p->q_lora_rank > 0 ? p->q_lora_rank : p->n_embd};
        const char *what[8] = {"n_embd",           "n_ff",
                               "heads x head dim", "linear head dim x value heads",
                               "dense n_ff",       "head dim - rotary dims",
                               "KV rank",          "query rank"};
        for (int i = 0; i < 8; i++) {
            if (rows[i] % block != 0) {
                return moeinf_fail(err, arg,
                                   "gen-model: %s = %d is not a multiple of %d (needed by %s)",
                                   what[i], rows[i], (int)block,
                                   mix ? moeinf_gen_type_name(p->type) : moeinf_type_name(p->type));
            }
        }
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_gen_params_check(const struct moeinf_gen_params *p,
                                           struct moeinf_error *err) {
    const enum moeinf_status arg = MOEINF_ERR_ARG;
    const enum gen_arch arch = arch_of(p);
    if (arch == ARCH_UNKNOWN) {
        return moeinf_fail(err, arg,
                           "gen-model: arch '%s' is not supported (llama, qwen2moe, qwen3moe, "
                           "olmoe, qwen35moe, qwen3next, gpt-oss, deepseek2, glm4moe)",
                           p->arch);
    }
    if (!in_range(p->n_layer, 1, 4096)) {
        return moeinf_fail(err, arg, "gen-model: layers %d not in [1, 4096]", p->n_layer);
    }
    if (!in_range(p->n_embd, 1, MAX_DIM) || !in_range(p->n_ff, 1, MAX_DIM)) {
        return moeinf_fail(err, arg, "gen-model: n_embd %d / n_ff %d not in [1, %d]", p->n_embd,
                           p->n_ff, MAX_DIM);
    }
    if (!in_range(p->n_head, 1, 4096) || !in_range(p->n_head_kv, 1, 4096)) {
        return moeinf_fail(err, arg, "gen-model: heads %d / kv heads %d not in [1, 4096]",
                           p->n_head, p->n_head_kv);
    }
    if (p->n_embd_head < 0 || p->n_embd_head > 65536) {
        return moeinf_fail(err, arg, "gen-model: head dim %d not in [0, 65536]", p->n_embd_head);
    }
    if (p->n_embd_head == 0 && p->n_embd % p->n_head != 0) {
        return moeinf_fail(err, arg, "gen-model: %d heads do not divide n_embd %d", p->n_head,
                           p->n_embd);
    }
    if (head_dim(p) % 2 != 0) {
        return moeinf_fail(err, arg, "gen-model: head dim %d is odd (RoPE rotates pairs)",
                           head_dim(p));
    }
    if ((int64_t)p->n_head * head_dim(p) > MAX_DIM) {
        return moeinf_fail(err, arg, "gen-model: heads x head dim is too large");
    }
    if (p->n_head % p->n_head_kv != 0) {
        return moeinf_fail(err, arg, "gen-model: %d kv heads do not divide %d heads", p->n_head_kv,
                           p->n_head);
    }
    if (!in_range(p->n_expert, 0, 4096)) {
        return moeinf_fail(err, arg, "gen-model: experts %d not in [0, 4096]", p->n_expert);
    }
    if (p->n_expert > 0 && !in_range(p->n_expert_used, 1, p->n_expert)) {
        return moeinf_fail(err, arg, "gen-model: top-k %d not in [1, experts = %d]",
                           p->n_expert_used, p->n_expert);
    }
    if (p->n_expert == 0 && p->n_expert_used != 0) {
        return moeinf_fail(err, arg, "gen-model: top-k %d given for a dense model (0 experts)",
                           p->n_expert_used);
    }
    if (arch != ARCH_LLAMA && p->n_expert == 0) {
        return moeinf_fail(err, arg, "gen-model: arch '%s' needs routed experts (got 0)",
                           arch_names[arch]);
    }
    if (has_shared_expert(arch) && !in_range(p->n_expert_shared, 1, 64)) {
        return moeinf_fail(err, arg, "gen-model: arch '%s' needs 1 to 64 shared experts (got %d)",
                           arch_names[arch], p->n_expert_shared);
    }
    if (!has_shared_expert(arch) && !is_ds_family(arch) && p->n_expert_shared != 0) {
        return moeinf_fail(err, arg, "gen-model: arch '%s' has no shared experts (got %d)",
                           arch_names[arch], p->n_expert_shared);
    }
    if ((int64_t)p->n_expert_shared * p->n_ff > MAX_DIM) {
        return moeinf_fail(err, arg, "gen-model: the shared expert is too wide");
    }
    if (p->n_threads < 0) {
        return moeinf_fail(err, arg, "gen-model: threads %d < 0", p->n_threads);
    }
    if (p->n_ctx_train < 1) {
        return moeinf_fail(err, arg, "gen-model: context length %d < 1", p->n_ctx_train);
    }
    if (!in_range(p->n_vocab, 0, 1 << 22)) {
        return moeinf_fail(err, arg, "gen-model: vocabulary size %d not in [0, %d]", p->n_vocab,
                           1 << 22);
    }
    if (is_hybrid(arch)) {
        enum moeinf_status st = check_hybrid(p, err);
        if (st) return st;
    }
    if (is_ds_family(arch)) {
        enum moeinf_status st = check_ds(p, err);
        if (st) return st;
    }
    if (arch == ARCH_GPT_OSS &&
        (!in_range(p->n_swa, 1, 1 << 24) || !in_range(p->rope_yarn_orig_ctx, 1, 1 << 24) ||
         !(p->rope_yarn_factor >= 1.0f) || !isfinite(p->rope_yarn_factor))) {
        return moeinf_fail(err, arg,
                           "gen-model: sliding window %d or YaRN original context %d not in "
                           "[1, %d], or YaRN factor %g below 1",
                           p->n_swa, p->rope_yarn_orig_ctx, 1 << 24, (double)p->rope_yarn_factor);
    }
    enum moeinf_status st = check_rows(p, err);
    if (st) return st;
    if (!(p->rope_freq_base > 0) || !(p->rms_eps > 0) || !isfinite(p->rope_freq_base) ||
        !isfinite(p->rms_eps)) {
        return moeinf_fail(err, arg, "gen-model: rope base and rms epsilon must be positive");
    }
    return MOEINF_OK;
}

/* ---- random numbers ------------------------------------------------------------------- */

/*
 * Every chunk of rows of every tensor has its own stream: xoshiro256** seeded through
 * splitmix64 from (seed, tensor index, chunk index). Chunks are therefore generated in any
 * order, by any number of threads, with the same bytes as a result.
 */
struct rng {
    uint64_t s[4];
};

static void rng_seed(struct rng *r, uint64_t seed, uint64_t tensor, uint64_t chunk) {
    uint64_t x = seed;
    uint64_t mix = moeinf_splitmix64(&x) ^ (tensor * 0xd1342543de82ef95ull) ^
                   (chunk * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
    for (int i = 0; i < 4; i++)
        r->s[i] = moeinf_splitmix64(&mix);
}

static uint64_t rng_next(struct rng *r) {
    return moeinf_xoshiro256ss(r->s);
}

/* Uniform in (0, 1), never 0 (it goes into log). */
static double rng_uniform(struct rng *r) {
    return ((double)(rng_next(r) >> 11) + 0.5) * 0x1p-53;
}

/*
 * N(0, 1) by the ziggurat method of Marsaglia and Tsang (2000), 128 layers: about one
 * random number and one compare per sample, against a log, a sqrt and a sin/cos for
 * Box-Muller, which made generation CPU-bound at ~30 ns per weight. The layer index takes
 * the low 7 bits and the value the high 32 bits of one 64-bit draw, so the two are
 * independent (the original shared bits between them).
 */
#define ZIG_R 3.442619855899      /* start of the tail */
#define ZIG_V 9.91256303526217e-3 /* area of each layer */

struct zig {
    uint32_t k[128]; /* |hz| below k[i]: inside the rectangle, accept at once */
    double w[128];   /* value scale of layer i */
    double f[128];   /* density at the layer edges */
};

static void zig_init(struct zig *z) {
    const double m1 = 2147483648.0; /* 2^31 */
    double dn = ZIG_R;
    double tn = dn;
    double q = ZIG_V / exp(-0.5 * dn * dn);
    z->k[0] = (uint32_t)((dn / q) * m1);
    z->k[1] = 0;
    z->w[0] = q / m1;
    z->w[127] = dn / m1;
    z->f[0] = 1.0;
    z->f[127] = exp(-0.5 * dn * dn);
    for (int i = 126; i >= 1; i--) {
        dn = sqrt(-2.0 * log(ZIG_V / dn + exp(-0.5 * dn * dn)));
        z->k[i + 1] = (uint32_t)((dn / tn) * m1);
        tn = dn;
        z->f[i] = exp(-0.5 * dn * dn);
        z->w[i] = dn / m1;
    }
}

static double rng_normal(struct rng *r, const struct zig *z) {
    for (;;) {
        uint64_t u = rng_next(r);
        int i = (int)(u & 127);
        int32_t hz = (int32_t)(uint32_t)(u >> 32);
        uint32_t ahz = hz < 0 ? 0u - (uint32_t)hz : (uint32_t)hz;
        double x = hz * z->w[i];
        if (ahz < z->k[i]) return x;
        if (i == 0) { /* the tail beyond ZIG_R, by Marsaglia's exponential method */
            double xt;
            double y;
            do {
                xt = -log(rng_uniform(r)) / ZIG_R;
                y = -log(rng_uniform(r));
            } while (y + y < xt * xt);
            return hz > 0 ? ZIG_R + xt : -ZIG_R - xt;
        }
        if (z->f[i] + rng_uniform(r) * (z->f[i - 1] - z->f[i]) < exp(-0.5 * x * x)) return x;
    }
}

/* ---- vocabulary ----------------------------------------------------------------------- */

/* llama.cpp token types */
#define TOK_NORMAL  1
#define TOK_UNKNOWN 2
#define TOK_CONTROL 3
#define TOK_UNUSED  5
#define TOK_BYTE    6

struct vocab {
    char **text;
    float *scores;
    int32_t *types;
    uint64_t n, cap;
};

static void vocab_free(struct vocab *v) {
    for (uint64_t i = 0; i < v->n; i++)
        free(v->text[i]);
    free(v->text);
    free(v->scores);
    free(v->types);
}

/* Appends a token (the caller knows it is new); false only when out of memory. */
static bool vocab_push(struct vocab *v, const char *s, float score, int32_t type) {
    if (v->n == v->cap) {
        uint64_t cap = v->cap ? v->cap * 2 : 1024;
        char **t = realloc(v->text, cap * sizeof *t);
        if (!t) return false;
        v->text = t;
        float *sc = realloc(v->scores, cap * sizeof *sc);
        if (!sc) return false;
        v->scores = sc;
        int32_t *ty = realloc(v->types, cap * sizeof *ty);
        if (!ty) return false;
        v->types = ty;
        v->cap = cap;
    }
    char *copy = strdup(s);
    if (!copy) return false;
    v->text[v->n] = copy;
    v->scores[v->n] = score;
    v->types[v->n] = type;
    v->n++;
    return true;
}

/* Adds a token unless already there; false only when out of memory. */
static bool vocab_add(struct vocab *v, const char *s, float score, int32_t type) {
    for (uint64_t i = 0; i < v->n; i++) {
        if (!strcmp(v->text[i], s)) return true;
    }
    return vocab_push(v, s, score, type);
}

/* Pads to n tokens with unused ones ("<unused_N>", which no piece merges into), so that
 * token_embd and output have a real model's row count. */
static bool vocab_pad(struct vocab *v, uint64_t n) {
    char t[32];
    for (uint64_t i = v->n; i < n; i++) {
        snprintf(t, sizeof t, "<unused_%" PRIu64 ">", i);
        if (!vocab_push(v, t, 0, TOK_UNUSED)) return false;
    }
    return true;
}

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's word-start mark */

/*
 * A SentencePiece-style ("llama") vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then
 * pieces: single printable characters, "▁" + letter/digit, and common words, each word with
 * all its prefixes so that the tokenizer's pair merges can reach it. Piece scores decrease
 * in the order added (SentencePiece scores are log-probabilities; higher merges first).
 */
static bool vocab_build(struct vocab *v) {
    static const char *const words[] = {
        "the",     "of",   "and",    "to",      "in",     "is",     "that",   "for",    "it",
        "as",      "was",  "with",   "be",      "by",     "on",     "not",    "he",     "this",
        "are",     "or",   "his",    "from",    "at",     "which",  "but",    "have",   "an",
        "had",     "they", "you",    "were",    "their",  "one",    "all",    "we",     "can",
        "her",     "has",  "there",  "been",    "if",     "more",   "when",   "will",   "would",
        "who",     "so",   "no",     "she",     "other",  "its",    "may",    "these",  "about",
        "what",    "time", "out",    "up",      "into",   "than",   "them",   "only",   "some",
        "could",   "new",  "two",    "first",   "world",  "hello",  "model",  "expert", "cache",
        "token",   "def",  "return", "int",     "float",  "void",   "const",  "struct", "class",
        "import",  "self", "print",  "while",   "else",   "true",   "false",  "null",   "value",
        "data",    "file", "name",   "list",    "string", "number", "test",   "error",  "use",
        "make",    "like", "just",   "over",    "also",   "after",  "people", "year",   "good",
        "day",     "way",  "how",    "because", "any",    "each",   "most",   "very",   "where",
        "through", "back", "much",   "before",  "go",     "right",  "think",  "say",    "help",
    };
    if (!vocab_add(v, "<unk>", 0, TOK_UNKNOWN) || !vocab_add(v, "<s>", 0, TOK_CONTROL) ||
        !vocab_add(v, "</s>", 0, TOK_CONTROL)) {
        return false;
    }
    for (int b = 0; b < 256; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        if (!vocab_add(v, t, 0, TOK_BYTE)) return false;
    }
    float score = 0;
    if (!vocab_add(v, SPM_SPACE, score--, TOK_NORMAL)) return false;
    char t[64];
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t len = strlen(words[w]);
        for (size_t k = 1; k <= len; k++) {
            snprintf(t, sizeof t, SPM_SPACE "%.*s", (int)k, words[w]);
            if (!vocab_add(v, t, score--, TOK_NORMAL)) return false;
            if (k >= 2) {
                snprintf(t, sizeof t, "%.*s", (int)k, words[w]);
                if (!vocab_add(v, t, score--, TOK_NORMAL)) return false;
            }
        }
    }
    for (int c = 0x21; c < 0x7f; c++) {
        snprintf(t, sizeof t, "%c", c);
        if (!vocab_add(v, t, score--, TOK_NORMAL)) return false;
        if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
            snprintf(t, sizeof t, SPM_SPACE "%c", c);
            if (!vocab_add(v, t, score--, TOK_NORMAL)) return false;
        }
    }
    return true;
}

/* ---- the tensor plan ------------------------------------------------------------------ */

enum init_kind {
    INIT_NORMAL,        /* N(0, scale / sqrt(ne[0])): matrices, fan_in = ne[0] */
    INIT_NORM,          /* scale * (1 + 0.1 N(0, 1)): RMSNorm weights */
    INIT_EMBED,         /* N(0, scale) */
    INIT_NEG_LOGNORMAL, /* -exp(scale N(0, 1)): ssm_a, the (negative) log-decay rate */
};

struct tplan {
    char name[64];
    int type;
    int n_dims;
    int64_t ne[3];
    enum init_kind kind;
    double scale;
};

struct plan {
    struct tplan *t;
    int n, cap;
};

/* Tensor "<name>.weight", or "blk.<layer>.<name>.weight" for layer >= 0; a name that ends in
 * ".bias", and "ssm_a" (llama.cpp names it without a suffix), are used as they are (after the
 * layer prefix). */
static bool plan_add(struct plan *pl, const char *name, int layer, int type, int n_dims,
                     int64_t ne0, int64_t ne1, int64_t ne2, enum init_kind kind, double scale) {
    if (pl->n == pl->cap) {
        int cap = pl->cap ? pl->cap * 2 : 64;
        struct tplan *t = realloc(pl->t, (size_t)cap * sizeof *t);
        if (!t) return false;
        pl->t = t;
        pl->cap = cap;
    }
    struct tplan *t = &pl->t[pl->n++];
    size_t len = strlen(name);
    const bool bare = (len > 5 && !strcmp(name + len - 5, ".bias")) || !strcmp(name, "ssm_a");
    const char *suffix = bare ? "" : ".weight";
    if (layer >= 0) {
        snprintf(t->name, sizeof t->name, "blk.%d.%s%s", layer, name, suffix);
    } else {
        snprintf(t->name, sizeof t->name, "%s%s", name, suffix);
    }
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->kind = kind;
    t->scale = scale;
    return true;
}

/* What qwen2moe, qwen3moe and olmoe add to a layer's attention and FFN (ne order). */
static bool plan_arch_extras(struct plan *pl, const struct moeinf_gen_params *p, int l) {
    const enum gen_arch arch = arch_of(p);
    const int q = p->type;
    const int f32 = MOEINF_TYPE_F32;
    const int64_t e = p->n_embd;
    const int64_t hd = head_dim(p);
    const int64_t dq = (int64_t)p->n_head * hd;
    const int64_t dkv = (int64_t)p->n_head_kv * hd;
    const int64_t fs = (int64_t)p->n_expert_shared * p->n_ff;
    switch (arch) {
    case ARCH_QWEN2MOE:
        return plan_add(pl, "attn_q.bias", l, f32, 1, dq, 1, 1, INIT_EMBED, 0.2) &&
               plan_add(pl, "attn_k.bias", l, f32, 1, dkv, 1, 1, INIT_EMBED, 0.2) &&
               plan_add(pl, "attn_v.bias", l, f32, 1, dkv, 1, 1, INIT_EMBED, 0.2) &&
               plan_add(pl, "ffn_gate_inp_shexp", l, f32, 1, e, 1, 1, INIT_NORMAL, 1) &&
               plan_add(pl, "ffn_gate_shexp", l, q, 2, e, fs, 1, INIT_NORMAL, 1) &&
               plan_add(pl, "ffn_up_shexp", l, q, 2, e, fs, 1, INIT_NORMAL, 1) &&
               plan_add(pl, "ffn_down_shexp", l, q, 2, fs, e, 1, INIT_NORMAL, 1);
    case ARCH_QWEN3MOE:
        return plan_add(pl, "attn_q_norm", l, f32, 1, hd, 1, 1, INIT_NORM, 1) &&
               plan_add(pl, "attn_k_norm", l, f32, 1, hd, 1, 1, INIT_NORM, 1);
    case ARCH_OLMOE:
        return plan_add(pl, "attn_q_norm", l, f32, 1, dq, 1, 1, INIT_NORM, 1) &&
               plan_add(pl, "attn_k_norm", l, f32, 1, dkv, 1, 1, INIT_NORM, 1);
    default:
        return true;
    }
}

/* Replaces the mix's placeholder type of the big matrices by llama-quantize's choice. */
static void apply_mix(struct plan *pl, const struct moeinf_gen_params *p) {
    for (int i = 0; i < pl->n; i++) {
        struct tplan *t = &pl->t[i];
        if (t->type == MOEINF_GEN_TYPE_MXFP4_MOE) t->type = moeinf_mxfp4_moe_type(t->ne[2]);
        if (t->type != MOEINF_GEN_TYPE_Q4_K_M) continue;
        int layer = -1; /* "blk.N." */
        if (!strncmp(t->name, "blk.", 4)) layer = (int)strtol(t->name + 4, NULL, 10);
        bool lm_head = !strcmp(t->name, "output.weight") ||
                       (p->tied_output && !strcmp(t->name, "token_embd.weight"));
        char base[64];
        snprintf(base, sizeof base, "%s", t->name);
        char *dot = strrchr(base, '.');
        if (dot) *dot = '\0'; /* without ".weight" */
        t->type = moeinf_q4_k_m_type(base, layer, n_blocks(p), p->n_expert, t->ne[0], lm_head);
    }
}

/*
 * One layer of qwen35moe or qwen3next (ne order), as llama.cpp's loader reads them: the two
 * norms (post_attention_norm is the pre-FFN norm; there is no ffn_norm), then a gated full
 * attention (attn_q is q and its gate, 2 x head dim per head; q/k RMSNorm per head) or a Gated
 * DeltaNet (fused qkv, z gate, depthwise conv1d, dt bias, A, beta/alpha - fused as ssm_ba in
 * qwen3next -, the gated RMSNorm over a value head, the output projection), then the router,
 * the routed experts and the shared expert. conv1d, dt, A and the norms stay F32, as
 * llama-quantize leaves them (1-D, *_norm, or ssm_conv1d).
 */
static bool plan_layer_hybrid(struct plan *pl, const struct moeinf_gen_params *p, int l) {
    const int q = p->type;
    const int f32 = MOEINF_TYPE_F32;
    const int64_t e = p->n_embd;
    const int64_t f = p->n_ff;
    const int64_t x = p->n_expert;
    const int64_t fs = (int64_t)p->n_expert_shared * p->n_ff;
    const int64_t hd = head_dim(p);
    const int64_t dq = (int64_t)p->n_head * hd;
    const int64_t dkv = (int64_t)p->n_head_kv * hd;
    const int64_t kd = key_dim(p);
    const int64_t vd = value_dim(p);
    const int64_t nv = p->ssm_dt_rank;
    bool ok = plan_add(pl, "attn_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1);
    if (is_full_attn(p, l)) {
        ok = ok && plan_add(pl, "attn_q", l, q, 2, e, 2 * dq, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_k", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_v", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_output", l, q, 2, dq, e, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_q_norm", l, f32, 1, hd, 1, 1, INIT_NORM, 1) &&
             plan_add(pl, "attn_k_norm", l, f32, 1, hd, 1, 1, INIT_NORM, 1);
    } else {
        ok = ok && plan_add(pl, "attn_qkv", l, q, 2, e, 2 * kd + vd, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_gate", l, q, 2, e, vd, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "ssm_conv1d", l, f32, 2, p->ssm_d_conv, 2 * kd + vd, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "ssm_dt.bias", l, f32, 1, nv, 1, 1, INIT_EMBED, 0.1) &&
             plan_add(pl, "ssm_a", l, f32, 1, nv, 1, 1, INIT_NEG_LOGNORMAL, 0.5);
        if (arch_of(p) == ARCH_QWEN3NEXT) {
            ok = ok && plan_add(pl, "ssm_ba", l, q, 2, e, 2 * nv, 1, INIT_NORMAL, 1);
        } else {
            ok = ok && plan_add(pl, "ssm_beta", l, q, 2, e, nv, 1, INIT_NORMAL, 1) &&
                 plan_add(pl, "ssm_alpha", l, q, 2, e, nv, 1, INIT_NORMAL, 1);
        }
        ok = ok && plan_add(pl, "ssm_norm", l, f32, 1, p->ssm_d_state, 1, 1, INIT_NORM, 1) &&
             plan_add(pl, "ssm_out", l, q, 2, vd, e, 1, INIT_NORMAL, 1);
    }
    return ok && plan_add(pl, "post_attention_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1) &&
           plan_add(pl, "ffn_gate_inp", l, f32, 2, e, x, 1, INIT_NORMAL, 2) &&
           plan_add(pl, "ffn_gate_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_up_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_down_exps", l, q, 3, f, e, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_gate_inp_shexp", l, f32, 1, e, 1, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_gate_shexp", l, q, 2, e, fs, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_up_shexp", l, q, 2, e, fs, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_down_shexp", l, q, 2, fs, e, 1, INIT_NORMAL, 1);
}

/*
 * One gpt-oss layer (ne order), as llama.cpp's loader reads them (src/models/openai-moe.cpp):
 * the pre-attention norm, q/k/v/o with biases, a sink logit per head, post_attention_norm (the
 * pre-FFN norm; no ffn_norm), the router with its bias, the experts with a bias per expert
 * row. Biases ~ N(0, 0.1) (q/k/v 0.2 as qwen2moe's, the router's 0.5), the sinks ~ N(0, 1):
 * a logit of the same order as the attention scores. All F32, as in the published files.
 */
static bool plan_layer_gpt_oss(struct plan *pl, const struct moeinf_gen_params *p, int l) {
    const int q = p->type;
    const int f32 = MOEINF_TYPE_F32;
    const int64_t e = p->n_embd;
    const int64_t f = p->n_ff;
    const int64_t x = p->n_expert;
    const int64_t dq = (int64_t)p->n_head * head_dim(p);
    const int64_t dkv = (int64_t)p->n_head_kv * head_dim(p);
    return plan_add(pl, "attn_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1) &&
           plan_add(pl, "attn_q", l, q, 2, e, dq, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "attn_q.bias", l, f32, 1, dq, 1, 1, INIT_EMBED, 0.2) &&
           plan_add(pl, "attn_k", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "attn_k.bias", l, f32, 1, dkv, 1, 1, INIT_EMBED, 0.2) &&
           plan_add(pl, "attn_v", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "attn_v.bias", l, f32, 1, dkv, 1, 1, INIT_EMBED, 0.2) &&
           plan_add(pl, "attn_output", l, q, 2, dq, e, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "attn_output.bias", l, f32, 1, e, 1, 1, INIT_EMBED, 0.1) &&
           plan_add(pl, "attn_sinks", l, f32, 1, p->n_head, 1, 1, INIT_EMBED, 1) &&
           plan_add(pl, "post_attention_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1) &&
           plan_add(pl, "ffn_gate_inp", l, f32, 2, e, x, 1, INIT_NORMAL, 2) &&
           plan_add(pl, "ffn_gate_inp.bias", l, f32, 1, x, 1, 1, INIT_EMBED, 0.5) &&
           plan_add(pl, "ffn_gate_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_gate_exps.bias", l, f32, 2, f, x, 1, INIT_EMBED, 0.1) &&
           plan_add(pl, "ffn_up_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_up_exps.bias", l, f32, 2, f, x, 1, INIT_EMBED, 0.1) &&
           plan_add(pl, "ffn_down_exps", l, q, 3, f, e, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_down_exps.bias", l, f32, 2, e, x, 1, INIT_EMBED, 0.1);
}

/*
 * The FFN of a deepseek2 or glm4moe layer (ne order): a leading dense SwiGLU n_ff_dense wide,
 * or the router (with the selection bias exp_probs_b for sigmoid routing, ~ N(0, 0.1), of the
 * order of the sigmoid's spread), the routed experts, and the ungated shared FFN
 * n_expert_shared x n_ff wide (src/models/deepseek2.cpp, glm4-moe.cpp).
 */
static bool plan_ffn_ds(struct plan *pl, const struct moeinf_gen_params *p, int l) {
    const int q = p->type;
    const int f32 = MOEINF_TYPE_F32;
    const int64_t e = p->n_embd;
    const int64_t f = p->n_ff;
    const int64_t x = p->n_expert;
    const int64_t fs = (int64_t)p->n_expert_shared * p->n_ff;
    if (l < p->n_dense_lead) {
        const int64_t fd = p->n_ff_dense;
        return plan_add(pl, "ffn_gate", l, q, 2, e, fd, 1, INIT_NORMAL, 1) &&
               plan_add(pl, "ffn_up", l, q, 2, e, fd, 1, INIT_NORMAL, 1) &&
               plan_add(pl, "ffn_down", l, q, 2, fd, e, 1, INIT_NORMAL, 1);
    }
    bool ok = plan_add(pl, "ffn_gate_inp", l, f32, 2, e, x, 1, INIT_NORMAL, 2);
    if (has_probs_bias(p)) {
        ok = ok && plan_add(pl, "exp_probs_b.bias", l, f32, 1, x, 1, 1, INIT_EMBED, 0.1);
    }
    return ok && plan_add(pl, "ffn_gate_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_up_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_down_exps", l, q, 3, f, e, x, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_gate_shexp", l, q, 2, e, fs, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_up_shexp", l, q, 2, e, fs, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_down_shexp", l, q, 2, fs, e, 1, INIT_NORMAL, 1);
}

/*
 * One deepseek2 layer (ne order) in the split MLA layout of today's converter: the query
 * (compressed through attn_q_a and its norm when q_lora_rank > 0, else one attn_q), the joint
 * KV projection to the latent and the rotary key, the latent's norm, attn_k_b [nope, latent,
 * heads] and attn_v_b [latent, v, heads] that decompress it per head, the output, ffn_norm.
 */
static bool plan_layer_deepseek2(struct plan *pl, const struct moeinf_gen_params *p, int l) {
    const int q = p->type;
    const int f32 = MOEINF_TYPE_F32;
    const int64_t e = p->n_embd;
    const int64_t h = p->n_head;
    const int64_t kmla = head_dim(p);
    const int64_t rope = rot_dims(p);
    const int64_t kvl = p->kv_lora_rank;
    const int64_t ql = p->q_lora_rank;
    bool ok = plan_add(pl, "attn_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1);
    if (ql > 0) {
        ok = ok && plan_add(pl, "attn_q_a", l, q, 2, e, ql, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_q_a_norm", l, f32, 1, ql, 1, 1, INIT_NORM, 1) &&
             plan_add(pl, "attn_q_b", l, q, 2, ql, h * kmla, 1, INIT_NORMAL, 1);
    } else {
        ok = ok && plan_add(pl, "attn_q", l, q, 2, e, h * kmla, 1, INIT_NORMAL, 1);
    }
    return ok && plan_add(pl, "attn_kv_a_mqa", l, q, 2, e, kvl + rope, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "attn_kv_a_norm", l, f32, 1, kvl, 1, 1, INIT_NORM, 1) &&
           plan_add(pl, "attn_k_b", l, q, 3, kmla - rope, kvl, h, INIT_NORMAL, 1) &&
           plan_add(pl, "attn_v_b", l, q, 3, kvl, p->v_head_dim, h, INIT_NORMAL, 1) &&
           plan_add(pl, "attn_output", l, q, 2, h * p->v_head_dim, e, 1, INIT_NORMAL, 1) &&
           plan_add(pl, "ffn_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1) && plan_ffn_ds(pl, p, l);
}

/*
 * One glm4moe block (ne order): q/k/v with biases, the output, post_attention_norm (the
 * pre-FFN norm), the FFN; the blocks from n_layer on are next-token-prediction blocks, a full
 * layer plus eh_proj [2 n_embd, n_embd] and its norms (llama.cpp loads and never runs them; the
 * optional vocabulary-sized embed_tokens and shared_head_head are left out).
 */
static bool plan_layer_glm4moe(struct plan *pl, const struct moeinf_gen_params *p, int l) {
    const int q = p->type;
    const int f32 = MOEINF_TYPE_F32;
    const int64_t e = p->n_embd;
    const int64_t dq = (int64_t)p->n_head * head_dim(p);
    const int64_t dkv = (int64_t)p->n_head_kv * head_dim(p);
    bool ok = plan_add(pl, "attn_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1) &&
              plan_add(pl, "attn_q", l, q, 2, e, dq, 1, INIT_NORMAL, 1) &&
              plan_add(pl, "attn_q.bias", l, f32, 1, dq, 1, 1, INIT_EMBED, 0.2) &&
              plan_add(pl, "attn_k", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
              plan_add(pl, "attn_k.bias", l, f32, 1, dkv, 1, 1, INIT_EMBED, 0.2) &&
              plan_add(pl, "attn_v", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
              plan_add(pl, "attn_v.bias", l, f32, 1, dkv, 1, 1, INIT_EMBED, 0.2) &&
              plan_add(pl, "attn_output", l, q, 2, dq, e, 1, INIT_NORMAL, 1) &&
              plan_add(pl, "post_attention_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1) &&
              plan_ffn_ds(pl, p, l);
    if (ok && l >= p->n_layer) {
        ok = plan_add(pl, "nextn.eh_proj", l, q, 2, 2 * e, e, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "nextn.enorm", l, f32, 1, e, 1, 1, INIT_NORM, 1) &&
             plan_add(pl, "nextn.hnorm", l, f32, 1, e, 1, 1, INIT_NORM, 1) &&
             plan_add(pl, "nextn.shared_head_norm", l, f32, 1, e, 1, 1, INIT_NORM, 1);
    }
    return ok;
}

/* Tensor names and shapes as llama.cpp's loader expects them for the arch (ne order). */
static bool plan_build(struct plan *pl, const struct moeinf_gen_params *p, int64_t n_vocab) {
    const int q = p->type; /* big matrices */
    const int64_t e = p->n_embd;
    const int64_t f = p->n_ff;
    const int64_t x = p->n_expert;
    const int64_t dq = (int64_t)p->n_head * head_dim(p);
    const int64_t dkv = (int64_t)p->n_head_kv * head_dim(p);
    bool ok = plan_add(pl, "token_embd", -1, q, 2, e, n_vocab, 1, INIT_EMBED, 0.1);
    double out_norm = p->tied_output ? 80.0 / sqrt((double)e) : 1.0;
    ok = ok && plan_add(pl, "output_norm", -1, MOEINF_TYPE_F32, 1, e, 1, 1, INIT_NORM, out_norm);
    if (!p->tied_output) ok = ok && plan_add(pl, "output", -1, q, 2, e, n_vocab, 1, INIT_NORMAL, 8);
    for (int l = 0; ok && l < n_blocks(p); l++) {
        if (arch_of(p) == ARCH_DEEPSEEK2) {
            ok = plan_layer_deepseek2(pl, p, l);
            continue;
        }
        if (arch_of(p) == ARCH_GLM4MOE) {
            ok = plan_layer_glm4moe(pl, p, l);
            continue;
        }
        if (is_hybrid(arch_of(p))) {
            ok = plan_layer_hybrid(pl, p, l);
            continue;
        }
        if (arch_of(p) == ARCH_GPT_OSS) {
            ok = plan_layer_gpt_oss(pl, p, l);
            continue;
        }
        ok = plan_add(pl, "attn_norm", l, MOEINF_TYPE_F32, 1, e, 1, 1, INIT_NORM, 1) &&
             plan_add(pl, "attn_q", l, q, 2, e, dq, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_k", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_v", l, q, 2, e, dkv, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "attn_output", l, q, 2, dq, e, 1, INIT_NORMAL, 1) &&
             plan_add(pl, "ffn_norm", l, MOEINF_TYPE_F32, 1, e, 1, 1, INIT_NORM, 1);
        if (!ok) break;
        if (x > 0) {
            ok = plan_add(pl, "ffn_gate_inp", l, MOEINF_TYPE_F32, 2, e, x, 1, INIT_NORMAL, 2) &&
                 plan_add(pl, "ffn_gate_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
                 plan_add(pl, "ffn_up_exps", l, q, 3, e, f, x, INIT_NORMAL, 1) &&
                 plan_add(pl, "ffn_down_exps", l, q, 3, f, e, x, INIT_NORMAL, 1);
        } else {
            ok = plan_add(pl, "ffn_gate", l, q, 2, e, f, 1, INIT_NORMAL, 1) &&
                 plan_add(pl, "ffn_up", l, q, 2, e, f, 1, INIT_NORMAL, 1) &&
                 plan_add(pl, "ffn_down", l, q, 2, f, e, 1, INIT_NORMAL, 1);
        }
        ok = ok && plan_arch_extras(pl, p, l);
    }
    if (ok && moeinf_gen_type_is_mix(p->type)) apply_mix(pl, p);
    return ok;
}

/* ---- metadata ------------------------------------------------------------------------- */

/* An "<arch>.<suffix>" key into buf. */
static const char *akey(char *buf, size_t size, const char *arch, const char *suffix) {
    snprintf(buf, size, "%s.%s", arch, suffix);
    return buf;
}

/*
 * The rest of deepseek2's and glm4moe's keys, as their converters write them
 * (convert_hf_to_gguf.py's DeepseekV2Model and Glm4MoeModel): deepseek2's MLA heads as MQA with
 * one KV head of the latent + rotary key (key_length) and the latent (value_length), the real
 * head dims in key_length_mla / value_length_mla. One deviation: q_lora_rank 0 is written for a
 * query without compression (the converter omits the key), since llama.cpp reads it unless
 * the model has V2-Lite's 27 layers, so that cuts of V2-Lite load too.
 */
static enum moeinf_status add_hparams_ds(struct moeinf_gguf_writer *w,
                                         const struct moeinf_gen_params *p, uint32_t n_vocab,
                                         struct moeinf_error *err) {
    const enum gen_arch arch = arch_of(p);
    const bool ds = arch == ARCH_DEEPSEEK2;
    const char *an = arch_names[arch];
    char k[96];
#define U32(suffix, v)                                                                             \
    moeinf_gguf_writer_add_u32(w, akey(k, sizeof k, an, suffix), (uint32_t)(v), err)
#define F32(suffix, v) moeinf_gguf_writer_add_f32(w, akey(k, sizeof k, an, suffix), (v), err)
    U32("feed_forward_length", p->n_dense_lead > 0 ? p->n_ff_dense : p->n_ff);
    U32("expert_feed_forward_length", p->n_ff);
    U32("expert_shared_count", p->n_expert_shared);
    U32("leading_dense_block_count", p->n_dense_lead);
    U32("attention.head_count", p->n_head);
    if (ds) {
        U32("attention.head_count_kv", 1);
        U32("attention.q_lora_rank", p->q_lora_rank);
        U32("attention.kv_lora_rank", p->kv_lora_rank);
        U32("attention.key_length", p->kv_lora_rank + rot_dims(p));
        U32("attention.value_length", p->kv_lora_rank);
        U32("attention.key_length_mla", head_dim(p));
        U32("attention.value_length_mla", p->v_head_dim);
    } else {
        U32("attention.head_count_kv", p->n_head_kv);
        U32("attention.key_length", head_dim(p));
        U32("attention.value_length", head_dim(p));
        U32("nextn_predict_layers", p->n_nextn);
    }
    U32("rope.dimension_count", rot_dims(p));
    F32("rope.freq_base", p->rope_freq_base);
    if (ds && p->rope_yarn_factor > 1.0f) {
        moeinf_gguf_writer_add_str(w, akey(k, sizeof k, an, "rope.scaling.type"), "yarn", err);
        F32("rope.scaling.factor", p->rope_yarn_factor);
        U32("rope.scaling.original_context_length", p->rope_yarn_orig_ctx);
        F32("rope.scaling.yarn_log_multiplier", p->rope_yarn_log_mul);
    }
    F32("attention.layer_norm_rms_epsilon", p->rms_eps);
    U32("expert_count", p->n_expert);
    U32("expert_used_count", p->n_expert_used);
    F32("expert_weights_scale", p->expert_weights_scale);
    moeinf_gguf_writer_add_bool(w, akey(k, sizeof k, an, "expert_weights_norm"),
                                p->expert_weights_norm, err);
    if (p->expert_gating != 0) U32("expert_gating_func", p->expert_gating);
    if (p->n_expert_groups > 0) {
        U32("expert_group_count", p->n_expert_groups);
        U32("expert_group_used_count", p->n_group_used);
    }
    return U32("vocab_size", n_vocab);
#undef F32
#undef U32
}

static enum moeinf_status add_hparams(struct moeinf_gguf_writer *w,
                                      const struct moeinf_gen_params *p, uint32_t n_vocab,
                                      struct moeinf_error *err) {
    const enum gen_arch arch = arch_of(p);
    const char *an = arch_names[arch];
    char k[96];
#define U32(suffix, v)                                                                             \
    moeinf_gguf_writer_add_u32(w, akey(k, sizeof k, an, suffix), (uint32_t)(v), err)
    /* Errors are sticky in the writer: checking the last call checks them all. */
    moeinf_gguf_writer_add_str(w, "general.architecture", an, err);
    moeinf_gguf_writer_add_str(w, "general.name", "moeinf random MoE", err);
    moeinf_gguf_writer_add_u32(w, "general.file_type", moeinf_gen_file_type(p->type), err);
    moeinf_gguf_writer_add_u32(w, "general.quantization_version", 2, err);
    U32("context_length", p->n_ctx_train);
    U32("embedding_length", p->n_embd);
    U32("block_count", n_blocks(p));
    if (is_ds_family(arch)) return add_hparams_ds(w, p, n_vocab, err);
    /* feed_forward_length: the expert width for llama and olmoe; qwen2moe's converter writes
     * the shared expert's width there, qwen3moe's and the hybrid archs' a dense-equivalent
     * (top-k x expert: Qwen3-Next's config has intermediate_size 5120 = top-10 x 512);
     * llama.cpp reads the expert widths of the hybrid archs from the two keys below */
    const bool dense_equiv = arch == ARCH_QWEN3MOE || is_hybrid(arch);
    U32("feed_forward_length", arch == ARCH_QWEN2MOE ? p->n_expert_shared * p->n_ff
                               : dense_equiv         ? p->n_expert_used * p->n_ff
                                                     : p->n_ff);
    if (arch == ARCH_QWEN2MOE || dense_equiv || arch == ARCH_GPT_OSS) {
        U32("expert_feed_forward_length", p->n_ff);
    }
    if (has_shared_expert(arch)) {
        U32("expert_shared_feed_forward_length", p->n_expert_shared * p->n_ff);
    }
    U32("attention.head_count", p->n_head);
    U32("attention.head_count_kv", p->n_head_kv);
    U32("attention.key_length", head_dim(p));
    U32("attention.value_length", head_dim(p));
    /* gpt-oss's converter writes no rope.dimension_count (llama.cpp takes the head dim), but
     * the sliding window and YaRN's type, factor and original context (the betas are left to
     * llama.cpp's defaults, 32 and 1, which are gpt-oss's) */
    if (arch != ARCH_GPT_OSS) {
        U32("rope.dimension_count", is_hybrid(arch) ? rot_dims(p) : head_dim(p));
    } else {
        U32("attention.sliding_window", p->n_swa);
        moeinf_gguf_writer_add_str(w, akey(k, sizeof k, an, "rope.scaling.type"), "yarn", err);
        moeinf_gguf_writer_add_f32(w, akey(k, sizeof k, an, "rope.scaling.factor"),
                                   p->rope_yarn_factor, err);
        U32("rope.scaling.original_context_length", p->rope_yarn_orig_ctx);
    }
    if (is_hybrid(arch)) {
        U32("ssm.conv_kernel", p->ssm_d_conv);
        U32("ssm.state_size", p->ssm_d_state);
        U32("ssm.group_count", p->ssm_n_group);
        U32("ssm.time_step_rank", p->ssm_dt_rank);
        U32("ssm.inner_size", value_dim(p));
        U32("full_attention_interval", p->full_attn_interval);
    }
    if (arch == ARCH_QWEN35MOE) {
        int32_t sec[4];
        rope_sections(p, sec);
        moeinf_gguf_writer_add_arr(w, akey(k, sizeof k, an, "rope.dimension_sections"),
                                   MOEINF_GGUF_TYPE_INT32, sec, 4, err);
    }
    moeinf_gguf_writer_add_f32(w, akey(k, sizeof k, an, "rope.freq_base"), p->rope_freq_base, err);
    moeinf_gguf_writer_add_f32(w, akey(k, sizeof k, an, "attention.layer_norm_rms_epsilon"),
                               p->rms_eps, err);
    if (p->n_expert > 0) {
        U32("expert_count", p->n_expert);
        U32("expert_used_count", p->n_expert_used);
    }
    return U32("vocab_size", n_vocab);
#undef U32
}

/* gen-model's own vocabulary, padded to n_vocab tokens when that is larger. */
static enum moeinf_status build_own_vocab(struct vocab *v, int n_vocab, const char *path,
                                          struct moeinf_error *err) {
    if (!vocab_build(v)) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    if (n_vocab > 0 && (uint64_t)n_vocab < v->n) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "gen-model: vocabulary size %d is below the %" PRIu64
                           " tokens of gen-model's own vocabulary",
                           n_vocab, v->n);
    }
    if (!vocab_pad(v, (uint64_t)n_vocab)) {
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    return MOEINF_OK;
}

static enum moeinf_status add_own_vocab(struct moeinf_gguf_writer *w, const struct vocab *v,
                                        struct moeinf_error *err) {
    moeinf_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", err);
    moeinf_gguf_writer_add_str(w, "tokenizer.ggml.pre", "default", err);
    moeinf_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->text, NULL,
                                   v->n, err);
    moeinf_gguf_writer_add_arr(w, "tokenizer.ggml.scores", MOEINF_GGUF_TYPE_FLOAT32, v->scores,
                               v->n, err);
    moeinf_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", MOEINF_GGUF_TYPE_INT32, v->types,
                               v->n, err);
    moeinf_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, err);
    moeinf_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, err);
    moeinf_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0, err);
    moeinf_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true, err);
    return moeinf_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", false, err);
}

/* Copies every tokenizer.* entry of another GGUF; *n_vocab from its token list. */
static enum moeinf_status add_vocab_from(struct moeinf_gguf_writer *w, const char *path,
                                         uint32_t *n_vocab, struct moeinf_error *err) {
    struct moeinf_gguf *src = NULL;
    enum moeinf_status st = moeinf_gguf_open(path, &src, err);
    if (st) return st;
    const struct moeinf_gguf_kv *tokens = NULL;
    st = moeinf_gguf_get_arr(src, "tokenizer.ggml.tokens", MOEINF_GGUF_TYPE_STRING, &tokens, err);
    if (!st && (tokens->n_elem == 0 || tokens->n_elem > INT32_MAX)) {
        st = moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: %" PRIu64 " tokens", path, tokens->n_elem);
    }
    if (!st) {
        *n_vocab = (uint32_t)tokens->n_elem;
        for (uint64_t i = 0; i < src->n_kv && !st; i++) {
            const struct moeinf_gguf_str *k = &src->kv[i].key;
            if (k->len > 10 && memcmp(k->data, "tokenizer.", 10) == 0) {
                st = moeinf_gguf_writer_add_kv(w, &src->kv[i], err);
            }
        }
    }
    moeinf_gguf_free(src);
    return st;
}

/* ---- weights -------------------------------------------------------------------------- */

/* One chunk of rows of one tensor: generated, then converted to the tensor's type. Each
 * job is touched by one thread between pthread_create and pthread_join. */
struct job {
    const struct tplan *t;
    const struct zig *zig;
    const uint8_t *mx_codes; /* MXFP4 drawn directly (mx_table): the codes, or NULL */
    uint8_t mx_e;            /* and the tensor's E8M0 scale */
    uint64_t seed, tensor;
    int64_t chunk, row0, n_rows;
    float *x;   /* [cap_elems] */
    uint8_t *y; /* [cap_elems * 4] */
    size_t n_bytes;
};

/* The standard deviation of an INIT_NORMAL or INIT_EMBED tensor's weights. */
static double sigma_of(const struct tplan *t) {
    return t->kind == INIT_NORMAL ? t->scale / sqrt((double)t->ne[0]) : t->scale;
}

/*
 * MXFP4 without floats. Quantizing N(0, sigma) weights one at a time was nearly all of the
 * time of a gpt-oss-shaped file (its experts are 90 % of it). Instead the codes are drawn
 * directly, 16 random bits each, from the distribution that N(0, sigma) rounded to the
 * nearest E2M1 value has, under one E8M0 scale for the whole tensor: 2^(e-127) with
 * e = 127 + floor(log2(sigma / 1.5)), so that sigma is 1.5 to 3 E2M1 units and the largest
 * value, 6, is 2 to 4 standard deviations out (ggml's quantizer puts a block's maximum at 4 to
 * 8 units, and clips at 6). mx_table fills codes[65536]: bit 15 of a draw is the sign, the
 * low 15 bits pick the magnitude by its probability. Returns e.
 */
static uint8_t mx_table(double sigma, uint8_t codes[65536]) {
    static const double mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0}; /* E2M1 midpoints */
    int e = 127 + (int)floor(log2(sigma / 1.5));
    e = e < 1 ? 1 : e > 254 ? 254 : e;
    const double units = sigma / ldexp(1.0, e - 127); /* sigma in E2M1 units */
    uint32_t bound[8];
    for (int k = 0; k < 7; k++) /* P(|z| < mid / units) in 2^-15 steps */
        bound[k] = (uint32_t)lrint(erf(mid[k] / units / sqrt(2.0)) * 32768.0);
    bound[7] = 32768;
    int k = 0;
    for (uint32_t u = 0; u < 32768; u++) {
        while (u >= bound[k])
            k++;
        codes[u] = (uint8_t)k;
        codes[u | 32768] = (uint8_t)(k | 8); /* code 8 + k is -value[k] */
    }
    return (uint8_t)e;
}

/* A chunk of MXFP4 blocks from mx_table's codes: one 64-bit draw for two bytes of codes. */
static void gen_chunk_mxfp4(struct job *j, struct rng *r, int64_t n) {
    uint8_t *y = j->y;
    for (int64_t b = 0; b < n / 32; b++, y += sizeof(struct moeinf_block_mxfp4)) {
        y[0] = j->mx_e;
        for (int i = 0; i < 16; i += 2) {
            uint64_t u = rng_next(r);
            y[1 + i] = (uint8_t)(j->mx_codes[u & 0xffff] | j->mx_codes[(u >> 16) & 0xffff] << 4);
            y[2 + i] =
                (uint8_t)(j->mx_codes[(u >> 32) & 0xffff] | j->mx_codes[(u >> 48) & 0xffff] << 4);
        }
    }
    j->n_bytes = moeinf_row_bytes(MOEINF_TYPE_MXFP4, n);
}

static void gen_chunk(struct job *j) {
    const struct tplan *t = j->t;
    struct rng r;
    rng_seed(&r, j->seed, j->tensor, (uint64_t)j->chunk);
    int64_t ne0 = t->ne[0];
    int64_t n = j->n_rows * ne0;
    if (j->mx_codes) {
        gen_chunk_mxfp4(j, &r, n);
        return;
    }
    double sigma = sigma_of(t);
    for (int64_t i = 0; i < n; i++) {
        double z = rng_normal(&r, j->zig);
        double v = sigma * z;
        if (t->kind == INIT_NORM) v = t->scale * (1.0 + 0.1 * z);
        if (t->kind == INIT_NEG_LOGNORMAL) v = -exp(t->scale * z);
        j->x[i] = (float)v;
    }
    /* F32 copies, F16 rounds to nearest even, Q8_0/Q4_0 as llama-quantize does. */
    moeinf_quantize_row_ref((enum moeinf_type)t->type, j->x, j->y, n);
    j->n_bytes = moeinf_row_bytes((enum moeinf_type)t->type, n);
}

static void *gen_thread(void *arg) {
    gen_chunk(arg);
    return NULL;
}

/*
 * Writes one tensor: chunks of CHUNK_ELEMS (at least one row) are generated by up to
 * n_jobs threads at a time, then written in order by this thread. The chunking depends on
 * the shape only, never on the thread count, so the bytes do not either. Threads are
 * created per round and joined before the write; a round costs milliseconds of compute, so
 * the creation cost (tens of microseconds) is noise and no pool is needed.
 */
static enum moeinf_status write_tensor(struct moeinf_gguf_writer *w, struct job *jobs, int n_jobs,
                                       const struct tplan *t, uint64_t tensor, int64_t cap_elems,
                                       uint8_t *mx_codes, struct moeinf_error *err) {
    int64_t ne0 = t->ne[0];
    const bool direct =
        t->type == MOEINF_TYPE_MXFP4 && (t->kind == INIT_NORMAL || t->kind == INIT_EMBED);
    const uint8_t e = direct ? mx_table(sigma_of(t), mx_codes) : 0;
    for (int k = 0; k < n_jobs; k++) {
        jobs[k].mx_codes = direct ? mx_codes : NULL;
        jobs[k].mx_e = e;
    }
    int64_t rows = t->ne[1] * t->ne[2];
    int64_t chunk_rows = CHUNK_ELEMS / ne0 > 0 ? CHUNK_ELEMS / ne0 : 1;
    (void)cap_elems;
    assert(chunk_rows * ne0 <= cap_elems);
    int64_t n_chunks = (rows + chunk_rows - 1) / chunk_rows;
    for (int64_t c0 = 0; c0 < n_chunks; c0 += n_jobs) {
        int m = n_chunks - c0 < n_jobs ? (int)(n_chunks - c0) : n_jobs;
        pthread_t tid[MAX_THREADS];
        bool started[MAX_THREADS] = {false};
        for (int k = 0; k < m; k++) {
            struct job *j = &jobs[k];
            j->t = t;
            j->tensor = tensor;
            j->chunk = c0 + k;
            j->row0 = j->chunk * chunk_rows;
            j->n_rows = rows - j->row0 < chunk_rows ? rows - j->row0 : chunk_rows;
            if (k > 0) started[k] = pthread_create(&tid[k], NULL, gen_thread, j) == 0;
        }
        gen_chunk(&jobs[0]);
        for (int k = 1; k < m; k++) {
            if (started[k]) {
                pthread_join(tid[k], NULL);
            } else {
                gen_chunk(&jobs[k]); /* no thread to be had: do it here */
            }
        }
        for (int k = 0; k < m; k++) {
            enum moeinf_status st = moeinf_gguf_writer_write(w, jobs[k].y, jobs[k].n_bytes, err);
            if (st) return st;
        }
    }
    return MOEINF_OK;
}

/* Fails early, before hours of writing, when the file cannot fit on its filesystem. */
static enum moeinf_status check_space(const char *path, const struct moeinf_gguf_writer *w,
                                      uint64_t n_tensors, struct moeinf_error *err) {
    uint64_t need = 0;
    for (uint64_t i = 0; i < n_tensors; i++)
        need += moeinf_gguf_writer_tensor_bytes(w, i);
    char *copy = strdup(path);
    if (!copy) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    /* The folder part, cut in place (dirname() may use static storage). */
    char *slash = strrchr(copy, '/');
    const char *dir = ".";
    if (slash == copy) {
        dir = "/";
    } else if (slash) {
        *slash = '\0';
        dir = copy;
    }
    struct statvfs vfs;
    int rc = statvfs(dir, &vfs);
    free(copy);
    if (rc != 0) return MOEINF_OK; /* unknown: let the writes tell */
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (need > avail) {
        return moeinf_fail(err, MOEINF_ERR_IO,
                           "%s: the model needs %" PRIu64 " bytes, the filesystem has %" PRIu64
                           " free",
                           path, need, avail);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_gen_model_tensors(const struct moeinf_gen_params *p,
                                            void (*fn)(void *user, const char *name, int type,
                                                       int n_dims, const int64_t ne[3]),
                                            void *user, struct moeinf_error *err) {
    enum moeinf_status st = moeinf_gen_params_check(p, err);
    if (st) return st;
    uint32_t n_vocab = 0;
    if (p->vocab_from) {
        struct moeinf_gguf *src = NULL;
        const struct moeinf_gguf_kv *tokens = NULL;
        st = moeinf_gguf_open(p->vocab_from, &src, err);
        if (!st) {
            st = moeinf_gguf_get_arr(src, "tokenizer.ggml.tokens", MOEINF_GGUF_TYPE_STRING, &tokens,
                                     err);
        }
        if (!st) n_vocab = tokens->n_elem > UINT32_MAX ? UINT32_MAX : (uint32_t)tokens->n_elem;
        moeinf_gguf_free(src);
        if (st) return st;
    } else {
        struct vocab v = {0};
        st = build_own_vocab(&v, p->n_vocab, "gen-model", err);
        n_vocab = (uint32_t)v.n;
        vocab_free(&v);
        if (st) return st;
    }
    struct plan plan = {0};
    if (!plan_build(&plan, p, n_vocab)) {
        free(plan.t);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "gen-model: out of memory");
    }
    for (int i = 0; i < plan.n; i++)
        fn(user, plan.t[i].name, plan.t[i].type, plan.t[i].n_dims, plan.t[i].ne);
    free(plan.t);
    return MOEINF_OK;
}

static int thread_count(int requested) {
    long n = requested > 0 ? requested : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static enum moeinf_status gen_model(const struct moeinf_gen_params *p, const char *path,
                                    bool header_only, struct moeinf_error *err) {
    enum moeinf_status st = moeinf_gen_params_check(p, err);
    if (st) return st;
    struct moeinf_gguf_writer *w = NULL;
    struct vocab vocab = {0};
    struct plan plan = {0};
    struct zig *zig = NULL;
    uint8_t *mx_codes = NULL;
    struct job jobs[MAX_THREADS] = {0};
    int n_jobs = thread_count(p->n_threads);
    int n_alloc = 0;
    uint32_t n_vocab = 0;

    st = moeinf_gguf_writer_open(path, 32, &w, err);
    if (st) goto fail;
    if (p->vocab_from) {
        st = add_vocab_from(w, p->vocab_from, &n_vocab, err);
    } else {
        st = build_own_vocab(&vocab, p->n_vocab, path, err);
        if (!st) {
            n_vocab = (uint32_t)vocab.n;
            st = add_own_vocab(w, &vocab, err);
        }
    }
    if (st) goto fail;
    if ((st = add_hparams(w, p, n_vocab, err))) goto fail;
    if (!plan_build(&plan, p, n_vocab)) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    int64_t cap = CHUNK_ELEMS;
    for (int i = 0; i < plan.n; i++) {
        const struct tplan *t = &plan.t[i];
        if (t->ne[0] > cap) cap = t->ne[0];
        st = moeinf_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, err);
        if (st) goto fail;
    }
    if (header_only) {
        st = moeinf_gguf_writer_finish_header(w, err);
        goto fail;
    }
    if ((st = check_space(path, w, (uint64_t)plan.n, err))) goto fail;
    zig = malloc(sizeof *zig);
    mx_codes = malloc(65536);
    if (!zig || !mx_codes) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    zig_init(zig);
    for (; n_alloc < n_jobs; n_alloc++) {
        struct job *j = &jobs[n_alloc]; /* zeroed at its declaration */
        j->zig = zig;
        j->seed = p->seed;
        j->x = malloc((size_t)cap * sizeof *j->x);
        j->y = malloc((size_t)cap * 4); /* no type takes over 4 bytes per weight */
        if (!j->x || !j->y) {
            free(j->x);
            free(j->y);
            st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
            goto fail;
        }
    }
    for (int i = 0; i < plan.n; i++) {
        st = write_tensor(w, jobs, n_jobs, &plan.t[i], (uint64_t)i, cap, mx_codes, err);
        if (st) goto fail;
    }
    st = moeinf_gguf_writer_finish(w, err);

fail:
    moeinf_gguf_writer_free(w); /* removes the temp file unless finish succeeded */
    for (int i = 0; i < n_alloc; i++) {
        free(jobs[i].x);
        free(jobs[i].y);
    }
    free(zig);
    free(mx_codes);
    vocab_free(&vocab);
    free(plan.t);
    return st;
}

enum moeinf_status moeinf_gen_model(const struct moeinf_gen_params *p, const char *path,
                                    struct moeinf_error *err) {
    return gen_model(p, path, false, err);
}

enum moeinf_status moeinf_gen_model_header(const struct moeinf_gen_params *p, const char *path,
                                           struct moeinf_error *err) {
    return gen_model(p, path, true, err);
}
