/* resident.c - non-expert weights copied into anonymous memory (see resident.h). */
#include "model/resident.h"

#include <assert.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/status.h"

struct loader {
    struct moeinf_resident *r;
    const struct moeinf_gguf *g;
    struct moeinf_error *err;
    bool count_only; /* a first pass that only adds up `total` and the arena's size */
    uint64_t done, total;
    size_t used; /* bytes of r->arena handed out */
    const struct moeinf_progress *progress;
};

static uint64_t file_offset(const struct moeinf_gguf *g, const void *p) {
    return (uint64_t)((const uint8_t *)p - g->map.data);
}

/* A copy of n bytes at `src` (a pointer into g's mapping), read with pread: the mapping's
 * pages are never touched. */
static enum moeinf_status copy_out(struct loader *ld, const void *src, size_t n, void **out) {
    const size_t padded = n ? (n + 63) & ~(size_t)63 : 64;
    if (ld->count_only) {
        ld->total += n;
        ld->r->bytes += padded;
        *out = (void *)src;
        return MOEINF_OK;
    }
    uint8_t *p = ld->r->arena + ld->used;
    ld->used += padded;
    enum moeinf_status st =
        moeinf_file_pread(ld->g->map.fd, p, n, file_offset(ld->g, src), ld->g->path, ld->err);
    if (st != MOEINF_OK) return st;
    ld->done += n;
    moeinf_progress_report(ld->progress, ld->done, ld->total);
    *out = p;
    return MOEINF_OK;
}

static enum moeinf_status copy_weight(struct loader *ld, struct moeinf_weight *w) {
    /* only the routed experts are strided views (model.h), and those are not copied */
    assert(w->mat_stride == w->mat_bytes);
    void *p = NULL;
    enum moeinf_status st = copy_out(ld, w->data, w->mat_bytes * (size_t)w->n_mat, &p);
    if (st == MOEINF_OK) w->data = p;
    return st;
}

static enum moeinf_status copy_vec(struct loader *ld, const float **v, size_t bytes) {
    void *p = NULL;
    enum moeinf_status st = copy_out(ld, *v, bytes, &p);
    if (st == MOEINF_OK) *v = p;
    return st;
}

static void take_experts(const struct moeinf_gguf *g, struct moeinf_layer *lw,
                         struct moeinf_store_layer *out) {
    struct moeinf_weight *parts[MOEINF_EXPERT_PARTS] = {&lw->gate_exps, &lw->up_exps,
                                                        &lw->down_exps};
    for (int p = 0; p < MOEINF_EXPERT_PARTS; p++) {
        out->off[p] = file_offset(g, parts[p]->data);
        out->stride[p] = parts[p]->mat_stride;
        out->bytes[p] = parts[p]->mat_bytes;
        parts[p]->data = NULL; /* from now on only through the expert cache */
    }
}

/* Every weight the model bound but the routed experts, rebound to its copy, and the experts'
 * extents into r. On the counting pass (ld->count_only) nothing is read or rebound: copy_out
 * only adds up the bytes and hands back the same pointers. */
static enum moeinf_status copy_all(struct loader *ld, struct moeinf_llm *llm,
                                   struct moeinf_resident *r) {
    const bool tied = llm->output.data == llm->tok_embd.data;
    enum moeinf_status st = MOEINF_OK;
    for (int i = 0; st == MOEINF_OK && i < llm->n_bound; i++) {
        const struct moeinf_bound *b = &llm->bound[i];
        if (b->expert) continue;
        if (b->w) {
            st = copy_weight(ld, b->w);
        } else {
            st = copy_vec(ld, b->v, b->bytes);
        }
    }
    if (st != MOEINF_OK) return st;
    if (tied) llm->output.data = llm->tok_embd.data;
    for (int il = 0; !ld->count_only && il < llm->hp.n_layer; il++) {
        if (llm->layers[il].ffn == MOEINF_FFN_MOE)
            take_experts(ld->g, &llm->layers[il], &r->experts[il]);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_resident_load(struct moeinf_llm *llm, const struct moeinf_gguf *g,
                                        const struct moeinf_progress *progress,
                                        struct moeinf_resident **out, struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &llm->hp;
    if (hp->n_expert == 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "offload_experts: %s is a dense model, it has no routed experts to "
                           "offload",
                           g->path);
    }
    if (!g->map.data || g->map.fd < 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: offloading experts needs the file itself",
                           g->path);
    }
    struct moeinf_resident *r = calloc(1, sizeof *r);
    if (r) r->experts = calloc((size_t)hp->n_layer, sizeof *r->experts);
    if (!r || !r->experts) {
        moeinf_resident_free(r);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", g->path);
    }
    struct loader ld = {.r = r, .g = g, .err = err, .count_only = true, .progress = progress};
    enum moeinf_status st = copy_all(&ld, llm, r); /* the sizes */
    if (st == MOEINF_OK) {
        r->arena = moeinf_huge_alloc((size_t)r->bytes);
        if (!r->arena) {
            st = moeinf_fail(err, MOEINF_ERR_NOMEM,
                             "%s: out of memory for %llu MiB of resident weights", g->path,
                             (unsigned long long)(r->bytes >> 20));
        }
    }
    ld.count_only = false;
    if (st == MOEINF_OK) st = copy_all(&ld, llm, r);
    if (st != MOEINF_OK) {
        moeinf_resident_free(r);
        return st;
    }
    /* The copies were read through the page cache: let it go. */
    (void)posix_fadvise(g->map.fd, 0, 0, POSIX_FADV_DONTNEED);
    *out = r;
    return MOEINF_OK;
}

void moeinf_resident_free(struct moeinf_resident *r) {
    if (!r) return;
    moeinf_huge_free(r->arena, (size_t)r->bytes);
    free(r->experts);
    free(r);
}
