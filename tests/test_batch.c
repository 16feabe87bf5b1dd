/*
 * test_batch.c - several sequences in one context (moeinf_decode_batch). A request's logits must
 * not depend on who else is in the batch: each request is first run alone in a context of one
 * sequence (its prompt in one call, then its continuation one token at a time, as `moeinf run`
 * does), then all of them together, interleaved as a continuous-batching server runs them:
 * prompts cut into chunks beside other requests' decode tokens, requests of different lengths
 * starting and finishing at different iterations, entries of different sequences mixed in one
 * batch, one sequence started over. Every kernel computes a row the same way whatever the other
 * rows, so every logits row must equal the lone run's bit for bit. The architectures cover
 * each kind of per-sequence state: a KV cache (qwen3moe, llama), a recurrent state with its
 * checkpoints (qwen35moe), sliding windows (gpt-oss), the latent cache (deepseek2), and the
 * expert cache (an offloaded llama model with a cache of a quarter of its experts).
 * It runs under each kernel table (the property is each table's). Also: the batch's checks
 * (positions, sequences, the per-sequence window) refuse without appending anything.
 */
// ctest-labels: kernels;threads
#include <stdlib.h>
#include <string.h>

#include "moeinf.h"
#include "test.h"

#define N_REQ    3
#define MAX_TOKS 24
#define N_SEQ    4
#define SEQ_CTX  32

/* Request r: its prompt, then the continuation fed one token at a time (fixed tokens, so that
 * the expectation does not depend on sampling). */
struct req {
    int n_prompt, n_total;
    int32_t ids[MAX_TOKS];
};

static void make_requests(struct req *rq, int n_vocab) {
    const int prompt[N_REQ] = {9, 4, 14};
    const int total[N_REQ] = {15, 16, 19};
    for (int r = 0; r < N_REQ; r++) {
        rq[r].n_prompt = prompt[r];
        rq[r].n_total = total[r];
        for (int i = 0; i < total[r]; i++)
            rq[r].ids[i] = (int32_t)((1 + 37 * r + 11 * i + (i * i) % 7) % n_vocab);
    }
}

struct setup {
    const char *rel; /* tests/data or models path under the source tree */
    bool offload;    /* experts through a cache of a quarter of them */
};

static struct moeinf_model *load(const struct setup *s) {
    char path[1024];
    test_src_path(s->rel, path, sizeof path);
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = s->offload;
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s: %s", s->rel, err.msg);
    return model;
}

static struct moeinf_context *context(struct moeinf_model *model, const struct setup *s, int n_seq,
                                      int n_batch) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = SEQ_CTX * n_seq;
    cp.n_seq = n_seq;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    if (s->offload) {
        cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
        cp.expert_cache.percent = 25.0;
        cp.expert_io_threads = 2;
    }
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s: %s", s->rel, err.msg);
    return ctx;
}

/* The lone runs: ref[r] holds request r's logits at every position. */
static bool lone_runs(struct moeinf_model *model, const struct setup *s, const struct req *rq,
                      float **ref, int n_vocab) {
    struct moeinf_context *ctx = context(model, s, 1, 64);
    if (!ctx) return false;
    struct moeinf_error err = {0};
    bool ok = true;
    for (int r = 0; r < N_REQ && ok; r++) {
        moeinf_context_reset(ctx);
        moeinf_context_request_end(ctx);
        ok = moeinf_decode(ctx, rq[r].ids, rq[r].n_prompt, ref[r], true, &err) == MOEINF_OK;
        for (int i = rq[r].n_prompt; i < rq[r].n_total && ok; i++) {
            ok = moeinf_decode(ctx, &rq[r].ids[i], 1, ref[r] + (size_t)i * n_vocab, false, &err) ==
                 MOEINF_OK;
        }
        CHECK_MSG(ok, "%s: lone run of request %d: %s", s->rel, r, err.msg);
    }
    moeinf_context_free(ctx);
    return ok;
}

/* The batched run. Request r runs in sequence seq_of[r]; it is admitted at iteration
 * start[r]; each iteration takes one decode token of every request past its prompt, then
 * prompt chunks of at most `chunk` tokens per request, until n_batch entries. The entries of
 * one iteration are added request by request, but with the decode tokens first, so sequences
 * interleave. Every entry asks for its logits, which must equal the lone run's row. */
static void batched_run(struct moeinf_model *model, const struct setup *s, const struct req *rq,
                        float *const *ref, int n_vocab) {
    const int n_batch = 8;
    const int chunk = 5;
    const int seq_of[N_REQ] = {2, 0, 3};
    const int start[N_REQ] = {0, 1, 3};
    struct moeinf_context *ctx = context(model, s, N_SEQ, n_batch);
    float *out = malloc((size_t)n_batch * (size_t)n_vocab * sizeof(float));
    CHECK(out != NULL);
    if (!ctx || !out) {
        moeinf_context_free(ctx);
        free(out);
        return;
    }
    int done[N_REQ] = {0}; /* tokens of request r evaluated */
    int32_t tok[8];
    int32_t pos[8];
    int32_t seq[8];
    int32_t who[8];
    bool want[8];
    struct moeinf_error err = {0};
    int mismatches = 0;
    for (int it = 0; it < 64; it++) {
        int n = 0;
        bool prompt_tokens = false;
        for (int pass = 0; pass < 2; pass++) { /* decode tokens, then prompt chunks */
            for (int r = 0; r < N_REQ; r++) {
                if (it < start[r] || done[r] >= rq[r].n_total) continue;
                const bool decoding = done[r] >= rq[r].n_prompt;
                if (decoding != (pass == 0)) continue;
                int take = decoding ? 1 : rq[r].n_prompt - done[r];
                if (take > chunk) take = chunk;
                if (take > n_batch - n) take = n_batch - n;
                for (int i = 0; i < take; i++) {
                    const int p = done[r] + i;
                    tok[n] = rq[r].ids[p];
                    pos[n] = p;
                    seq[n] = seq_of[r];
                    who[n] = r;
                    want[n] = true;
                    n++;
                }
                prompt_tokens |= !decoding && take > 0;
            }
        }
        if (n == 0) break;
        struct moeinf_batch b = {.n = n, .token = tok, .pos = pos, .seq = seq, .logits = want};
        enum moeinf_status st = moeinf_decode_batch(
            ctx, &b, prompt_tokens ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE, out, &err);
        CHECK_MSG(st == MOEINF_OK, "%s: iteration %d: %s", s->rel, it, err.msg);
        if (st != MOEINF_OK) break;
        for (int e = 0; e < n; e++) {
            const float *want_row = ref[who[e]] + (size_t)pos[e] * n_vocab;
            if (memcmp(out + (size_t)e * n_vocab, want_row, (size_t)n_vocab * sizeof(float)) != 0) {
                if (mismatches++ < 3) {
                    CHECK_MSG(false,
                              "%s: request %d position %d (iteration %d, %d entries): "
                              "logits differ from the lone run's",
                              s->rel, who[e], pos[e], it, n);
                }
            }
            done[who[e]]++;
        }
    }
    for (int r = 0; r < N_REQ; r++) {
        CHECK_EQ_INT(done[r], rq[r].n_total);
        CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, seq_of[r]), rq[r].n_total);
    }
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 1), 0); /* never used */
    /* Request 0 again in its sequence after a reset, beside request 1 continuing: the restarted
     * sequence computes what the lone run computed. */
    CHECK(moeinf_context_seq_reset(ctx, seq_of[0], &err) == MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, seq_of[0]), 0);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, seq_of[1]), rq[1].n_total);
    int n = 0;
    for (int p = 0; p < 5; p++, n++) {
        tok[n] = rq[0].ids[p];
        pos[n] = p;
        seq[n] = seq_of[0];
        want[n] = true;
    }
    CHECK(moeinf_decode_batch(
              ctx,
              &(struct moeinf_batch){.n = n, .token = tok, .pos = pos, .seq = seq, .logits = want},
              MOEINF_PHASE_PREFILL, out, &err) == MOEINF_OK);
    CHECK(memcmp(out, ref[0], (size_t)n * n_vocab * sizeof(float)) == 0);
    free(out);
    moeinf_context_free(ctx);
}

static void exact(const struct setup *s) {
    struct moeinf_model *model = load(s);
    if (!model) return;
    const int n_vocab = moeinf_model_n_vocab(model);
    struct req rq[N_REQ];
    make_requests(rq, n_vocab);
    float *ref[N_REQ] = {0};
    bool ok = true;
    for (int r = 0; r < N_REQ; r++) {
        ref[r] = malloc((size_t)MAX_TOKS * (size_t)n_vocab * sizeof(float));
        ok = ok && ref[r];
    }
    CHECK(ok);
    if (ok && lone_runs(model, s, rq, ref, n_vocab)) batched_run(model, s, rq, ref, n_vocab);
    for (int r = 0; r < N_REQ; r++)
        free(ref[r]);
    moeinf_model_free(model);
}

static void test_qwen3moe(void) {
    exact(&(struct setup){"tests/data/models/tiny-qwen3moe-F32.gguf", false});
}

static void test_qwen35moe_recurrent(void) {
    exact(&(struct setup){"tests/data/models/tiny-qwen35moe-Q4_K_M.gguf", false});
}

static void test_gptoss_windows(void) {
    exact(&(struct setup){"tests/data/models/tiny-gptoss-MXFP4.gguf", false});
}

static void test_deepseek2_latent(void) {
    exact(&(struct setup){"tests/data/models/tiny-deepseek2lite-Q4_K_M.gguf", false});
}

static void test_llama_offloaded(void) {
    exact(&(struct setup){"models/trained-moe-Q8_0.gguf", true});
}

/* The checks: nothing is appended to any sequence when one entry is wrong. */
static void test_refusals(void) {
    const struct setup s = {"tests/data/models/tiny-qwen3moe-F32.gguf", false};
    struct moeinf_model *model = load(&s);
    if (!model) return;
    struct moeinf_context *ctx = context(model, &s, 2, 8);
    if (!ctx) {
        moeinf_model_free(model);
        return;
    }
    struct moeinf_error err = {0};
    int32_t tok[4] = {1, 2, 3, 4};
    int32_t pos[4] = {0, 0, 1, 2};
    int32_t seq[4] = {0, 1, 1, 0};
    struct moeinf_batch b = {.n = 4, .token = tok, .pos = pos, .seq = seq};
    /* sequence 0's second entry is at position 2, not its next (1) */
    CHECK_EQ_INT(moeinf_decode_batch(ctx, &b, MOEINF_PHASE_PREFILL, NULL, &err), MOEINF_ERR_ARG);
    CHECK(strstr(err.msg, "entry 3") && strstr(err.msg, "not its next (1)"));
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 0), 0);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 1), 0);
    pos[3] = 1;
    seq[2] = 2;
    CHECK_EQ_INT(moeinf_decode_batch(ctx, &b, MOEINF_PHASE_PREFILL, NULL, &err), MOEINF_ERR_ARG);
    CHECK(strstr(err.msg, "sequence 2 is not in [0, 2)"));
    seq[2] = 1;
    CHECK_EQ_INT(moeinf_decode_batch(ctx, &b, MOEINF_PHASE_PREFILL, NULL, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 0), 2);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 1), 2);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), 2);
    CHECK_EQ_INT(moeinf_context_seq_n_ctx(ctx), SEQ_CTX);
    /* each sequence has SEQ_CTX positions of its own: filling sequence 1 leaves 0 as it was */
    int32_t many[8];
    int32_t mpos[8];
    int32_t mseq[8];
    int filled = 2;
    while (filled < SEQ_CTX) {
        int n = SEQ_CTX - filled < 8 ? SEQ_CTX - filled : 8;
        for (int i = 0; i < n; i++) {
            many[i] = 5 + i;
            mpos[i] = filled + i;
            mseq[i] = 1;
        }
        struct moeinf_batch f = {.n = n, .token = many, .pos = mpos, .seq = mseq};
        CHECK_EQ_INT(moeinf_decode_batch(ctx, &f, MOEINF_PHASE_PREFILL, NULL, &err), MOEINF_OK);
        filled += n;
    }
    struct moeinf_batch one = {.n = 1, .token = many, .pos = &(int32_t){SEQ_CTX}, .seq = mseq};
    CHECK_EQ_INT(moeinf_decode_batch(ctx, &one, MOEINF_PHASE_DECODE, NULL, &err),
                 MOEINF_ERR_CONTEXT);
    CHECK(strstr(err.msg, "sequence 1") != NULL);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 1), SEQ_CTX);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 0), 2);
    /* more entries than n_batch, a bad token, a sequence out of range in the helpers */
    struct moeinf_batch big = {.n = 9, .token = many, .pos = mpos, .seq = mseq};
    CHECK_EQ_INT(moeinf_decode_batch(ctx, &big, MOEINF_PHASE_DECODE, NULL, &err), MOEINF_ERR_ARG);
    int32_t bad = moeinf_model_n_vocab(model);
    struct moeinf_batch vb = {.n = 1, .token = &bad, .pos = &(int32_t){2}, .seq = &(int32_t){0}};
    CHECK_EQ_INT(moeinf_decode_batch(ctx, &vb, MOEINF_PHASE_DECODE, NULL, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 7), -1);
    CHECK_EQ_INT(moeinf_context_seq_truncate(ctx, 2, 0, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_context_seq_reset(ctx, -1, &err), MOEINF_ERR_ARG);
    /* reset forgets every sequence */
    moeinf_context_reset(ctx);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 0), 0);
    CHECK_EQ_INT(moeinf_context_seq_n_past(ctx, 1), 0);
    moeinf_context_free(ctx);
    /* n_seq: in range, and no more sequences than positions */
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_seq = 0;
    CHECK_EQ_INT(moeinf_context_params_check(&cp, NULL, &err), MOEINF_ERR_ARG);
    CHECK(strncmp(err.msg, "n_seq:", 6) == 0);
    cp.n_seq = 8;
    cp.n_ctx = 7;
    CHECK_EQ_INT(moeinf_context_params_check(&cp, NULL, &err), MOEINF_ERR_ARG);
    CHECK(strncmp(err.msg, "n_seq:", 6) == 0);
    moeinf_model_free(model);
}

int main(void) {
    RUN(test_qwen3moe);
    RUN(test_qwen35moe_recurrent);
    RUN(test_gptoss_windows);
    RUN(test_deepseek2_latent);
    RUN(test_llama_offloaded);
    RUN(test_refusals);
    return test_report();
}
