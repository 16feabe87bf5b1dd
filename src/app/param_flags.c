/* param_flags.c - the library's parameter names as the command line's options (see
 * param_flags.h). */
#include "app/param_flags.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "app/args.h"

static const struct {
    const char *param;
    const char *flag;
} table[] = {
    {"n_ctx", "-c"},
    {"n_batch", "-b"},
    {"n_seq", "--parallel"},
    {"n_threads", "-t"},
    {"kv_type", "--kv-type"},
    {"expert_cache", "--expert-cache"},
    {"expert_io_threads", "--io-threads"},
    {"expert_io", "--expert-io"},
    {"expert_policy", "--policy"},
    {"expert_prefetch", "--prefetch"},
    {"expert_lookahead", "--lookahead"},
    {"offload_experts", "--expert-cache"},
};

static bool word_char(char c) {
    return isalnum((unsigned char)c) || c == '_';
}

/* The option of the parameter name at s (a whole word), or NULL; *len its length. */
static const char *flag_at(const char *msg, const char *s, size_t *len) {
    if (s > msg && word_char(s[-1])) return NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        size_t n = strlen(table[i].param);
        if (!strncmp(s, table[i].param, n) && !word_char(s[n])) {
            *len = n;
            return table[i].flag;
        }
    }
    return NULL;
}

void cli_param_flags(const char *msg, char *out, size_t size) {
    size_t used = 0;
    for (const char *s = msg; *s && used + 1 < size;) {
        size_t len = 0;
        const char *flag = flag_at(msg, s, &len);
        const char *piece = flag ? flag : s;
        size_t n = flag ? strlen(flag) : 1;
        if (used + n >= size) break;
        memcpy(out + used, piece, n);
        used += n;
        s += flag ? len : 1;
    }
    out[used] = '\0';
}

int cli_param_fail(const char *cmd, const struct moeinf_error *err, int code) {
    char msg[sizeof err->msg + 64];
    cli_param_flags(err->msg[0] ? err->msg : moeinf_status_str(err->status), msg, sizeof msg);
    /* the programs' convention (app/args.h): a usage error names the command */
    if (code == CLI_EXIT_USAGE) {
        fprintf(stderr, "moeinf %s: %s\n", cmd, msg);
    } else {
        fprintf(stderr, "moeinf: %s\n", msg);
    }
    return code;
}
