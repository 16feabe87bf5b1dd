/* cache.c - expert slots, residency index, pins, and the access protocol (see cache.h). */
#include "experts/cache.h"

#include <assert.h>
#include <stdlib.h>

#include "base/status.h"

struct moeinf_cache {
    int capacity;
    int n_resident;
    int n_pinned_resident; /* resident experts with a pin: the ones that cannot be victims */
    uint32_t n_ids;        /* n_layers * n_experts */
    int32_t *slot_of;      /* (n_ids) slot holding each expert, -1 when absent */
    uint16_t *pins;        /* (n_ids) pin count */
    uint8_t *prefetched;   /* (n_ids) 1 while a prefetched expert awaits its first demand */
    uint32_t *id_of;       /* (capacity) expert in each slot, MOEINF_EXPERT_NONE when free */
    int32_t *free_slots;   /* (capacity) stack of free slots */
    int n_free;
};

enum moeinf_status moeinf_cache_init(const struct moeinf_policy_geometry *geom,
                                     struct moeinf_cache **out, struct moeinf_error *err) {
    enum moeinf_status st = moeinf_policy_geometry_check(geom, "cache", err);
    if (st != MOEINF_OK) return st;
    struct moeinf_cache *c = calloc(1, sizeof *c);
    if (!c) goto fail;
    c->capacity = geom->capacity;
    c->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    c->slot_of = malloc(c->n_ids * sizeof *c->slot_of);
    c->pins = calloc(c->n_ids, sizeof *c->pins);
    c->prefetched = calloc(c->n_ids, sizeof *c->prefetched);
    c->id_of = malloc((size_t)c->capacity * sizeof *c->id_of);
    c->free_slots = malloc((size_t)c->capacity * sizeof *c->free_slots);
    if (!c->slot_of || !c->pins || !c->prefetched || !c->id_of || !c->free_slots) goto fail;
    for (uint32_t i = 0; i < c->n_ids; i++)
        c->slot_of[i] = -1;
    for (int s = 0; s < c->capacity; s++) {
        c->id_of[s] = MOEINF_EXPERT_NONE;
        /* Lowest slot on top, so that slots fill in order 0, 1, 2, ... */
        c->free_slots[s] = c->capacity - 1 - s;
    }
    c->n_free = c->capacity;
    *out = c;
    return MOEINF_OK;
fail:
    moeinf_cache_free(c);
    return moeinf_fail(err, MOEINF_ERR_NOMEM, "cache of %d experts: out of memory", geom->capacity);
}

void moeinf_cache_free(struct moeinf_cache *c) {
    if (!c) return;
    free(c->slot_of);
    free(c->pins);
    free(c->prefetched);
    free(c->id_of);
    free(c->free_slots);
    free(c);
}

int moeinf_cache_capacity(const struct moeinf_cache *c) {
    return c->capacity;
}

int moeinf_cache_slot(const struct moeinf_cache *c, uint32_t id) {
    return id < c->n_ids ? c->slot_of[id] : -1;
}

bool moeinf_cache_is_resident(const struct moeinf_cache *c, uint32_t id) {
    return id < c->n_ids && c->slot_of[id] >= 0;
}

uint32_t moeinf_cache_slot_expert(const struct moeinf_cache *c, int slot) {
    return slot >= 0 && slot < c->capacity ? c->id_of[slot] : MOEINF_EXPERT_NONE;
}

bool moeinf_cache_is_prefetched(const struct moeinf_cache *c, uint32_t id) {
    return id < c->n_ids && c->prefetched[id];
}

void moeinf_cache_pin(struct moeinf_cache *c, uint32_t id) {
    assert(id < c->n_ids);
    assert(c->pins[id] < UINT16_MAX);
    if (c->pins[id]++ == 0 && c->slot_of[id] >= 0) c->n_pinned_resident++;
}

void moeinf_cache_unpin(struct moeinf_cache *c, uint32_t id) {
    assert(id < c->n_ids);
    assert(c->pins[id] > 0);
    if (--c->pins[id] == 0 && c->slot_of[id] >= 0) c->n_pinned_resident--;
}

bool moeinf_cache_is_pinned(const struct moeinf_cache *c, uint32_t id) {
    return id < c->n_ids && c->pins[id] > 0;
}

void moeinf_cache_step_begin(struct moeinf_cache *c, struct moeinf_policy *p, int layer,
                             const uint32_t *ids, int n) {
    for (int i = 0; i < n; i++)
        moeinf_cache_pin(c, ids[i]);
    moeinf_policy_step_begin(p, layer, ids, NULL, n);
}

void moeinf_cache_step_end(struct moeinf_cache *c, struct moeinf_policy *p, int layer,
                           const uint32_t *ids, int n) {
    for (int i = 0; i < n; i++)
        moeinf_cache_unpin(c, ids[i]);
    moeinf_policy_step_end(p, layer);
}

/* Frees one slot through the policy's victim; the caller checked that one can be evicted. */
static enum moeinf_status evict_one(struct moeinf_cache *c, struct moeinf_policy *p,
                                    struct moeinf_cache_event *ev, struct moeinf_error *err) {
    uint32_t victim = p->ops->choose_victim(p->state, c);
    if (victim >= c->n_ids || c->slot_of[victim] < 0 || c->pins[victim] > 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "policy '%s' chose expert %u as victim, which is %s", p->ops->name,
                           (unsigned)victim,
                           victim >= c->n_ids       ? "out of range"
                           : c->slot_of[victim] < 0 ? "not resident"
                                                    : "pinned");
    }
    int slot = c->slot_of[victim];
    c->slot_of[victim] = -1;
    c->id_of[slot] = MOEINF_EXPERT_NONE;
    c->free_slots[c->n_free++] = slot;
    c->n_resident--;
    ev->evicted = victim;
    ev->evicted_unused_prefetch = c->prefetched[victim] != 0;
    c->prefetched[victim] = 0;
    p->ops->on_evict(p->state, victim);
    return MOEINF_OK;
}

static void admit(struct moeinf_cache *c, struct moeinf_policy *p, uint32_t id, bool prefetch,
                  struct moeinf_cache_event *ev) {
    assert(c->n_free > 0);
    int slot = c->free_slots[--c->n_free];
    c->slot_of[id] = slot;
    c->id_of[slot] = id;
    c->n_resident++;
    if (c->pins[id] > 0) c->n_pinned_resident++;
    c->prefetched[id] = prefetch;
    ev->admitted = true;
    ev->slot = slot;
    p->ops->on_admit(p->state, id, prefetch);
}

static void event_clear(struct moeinf_cache_event *ev) {
    ev->hit = false;
    ev->prefetch_hit = false;
    ev->admitted = false;
    ev->slot = -1;
    ev->evicted = MOEINF_EXPERT_NONE;
    ev->evicted_unused_prefetch = false;
}

enum moeinf_status moeinf_cache_access(struct moeinf_cache *c, struct moeinf_policy *p, uint32_t id,
                                       struct moeinf_cache_event *ev, struct moeinf_error *err) {
    event_clear(ev);
    if (id >= c->n_ids) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "cache access: expert id %u out of range (%u)",
                           (unsigned)id, (unsigned)c->n_ids);
    }
    if (c->slot_of[id] >= 0) {
        ev->hit = true;
        ev->slot = c->slot_of[id];
        ev->prefetch_hit = c->prefetched[id] != 0;
        c->prefetched[id] = 0;
        p->ops->on_access(p->state, id, true);
        return MOEINF_OK;
    }
    if (c->n_free == 0) {
        if (c->n_pinned_resident >= c->n_resident) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "cache access: all %d resident experts are pinned", c->n_resident);
        }
        enum moeinf_status st = evict_one(c, p, ev, err);
        if (st != MOEINF_OK) return st;
    }
    admit(c, p, id, false, ev);
    p->ops->on_access(p->state, id, false);
    return MOEINF_OK;
}

enum moeinf_status moeinf_cache_prefetch(struct moeinf_cache *c, struct moeinf_policy *p,
                                         uint32_t id, struct moeinf_cache_event *ev,
                                         struct moeinf_error *err) {
    event_clear(ev);
    if (id >= c->n_ids) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "cache prefetch: expert id %u out of range (%u)",
                           (unsigned)id, (unsigned)c->n_ids);
    }
    if (c->slot_of[id] >= 0) {
        ev->hit = true;
        ev->slot = c->slot_of[id];
        return MOEINF_OK;
    }
    if (c->n_free == 0) {
        if (c->n_pinned_resident >= c->n_resident) return MOEINF_OK; /* nothing may go */
        enum moeinf_status st = evict_one(c, p, ev, err);
        if (st != MOEINF_OK) return st;
    }
    admit(c, p, id, true, ev);
    return MOEINF_OK;
}

void moeinf_cache_drop(struct moeinf_cache *c, struct moeinf_policy *p, uint32_t id) {
    if (id >= c->n_ids || c->slot_of[id] < 0) return;
    int slot = c->slot_of[id];
    if (c->pins[id] > 0) c->n_pinned_resident--;
    c->slot_of[id] = -1;
    c->id_of[slot] = MOEINF_EXPERT_NONE;
    c->free_slots[c->n_free++] = slot;
    c->n_resident--;
    c->prefetched[id] = 0;
    p->ops->on_evict(p->state, id);
}
