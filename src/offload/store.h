/*
 * store.h - the slow tier of routed experts: where each expert's bytes lie in the model file,
 * and reads of them into the fast tier's slots (offload/fast_tier.h, which owns the slots'
 * memory). A read blocks its caller; offload/loader.h runs reads on I/O threads. Reads into
 * distinct slots may run on any threads at once.
 *
 * An expert of a MoE layer is three matrices (gate, up, down). In GGUF each is expert e's
 * slice of a 3-D tensor [n_in, n_out, n_expert]: contiguous, at tensor offset + e * stride,
 * but tensors are only 32-byte aligned. A slot holds one region per part sized for the largest
 * window of that part in any layer (types and so sizes may differ per layer).
 *
 * Reads use O_DIRECT where the file system allows it: each part is read as the 4 KiB-aligned
 * window around it, into a 4 KiB-aligned region, and the kernels are pointed at the part's
 * offset inside the window; a window that runs past the end of the file reads short, which is
 * fine as long as the part itself was read. Where O_DIRECT is refused, or on request
 * (MOEINF_EXPERT_IO_NOCACHE), the store reads exactly the part through the page cache, on an
 * fd marked POSIX_FADV_RANDOM (no readahead: the kernel reads only the part's pages), and then
 * drops the part's page-aligned window with posix_fadvise(DONTNEED), so that the page cache
 * does not keep the file (store->note says which happened; DONTNEED drops nothing on tmpfs,
 * whose pages are the file). On request (MOEINF_EXPERT_IO_CACHED) the store reads through the
 * page cache and leaves the pages there: repeated runs then hit memory, which the memory
 * budget does not count.
 */
#ifndef MOEINF_OFFLOAD_STORE_H
#define MOEINF_OFFLOAD_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"
#include "offload/fast_tier.h"

#define MOEINF_EXPERT_PARTS 3 /* gate, up, down */
#define MOEINF_STORE_ALIGN  4096

/* Where a layer's experts lie: part p of expert e starts at off[p] + e * stride[p] and is
 * bytes[p] long. */
struct moeinf_store_layer {
    uint64_t off[MOEINF_EXPERT_PARTS];
    uint64_t stride[MOEINF_EXPERT_PARTS];
    uint64_t bytes[MOEINF_EXPERT_PARTS];
};

struct moeinf_store_counters {
    uint64_t loads;      /* experts read */
    uint64_t bytes;      /* bytes read from the file (whole windows under O_DIRECT) */
    uint64_t part_bytes; /* of them, the experts' own bytes */
    uint64_t read_ns;    /* time spent in reads */
};

/* to += from, field by field. */
void moeinf_store_counters_add(struct moeinf_store_counters *to,
                               const struct moeinf_store_counters *from);

struct moeinf_store;

/*
 * Opens `path` for the experts of n_layers layers of n_experts each (layers[] copied), reading
 * into the slots of `fast` (borrowed: it must outlive the store; its slots at least
 * moeinf_store_slot_bytes_for bytes), reading as `io` says (above). MOEINF_ERR_IO if the file
 * cannot be opened; MOEINF_ERR_FORMAT if an expert lies past the end of the file; MOEINF_ERR_NOMEM.
 */
enum moeinf_status moeinf_store_open(const char *path, const struct moeinf_store_layer *layers,
                                     int n_layers, int n_experts,
                                     const struct moeinf_fast_tier *fast, enum moeinf_expert_io io,
                                     struct moeinf_store **out, struct moeinf_error *err);
void moeinf_store_free(struct moeinf_store *s);

/* The MOEINF_STORE_ALIGN window around part p of expert e of layer l, which an O_DIRECT read
 * of the part reads: its first byte in the file, returned, and its length in *len. */
uint64_t moeinf_store_part_window(const struct moeinf_store_layer *l, int p, int e, uint64_t *len);

/* Bytes of one slot (all parts with their alignment room): what an expert cache's byte budget
 * is divided by. */
uint64_t moeinf_store_slot_bytes_for(const struct moeinf_store_layer *layers, int n_layers,
                                     int n_experts);
int moeinf_store_n_slots(const struct moeinf_store *s);
/* True when reads bypass the page cache (O_DIRECT). */
bool moeinf_store_direct(const struct moeinf_store *s);
/* A one-line note on how the store reads (O_DIRECT or why not), or NULL. */
const char *moeinf_store_note(const struct moeinf_store *s);

/* Reads part `part` (0 gate, 1 up, 2 down) of expert `expert` of `layer` into `slot`, adding
 * its bytes and read time to *counters (not loads: offload/loader.c counts an expert once its
 * three parts are in). Touches only that part of the slot (and *counters), so reads into
 * distinct slots, or of distinct parts of one slot, may run concurrently; the caller makes
 * sure nobody computes from the slot meanwhile. MOEINF_ERR_IO on a read error or a short read
 * (the file changed under the process). */
enum moeinf_status moeinf_store_load_part(struct moeinf_store *s, int slot, int layer, int expert,
                                          int part, struct moeinf_store_counters *counters,
                                          struct moeinf_error *err);

/* Part p of the expert last read into `slot`: the bytes the kernels read. */
const uint8_t *moeinf_store_part(const struct moeinf_store *s, int slot, int part);

#endif
