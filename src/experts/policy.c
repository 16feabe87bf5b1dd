/* policy.c - the registry of online cache policies and policy creation by name. */
#include "experts/policy.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

/* Every online policy; a new one is added here (see policy.h). */
static const struct moeinf_policy_ops *const registry[] = {
    &moeinf_policy_lru,   &moeinf_policy_lfu,          &moeinf_policy_count,
    &moeinf_policy_reuse, &moeinf_policy_moe_infinity,
};

const struct moeinf_policy_ops *moeinf_policy_registry(size_t i) {
    return i < sizeof registry / sizeof registry[0] ? registry[i] : NULL;
}

const struct moeinf_policy_ops *moeinf_policy_find(const char *name) {
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        if (!strcmp(registry[i]->name, name)) return registry[i];
    }
    return NULL;
}

enum moeinf_status moeinf_policy_geometry_check(const struct moeinf_policy_geometry *geom,
                                                const char *what, struct moeinf_error *err) {
    if (geom->n_layers < 1 || geom->n_experts < 1) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: %d layers x %d experts: both must be >= 1",
                           what, geom->n_layers, geom->n_experts);
    }
    if ((uint64_t)geom->n_layers * (uint64_t)geom->n_experts > MOEINF_MAX_EXPERT_IDS) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: %d layers x %d experts exceeds %u experts",
                           what, geom->n_layers, geom->n_experts, MOEINF_MAX_EXPERT_IDS);
    }
    if (geom->top_k < 1 || geom->top_k > geom->n_experts) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: top_k %d is not in [1, n_experts %d]", what,
                           geom->top_k, geom->n_experts);
    }
    if (geom->capacity < geom->top_k) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "%s: a cache of %d experts is smaller than top_k %d: one layer's "
                           "experts must fit at once",
                           what, geom->capacity, geom->top_k);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_policy_create_ops(const struct moeinf_policy_ops *ops,
                                            const struct moeinf_policy_geometry *geom,
                                            struct moeinf_policy **out, struct moeinf_error *err) {
    enum moeinf_status st = moeinf_policy_geometry_check(geom, ops->name, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_policy *p = calloc(1, sizeof *p);
    if (!p) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy '%s': out of memory", ops->name);
    p->ops = ops;
    p->geom = *geom;
    st = ops->init(geom, &p->state, err);
    if (st != MOEINF_OK) {
        free(p);
        return st;
    }
    *out = p;
    return MOEINF_OK;
}

enum moeinf_status moeinf_policy_create(const char *name, const struct moeinf_policy_geometry *geom,
                                        struct moeinf_policy **out, struct moeinf_error *err) {
    const struct moeinf_policy_ops *ops = moeinf_policy_find(name);
    if (!ops) return moeinf_fail(err, MOEINF_ERR_ARG, "unknown cache policy '%s'", name);
    return moeinf_policy_create_ops(ops, geom, out, err);
}

void moeinf_policy_free(struct moeinf_policy *p) {
    if (!p) return;
    p->ops->free(p->state);
    free(p);
}
