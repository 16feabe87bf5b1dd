/* gen_model.c - placeholder until the GGUF writer lands. */
#include "base/status.h"
#include "moeinf.h"

struct moeinf_gen_params moeinf_gen_params_default(void) {
    struct moeinf_gen_params p = {0};
    return p;
}

enum moeinf_status moeinf_gen_model(const struct moeinf_gen_params *params, const char *path,
                                    struct moeinf_error *err) {
    (void)params;
    return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED, "%s: gen-model is not built yet", path);
}
