/* arch.c - the table of architectures: one row per file of src/model/arch/ (see arch.h). */
#include "model/arch.h"

#include <stdio.h>
#include <string.h>

/* one architecture a line */
/* clang-format off */
static const struct moeinf_arch *const registry[] = {
    &moeinf_arch_llama,
    &moeinf_arch_qwen2moe,
    &moeinf_arch_qwen3moe,
    &moeinf_arch_qwen3vlmoe,
    &moeinf_arch_olmoe,
    &moeinf_arch_qwen35moe,
    &moeinf_arch_qwen3next,
    &moeinf_arch_gptoss,
    &moeinf_arch_deepseek2,
    &moeinf_arch_glm4moe,
    &moeinf_arch_minimax_m2,
};

/* clang-format on */

const struct moeinf_arch *moeinf_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        if (strlen(registry[i]->name) == len && !memcmp(registry[i]->name, name, len)) {
            return registry[i];
        }
    }
    return NULL;
}

void moeinf_arch_names(char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof registry / sizeof registry[0] && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", registry[i]->name);
        if (n < 0) break;
        used += (size_t)n;
    }
}
