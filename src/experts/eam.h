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
 * The EAMC file (version 3), all integers little-endian:
 *
 *   offset  size  field
 *   0       8     magic "MOEIEAMC"
 *   8       4     u32 version = 3
 *   12      4     u32 n_layers
 *   16      4     u32 n_experts
 *   20      4     u32 top_k
 *   24      4     u32 capacity       entries the collection may hold (1..MOEINF_EAMC_MAX_CAPACITY)
 *   28      4     u32 n_entries      entries that follow (<= capacity)
 *   32      4     u32 model kind     whose routing this is (enum moeinf_model_id_kind, 0..2)
 *   36      4     u32 0
 *   40      8     u64 model hash
 *   48      48    model name         a label for messages (printable ASCII, NUL-padded)
 *   96      16    policy name        the policy that wrote it (ASCII, NUL-padded, "reuse");
 *                                    all NUL: the collection alone (moeinf_eamc_write)
 *   112     8     u64 section_len    bytes of the policy's section (0 with no policy name)
 *   120     ...   n_entries records, oldest slot first, each:
 *                   u32 prefill_tokens, u32 decode_tokens,
 *                   f32 prefill[n_ids], f32 decode[n_ids]   (finite, >= 0)
 *           ...   section_len bytes of the policy's section
 *   end-8   8     u64 FNV-1a 64 of every byte before it
 *
 * The section's layout is the policy's (policy_reuse.c, policy_eam.c); a policy reads only a
 * file that names it (another policy's is MOEINF_EAMC_FOREIGN) or names no policy (the
 * collection alone, which every EAMC policy shares; its own tables then start empty).
 *
 * The model. What a policy learned is about one model's routing, and another model of the
 * same geometry (a fine-tune, another model of that shape) routes differently, so a file names
 * its model and a reader refuses another model's (MOEINF_EAMC_MODEL, naming both). The
 * identity is the policy geometry's `model` (policy.h):
 *   - the engine's (MOEINF_MODEL_ID_ROUTERS): an FNV-1a 64 hash of the geometry and of every
 *     MoE layer's router weights, computed once when the model loads with offloaded experts
 *     (engine_model.c). The routers are what choose the experts; they are resident already
 *     (no expert weight is read for it), and quantizing a model leaves them F32, so two
 *     quantizations of one model share their state while a retrained router does not. A hash
 *     of the tensor table (names, types, shapes, offsets) would be cheaper still, but it is the
 *     same for every fine-tune of a base model and differs between its quantizations;
 *   - the simulator's (`moeinf sim --eamc`), from its trace: a trace recorded by the engine
 *     (`run --record-routing`) carries "# model_id: HEX", the recording model's hash, and the
 *     simulator's file then has that identity (the engine reads it as its own); a trace that
 *     names no model_id gives MOEINF_MODEL_ID_TRACE with the hash of its "model" line, which no
 *     engine model matches: the engine refuses it, and the message gives the engine's id, which
 *     a "# model_id:" line added to the trace's header would claim;
 *   - MOEINF_MODEL_ID_NONE: a reader with no identity (tests, tools) checks none, and takes
 *     the file's.
 * Versions 1 and 2 named no model; they are refused (MOEINF_EAMC_BAD_VERSION) rather than
 * taken on geometry alone: the learned state is relearned in a few dozen requests.
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
    MOEINF_EAMC_FOREIGN,     /* written by another policy */
    MOEINF_EAMC_MODEL,       /* written for another model of the same geometry */
};

/* Bytes of the policy name field of the file (names are shorter: one NUL at least). */
#define MOEINF_EAMC_POLICY_NAME 16

const char *moeinf_eamc_defect_name(enum moeinf_eamc_defect d);

/* An empty collection of `capacity` entries (1..MOEINF_EAMC_MAX_CAPACITY) for this geometry
 * and its model (geom->capacity, the cache size, is not used). */
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

/* Writes the collection in the file format above, with no policy, to f (a stream, no
 * atomicity). */
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

/* The collection, then `len` bytes of `policy`'s own section. */
enum moeinf_status moeinf_eamc_write_policy(const struct moeinf_eamc *c, FILE *f, const char *what,
                                            const char *policy, const uint8_t *section, size_t len,
                                            struct moeinf_error *err);
/*
 * moeinf_eamc_read for `policy`: a file that names a policy must name this one (else
 * MOEINF_EAMC_FOREIGN) and hold a section of 0 or section_len bytes (else
 * MOEINF_EAMC_BAD_HEADER); a non-empty section comes back in *section (malloc'ed; NULL for a
 * file with no policy or an empty section). Checks run in this order: the bytes (magic,
 * version, header, size, checksum), the policy, the geometry, the model (unless geom->model is
 * MOEINF_MODEL_ID_NONE), the counts. moeinf_eamc_read reads any policy's file and ignores the
 * section.
 */
enum moeinf_status moeinf_eamc_read_policy(const struct moeinf_policy_geometry *geom, FILE *f,
                                           const char *what, const char *policy,
                                           uint64_t section_len, struct moeinf_eamc **out,
                                           uint8_t **section, enum moeinf_eamc_defect *defect,
                                           struct moeinf_error *err);

/* The identity of a trace's routing (moeinf sim's): the trace's model_id when its header
 * has one (has_id), else MOEINF_MODEL_ID_TRACE with the FNV-1a 64 hash of `name`, its model
 * line ("" when absent), which is also the label. */
void moeinf_model_id_for_trace(const char *name, bool has_id, uint64_t id,
                               struct moeinf_model_id *out);
/* Sets out->name from `name` (NULL: empty): at most MOEINF_MODEL_NAME_BYTES - 1 bytes, each
 * byte outside printable ASCII written as '?'. */
void moeinf_model_id_set_name(struct moeinf_model_id *out, const char *name);

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
