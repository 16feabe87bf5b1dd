/* gen_types.c - gen-model's --type names (gen_types.h): the generator's own table
 * (gen/quant_mix.h), so that the names the command line takes are the ones it writes. */
#include "app/gen_types.h"

#include "base/tensor_type.h"
#include "gen/quant_mix.h"

int cli_gen_type_by_name(const char *name) {
    return moeinf_gen_type_by_name(name);
}

const char *cli_gen_type_name(int type) {
    return moeinf_gen_type_name(type);
}

const char *cli_gen_type_names(void) {
    return moeinf_gen_type_names();
}

const char *cli_tensor_type_name(int type) {
    return moeinf_type_name(type);
}

uint64_t cli_tensor_row_bytes(int type, int64_t n) {
    return moeinf_row_bytes((enum moeinf_type)type, n);
}
