/*
 * pretok.h - the pre-tokenizers of byte-level BPE vocabularies (tokenizer.ggml.pre): the text
 * is cut into words by a list of regular expressions before BPE merges run inside each word.
 *
 * The patterns are the ones llama.cpp's llama-vocab.cpp lists per pre-tokenizer name (taken
 * from each model's tokenizer.json; deepseek-llm's and -coder's code-point classes leave out
 * the whitespace inside their ranges, as llama.cpp in effect does: pretok.c says why),
 * compiled with PCRE2 (UTF, Unicode properties). As in llama.cpp, the expressions apply one
 * after another: each one splits every piece the previous ones left, and the stretches
 * between its matches stay pieces too, so the words are the pieces of the last split. \s and \S
 * mean llama.cpp's whitespace set (Unicode White_Space: tab..CR, space, U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), written out so the result does not
 * depend on the PCRE2 version's \s.
 *
 * Where this and llama.cpp can differ (none of it shows in llama.cpp's test vectors):
 *   - llama.cpp runs most patterns on a copy of the text with every non-ASCII character
 *     replaced by a stand-in for its category, and its stand-in pattern for \p{S} misses
 *     ASCII '~' (a math symbol); here '~' is \p{S}, as in the published patterns (this
 *     matters for deepseek-v3: "~" next to a letter or other punctuation).
 *   - llama.cpp's own code for the gpt-2, llama3, qwen2 and qwen35 patterns does not count
 *     unassigned code points as [^\s\p{L}\p{N}]; PCRE2 does, as the patterns say.
 *   - Unicode properties are PCRE2's (Unicode 14 in Debian 12's 10.42), llama.cpp's are its
 *     own table's: characters assigned in between may be classified differently.
 *
 * Where this, like llama.cpp, differs from a published pattern: gpt-4o (o200k, gpt-oss's
 * vocabulary) is llama.cpp's spelling of it, in which only ASCII letters have a case (any other
 * letter may sit in an upper- or a lower-case run, so "ПриветМир" is one word, where o200k
 * gives "Привет" "Мир") and combining marks are not letters (so "Cafe\u0301" is "Cafe" and
 * the mark, and Indic, Thai and Arabic words break at their vowel signs, where o200k keeps
 * them whole). kimi-k2 is likewise llama.cpp's own split, not tokenization_kimi.py's pattern:
 * any letters but Han make one run (no split at case changes), combining marks are no letters,
 * and Han is llama.cpp's ranges (not Unicode's Han script: U+3005, U+3007 and the radicals are
 * not in them). tools/tokenizer/pretok_cases.py --published lists such texts.
 *
 * A pre-tokenizer is read-only once made and may be used by several threads at once.
 */
#ifndef MOEINF_TOKENIZER_PRETOK_H
#define MOEINF_TOKENIZER_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

struct moeinf_pretok;

/* What a pre-tokenizer name implies besides its split (llama.cpp's per-name flags). */
struct moeinf_pretok_flags {
    bool ignore_merges; /* a word that is a token as a whole is taken as is (llama3) */
    bool clean_spaces;  /* detokenizing removes spaces before ?!., and some contractions */
    bool add_bos;       /* default for tokenizer.ggml.add_bos_token when absent */
    bool no_bos;        /* no BOS when tokenizer.ggml.bos_token_id is absent (glm4) */
};

/* A piece of text: bytes [off, off + len). */
struct moeinf_span {
    size_t off, len;
};

/*
 * Compiles the pre-tokenizer of `name` ("default" when NULL). MOEINF_ERR_UNSUPPORTED naming
 * it, and the known names, for a name this table does not have; MOEINF_ERR_NOMEM.
 */
enum moeinf_status moeinf_pretok_create(const char *name, struct moeinf_pretok **out,
                                        struct moeinf_error *err);
void moeinf_pretok_free(struct moeinf_pretok *p);

/* The canonical name of its table entry ("llama3" for "llama-bpe", ...). */
const char *moeinf_pretok_name(const struct moeinf_pretok *p);
struct moeinf_pretok_flags moeinf_pretok_flags(const struct moeinf_pretok *p);

/*
 * Splits len bytes of valid UTF-8 (the caller has replaced invalid sequences) into words.
 * On success *words is malloc'ed (free() it; never NULL) and holds *n_words spans in order,
 * covering the text without gaps. MOEINF_ERR_NOMEM; MOEINF_ERR_ARG when PCRE2 gives up (its
 * match limits), naming the pattern.
 */
enum moeinf_status moeinf_pretok_split(const struct moeinf_pretok *p, const char *text, size_t len,
                                       struct moeinf_span **words, size_t *n_words,
                                       struct moeinf_error *err);

/* Every name the table knows, comma-separated, for messages and --help. */
const char *moeinf_pretok_known_names(void);

#endif
