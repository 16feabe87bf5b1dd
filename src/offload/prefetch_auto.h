/*
 * prefetch_auto.h - the controller behind `--prefetch auto` and `--lookahead auto`: per MoE
 * layer and per source of predictions (offload/tier.h: 0 the policy's proposals, 1 gate
 * lookahead), whether the tier reads the experts the source names for that layer.
 *
 * The tier feeds it one observation per step of a layer, measured for every source whether
 * it is on or off (a source that is off still names experts; they are only not read):
 *   reads:    experts the source named for the step that were not in the cache when named
 *             (the reads it issues when on);
 *   used:     of them, those the step used: demand misses it turned (on) or would have
 *             turned (off) into prefetches. used / reads is the source's precision on the
 *             experts that had to be read;
 *   spare_ns: I/O thread time idle while the step before it computed (I/O threads x wall
 *             time, less the time they spent reading): room for reads that delay no demand
 *             read.
 * with read_ns, the I/O thread time of one expert read.
 *
 * Every MOEINF_PREFETCH_AUTO_WINDOW steps of a layer it decides from decayed sums (the
 * window's counts plus half of what came before). A read the source names gains 1 when used
 * (a demand miss avoided) and costs `cost` when not:
 *   cost = COST_MIN + (1 - COST_MIN) x (1 - f),  f = min(1, spare / (wasted x read_ns)),
 * where spare is what the layer had with the source off (with it on, its own reads' time is
 * added back). A wasted read never costs less than COST_MIN: it still takes I/O bandwidth and
 * CPU (which the I/O threads' idle time does not show: on a shared 2-core VM, wasted lookahead
 * reads on an idle disk cost about a read's time each, docs/OFFLOAD.md, 2026-12-01, reading
 * ahead) and evicts an expert. The source is turned on when used > cost x wasted x (1 + H) and
 * off when used < cost x wasted x (1 - H) (H the hysteresis), once the sums hold at least
 * MOEINF_PREFETCH_AUTO_MIN_READS reads; in between it keeps its state. Every source starts
 * off: it is turned on only where its measured precision pays.
 *
 * That rule says where a source is wanted. Reads also cost CPU (the I/O threads' system calls
 * and wake-ups) and disk time, which their idle time does not show, so a source is read only
 * where a check of wall time says its reads make decoding faster: the tier reports the wall
 * time of each decode iteration (moeinf_prefetch_auto_iteration; a read's CPU cost lands in
 * whichever layer computes when it runs, so the whole iteration is what counts), and one
 * source at a time is checked in four arms of MOEINF_PREFETCH_AUTO_ARM iterations, with its
 * reads on, off, off, on in every layer that wants it (the order cancels a steady drift); the
 * first iteration of an arm is not counted (reads of the arm before may still arrive in it).
 * The source's verdict: read where the median time with it on is below the median with it
 * off. Every layer at once because one layer's reads move an iteration by less than the noise
 * of a shared machine: a check of one layer at a time came out close to a coin toss
 * (docs/OFFLOAD.md, 2026-12-05, the deeper trained model); the precision rule still chooses
 * the layers. One source at a time so that a source whose reads do not pay does not take down
 * one whose reads do. The sources take turns; after a verdict a source waits the time of 1, 2,
 * 4 ... (at most MOEINF_PREFETCH_AUTO_BACKOFF) checks before its next, doubling while its
 * verdict stays the same and back to one when it changes (half of a check runs the worse arm).
 * Until its first verdict a source reads nothing; a layer that comes to want it later follows
 * the standing verdict.
 */
#ifndef MOEINF_OFFLOAD_PREFETCH_AUTO_H
#define MOEINF_OFFLOAD_PREFETCH_AUTO_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"

#define MOEINF_PREFETCH_AUTO_SOURCES   2
#define MOEINF_PREFETCH_AUTO_WINDOW    16  /* steps of a layer between decisions */
#define MOEINF_PREFETCH_AUTO_MIN_READS 4.0 /* decayed reads needed to decide */
#define MOEINF_PREFETCH_AUTO_COST_MIN  0.75 /* the least a wasted read costs, in demand misses */
#define MOEINF_PREFETCH_AUTO_H         0.25
#define MOEINF_PREFETCH_AUTO_ARM       8    /* decode iterations of one arm of a check */
#define MOEINF_PREFETCH_AUTO_BACKOFF   16   /* the most checks' time a source waits for its next */

/* One step of one layer, as the tier measured it. */
struct moeinf_prefetch_auto_obs {
    uint32_t reads[MOEINF_PREFETCH_AUTO_SOURCES];
    uint32_t used[MOEINF_PREFETCH_AUTO_SOURCES];
    uint64_t spare_ns;
};

struct moeinf_prefetch_auto;

/* The decision rule alone: the state after a window whose decayed sums are reads, used and
 * spare_ns, from state `on`; read_ns 0 (unknown) counts no spare time. */
bool moeinf_prefetch_auto_decide(bool on, double reads, double used, double spare_ns,
                                 double read_ns);

/* n_layers >= 1 layers, every source off. MOEINF_ERR_NOMEM. */
enum moeinf_status moeinf_prefetch_auto_init(int n_layers, struct moeinf_prefetch_auto **out,
                                             struct moeinf_error *err);
void moeinf_prefetch_auto_free(struct moeinf_prefetch_auto *a);
/* One step of `layer`; read_ns as above. Returns true if a source of the layer changed
 * (wanted or not). */
bool moeinf_prefetch_auto_step(struct moeinf_prefetch_auto *a, int layer,
                               const struct moeinf_prefetch_auto_obs *obs, uint64_t read_ns);
/* The wall time of the decode iteration that has just ended (see above): the other sources'
 * waits count down, and the source under check gets the time, or the next source in turn
 * that is wanted and waits no more starts its check; the arm changes only here, between
 * iterations. */
void moeinf_prefetch_auto_iteration(struct moeinf_prefetch_auto *a, uint64_t time_ns);
/* Whether the precision rule wants the source in the layer. */
bool moeinf_prefetch_auto_wanted(const struct moeinf_prefetch_auto *a, int layer, int source);
/* Whether the source's reads are issued in the layer now: wanted, and the source's arm (while
 * it is checked) or its last verdict says so. */
bool moeinf_prefetch_auto_on(const struct moeinf_prefetch_auto *a, int layer, int source);
/* Layers where the source is on now. */
int moeinf_prefetch_auto_layers_on(const struct moeinf_prefetch_auto *a, int source);
/* Verdicts of the wall-time check so far, and of them the ones that kept the reads. */
void moeinf_prefetch_auto_checks(const struct moeinf_prefetch_auto *a, uint64_t *checks,
                                 uint64_t *kept);

#endif
