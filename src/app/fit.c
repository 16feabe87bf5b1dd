/*
 * fit.c - `moeinf fit` (fit.h): a model's sizes from its header and tensor table, read as the
 * engine reads them (gguf/gguf.h's header-only open, then the architecture's own binding,
 * model/model.c), and the predicted decode and prefill rates at a memory budget.
 *
 * The prediction. Per decode token the engine reads, from memory, the weights
 * moeinf_model_decode_bytes counts: the non-expert ones and top_k experts per MoE layer. With
 * an expert cache a share `hit` of those experts is in the cache's slots (memory) and the rest
 * is read from the disk first. So:
 *   t_mem  = decode bytes / (memory bandwidth x CLI_FIT_MEM_EFF)   (a missed expert is
 *            computed from its slot once read, so every expert's bytes are read from memory);
 *            t_nonexpert its share for the non-expert weights, t_mem - t_nonexpert the experts'
 *   t_disk = misses x expert bytes / (disk bandwidth x CLI_FIT_DISK_EFF)   (the bandwidth of
 *            cli_fit_probe_misses over the simulated misses' own windows where the whole file
 *            is there, else the machine's random-read probe)
 *   t      = t_nonexpert + max(t_mem - t_nonexpert, t_disk) + MoE layers x CLI_FIT_LAYER_S
 *            (resident: t_mem)
 * A layer's misses are known once its router has run, after the layer's attention: the
 * non-expert weights' time does not hide reads (reading ahead, where it pays, is not
 * modelled). The experts' time does: the engine computes a wave's cached experts while the
 * I/O threads read its misses, and each miss as it arrives. On three runs of
 * bench/fit_check.sh on the AMD EPYC (18 offloaded rows) this put every row within 0.72-1.29 of
 * the measured rate, where max(t_mem, t_disk) gave 0.90-1.53 (docs/OFFLOAD.md). The constants
 * are those of the run on the quietest machine (docs/OFFLOAD.md says which). The last term was
 * 7 ms per token until 2026-12-06, fitted on the OLMoE-shaped file's 4 MoE layers; per layer
 * it put two later runs' 12 offloaded rows on the Intel Xeon within 0.81-1.20, where per token
 * they were within 0.71-1.20 (the 3-layer file's rows under, the 7-layer file's over).
 * Prefill, per micro-batch of 512 tokens (a 512-token prompt), what a profile of the engine's
 * prefill is made of (docs/OFFLOAD.md, "`moeinf fit`: what prefill is made of"): the matrix
 * products most of its CPU time, the attention most of the rest:
 *   t_dot  = (weights x 512 + the lm_head's weights) / (the prefill tile's probed rate x
 *            CLI_FIT_DOT_EFF)   (every product but the lm_head, which prefill computes for
 *            the last position only; a routed expert top_k times per token)
 *   t_attn = (q.k multiply-adds / their kernel's probed rate + V multiply-adds / the weighted
 *            sum's) / CLI_FIT_ATTN_EFF   (attention.c's work for the 512 x 513 / 2 position
 *            pairs per query head; both kernels read F16 rows as they lie in the cache)
 *   t_read = with an expert cache, the time the reads add: every distinct expert of the
 *            batch (1 - (1 - K/E)^512 of each layer's: nearly all) that is not cached is read
 *            once, while the layer's experts compute, in the waves the slots allow
 *            (cli_fit_prefill_read_wait: a wave's first read, and whatever its reads take
 *            beyond its computing, are waited for); an expert computes in its share of t_dot
 *            and is read at the random-read probe's bandwidth x CLI_FIT_PREFILL_READ_EFF. The
 *            cached share is the simulator's, replaying the routing's prefill in micro-batches
 *            as the engine runs it (the slots' share of the experts where the routing has no
 *            prefill): a step pins its wave, so a cache that holds little more than one layer's
 *            experts keeps few for the next micro-batch (0.07-0.13 of Qwen3-shaped experts at
 *            37 % in the engine, where the slots' share said 0.37)
 *   t      = t_dot + t_attn + t_read
 * Until 2026-12-06 t_read was every read's whole time (the sum). On the AMD EPYC, whose
 * prefill computed several times longer than it read, either form fits; on the Intel Xeon
 * with AMX the reads take about as long as the computing, and the measured offloaded prefill
 * was 0.89-0.94 of the resident one at 50 % where the sum said 0.69-0.82 (docs/OFFLOAD.md).
 * There the engine's prefill read at 1.6-2.3 GB/s (MiB read over the 4 I/O threads' read
 * seconds; 2 or 8 threads read no faster) while the probe said 2.2-3.6: the median of 18
 * rows' ratios, 0.75, is CLI_FIT_PREFILL_READ_EFF.
 * CLI_FIT_DOT_EFF and CLI_FIT_ATTN_EFF are 1: per CPU second the engine's tiles run as fast as
 * the probe's, and the rest of prefill (norms, routing, the activations' conversion) is a small
 * part of its time.
 */
#include "app/fit.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/memlimit.h"
#include "base/status.h"
#include "engine/engine.h"
#include "gen/gen_header.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "offload/store.h"

#define MARGIN     (64ull << 20)

/* The weights the forward pass multiplies per token: every bound matrix but token_embd
 * (rows are looked up), routed experts top_k times; the tied lm_head counted once. The
 * lm_head's share in *output, the routed experts' in *routed. */
static uint64_t active_elems(const struct moeinf_llm *llm, uint64_t *output, uint64_t *routed) {
    const struct moeinf_hparams *hp = &llm->hp;
    uint64_t n = 0;
    *output = 0;
    *routed = 0;
    for (int i = 0; i < llm->n_bound; i++) {
        const struct moeinf_weight *w = llm->bound[i].w;
        if (!w || w == &llm->tok_embd) continue;
        uint64_t e = (uint64_t)w->n_in * (uint64_t)w->n_out;
        if (w == &llm->output) *output = e;
        if (llm->bound[i].expert) *routed += e * (uint64_t)hp->n_expert_used;
        n += llm->bound[i].expert ? e * (uint64_t)hp->n_expert_used
                                  : e * (uint64_t)(w->n_mat > 0 ? w->n_mat : 1);
    }
    if (llm->output.data == llm->tok_embd.data) {
        *output = (uint64_t)hp->n_embd * (uint64_t)hp->n_vocab;
        n += *output;
    }
    return n;
}

/* The attention work of a prompt of CLI_FIT_BATCH tokens from position 0 (fit.h's attn_*): per
 * position pair (each token and every earlier one, or the last n_swa of them on a sliding layer)
 * and query head, a dot over the K head and the V head's multiply-adds of the weighted sum
 * (compute/attention.c). Multi-head latent attention: the K head the latent and the RoPE part,
 * the value the latent (model/layer_mla.c). Gated DeltaNet layers have no pairs. */
static void attn_work(const struct moeinf_llm *llm, struct cli_fit_model *m) {
    const struct moeinf_hparams *hp = &llm->hp;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &llm->layers[il];
        if (lw->attn == MOEINF_ATTN_DELTANET) continue;
        const int w = lw->swa && hp->n_swa > 0 ? hp->n_swa : CLI_FIT_BATCH;
        double pairs = 0;
        for (int p = 0; p < CLI_FIT_BATCH; p++)
            pairs += p + 1 < w ? p + 1 : w;
        const bool mla = lw->attn == MOEINF_ATTN_MLA;
        const double kd = mla ? hp->mla_kv + hp->n_rot : hp->head_dim;
        const double vd = mla ? hp->mla_kv : hp->head_dim;
        m->attn_dot += pairs * hp->n_head * kd;
        m->attn_wsum += pairs * hp->n_head * vd;
    }
}

/* The KV cache and the fixed state as model/forward.c allocates them (kv_layout,
 * alloc_recurrent, alloc_checkpoints) for F16 KV and micro-batches of CLI_FIT_BATCH. */
static void kv_sizes(const struct moeinf_llm *llm, struct cli_fit_model *m) {
    const struct moeinf_hparams *hp = &llm->hp;
    const bool mla = hp->mla_kv > 0;
    const uint64_t n_kv = mla ? (uint64_t)(hp->mla_kv + hp->n_rot)
                              : (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim;
    const uint64_t row = n_kv * 2 * (mla ? 1 : 2); /* K and V (latent: K only), F16 */
    uint64_t per_token = 0;
    uint64_t fixed = 0;
    int n_swa = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &llm->layers[il];
        if (lw->attn == MOEINF_ATTN_DELTANET) continue;
        if (lw->swa && hp->n_swa > 0) {
            fixed += (uint64_t)(hp->n_swa - 1 + CLI_FIT_BATCH) * row;
            n_swa++;
        } else {
            per_token += row;
        }
    }
    uint64_t rs = 0;
    if (hp->n_recurrent > 0) {
        const uint64_t conv_dim = 2ull * (uint64_t)hp->ssm_n_k_heads * (uint64_t)hp->ssm_head_dim +
                                  (uint64_t)hp->ssm_n_v_heads * (uint64_t)hp->ssm_head_dim;
        const uint64_t delta = (uint64_t)hp->ssm_n_v_heads * (uint64_t)hp->ssm_head_dim *
                               (uint64_t)hp->ssm_head_dim;
        rs = (uint64_t)hp->n_recurrent * ((uint64_t)(hp->ssm_d_conv - 1) * conv_dim + delta) * 4;
    }
    const uint64_t w = hp->n_swa > 1 ? (uint64_t)(hp->n_swa - 1) : 0;
    const uint64_t ckpt = rs + (uint64_t)n_swa * 2 * w * n_kv * 2;
    /* the micro-batch's activations (moeinf_fwd_init's buffers, the larger ones) */
    const uint64_t nb = CLI_FIT_BATCH;
    const uint64_t n_q = (uint64_t)hp->n_head * (uint64_t)hp->head_dim;
    const uint64_t n_att = mla && (uint64_t)hp->n_head * (uint64_t)hp->mla_v > n_q
                               ? (uint64_t)hp->n_head * (uint64_t)hp->mla_v
                               : n_q;
    const uint64_t k_used = hp->n_expert > 0 ? (uint64_t)hp->n_expert_used : 1;
    uint64_t h = nb * k_used * (uint64_t)hp->n_ff;
    if (nb * (uint64_t)hp->n_ff_shexp > h) h = nb * (uint64_t)hp->n_ff_shexp;
    if (nb * (uint64_t)hp->n_ff_dense > h) h = nb * (uint64_t)hp->n_ff_dense;
    uint64_t floats = nb * (3 * (uint64_t)hp->n_embd + n_q + 2 * n_kv + n_att) + 2 * h;
    if (hp->n_expert > 0) floats += nb * (2 * k_used * (uint64_t)hp->n_embd + (uint64_t)hp->n_expert);
    m->scratch_bytes = floats * 4 + h + (16ull << 20); /* + the converted activations, misc */
    m->kv_token_bytes = per_token;
    m->state_bytes = fixed + rs + 4 * ckpt; /* MOEINF_FWD_CHECKPOINTS checkpoints */
}

enum moeinf_status cli_fit_read(const char *path, struct cli_fit_model *out,
                                struct moeinf_error *err) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot read the file", path);
    }
    struct moeinf_gguf *g = NULL;
    enum moeinf_status st = moeinf_gguf_open_header(path, &g, err);
    if (st) return st;
    struct moeinf_llm *llm = NULL;
    st = moeinf_llm_init(g, &llm, err);
    if (st) {
        moeinf_gguf_free(g);
        return st;
    }
    const struct moeinf_hparams *hp = &llm->hp;
    snprintf(out->arch, sizeof out->arch, "%s", moeinf_llm_arch_name(llm));
    out->n_layer = hp->n_layer;
    out->n_moe_layers = moeinf_n_moe_layers(hp);
    out->n_expert = hp->n_expert;
    out->n_expert_used = hp->n_expert_used;
    out->file_bytes = g->data_offset + g->data_bytes;
    out->present_bytes = (uint64_t)sb.st_size;
    out->header_only = out->present_bytes < out->file_bytes;
    for (int i = 0; i < llm->n_bound; i++) {
        out->weight_bytes += llm->bound[i].bytes;
        if (llm->bound[i].expert) out->experts_bytes += llm->bound[i].bytes;
    }
    out->nonexpert_bytes = out->weight_bytes - out->experts_bytes;
    uint64_t active_experts = 0;
    out->expert_type = -1;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &llm->layers[il];
        if (lw->ffn != MOEINF_FFN_MOE) continue;
        uint64_t e = lw->gate_exps.mat_bytes + lw->up_exps.mat_bytes + lw->down_exps.mat_bytes;
        if (e > out->expert_bytes) out->expert_bytes = e;
        active_experts += (uint64_t)hp->n_expert_used * e;
        if (out->expert_type < 0) out->expert_type = (int)lw->gate_exps.type;
    }
    /* the expert cache's slot as offload/store.c sizes it, from where the experts lie */
    const int n_moe = out->n_moe_layers;
    struct moeinf_store_layer *sl = n_moe > 0 ? calloc((size_t)n_moe, sizeof *sl) : NULL;
    if (n_moe > 0 && !sl) {
        moeinf_llm_free(llm);
        moeinf_gguf_free(g);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int ml = 0; ml < n_moe; ml++) {
        const struct moeinf_layer *lw = &llm->layers[hp->n_layer_dense_lead + ml];
        const struct moeinf_weight *parts[3] = {&lw->gate_exps, &lw->up_exps, &lw->down_exps};
        for (int p = 0; p < 3 && p < MOEINF_EXPERT_PARTS; p++) {
            sl[ml].off[p] = g->data_offset + (uint64_t)(parts[p]->data - (const uint8_t *)g->absent);
            sl[ml].stride[p] = parts[p]->mat_stride;
            sl[ml].bytes[p] = parts[p]->mat_bytes;
        }
    }
    if (n_moe > 0) out->slot_bytes = moeinf_store_slot_bytes_for(sl, n_moe, hp->n_expert);
    out->layout = sl;
    if (out->expert_type < 0) { /* a dense model: its FFN's type */
        const struct moeinf_layer *lw = &llm->layers[hp->n_layer - 1];
        out->expert_type = (int)(lw->ffn_gate.data ? lw->ffn_gate.type : llm->output.type);
    }
    struct moeinf_model model;
    memset(&model, 0, sizeof model);
    model.llm = llm;
    out->decode_bytes = moeinf_model_decode_bytes(&model);
    out->nonexpert_decode = out->decode_bytes - active_experts;
    out->active_elems = active_elems(llm, &out->output_elems, &out->routed_elems);
    attn_work(llm, out);
    kv_sizes(llm, out);
    moeinf_llm_free(llm);
    moeinf_gguf_free(g);
    return MOEINF_OK;
}

void cli_fit_model_free(struct cli_fit_model *m) {
    free(m->layout);
    m->layout = NULL;
}

/* Seconds per decode token reading the misses from the disk: at the rate of the probe over the
 * simulated misses' own windows when probe_path is given and the probe reads, else at the
 * machine's random-read rate. misses: the simulator's decode misses per expert, or NULL. */
static double decode_disk_time(const struct cli_fit_model *m, const struct cli_fit_machine *mc,
                               double hit, const uint64_t *misses, const char *probe_path,
                               struct cli_fit_prediction *out) {
    double gbps = mc->disk_gbps;
    if (misses && probe_path) {
        out->miss_gbps = cli_fit_probe_misses(probe_path, m, misses, &out->miss_footprint);
        if (out->miss_gbps > 0) gbps = out->miss_gbps;
    }
    const double experts = (double)m->n_expert_used * m->n_moe_layers; /* per token */
    return (1 - hit) * experts * (double)m->expert_bytes / (gbps * 1e9 * CLI_FIT_DISK_EFF);
}

double cli_fit_prefill_read_wait(double used, double hits, double slots, double expert_s,
                                 double expert_read) {
    double wait = 0;
    for (double left = used; left > 1e-9;) {
        const double n = left < slots ? left : slots;
        const double h = hits < n ? hits : n;
        const double miss = n - h;
        hits -= h;
        left -= n;
        if (miss <= 0) continue;
        double t = n * expert_s;
        if (expert_read + miss * expert_s > t) t = expert_read + miss * expert_s;
        if (miss * expert_read + expert_s > t) t = miss * expert_read + expert_s;
        wait += t - n * expert_s;
    }
    return wait;
}

enum moeinf_status cli_fit_predict(const struct cli_fit_model *m, const struct cli_fit_machine *mc,
                                   uint64_t memory, int n_ctx, const char *trace_path,
                                   const char *probe_path, struct cli_fit_prediction *out,
                                   char *source, size_t source_size, struct moeinf_error *err) {
    memset(out, 0, sizeof *out);
    out->memory = memory;
    const double mem_bps = mc->mem_gbps * 1e9 * CLI_FIT_MEM_EFF;
    const uint64_t ctx_bytes =
        m->kv_token_bytes * (uint64_t)n_ctx + m->state_bytes + m->scratch_bytes + MARGIN;
    /* prefill's computing, per micro-batch: the products (the lm_head for one position) and
     * the attention */
    out->t_dot = ((double)(m->active_elems - m->output_elems) * CLI_FIT_BATCH +
                  (double)m->output_elems) /
                 (mc->dot_gops * 1e9 * CLI_FIT_DOT_EFF);
    out->t_attn =
        (m->attn_dot / mc->fdot_gops + m->attn_wsum / mc->wsum_gops) / (1e9 * CLI_FIT_ATTN_EFF);
    const double t_compute = out->t_dot + out->t_attn;
    if (m->n_expert == 0 || memory >= m->weight_bytes + ctx_bytes) {
        out->resident = true;
        out->runs = memory >= m->weight_bytes + ctx_bytes;
        out->hit = 1;
        out->prefill_hit = 1;
        out->cache_percent = 100;
        out->t_mem = (double)m->decode_bytes / mem_bps;
        out->decode_tps = 1.0 / out->t_mem;
        out->prefill_tps = CLI_FIT_BATCH / t_compute;
        if (source_size) snprintf(source, source_size, "resident: no expert cache");
        return MOEINF_OK;
    }
    const uint64_t slot = m->slot_bytes;
    const int total = m->n_moe_layers * m->n_expert;
    const uint64_t fixed = m->nonexpert_bytes + ctx_bytes;
    if (memory < fixed + slot * (uint64_t)m->n_expert_used) {
        out->runs = false;
        if (source_size) snprintf(source, source_size, "does not fit");
        return MOEINF_OK;
    }
    uint64_t slots = (memory - fixed) / slot;
    if (slots > (uint64_t)total) slots = (uint64_t)total;
    out->runs = true;
    out->cache_slots = (int)slots;
    out->cache_bytes = slots * slot;
    out->cache_percent = 100.0 * (double)slots / (double)total;
    double hit = 0;
    const size_t n_ids = (size_t)total;
    uint64_t *misses =
        probe_path && !m->header_only && m->layout ? calloc(n_ids, sizeof *misses) : NULL;
    double prefill_hit = -1;
    enum moeinf_status st = cli_fit_hit_ratio(m, (int)slots, trace_path, misses, &hit, &prefill_hit,
                                              source, source_size, err);
    if (st) {
        free(misses);
        return st;
    }
    out->hit = hit;
    const double per_layer = (double)m->n_expert_used;
    const double e_bytes = (double)m->expert_bytes;
    const double t_mem = (double)m->decode_bytes / mem_bps;
    const double t_nonexpert = (double)m->nonexpert_decode / mem_bps;
    const double t_experts = t_mem - t_nonexpert;
    const double t_disk = decode_disk_time(m, mc, hit, misses, probe_path, out);
    free(misses);
    out->t_mem = t_mem;
    out->t_nonexpert = t_nonexpert;
    out->t_disk = t_disk;
    out->decode_tps = 1.0 / (t_nonexpert + (t_experts > t_disk ? t_experts : t_disk) +
                             m->n_moe_layers * CLI_FIT_LAYER_S);
    /* prefill: a micro-batch uses nearly every expert of each layer (1 - (1 - K/E)^512 of
     * them); of those, the share the simulator found cached is there, and the rest is read
     * while the layer's experts compute, in the waves the slots allow */
    const double used = (1 - pow(1 - per_layer / m->n_expert, CLI_FIT_BATCH)) * m->n_expert;
    const double cached = prefill_hit >= 0 ? prefill_hit : (double)slots / (double)total;
    out->prefill_hit = cached;
    const double expert_s = (double)m->routed_elems * CLI_FIT_BATCH /
                            (mc->dot_gops * 1e9 * CLI_FIT_DOT_EFF) / m->n_moe_layers / used;
    const double read_s = e_bytes / (mc->disk_gbps * 1e9 * CLI_FIT_PREFILL_READ_EFF);
    const double t_read =
        m->n_moe_layers *
        cli_fit_prefill_read_wait(used, cached * used, (double)slots, expert_s, read_s);
    out->t_read = t_read;
    out->prefill_tps = CLI_FIT_BATCH / (t_compute + t_read);
    return MOEINF_OK;
}

enum moeinf_status cli_fit_preset_header(const struct moeinf_gen_params *p, const char *path,
                                         struct moeinf_error *err) {
    return moeinf_gen_model_header(p, path, err);
}

enum moeinf_status cli_fit_memory(uint64_t *bytes, char *source, size_t source_size,
                                  struct moeinf_error *err) {
    bool cgroup = false;
    char from[256] = "";
    enum moeinf_status st = moeinf_memory_limit(bytes, &cgroup, from, sizeof from, err);
    if (st) return st;
    snprintf(source, source_size, "%s (%s)", cgroup ? "the memory limit" : "MemAvailable", from);
    return MOEINF_OK;
}
