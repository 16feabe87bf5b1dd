/*
 * trace.h - reading and writing expert-routing traces in the text format "moe-trace v1".
 *
 * A trace records which experts the router of each MoE layer chose for each token, request by
 * request. The format (one '\n'-terminated line at a time; a final '\r' is tolerated):
 *
 * 1. Magic line: "# moe-trace v1".
 * 2. Header lines, each starting with '#', all before the first token line:
 *    - "# <key>: <value>", key of [a-z0-9_], each key at most once. Required:
 *        n_layers   MoE layers L in each token line (1..MOEINF_MAX_EXPERT_IDS / n_experts)
 *        n_experts  routed experts per layer E, ids 0..E-1
 *        top_k      experts per token per layer K (1..E)
 *      Checked against the file at its end when present:
 *        n_requests, n_tokens, n_prefill_tokens, n_decode_tokens
 *      Kept as text: model. Kept as a number: model_id, 1 to 16 hex digits, the identity of
 *      the model that recorded it (the engine writes it; experts/eam.h). Any other key is
 *      provenance and is skipped.
 *    - "# req <request_id> <tag> prefill=<n> decode=<n>", one per request in file order
 *      (optional; when present, there is exactly one per request, in the same order, and
 *      each request's token lines must agree with its counts). tag has no spaces.
 * 3. Token lines, exactly four fields separated by single spaces:
 *        <request_id> <phase> <token_index> <experts>
 *    - request_id: decimal, >= 0. The lines of one request are contiguous and ids increase
 *      from request to request.
 *    - phase: P (prompt / prefill forward pass) or D (one decode step); within a request
 *      all P lines come first.
 *    - token_index: 0, 1, 2, ... within the request.
 *    - experts: L groups separated by '|', group i for MoE layer i; a group is K distinct
 *      expert ids in [0, E) separated by ','. Example (L = 3, K = 2): "4,17|0,9|63,2".
 *    A token line longer than 256 + L x K x (digits(E - 1) + 1) bytes is rejected (so the
 *    reader's memory is bounded by the geometry), as is a header line over 4096 bytes.
 *
 * Replay order for a cache study: requests in file order, tokens in file order, layers
 * 0..L-1, and inside a layer the listed experts in order.
 *
 * The reader streams: memory is O(line length + E), whatever the file's size. Every defect
 * is a MOEINF_ERR_FORMAT whose message is "<path>:<line>: <defect name>: <detail>"; the
 * defect itself is available as an enum for tests and tools.
 *
 * src/trace/ holds the format (this header: trace.c reads, trace_write.c writes) and the trace
 * tools built on the reader alone (trace_tools.h); its users are the simulator (src/sim), the
 * engine, which records and replays routing, and the CLI's `moeinf trace`. It depends on
 * base/ and, for MOEINF_MAX_EXPERT_IDS, experts/policy.h.
 */
#ifndef MOEINF_TRACE_TRACE_H
#define MOEINF_TRACE_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/policy.h"
#include "moeinf.h"

#define MOEINF_TRACE_MAX_HEADER_LINE 4096

enum moeinf_trace_defect {
    MOEINF_TRACE_OK = 0,
    MOEINF_TRACE_BAD_MAGIC,        /* first line is not "# moe-trace v1" */
    MOEINF_TRACE_BAD_HEADER,       /* a '#' line that is neither "key: value" nor "req" */
    MOEINF_TRACE_DUPLICATE_KEY,    /* a header key given twice */
    MOEINF_TRACE_MISSING_KEY,      /* n_layers, n_experts or top_k absent */
    MOEINF_TRACE_BAD_GEOMETRY,     /* n_layers / n_experts / top_k not a valid number */
    MOEINF_TRACE_BAD_REQ_LINE,     /* malformed "# req" line */
    MOEINF_TRACE_LATE_HEADER,      /* a '#' line after the first token line */
    MOEINF_TRACE_OVERLONG_LINE,    /* longer than the limit for its kind */
    MOEINF_TRACE_BAD_FIELDS,       /* not four fields separated by single spaces, or NUL */
    MOEINF_TRACE_BAD_REQUEST_ID,   /* request id not a non-negative decimal */
    MOEINF_TRACE_REQUEST_ORDER,    /* request ids decrease, or a request is split */
    MOEINF_TRACE_BAD_PHASE,        /* phase other than P or D */
    MOEINF_TRACE_PHASE_ORDER,      /* a P line after a D line of the same request */
    MOEINF_TRACE_BAD_TOKEN_INDEX,  /* token index not 0, 1, 2, ... within the request */
    MOEINF_TRACE_BAD_EXPERTS,      /* the experts field is not numbers, ',' and '|' */
    MOEINF_TRACE_LAYER_COUNT,      /* number of '|' groups differs from n_layers */
    MOEINF_TRACE_EXPERT_COUNT,     /* a group's size differs from top_k */
    MOEINF_TRACE_EXPERT_RANGE,     /* expert id >= n_experts */
    MOEINF_TRACE_DUPLICATE_EXPERT, /* the same expert twice in one group */
    MOEINF_TRACE_REQUEST_MISMATCH, /* token lines disagree with the request's "# req" line */
    MOEINF_TRACE_COUNT_MISMATCH,   /* n_requests / n_tokens / ... disagree with the file */
};

/* Short name of a defect, as it appears in messages ("expert id out of range", ...). */
const char *moeinf_trace_defect_name(enum moeinf_trace_defect d);

struct moeinf_trace_header {
    int n_layers;
    int n_experts;
    int top_k;
    char model[256];   /* the "model" value, truncated; empty when absent */
    bool has_model_id; /* "model_id": the recording model's identity (experts/eam.h) */
    uint64_t model_id;
    int64_t n_requests; /* the header's totals, -1 when absent */
    int64_t n_tokens;
    int64_t n_prefill_tokens;
    int64_t n_decode_tokens;
    int64_t n_req_lines; /* "# req" lines in the header */
};

/* One token line. Pointers borrow the reader's storage until the next read or close. */
struct moeinf_trace_token {
    int64_t request_id;
    int64_t token_index;
    enum moeinf_phase phase;
    bool request_begins;     /* the first line of its request */
    const int32_t *experts;  /* (n_layers, top_k): experts[l * top_k + j], ids within layer l */
    const char *request_tag; /* the tag of the request's "# req" line, or NULL if none */
    uint64_t line;           /* 1-based line number */
};

struct moeinf_trace_reader;

/* Opens a trace and reads (and checks) its whole header. */
enum moeinf_status moeinf_trace_open(const char *path, struct moeinf_trace_reader **out,
                                     struct moeinf_error *err);
void moeinf_trace_close(struct moeinf_trace_reader *r);

const struct moeinf_trace_header *moeinf_trace_header(const struct moeinf_trace_reader *r);

/* Reads the next token line into *tok: MOEINF_OK with *end false; or, after the last line
 * (once the file's totals are checked), MOEINF_OK with *end true. After a failure the reader
 * only fails again. */
enum moeinf_status moeinf_trace_read(struct moeinf_trace_reader *r, struct moeinf_trace_token *tok,
                                     bool *end, struct moeinf_error *err);

/* The defect behind the last MOEINF_ERR_FORMAT (MOEINF_TRACE_OK if none). */
enum moeinf_trace_defect moeinf_trace_defect(const struct moeinf_trace_reader *r);

/*
 * Writer: what the engine uses to record its own routing. The token lines are streamed to a
 * temporary file; close writes header, "# req" lines and tokens to `path` atomically. Open
 * already refuses a path that cannot be written (moeinf_file_check_output), so the work
 * before close is not wasted.
 *
 *   moeinf_trace_writer_open(path, &meta, &w, err);
 *   moeinf_trace_writer_request(w, id, "tag", err);        once per request, ids increasing
 *   moeinf_trace_writer_token(w, MOEINF_PHASE_PREFILL, experts, err);   P tokens, then D
 *   moeinf_trace_writer_close(w, err);                    (or moeinf_trace_writer_abort(w))
 */
struct moeinf_trace_meta {
    int n_layers;
    int n_experts;
    int top_k;
    const char *model; /* one line, or NULL */
};

struct moeinf_trace_writer;

enum moeinf_status moeinf_trace_writer_open(const char *path, const struct moeinf_trace_meta *meta,
                                            struct moeinf_trace_writer **out,
                                            struct moeinf_error *err);
/* Adds a provenance line "# key: value" (key of [a-z0-9_], not one the writer writes itself;
 * value one line); MOEINF_ERR_ARG otherwise. */
enum moeinf_status moeinf_trace_writer_header(struct moeinf_trace_writer *w, const char *key,
                                              const char *value, struct moeinf_error *err);
/* Starts a request: ids must increase; tag has no whitespace (NULL writes "-"). */
enum moeinf_status moeinf_trace_writer_request(struct moeinf_trace_writer *w, int64_t request_id,
                                               const char *tag, struct moeinf_error *err);
/* Appends one token of the current request: experts is (n_layers, top_k), distinct ids in
 * [0, n_experts) per layer; P tokens before D tokens. MOEINF_ERR_ARG otherwise. */
enum moeinf_status moeinf_trace_writer_token(struct moeinf_trace_writer *w, enum moeinf_phase phase,
                                             const int32_t *experts, struct moeinf_error *err);
/* Writes the file and frees the writer (also on failure). */
enum moeinf_status moeinf_trace_writer_close(struct moeinf_trace_writer *w,
                                             struct moeinf_error *err);
/* Discards everything and frees the writer; accepts NULL. */
void moeinf_trace_writer_abort(struct moeinf_trace_writer *w);

#endif
