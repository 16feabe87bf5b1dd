/* layer_ffn.c - the dense SwiGLU FFN of a layer (lw->ffn dense) and the shared expert of a MoE
 * layer (hp->n_ff_shexp > 0), both on the normed rows in xb. */
#include <math.h>

#include "compute/ops.h"
#include "model/fwd_state.h"

/* out[m x n_embd] = down(SwiGLU(gate(xb), up(xb))), n_ff wide. */
static void swiglu_ffn(struct moeinf_fwd *f, const struct moeinf_weight *gate,
                       const struct moeinf_weight *up, const struct moeinf_weight *down, int n_ff,
                       int m, float *out) {
    const int n_embd = f->llm->hp.n_embd;
    size_t rg;
    size_t ru;
    const uint8_t *xg = moeinf_fwd_act(f, gate->type, f->xb, m, n_embd, &rg);
    const uint8_t *xu = moeinf_fwd_act(f, up->type, f->xb, m, n_embd, &ru);
    struct moeinf_mm_job jobs[2] = {
        moeinf_fwd_job(gate, 0, xg, rg, m, f->hg, (size_t)n_ff),
        moeinf_fwd_job(up, 0, xu, ru, m, f->hu, (size_t)n_ff),
    };
    moeinf_matmul_run(f->p.pool, f->p.kern, jobs, 2);
    for (int j = 0; j < m; j++) {
        moeinf_swiglu(f->hg + (size_t)j * n_ff, f->hg + (size_t)j * n_ff, f->hu + (size_t)j * n_ff,
                      n_ff);
    }
    moeinf_fwd_matmul(f, down, f->hg, m, out, (size_t)n_embd);
}

void moeinf_fwd_dense_ffn(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    swiglu_ffn(f, &lw->ffn_gate, &lw->ffn_up, &lw->ffn_down, (int)lw->ffn_gate.n_out, m, f->tmp);
    for (size_t i = 0; i < (size_t)m * hp->n_embd; i++)
        f->x[i] += f->tmp[i];
}

/* SwiGLU of width n_ff_shexp scaled per token by sigmoid(gate_inp_shexp . x), the sigmoid
 * computed as llama.cpp does, silu(g) / g; as it is where the layer has no gate. */
void moeinf_fwd_shared_expert(struct moeinf_fwd *f, const struct moeinf_layer *lw, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_embd = hp->n_embd;
    swiglu_ffn(f, &lw->gate_shexp, &lw->up_shexp, &lw->down_shexp, hp->n_ff_shexp, m, f->sh_out);
    if (!lw->gate_inp_shexp) return; /* ungated (hp->shexp_ungated) */
    for (int j = 0; j < m; j++) {
        const float *x = f->xb + (size_t)j * n_embd;
        float g = 0.0f;
        for (int i = 0; i < n_embd; i++)
            g += lw->gate_inp_shexp[i] * x[i];
        const float silu = g / (1.0f + expf(-g));
        const float gate = g != 0.0f ? silu / g : 0.5f;
        float *o = f->sh_out + (size_t)j * n_embd;
        for (int i = 0; i < n_embd; i++)
            o[i] *= gate;
    }
}
