/*
 * test_default_model.c - the default model as a new user meets it: the binary carries the
 * trained model (models/trained-moe-Q8_0.gguf) and writes exactly those bytes to
 * $XDG_CACHE_HOME/moeinf, else $HOME/.cache/moeinf, on first use, then reuses the file; an
 * unset or missing HOME is refused. The README's first command prints text: at least four in
 * five of the words it generates are alphabetic and at least a fifth are among the commonest
 * English words (the list below, a fixed expectation independent of the model). And the model
 * has learned English: on sentences it never saw, its mean cross-entropy per token is below
 * half of the ln(n_vocab) nats a model that knows nothing (uniform) scores.
 */
#include <ctype.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "golden.h"
#include "moeinf.h"
#include "test.h"

static int run_cmd(const char *cmd, char *out, size_t out_size, char *errbuf, size_t err_size) {
    return test_run_shell("default_model", cmd, out, out_size, errbuf, err_size);
}

/* The environment of a user with no default-model settings. */
static const char *const env_clean = "env -u MOEINF_DEFAULT_MODEL -u XDG_CACHE_HOME";

/* The one default-moe-*.gguf file in dir (its name into path), or false. */
static bool find_cached(const char *dir, char *path, size_t size) {
    DIR *d = opendir(dir);
    int n = 0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): main thread
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (!strncmp(e->d_name, "default-moe-", 12) && len > 5 &&
            !strcmp(e->d_name + len - 5, ".gguf")) {
            snprintf(path, size, "%s/%s", dir, e->d_name);
            n++;
        }
    }
    if (d) closedir(d);
    CHECK_MSG(n == 1, "%s: %d default-moe-*.gguf files", dir, n);
    return n == 1;
}

/* Entries of dir besides . and .. */
static int n_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): main thread
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return n;
}

/* The file at path holds exactly the committed model's bytes. */
static void check_same_bytes(const char *path) {
    char committed[1024];
    test_src_path("models/trained-moe-Q8_0.gguf", committed, sizeof committed);
    size_t n_a = 0;
    size_t n_b = 0;
    char *a = golden_read_file(path, &n_a);
    char *b = golden_read_file(committed, &n_b);
    CHECK_MSG(a && b && n_a == n_b && n_a > 0 && !memcmp(a, b, n_a), "%s differs from %s", path,
              committed);
    free(a);
    free(b);
}

static void test_first_use_and_reuse(void) {
    char root[512];
    char cmd[4096];
    char out[4096];
    char err[4096];
    char cache[1024];
    char path[1024];
    char model[1024];
    char ref[4096];
    test_tmp_path("default_home", root, sizeof root);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/home %s/xdg", root, root, root);
    CHECK_EQ_INT(system(cmd), 0); // NOLINT(concurrency-mt-unsafe): main thread

    /* first use: written, announced, and the same tokens as the committed file gives */
    const char *args = "run -p 'Once upon a time' -n 8 --temp 0 --print-ids -t 1";
    const char *opts = args + 4; /* without "run " */
    snprintf(cmd, sizeof cmd, "%s HOME=%s/home %s %s", env_clean, root, test_moeinf_bin(), args);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(err, "moeinf: writing the default model to ");
    CHECK_STR_CONTAINS(err, "(first use)");
    snprintf(cache, sizeof cache, "%s/home/.cache/moeinf", root);
    if (!find_cached(cache, path, sizeof path)) return;
    check_same_bytes(path);
    test_src_path("models/trained-moe-Q8_0.gguf", model, sizeof model);
    snprintf(cmd, sizeof cmd, "%s run -m %s %s", test_moeinf_bin(), model, opts);
    CHECK_EQ_INT(run_cmd(cmd, ref, sizeof ref, err, sizeof err), 0);
    CHECK_MSG(!strcmp(out, ref), "default: %s; -m: %s", out, ref);

    /* second use: the cached file, nothing written */
    snprintf(cmd, sizeof cmd, "%s HOME=%s/home %s %s", env_clean, root, test_moeinf_bin(), args);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strstr(err, "first use") == NULL, "%s", err);
    CHECK(!strcmp(out, ref));

    /* a cached file of the wrong size (say, cut short by hand) is written again */
    CHECK(truncate(path, 100) == 0);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(err, "(first use)");
    check_same_bytes(path);
    CHECK_EQ_INT(n_entries(cache), 1); /* no temp file left */

    /* XDG_CACHE_HOME wins over HOME, which then need not exist */
    snprintf(cmd, sizeof cmd, "%s HOME=/nonexistent-home XDG_CACHE_HOME=%s/xdg %s %s", env_clean, root,
             test_moeinf_bin(), args);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(cache, sizeof cache, "%s/xdg/moeinf", root);
    if (find_cached(cache, path, sizeof path)) check_same_bytes(path);
    CHECK(!strcmp(out, ref));

    /* MOEINF_DEFAULT_MODEL names the file: written there when missing, used when present */
    snprintf(path, sizeof path, "%s/named.gguf", root);
    snprintf(cmd, sizeof cmd,
             "env -u XDG_CACHE_HOME HOME=/nonexistent-home MOEINF_DEFAULT_MODEL=%s %s %s", path,
             test_moeinf_bin(), args);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    check_same_bytes(path);
    CHECK(!strcmp(out, ref));
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strstr(err, "first use") == NULL, "%s", err);
    /* ... whatever it holds: a broken file there is the user's, reported and left alone */
    CHECK(truncate(path, 100) == 0);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "moeinf: ");
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 100);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK_EQ_INT(system(cmd), 0); // NOLINT(concurrency-mt-unsafe): main thread
}

/* Where the default model may not go: a HOME that is unset or missing is refused (it is not
 * replaced by a shared folder such as /tmp, nor created), and so is an XDG_CACHE_HOME whose
 * parent is missing. */
static void test_refused_locations(void) {
    char cmd[4096];
    char out[4096];
    char err[4096];
    snprintf(cmd, sizeof cmd, "%s HOME=/nonexistent-home %s run -p hi -n 1", env_clean,
             test_moeinf_bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "moeinf: HOME=/nonexistent-home is not an existing folder");
    CHECK(!test_file_exists("/nonexistent-home"));
    snprintf(cmd, sizeof cmd, "%s -u HOME %s run -p hi -n 1", env_clean, test_moeinf_bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "moeinf: HOME is not set");
    snprintf(cmd, sizeof cmd, "%s XDG_CACHE_HOME=/nonexistent-dir/cache %s run -p hi -n 1", env_clean,
             test_moeinf_bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "moeinf: /nonexistent-dir/cache: cannot create the folder");
    CHECK(!test_file_exists("/nonexistent-dir"));
}

/* The 100 commonest English words (word-frequency lists of general English agree on nearly all
 * of them; inflected forms of "be" and "have" included). */
static const char *const common_words[] = {
    "the",   "be",    "to",   "of",    "and",   "a",      "in",    "that", "have", "i",    "it",
    "for",   "not",   "on",   "with",  "he",    "as",     "you",   "do",   "at",   "this", "but",
    "his",   "by",    "from", "they",  "we",    "say",    "her",   "she",  "or",   "an",   "will",
    "my",    "one",   "all",  "would", "there", "their",  "what",  "so",   "up",   "out",  "if",
    "about", "who",   "get",  "which", "go",    "me",     "when",  "make", "can",  "like", "time",
    "no",    "just",  "him",  "know",  "take",  "people", "into",  "year", "your", "good", "some",
    "could", "them",  "see",  "other", "than",  "then",   "now",   "look", "only", "come", "its",
    "over",  "think", "also", "back",  "after", "use",    "two",   "how",  "our",  "work", "first",
    "well",  "way",   "even", "new",   "want",  "any",    "these", "give", "most", "is",   "are",
    "was",   "were",  "has",  "had",   "been",  "each",   "may",   "more", "used", "such", "must",
};

static bool is_common(const char *w) {
    for (size_t i = 0; i < sizeof common_words / sizeof common_words[0]; i++) {
        if (!strcmp(w, common_words[i])) return true;
    }
    return false;
}

/* One whitespace-separated word: alphabetic once the punctuation around it is removed
 * (letters, with apostrophes or hyphens inside); *common when it is in common_words. */
static bool classify(const char *word, size_t len, bool *common) {
    const char *edge = ".,;:!?\"'()[]";
    while (len && strchr(edge, word[0]))
        word++, len--;
    while (len && strchr(edge, word[len - 1]))
        len--;
    char low[64];
    bool alpha = len > 0 && len < sizeof low;
    for (size_t i = 0; alpha && i < len; i++) {
        unsigned char c = (unsigned char)word[i];
        bool inner = (c == '\'' || c == '-') && i > 0 && i + 1 < len;
        alpha = isalpha(c) || inner;
        low[i] = (char)tolower(c);
    }
    if (alpha) low[len] = '\0';
    *common = alpha && is_common(low);
    return alpha;
}

/* The README's first command (its default sampling; the default seed and four others): the
 * generated words read as English text. */
static void test_readme_command_reads_as_text(void) {
    char root[512];
    char cmd[4096];
    char out[8192] = "";
    char err[4096] = "";
    test_tmp_path("default_text_home", root, sizeof root);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", root, root);
    CHECK_EQ_INT(system(cmd), 0); // NOLINT(concurrency-mt-unsafe): main thread
    const char *prompt = "The module";
    int n_words = 0;
    int n_alpha = 0;
    int n_common = 0;
    for (int s = 0; s < 5; s++) {
        char seed[32] = "";
        if (s > 0) snprintf(seed, sizeof seed, "--seed %d", s);
        snprintf(cmd, sizeof cmd, "%s HOME=%s %s run -p '%s' -n 32 %s", env_clean, root,
                 test_moeinf_bin(), prompt, seed);
        CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
        CHECK_MSG(!strncmp(out, prompt, strlen(prompt)), "%s", out);
        const char *p = out + strlen(prompt);
        int words = 0;
        int alpha = 0;
        int common = 0;
        while (*p) {
            while (*p && isspace((unsigned char)*p))
                p++;
            size_t len = 0;
            while (p[len] && !isspace((unsigned char)p[len]))
                len++;
            if (!len) break;
            bool c;
            alpha += classify(p, len, &c);
            common += c;
            words++;
            p += len;
        }
        fprintf(stderr, "  seed %s: %d words, %d alphabetic, %d common:%s\n",
                s ? seed + 7 : "default", words, alpha, common, out + strlen(prompt));
        n_words += words;
        n_alpha += alpha;
        n_common += common;
    }
    CHECK_MSG(n_words >= 40, "%d words in 5 runs of 32 tokens", n_words);
    CHECK_MSG(5 * n_alpha >= 4 * n_words, "%d of %d words alphabetic", n_alpha, n_words);
    CHECK_MSG(5 * n_common >= n_words, "%d of %d words common", n_common, n_words);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK_EQ_INT(system(cmd), 0); // NOLINT(concurrency-mt-unsafe): main thread
}

/* Sentences written for this test (not from the training text), in the register of the
 * Python documentation the model was trained on. */
static const char *const held_out[] = {
    "The function returns a new list that holds the items of the sequence in sorted order.",
    "If the file does not exist, an exception is raised and nothing is written.",
    "This module provides a class that reads data from a socket and writes it to a file.",
};

/* Mean -ln p(token | the tokens before it) over the tokens after BOS, by the engine. */
static double mean_nll(struct moeinf_model *model, const char *text, int *n_pred) {
    struct moeinf_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    *n_pred = 0;
    if (moeinf_tokenize(model, text, strlen(text), true, false, &ids, &n, &err) != MOEINF_OK) {
        CHECK_MSG(false, "tokenize: %s", err.msg);
        return INFINITY;
    }
    const int n_vocab = moeinf_model_n_vocab(model);
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    struct moeinf_context *ctx = NULL;
    float *logits = malloc(n * (size_t)n_vocab * sizeof(float));
    double sum = 0.0;
    bool ok = logits && moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK &&
              moeinf_decode(ctx, ids, (int)n, logits, true, &err) == MOEINF_OK;
    CHECK_MSG(ok, "decode: %s", err.msg);
    for (size_t i = 0; ok && i + 1 < n; i++) {
        const float *row = logits + i * (size_t)n_vocab;
        double mx = row[0];
        double z = 0.0;
        for (int v = 1; v < n_vocab; v++)
            mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < n_vocab; v++)
            z += exp((double)row[v] - mx);
        sum += mx + log(z) - (double)row[ids[i + 1]];
        (*n_pred)++;
    }
    moeinf_context_free(ctx);
    free(logits);
    free(ids);
    return *n_pred ? sum / *n_pred : INFINITY;
}

static void test_predicts_held_out_text(void) {
    char path[1024];
    test_src_path("models/trained-moe-Q8_0.gguf", path, sizeof path);
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) return;
    const double uniform = log((double)moeinf_model_n_vocab(model));
    for (size_t i = 0; i < sizeof held_out / sizeof held_out[0]; i++) {
        int n = 0;
        double nll = mean_nll(model, held_out[i], &n);
        fprintf(stderr, "  %.3f nats/token over %d tokens (uniform %.3f): %s\n", nll, n, uniform,
                held_out[i]);
        CHECK_MSG(n >= 10 && nll < uniform / 2, "%.3f nats/token, uniform %.3f", nll, uniform);
    }
    moeinf_model_free(model);
}

int main(void) {
    RUN(test_first_use_and_reuse);
    RUN(test_refused_locations);
    RUN(test_readme_command_reads_as_text);
    RUN(test_predicts_held_out_text);
    return test_report();
}
