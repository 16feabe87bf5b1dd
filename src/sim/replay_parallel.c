/*
 * replay_parallel.c - the simulator's replay of continuous batching (moeinf_sim_params.parallel
 * > 1): the trace's requests run as `moeinf serve --parallel N -b B` runs requests that all
 * arrive at once. They are admitted in trace order into N sequences; each iteration takes one
 * decode token of every sequence that generates (sequence order), then prompt tokens of the
 * sequences still reading their prompts, in admission order, up to B tokens (a prompt's last
 * chunk keeps at least 2 tokens where it can), and runs them as one forward iteration over
 * their distinct experts. A request's prompt is its leading P tokens; each later token is fed
 * one per iteration. The policy's request opens at the first iteration when none is open and
 * ends each time a request finishes, as the server ends it after each job. An iteration is
 * counted when all of its requests are past the warmup.
 */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "sim/replay_iter.h"
#include "trace/trace.h"

struct pslot {
    bool active;
    bool counted;
    uint64_t order; /* admission order */
    int32_t *toks;  /* (cap x row) the request's choices, prompt first */
    int cap, n_prompt, n_total, done;
};

struct preplay {
    struct replay *rp;
    struct moeinf_trace_reader *r;
    size_t row;
    struct moeinf_trace_token next; /* read ahead: the first token of the next request */
    bool have_next, eof;
    uint64_t requests; /* read so far */
    uint64_t admitted;
};

/* Reads the next request into s; false at the end of the trace. */
static enum moeinf_status read_request(struct preplay *pr, struct pslot *s, bool *got,
                                       struct moeinf_error *err) {
    *got = false;
    if (!pr->have_next && !pr->eof) {
        bool end = false;
        enum moeinf_status st = moeinf_trace_read(pr->r, &pr->next, &end, err);
        if (st != MOEINF_OK) return st;
        pr->eof = end;
        pr->have_next = !end;
    }
    if (!pr->have_next) return MOEINF_OK;
    s->n_prompt = 0;
    s->n_total = 0;
    s->done = 0;
    bool prompt = true;
    for (;;) {
        if (s->n_total == s->cap) {
            int cap = s->cap ? 2 * s->cap : 64;
            int32_t *t = realloc(s->toks, (size_t)cap * pr->row * sizeof *t);
            if (!t) return moeinf_fail(err, MOEINF_ERR_NOMEM, "simulator: out of memory");
            s->toks = t;
            s->cap = cap;
        }
        memcpy(s->toks + (size_t)s->n_total * pr->row, pr->next.experts, pr->row * sizeof *s->toks);
        prompt = prompt && pr->next.phase == MOEINF_PHASE_PREFILL;
        s->n_prompt += prompt;
        s->n_total++;
        bool end = false;
        enum moeinf_status st = moeinf_trace_read(pr->r, &pr->next, &end, err);
        if (st != MOEINF_OK) return st;
        if (end) {
            pr->eof = true;
            pr->have_next = false;
            break;
        }
        if (pr->next.request_begins) break;
    }
    s->counted = pr->requests++ >= (uint64_t)pr->rp->params->warmup_requests;
    s->active = true;
    s->order = pr->admitted++;
    pr->rp->res->requests += s->counted;
    *got = true;
    return MOEINF_OK;
}

/* Appends token i of slot s to the iteration's buffer. */
static void take(struct preplay *pr, const struct pslot *s, int i, int *m) {
    memcpy(pr->rp->pending + (size_t)*m * pr->row, s->toks + (size_t)i * pr->row,
           pr->row * sizeof *pr->rp->pending);
    (*m)++;
}

/* Builds one iteration into rp->pending, as the server's worker does; the tokens each slot
 * gives go into n_taken. Returns its size. */
static int compose(struct preplay *pr, struct pslot *slots, int n_slots, int *n_taken,
                   bool *prompt_tokens, bool *counted) {
    const int budget = pr->rp->batch;
    int m = 0;
    *prompt_tokens = false;
    *counted = true;
    for (int i = 0; i < n_slots; i++)
        n_taken[i] = 0;
    for (int i = 0; i < n_slots && m < budget; i++) {
        struct pslot *s = &slots[i];
        if (!s->active || s->done < s->n_prompt) continue;
        take(pr, s, s->done, &m);
        n_taken[i] = 1;
        *counted = *counted && s->counted;
    }
    for (;;) { /* prefill slots, oldest admission first */
        int pick = -1;
        for (int i = 0; i < n_slots; i++) {
            const struct pslot *s = &slots[i];
            if (!s->active || s->done >= s->n_prompt || n_taken[i] > 0) continue;
            if (pick < 0 || s->order < slots[pick].order) pick = i;
        }
        if (pick < 0 || m >= budget) break;
        struct pslot *s = &slots[pick];
        int left = s->n_prompt - s->done;
        int n = left < budget - m ? left : budget - m;
        if (left - n == 1 && n > 1) n--;
        for (int k = 0; k < n; k++)
            take(pr, s, s->done + k, &m);
        n_taken[pick] = n;
        *prompt_tokens = true;
        *counted = *counted && s->counted;
    }
    return m;
}

enum moeinf_status moeinf_replay_parallel(struct replay *rp, struct moeinf_trace_reader *r,
                                          struct moeinf_error *err) {
    const struct moeinf_policy_geometry *g = &rp->policy->geom;
    const int n_slots = rp->params->parallel;
    struct preplay pr = {.rp = rp, .r = r, .row = (size_t)g->n_layers * (size_t)g->top_k};
    struct pslot *slots = calloc((size_t)n_slots, sizeof *slots);
    int *n_taken = calloc((size_t)n_slots, sizeof *n_taken);
    if (!slots || !n_taken) {
        free(slots);
        free(n_taken);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "simulator: out of memory");
    }
    enum moeinf_status st = MOEINF_OK;
    bool in_request = false;
    uint64_t policy_requests = 0;
    while (st == MOEINF_OK) {
        for (int i = 0; i < n_slots && st == MOEINF_OK; i++) { /* FIFO admission */
            bool got = false;
            if (!slots[i].active) st = read_request(&pr, &slots[i], &got, err);
        }
        if (st != MOEINF_OK) break;
        bool prompt_tokens = false;
        bool counted = true;
        int m = compose(&pr, slots, n_slots, n_taken, &prompt_tokens, &counted);
        if (m == 0) break; /* every request done */
        if (!in_request) {
            moeinf_policy_request_begin(rp->policy, policy_requests++);
            in_request = true;
        }
        st = moeinf_replay_iteration(rp, rp->pending, m,
                                     prompt_tokens ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE,
                                     counted, err);
        for (int i = 0; i < n_slots && st == MOEINF_OK; i++) {
            struct pslot *s = &slots[i];
            s->done += n_taken[i];
            if (!s->active || s->done < s->n_total) continue;
            s->active = false;
            moeinf_policy_request_end(rp->policy);
            in_request = false;
        }
    }
    if (in_request) moeinf_policy_request_end(rp->policy);
    for (int i = 0; i < n_slots; i++)
        free(slots[i].toks);
    free(slots);
    free(n_taken);
    return st;
}
