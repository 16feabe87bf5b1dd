/*
 * tokenize.c - tokenizing speed of a vocabulary on a large text: bench_tokenize VOCAB.gguf
 * [FILE]. Without FILE the text is 1 MiB of a mixed paragraph (English prose, code, digits,
 * Cyrillic, CJK, emoji) repeated with a changing number, so that no two words repeat
 * exactly in sequence. Prints bytes, tokens, the best of 3 runs in seconds and MB/s. The
 * work is meant to grow linearly with the text (bpe.c, pretok.c): compare a 1 MiB and a
 * 4 MiB run (-x 4 repeats the text 4 times).
 *
 * -p PRE times only the split of pre-tokenizer PRE (for families without a vocabulary here:
 * qwen2, llama3, deepseek-v3, ...); the tokens column then counts words.
 *
 *   bench_tokenize ../shared/testdata/tokenizer/ggml-vocab-gpt-2.gguf
 *   bench_tokenize -x 4 ../shared/testdata/models/tiny-qwen2moe-F32.gguf README.md
 *   bench_tokenize -p qwen2 README.md
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "moeinf.h"
#include "tokenizer/pretok.h"
#include "tokenizer/vocab.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_file(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = len > 0 ? malloc((size_t)len) : NULL;
    if (buf && fread(buf, 1, (size_t)len, fp) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *n = buf ? (size_t)len : 0;
    return buf;
}

static char *synth_text(size_t want, size_t *n) {
    static const char para[] =
        "The expert cache keeps the hottest experts of each layer in fast memory; a miss "
        "costs %d microseconds. def route(x, k=2):\n    return topk(softmax(W @ x), k)\n"
        "\xd0\x9d\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3 "
        "\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8\xe5\xb7\xa5\xe4\xbd\x9c %d\xe5\xa4\xa9 "
        "\xf0\x9f\x9a\x80 It's 3.14159, isn't it?  \t\n\n";
    char *buf = malloc(want + 512);
    if (!buf) return NULL;
    size_t len = 0;
    for (int i = 0; len < want; i++)
        len += (size_t)snprintf(buf + len, 512, para, i * 7919 % 100000, i);
    *n = want;
    return buf;
}

/* One timed run: tokenize with v, or split with p; *count = tokens or words. */
static int run_once(const struct moeinf_vocab *v, const struct moeinf_pretok *p, const char *text,
                    size_t n, size_t *count, double *secs) {
    struct moeinf_error err;
    double t0 = now();
    if (v) {
        int32_t *ids = NULL;
        if (moeinf_vocab_tokenize(v, text, n, false, false, &ids, count, &err) != MOEINF_OK) {
            fprintf(stderr, "moeinf: %s\n", err.msg);
            return 1;
        }
        *secs = now() - t0;
        free(ids);
        return 0;
    }
    struct moeinf_span *w = NULL;
    if (moeinf_pretok_split(p, text, n, &w, count, &err) != MOEINF_OK) {
        fprintf(stderr, "moeinf: %s\n", err.msg);
        return 1;
    }
    *secs = now() - t0;
    free(w);
    return 0;
}

int main(int argc, char **argv) {
    int times = 1;
    int a = 1;
    const char *pre = NULL;
    while (a + 1 < argc && argv[a][0] == '-') {
        if (strcmp(argv[a], "-x") == 0)
            times = (int)strtol(argv[a + 1], NULL, 10);
        else if (strcmp(argv[a], "-p") == 0)
            pre = argv[a + 1];
        else
            break;
        a += 2;
    }
    if ((!pre && a >= argc) || times < 1) {
        fprintf(stderr, "usage: bench_tokenize [-x TIMES] VOCAB.gguf [FILE]\n"
                        "       bench_tokenize [-x TIMES] -p PRE [FILE]\n");
        return 2;
    }
    struct moeinf_error err;
    struct moeinf_vocab *v = NULL;
    struct moeinf_pretok *p = NULL;
    if (pre) {
        if (moeinf_pretok_create(pre, &p, &err) != MOEINF_OK) {
            fprintf(stderr, "moeinf: %s\n", err.msg);
            return 1;
        }
    } else {
        struct moeinf_gguf *g = NULL;
        if (moeinf_gguf_open(argv[a], &g, &err) != MOEINF_OK ||
            moeinf_vocab_init_from_gguf(g, &v, &err) != MOEINF_OK) {
            fprintf(stderr, "moeinf: %s\n", err.msg);
            return 1;
        }
        moeinf_gguf_free(g);
        a++;
    }
    size_t n1 = 0;
    char *one = a < argc ? read_file(argv[a], &n1) : synth_text(1u << 20, &n1);
    if (!one) {
        fprintf(stderr, "moeinf: cannot read the text\n");
        return 1;
    }
    size_t n = n1 * (size_t)times;
    char *text = malloc(n);
    double best = 1e30;
    size_t count = 0;
    int rc = text ? 0 : 1;
    for (int i = 0; !rc && i < times; i++)
        memcpy(text + (size_t)i * n1, one, n1);
    for (int r = 0; !rc && r < 3; r++) {
        double t = 0;
        rc = run_once(v, p, text, n, &count, &t);
        if (t < best) best = t;
    }
    if (!rc)
        printf("%zu bytes, %zu %s, %.3f s, %.2f MB/s\n", n, count, v ? "tokens" : "words", best,
               (double)n / best / 1e6);
    free(text);
    free(one);
    moeinf_vocab_free(v);
    moeinf_pretok_free(p);
    return rc;
}
