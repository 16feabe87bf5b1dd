/*
 * sampler.c - picks the next token from one row of logits.
 *
 * The chain, in the order of llama.cpp's default sampler chain (common/sampling):
 *   1. repetition penalty over the last repeat_last_n accepted tokens: each distinct token in
 *      that window has its logit divided by the penalty if positive, multiplied if not;
 *   2. temp == 0: greedy argmax of the penalized logits, the lowest id winning exact ties;
 *   3. otherwise: top-k (keep the k highest), top-p (keep the shortest prefix of the
 *      descending list whose probability reaches top_p), min-p (keep tokens whose probability
 *      is at least min_p times the best one's), temperature (divide logits by temp), softmax,
 *      and a draw with the xoshiro256** generator held in the struct, seeded by
 *      splitmix64(seed). top-p and min-p see the probabilities before the temperature, as in
 *      llama.cpp.
 * Ties in the ordering are broken by the lower id, so results never depend on sort details.
 *
 * Cost per call: one copy of the row plus O(n_vocab log top_k) for the top-k selection (a
 * size-k min-heap, no full sort). Without top-k, min-p prefilters in O(n_vocab) before the
 * survivors are sorted; only with both top-k and min-p off is the whole row sorted. Every
 * buffer is allocated at init: nothing allocates per token.
 */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/status.h"
#include "moeinf.h"

struct cand {
    float logit;
    int32_t id;
};

struct moeinf_sampler {
    struct moeinf_sampler_params p;
    int n_vocab;
    float *logits;      /* [n_vocab] penalized copy of the row */
    struct cand *cands; /* [n_vocab] candidate list, descending after selection */
    double *probs;      /* [n_vocab] unnormalized weights of the candidates */
    uint32_t *stamp;    /* [n_vocab] window de-duplication marks */
    uint32_t stamp_gen; /* current mark */
    int32_t *history;   /* [repeat_last_n] ring of accepted tokens */
    int n_history;      /* tokens in the ring (<= repeat_last_n) */
    int history_pos;    /* next slot to write */
    uint64_t rng[4];    /* xoshiro256** state */
};

struct moeinf_sampler_params moeinf_sampler_params_default(void) {
    struct moeinf_sampler_params p;
    p.temp = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 0xC0FFEEu;
    return p;
}


/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) {
    return (double)(moeinf_xoshiro256ss(s) >> 11) * (1.0 / 9007199254740992.0);
}

void moeinf_sampler_free(struct moeinf_sampler *s) {
    if (!s) return;
    free(s->logits);
    free(s->cands);
    free(s->probs);
    free(s->stamp);
    free(s->history);
    free(s);
}

static enum moeinf_status check_params(const struct moeinf_sampler_params *p, int n_vocab,
                                       struct moeinf_error *err) {
    if (n_vocab <= 0) return moeinf_fail(err, MOEINF_ERR_ARG, "sampler: n_vocab %d", n_vocab);
    if (!(p->temp >= 0.0f) || isinf(p->temp))
        return moeinf_fail(err, MOEINF_ERR_ARG, "sampler: temp %g must be >= 0 and finite",
                           (double)p->temp);
    if (p->top_k < 0)
        return moeinf_fail(err, MOEINF_ERR_ARG, "sampler: top_k %d must be >= 0", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return moeinf_fail(err, MOEINF_ERR_ARG, "sampler: top_p %g must be in (0, 1]",
                           (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return moeinf_fail(err, MOEINF_ERR_ARG, "sampler: min_p %g must be in [0, 1]",
                           (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return moeinf_fail(err, MOEINF_ERR_ARG, "sampler: repeat_penalty %g must be > 0 and finite",
                           (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return moeinf_fail(err, MOEINF_ERR_ARG, "sampler: repeat_last_n %d must be >= 0",
                           p->repeat_last_n);
    return MOEINF_OK;
}

enum moeinf_status moeinf_sampler_init(const struct moeinf_sampler_params *params, int n_vocab,
                                       struct moeinf_sampler **out, struct moeinf_error *err) {
    struct moeinf_sampler_params p = params ? *params : moeinf_sampler_params_default();
    enum moeinf_status st = check_params(&p, n_vocab, err);
    if (st != MOEINF_OK) return st;

    struct moeinf_sampler *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->p = p;
    s->n_vocab = n_vocab;
    s->logits = malloc((size_t)n_vocab * sizeof *s->logits);
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
    s->stamp = calloc((size_t)n_vocab, sizeof *s->stamp);
    s->history = malloc((size_t)(p.repeat_last_n > 0 ? p.repeat_last_n : 1) * sizeof *s->history);
    if (!s->logits || !s->cands || !s->probs || !s->stamp || !s->history) goto nomem;
    uint64_t x = p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = moeinf_splitmix64(&x);
    *out = s;
    return MOEINF_OK;

nomem:
    moeinf_sampler_free(s);
    return moeinf_fail(err, MOEINF_ERR_NOMEM, "sampler: out of memory for %d tokens", n_vocab);
}

void moeinf_sampler_accept(struct moeinf_sampler *s, int32_t id) {
    /* Ids outside the vocabulary cannot be penalized; they are ignored. */
    if (!s || id < 0 || id >= s->n_vocab || s->p.repeat_last_n == 0) return;
    s->history[s->history_pos] = id;
    s->history_pos = (s->history_pos + 1) % s->p.repeat_last_n;
    if (s->n_history < s->p.repeat_last_n) s->n_history++;
}

/* A corrupt row must not break the ordering or the softmax: NaN counts as -inf, +inf as
 * the largest float. */
static float clean(float x) {
    if (isnan(x)) return -INFINITY;
    return x == INFINITY ? FLT_MAX : x;
}

/* a ranks before b: higher logit, then lower id. */
static int better(struct cand a, struct cand b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static int cmp_cand(const void *pa, const void *pb) {
    const struct cand *a = pa;
    const struct cand *b = pb;
    if (better(*a, *b)) return -1;
    if (better(*b, *a)) return 1;
    return 0;
}

static void penalize(struct moeinf_sampler *s) {
    if (s->p.repeat_penalty == 1.0f || s->n_history == 0) return;
    /* Each distinct token is penalized once however often it repeats (llama.cpp); the stamp
     * marks make that O(window) without clearing an n_vocab array per call. */
    if (++s->stamp_gen == 0) {
        memset(s->stamp, 0, (size_t)s->n_vocab * sizeof *s->stamp);
        s->stamp_gen = 1;
    }
    for (int i = 0; i < s->n_history; i++) {
        int32_t id = s->history[i];
        if (s->stamp[id] == s->stamp_gen) continue;
        s->stamp[id] = s->stamp_gen;
        float *l = &s->logits[id];
        *l = *l > 0.0f ? *l / s->p.repeat_penalty : *l * s->p.repeat_penalty;
    }
}

static void sift_down(struct cand *h, int n, int i) {
    /* Min-heap by rank: the root is the worst kept candidate. */
    for (;;) {
        int l = 2 * i + 1;
        int r = l + 1;
        int w = i;
        if (l < n && better(h[w], h[l])) w = l;
        if (r < n && better(h[w], h[r])) w = r;
        if (w == i) return;
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* The k best of the row into s->cands[0..k), descending. */
static int select_top_k(struct moeinf_sampler *s, int k) {
    struct cand *h = s->cands;
    for (int i = 0; i < k; i++)
        h[i] = (struct cand){s->logits[i], i};
    for (int i = k / 2 - 1; i >= 0; i--)
        sift_down(h, k, i);
    for (int i = k; i < s->n_vocab; i++) {
        struct cand c = {s->logits[i], i};
        if (better(c, h[0])) {
            h[0] = c;
            sift_down(h, k, 0);
        }
    }
    /* Heap sort in place: popping the worst to the end leaves the array descending. */
    for (int n = k; n > 1; n--) {
        struct cand t = h[0];
        h[0] = h[n - 1];
        h[n - 1] = t;
        sift_down(h, n - 1, 0);
    }
    return k;
}

int32_t moeinf_sampler_sample(struct moeinf_sampler *s, const float *logits) {
    const int n_vocab = s->n_vocab;
    for (int i = 0; i < n_vocab; i++)
        s->logits[i] = clean(logits[i]);
    penalize(s);

    if (s->p.temp == 0.0f) {
        int32_t best = 0;
        for (int i = 1; i < n_vocab; i++)
            if (s->logits[i] > s->logits[best]) best = i;
        return best;
    }

    /* Candidates, descending. */
    int n;
    double z_all = 0.0; /* normalizer over all candidates before the cut (top-p needs it) */
    float max_logit;
    if (s->p.top_k > 0 && s->p.top_k < n_vocab) {
        n = select_top_k(s, s->p.top_k);
        max_logit = s->cands[0].logit;
        if (max_logit == -INFINITY) return s->cands[0].id;
        for (int i = 0; i < n; i++)
            z_all += exp((double)s->cands[i].logit - max_logit);
    } else {
        max_logit = -INFINITY;
        int32_t best = 0;
        for (int i = 0; i < n_vocab; i++) {
            if (s->logits[i] > max_logit) {
                max_logit = s->logits[i];
                best = i;
            }
        }
        if (max_logit == -INFINITY) return best;
        for (int i = 0; i < n_vocab; i++)
            z_all += exp((double)s->logits[i] - max_logit);
        /* min-p keeps a prefix of the descending order and its threshold does not depend on
         * the normalizer, so filtering before sorting selects the same tokens. */
        float floor_logit = -INFINITY;
        if (s->p.min_p > 0.0f) floor_logit = max_logit + logf(s->p.min_p);
        n = 0;
        for (int i = 0; i < n_vocab; i++)
            if (s->logits[i] >= floor_logit) s->cands[n++] = (struct cand){s->logits[i], i};
        qsort(s->cands, (size_t)n, sizeof *s->cands, cmp_cand);
    }

    /* top-p on the probabilities of the candidate set as it stands (llama.cpp). */
    if (s->p.top_p < 1.0f) {
        double cum = 0.0;
        for (int i = 0; i < n; i++) {
            cum += exp((double)s->cands[i].logit - max_logit) / z_all;
            if (cum >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    /* min-p (a no-op after the prefilter above; needed after top-k). */
    if (s->p.min_p > 0.0f) {
        float floor_logit = max_logit + logf(s->p.min_p);
        int keep = 1;
        while (keep < n && s->cands[keep].logit >= floor_logit)
            keep++;
        n = keep;
    }
    assert(n >= 1);

    /* Temperature, softmax and the draw. */
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        double p = exp(((double)s->cands[i].logit - max_logit) / s->p.temp);
        s->probs[i] = p;
        total += p;
    }
    double u = rng_uniform(s->rng) * total;
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->probs[i];
        if (u < acc) return s->cands[i].id;
    }
    return s->cands[n - 1].id; /* u landed in the rounding slack at the top */
}
