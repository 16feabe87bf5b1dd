/*
 * eam.h - Expert Activation Matrices (docs/CACHE_POLICY.md, PAPER.md): the running EAM of the
 * current request (rEAM), the bounded collection of past requests' EAMs (EAMC), PredictEAM,
 * and the EAMC file.
 *
 * An EAM is an n_layers x n_experts matrix of counts, stored flat by expert id
 * (id = layer * n_experts + expert, as in policy.h). A request's rEAM is two such matrices,
 * one for its prefill tokens and one for its decode tokens: the paper tracks the phases apart,
 * and so do we, in the collection too. Each EAMC entry is one finished request.
 *
 * Use (one request at a time, as the cache policies do):
 *
 *   moeinf_eamc_request_begin(c);
 *   per token:  moeinf_eamc_token_begin(c, phase);
 *               per routed expert: moeinf_eamc_record(c, id);
 *               moeinf_eamc_predict(c, n_match, p);   whenever a prediction is wanted
 *   moeinf_eamc_request_end(c);                       the rEAM joins the collection
 *
 * Matching is by cosine similarity between the current request's EAM and each entry's EAM of
 * the same phase. The dot products are kept up to date on every record (O(entries) per
 * expert use, a contiguous row: the collection is stored expert-major), so a prediction
 * costs O(entries + n_match x n_ids) and never rescans the collection.
 *
 * The EAMC file (version 1), all integers little-endian:
 *
 *   offset  size  field
 *   0       8     magic "MOEIEAMC"
 *   8       4     u32 version = 1
 *   12      4     u32 n_layers
 *   16      4     u32 n_experts
 *   20      4     u32 top_k
 *   24      4     u32 capacity       entries the collection may hold (1..MOEINF_EAMC_MAX_CAPACITY)
 *   28      4     u32 n_entries      entries that follow (<= capacity)
 *   32      ...   n_entries records, oldest slot first, each:
 *                   u32 prefill_tokens, u32 decode_tokens,
 *                   f32 prefill[n_ids], f32 decode[n_ids]   (finite, >= 0)
 *   end-8   8     u64 FNV-1a 64 of every byte before it
 *
 * Version 2 is version 1 with a policy's own learned state: after the 32 header bytes,
 *   32      16    policy name        the policy that wrote it (ASCII, NUL-padded, "reuse")
 *   48      8     u64 section_len    bytes of the policy's section
 *   56      ...   the records as above, then section_len bytes of the policy's section
 *   end-8   8     u64 FNV-1a 64 of every byte before it
 * The section's layout is the policy's (policy_reuse.c, policy_eam.c); a policy reads only a
 * version 2 file that names it (another policy's is MOEINF_EAMC_FOREIGN) or a version 1 file
 * (the collection alone, which every EAMC policy shares; its own tables then start empty).
 *
 * The file's size is fixed by its header, so a truncated or extended file is caught before
 * any record is parsed; a file is parsed into a new collection that replaces the old one only
 * when every check passed (never half-loaded). Writes go through moeinf_atomic_open/commit
 * (temp file, fsync, rename), so a crash leaves either the old file or the new one.
 */
#ifndef MOEINF_EXPERTS_EAM_H
#define MOEINF_EXPERTS_EAM_H

#include <stdint.h>
#include <stdio.h>

#include "experts/policy.h"
#include "moeinf.h"

/* Default capacity: a few hundred entries suffice in the paper (and in our measurements). */
#define MOEINF_EAMC_DEFAULT_CAPACITY 256
/* Bound on a file's capacity, so that a hostile header cannot ask for huge allocations. */
#define MOEINF_EAMC_MAX_CAPACITY 4096
/* Most entries one prediction sums. */
#define MOEINF_EAMC_MAX_MATCH 64

struct moeinf_eamc;

/* What is wrong with an EAMC file; the message of a failed load starts with the name. */
enum moeinf_eamc_defect {
    MOEINF_EAMC_OK = 0,
    MOEINF_EAMC_BAD_MAGIC,   /* not an EAMC file */
    MOEINF_EAMC_BAD_VERSION, /* a version this build does not read */
    MOEINF_EAMC_TRUNCATED,   /* shorter than its header says */
    MOEINF_EAMC_TRAILING,    /* longer than its header says */
    MOEINF_EAMC_BAD_HEADER,  /* capacity or entry count out of range */
    MOEINF_EAMC_CHECKSUM,    /* the bytes do not match the stored checksum */
    MOEINF_EAMC_BAD_VALUE,   /* a count that is negative, NaN or infinite */
    MOEINF_EAMC_GEOMETRY,    /* written for another model (layers, experts or top_k) */
    MOEINF_EAMC_FOREIGN,     /* version 2 written by another policy */
};

/* Bytes of the policy name field of a version 2 file (names are shorter: one NUL at least). */
#define MOEINF_EAMC_POLICY_NAME 16

const char *moeinf_eamc_defect_name(enum moeinf_eamc_defect d);

/* An empty collection of `capacity` entries (1..MOEINF_EAMC_MAX_CAPACITY) for this geometry
 * (geom->capacity, the cache size, is not used). */
enum moeinf_status moeinf_eamc_init(const struct moeinf_policy_geometry *geom, int capacity,
                                    struct moeinf_eamc **out, struct moeinf_error *err);
void moeinf_eamc_free(struct moeinf_eamc *c);

int moeinf_eamc_capacity(const struct moeinf_eamc *c);
/* Entries stored so far (<= capacity). */
int moeinf_eamc_size(const struct moeinf_eamc *c);
uint32_t moeinf_eamc_n_ids(const struct moeinf_eamc *c);

/* Starts a request: the current rEAM becomes empty. */
void moeinf_eamc_request_begin(struct moeinf_eamc *c);
/* Starts a token of the current request in `phase`. */
void moeinf_eamc_token_begin(struct moeinf_eamc *c, enum moeinf_phase phase);
/* Starts a micro-batch of n_tokens (>= 1) tokens of the current request in `phase`. */
void moeinf_eamc_tokens_begin(struct moeinf_eamc *c, enum moeinf_phase phase, int n_tokens);
/* The current token used expert `id` (< n_ids). */
void moeinf_eamc_record(struct moeinf_eamc *c, uint32_t id);
/* `count` tokens of the current micro-batch used expert `id`. */
void moeinf_eamc_record_n(struct moeinf_eamc *c, uint32_t id, uint32_t count);
/* Ends the request: a request with at least one token joins the collection, appended while
 * there is room, otherwise replacing the entry most similar to it (cosine over both phases;
 * the lowest slot on ties). */
void moeinf_eamc_request_end(struct moeinf_eamc *c);

/* The current request's counts in `phase` (n_ids values) and its tokens in that phase. */
const float *moeinf_eamc_current(const struct moeinf_eamc *c, enum moeinf_phase phase);
uint32_t moeinf_eamc_current_tokens(const struct moeinf_eamc *c, enum moeinf_phase phase);
/* Copies entry `i` (< size) in `phase` into out (n_ids counts). */
void moeinf_eamc_entry(const struct moeinf_eamc *c, int i, enum moeinf_phase phase, float *out);
uint32_t moeinf_eamc_entry_tokens(const struct moeinf_eamc *c, int i, enum moeinf_phase phase);

/*
 * PredictEAM for the current token's phase. Finds the n_match (>= 1) entries closest to the
 * current request (cosine over that phase; at the start of the decode phase, before any decode
 * token was recorded, the prefill EAMs are matched and the entries' decode EAMs predicted;
 * with nothing recorded yet, every entry matches), sums their EAMs of the phase cell by cell
 * and normalises each layer's row to sum 1 (a row with no counts becomes uniform, 1 / E).
 * Writes n_ids likelihoods into out; returns the number of entries used (0: the collection
 * is empty and out is uniform). The layer-proximity weight is the caller's
 * (moeinf_eam_proximity), since a row-normalised likelihood does not depend on it.
 */
int moeinf_eamc_predict(const struct moeinf_eamc *c, int n_match, float *out);

/* The two halves of moeinf_eamc_predict, for callers that cache predictions: the entries
 * matched (best first, at most n_match, clamped to MOEINF_EAMC_MAX_MATCH) written to ids and
 * their count (0: nothing to match with, the prediction then uses every entry); and the
 * prediction from such a match. */
int moeinf_eamc_match(const struct moeinf_eamc *c, int n_match, int *ids);
void moeinf_eamc_predict_matched(const struct moeinf_eamc *c, const int *ids, int n, float *out);
/* Phase of the current token. */
enum moeinf_phase moeinf_eamc_phase(const struct moeinf_eamc *c);

/* The paper's layer-proximity weight of layer `layer` seen from the current layer `current`,
 * 1 - d / n_layers, where d = (layer - current) mod n_layers is how many layer steps ahead
 * `layer` runs next (layers behind the current one run in the next token). */
double moeinf_eam_proximity(int layer, int current, int n_layers);

/* Writes the collection in the file format above to f (a stream, no atomicity). */
enum moeinf_status moeinf_eamc_write(const struct moeinf_eamc *c, FILE *f, const char *what,
                                     struct moeinf_error *err);
/*
 * Reads a collection from f (until its end) for this geometry; `what` names the file in
 * messages. A defect is MOEINF_ERR_FORMAT with the message "<what>: <defect name>: <detail>"
 * and *defect set (defect may be NULL); nothing is returned then. The collection gets the
 * file's capacity. The current request is empty.
 */
enum moeinf_status moeinf_eamc_read(const struct moeinf_policy_geometry *geom, FILE *f,
                                    const char *what, struct moeinf_eamc **out,
                                    enum moeinf_eamc_defect *defect, struct moeinf_error *err);

/* Version 2: the collection, then `len` bytes of `policy`'s own section. */
enum moeinf_status moeinf_eamc_write_policy(const struct moeinf_eamc *c, FILE *f, const char *what,
                                            const char *policy, const uint8_t *section, size_t len,
                                            struct moeinf_error *err);
/*
 * moeinf_eamc_read for `policy`: a version 2 file must name it (else MOEINF_EAMC_FOREIGN) and
 * hold a section of 0 or section_len bytes (else MOEINF_EAMC_BAD_HEADER); a non-empty section
 * comes back in *section (malloc'ed; NULL for a version 1 file or an empty section). Checks
 * run in this order: the bytes (magic, version, header, size, checksum), the policy, the
 * geometry, the counts. moeinf_eamc_read reads either version and ignores the section.
 */
enum moeinf_status moeinf_eamc_read_policy(const struct moeinf_policy_geometry *geom, FILE *f,
                                           const char *what, const char *policy,
                                           uint64_t section_len, struct moeinf_eamc **out,
                                           uint8_t **section, enum moeinf_eamc_defect *defect,
                                           struct moeinf_error *err);

/* Atomic save to `path`: temp file, fsync, rename; on failure `path` is untouched. */
enum moeinf_status moeinf_eamc_save(const struct moeinf_eamc *c, const char *path,
                                    struct moeinf_error *err);
/* moeinf_eamc_read from the file at `path` (MOEINF_ERR_IO if it cannot be opened). */
enum moeinf_status moeinf_eamc_load(const struct moeinf_policy_geometry *geom, const char *path,
                                    struct moeinf_eamc **out, enum moeinf_eamc_defect *defect,
                                    struct moeinf_error *err);

/*
 * A policy's saved state (its EAMC) at `path`, for `moeinf sim --eamc FILE` and the engine.
 * state_load: a missing file is no error (*loaded = false): the policy starts from an empty
 * collection, of `capacity` entries when capacity > 0 (else the policy's default); a file the
 * policy rejects leaves the policy as it was, and an existing file keeps its own capacity.
 * state_save writes atomically. Both: MOEINF_ERR_ARG when the policy keeps no state (no
 * save/load slots) or for a capacity out of range. Messages start with the path.
 */
enum moeinf_status moeinf_policy_state_load(struct moeinf_policy *p, const char *path, int capacity,
                                            bool *loaded, struct moeinf_error *err);
enum moeinf_status moeinf_policy_state_save(const struct moeinf_policy *p, const char *path,
                                            struct moeinf_error *err);

#endif
