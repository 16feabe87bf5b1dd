/* warm_start.c - --eamc FILE: the expert-cache policy's learned state read at start and
 * written at the end (see expert_args.h; the format is experts/eam.h's). */
#include <stdio.h>

#include "app/args.h"
#include "app/expert_args.h"
#include "app/interrupt.h"

int expert_args_warm_start(const struct expert_args *a, struct moeinf_context *ctx) {
    if (!a->eamc) return CLI_EXIT_OK;
    struct moeinf_error err = {0};
    bool loaded = false;
    enum moeinf_status st = moeinf_context_expert_state_load(ctx, a->eamc, &loaded, &err);
    if (st != MOEINF_OK) {
        cli_fail(&err);
        return st == MOEINF_ERR_ARG ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    fprintf(stderr, "moeinf: expert cache state: %s %s\n", a->eamc,
            loaded ? "loaded (warm start)" : "does not exist yet (cold start; written at exit)");
    return CLI_EXIT_OK;
}

bool expert_args_save_state(const struct expert_args *a, struct moeinf_context *ctx) {
    if (!a->eamc || !ctx) return true;
    struct moeinf_error err = {0};
    if (moeinf_context_expert_state_save(ctx, a->eamc, &err) != MOEINF_OK) {
        cli_fail(&err);
        return false;
    }
    return true;
}

bool expert_args_stopped(const struct expert_args *a, struct moeinf_context *ctx) {
    if (!cli_stop_signal()) return false;
    if (expert_args_save_state(a, ctx)) cli_stop_finish(); /* does not return */
    return true;
}
