/*
 * vocab.h - the vocabulary and its tokenizer, as llama.cpp implements tokenizer.ggml.model =
 * "llama" (SentencePiece, llm_tokenizer_spm) and "gpt2" (byte-level BPE, llm_tokenizer_bpe;
 * the BPE steps are in bpe.c, the pre-tokenizers in pretok.h).
 *
 * Tokenizing (moeinf_vocab_tokenize):
 *   1. Special-token partition: the text is split around every occurrence of the texts of
 *      control, user-defined and unknown tokens, longest text first (ties: lower id first).
 *      Without parse_special only user-defined tokens are split out (control and unknown
 *      ones are then ordinary text). Tokens with the rstrip/lstrip attribute (set by name for
 *      Phi-3 vocabularies, as llama.cpp does) swallow the whitespace after/before them.
 *   2. Every remaining text fragment gets a leading space if add_space_prefix is on and it is
 *      the first fragment or follows a special token; spaces become U+2581.
 *   3. The fragment is cut into UTF-8 characters (length from the lead byte, clamped at the
 *      end); adjacent pairs whose concatenation is a token are merged, highest score first
 *      (ties: leftmost pair), until no pair is a token.
 *   4. Each final piece that is not a token (a character missing from the vocabulary) is
 *      emitted byte by byte as <0xXX> tokens (else the one-byte token, else the unknown token).
 *   5. add_special: BOS first if add_bos, EOS last if add_eos.
 *   BPE replaces steps 2-4 with bpe.c's: invalid UTF-8 -> U+FFFD, the pre-tokenizer's words,
 *   bytes -> GPT-2 characters, merges by rank; no space prefix.
 *
 * BPE defaults (llama.cpp's): BOS and EOS id 11 when in range, no unknown token, add_bos
 * false (true for the llama3 pre-tokenizers), add_space_prefix false; a missing
 * tokenizer.ggml.pre means "default" (one line on stderr says so).
 *
 * Pieces (moeinf_vocab_piece): normal tokens with U+2581 turned back into spaces (BPE: each
 * GPT-2 character back to its byte; characters outside that map as they are); byte tokens
 * as their byte; user-defined tokens as their text; control and unknown tokens as their text
 * only when special is true (else empty); unused and undefined tokens are empty. No leading
 * space is stripped, like llama_token_to_piece(..., lstrip = 0, ...): streaming "Hello" after
 * BOS prints " Hello". moeinf_vocab_detokenize has llama.cpp's llama_detokenize rules instead
 * (for BPE vocabularies whose pre-tokenizer asks for it, its clean_up_tokenization_spaces).
 *
 * End of generation (moeinf_vocab_is_eog): EOS, EOT, EOM, FIM pad/repo/file-separator (from
 * metadata, else found by their usual texts, lowest id first), and every token whose text is
 * one of llama.cpp's end-of-generation texts ("</s>", "<|endoftext|>", "<|im_end|>",
 * "<|eot_id|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", ...); those tokens are
 * treated as control tokens, as llama.cpp does. llama.cpp's exceptions, by text: when
 * "<|return|>" and "<|call|>" (or "<|calls|>" and "<|flush|>") end generation, "<|end|>" does
 * not and is user-defined (gpt-oss's o200k_harmony, solar-open); "<|channel|>", "<|message|>",
 * "<|start|>" and "<|constrain|>" are always user-defined, so a gpt-oss answer streams as
 * "<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>..."
 * up to the "<|return|>" that ends it (and, being user-defined, they are split out of any
 * text, with or without parse_special); "</s>" is a normal token when "<|tool_response>" ends
 * generation (gemma4).
 *
 * A vocabulary is read-only after init and may be shared between threads.
 */
#ifndef MOEINF_TOKENIZER_VOCAB_H
#define MOEINF_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

struct moeinf_gguf;
struct moeinf_vocab;

/* tokenizer.ggml.token_type values. */
enum moeinf_token_type {
    MOEINF_TOKEN_TYPE_UNDEFINED = 0,
    MOEINF_TOKEN_TYPE_NORMAL = 1,
    MOEINF_TOKEN_TYPE_UNKNOWN = 2,
    MOEINF_TOKEN_TYPE_CONTROL = 3,
    MOEINF_TOKEN_TYPE_USER_DEFINED = 4,
    MOEINF_TOKEN_TYPE_UNUSED = 5,
    MOEINF_TOKEN_TYPE_BYTE = 6,
};

/* Token attributes (llama.cpp's llama_token_attr bits). */
enum moeinf_token_attr {
    MOEINF_TOKEN_ATTR_UNDEFINED = 0,
    MOEINF_TOKEN_ATTR_UNKNOWN = 1 << 0,
    MOEINF_TOKEN_ATTR_UNUSED = 1 << 1,
    MOEINF_TOKEN_ATTR_NORMAL = 1 << 2,
    MOEINF_TOKEN_ATTR_CONTROL = 1 << 3,
    MOEINF_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    MOEINF_TOKEN_ATTR_BYTE = 1 << 5,
    MOEINF_TOKEN_ATTR_LSTRIP = 1 << 7,
    MOEINF_TOKEN_ATTR_RSTRIP = 1 << 8,
};

/* FIM token kinds (tokenizer.ggml.fim_*_token_id); pad, rep and sep end generation. */
enum moeinf_vocab_fim {
    MOEINF_VOCAB_FIM_PRE,
    MOEINF_VOCAB_FIM_SUF,
    MOEINF_VOCAB_FIM_MID,
    MOEINF_VOCAB_FIM_PAD,
    MOEINF_VOCAB_FIM_REP,
    MOEINF_VOCAB_FIM_SEP,
    MOEINF_VOCAB_N_FIM
};

/*
 * A vocabulary as plain arrays: what tokenizer.ggml.* holds. Used by
 * moeinf_vocab_init_from_gguf and directly by tests. Special ids and flags use -1 for "key
 * absent", in which case llama.cpp's SentencePiece defaults apply (BOS 1, EOS 2, UNK 0 when
 * in range, others none; add_bos true, add_eos false, add_space_prefix true).
 */
struct moeinf_vocab_desc {
    const char *source;        /* file name for messages ("(memory)" if NULL) */
    const char *model;         /* tokenizer.ggml.model; NULL = "llama" */
    const char *pre;           /* tokenizer.ggml.pre (gpt2 only); NULL = absent: "default" */
    const char *name;          /* general.name (Phi-3 strip rules), may be NULL */
    uint32_t n_tokens;         /* entries in texts, text_lens */
    const char *const *texts;  /* token texts (not necessarily NUL-terminated) */
    const uint64_t *text_lens; /* NULL: texts are NUL-terminated */
    const float *scores;       /* NULL: all 0 */
    uint64_t n_scores;         /* entries in scores (>= n_tokens) */
    const int32_t *types;      /* NULL: all normal (enum moeinf_token_type) */
    uint64_t n_types;          /* entries in types (>= n_tokens) */
    int64_t bos_id, eos_id, unk_id, pad_id, eot_id, eom_id; /* -1: absent */
    int64_t fim_ids[MOEINF_VOCAB_N_FIM];                    /* -1: absent */
    int add_bos, add_eos, add_space_prefix;                 /* 0/1, -1: absent */
    /* tokenizer.ggml.merges (gpt2 only): "left right" strings, rank = index. */
    const char *const *merges;
    const uint64_t *merge_lens; /* NULL: merges are NUL-terminated */
    uint64_t n_merges;
};

/* A desc with every optional field absent. */
struct moeinf_vocab_desc moeinf_vocab_desc_default(void);

/*
 * Builds a vocabulary. MOEINF_ERR_UNSUPPORTED for a model other than "llama" and "gpt2"
 * (naming it) and for an unknown gpt2 pre-tokenizer (naming it);
 * MOEINF_ERR_FORMAT for no tokens, more than INT32_MAX tokens, fewer scores or types than
 * tokens, a NaN score, duplicate texts, a special id out of range, add_bos/add_eos without
 * the token, a byte-type token whose text is not <0xXX>.
 */
enum moeinf_status moeinf_vocab_init(const struct moeinf_vocab_desc *desc,
                                     struct moeinf_vocab **out, struct moeinf_error *err);

/* Reads tokenizer.ggml.* (and general.name) from an open GGUF; the vocabulary copies what it
 * needs, so g may be closed afterwards. Errors as moeinf_vocab_init, plus missing or mistyped
 * keys (MOEINF_ERR_FORMAT naming the key). */
enum moeinf_status moeinf_vocab_init_from_gguf(const struct moeinf_gguf *g,
                                               struct moeinf_vocab **out, struct moeinf_error *err);

void moeinf_vocab_free(struct moeinf_vocab *v);

int32_t moeinf_vocab_n_tokens(const struct moeinf_vocab *v);
int32_t moeinf_vocab_bos(const struct moeinf_vocab *v); /* -1 if none */
int32_t moeinf_vocab_eos(const struct moeinf_vocab *v); /* -1 if none */
int32_t moeinf_vocab_eot(const struct moeinf_vocab *v); /* -1 if none */
int32_t moeinf_vocab_eom(const struct moeinf_vocab *v); /* -1 if none */
int32_t moeinf_vocab_unk(const struct moeinf_vocab *v); /* -1 if none */
int32_t moeinf_vocab_pad(const struct moeinf_vocab *v); /* -1 if none */
bool moeinf_vocab_add_bos(const struct moeinf_vocab *v);
bool moeinf_vocab_add_eos(const struct moeinf_vocab *v);
bool moeinf_vocab_add_space_prefix(const struct moeinf_vocab *v);
/* False for ids outside the vocabulary. */
bool moeinf_vocab_is_eog(const struct moeinf_vocab *v, int32_t id);
/* Attribute bits of a token (enum moeinf_token_attr); 0 for ids outside the vocabulary. */
unsigned moeinf_vocab_attr(const struct moeinf_vocab *v, int32_t id);
/* The raw token text (with U+2581, <0xXX> as stored); borrowed; NULL for a bad id. */
const char *moeinf_vocab_text(const struct moeinf_vocab *v, int32_t id, size_t *len);
float moeinf_vocab_score(const struct moeinf_vocab *v, int32_t id); /* 0 for a bad id */
/* Id of a token text, or -1. */
int32_t moeinf_vocab_find(const struct moeinf_vocab *v, const char *text, size_t len);

/*
 * Tokenizes len bytes of text (taken literally unless parse_special). On success *out is
 * malloc'ed (never NULL, free() it) and holds *n_out ids. MOEINF_ERR_FORMAT if a character
 * has neither a byte token nor an unknown token to fall back on; MOEINF_ERR_NOMEM.
 */
enum moeinf_status moeinf_vocab_tokenize(const struct moeinf_vocab *v, const char *text, size_t len,
                                         bool add_special, bool parse_special, int32_t **out,
                                         size_t *n_out, struct moeinf_error *err);

/*
 * As moeinf_vocab_tokenize with parse_special, except that a control (or unknown) token whose
 * text overlaps one of the n_plain byte ranges [plain[2i], plain[2i + 1]) is not recognised
 * there: that text is tokenized as text, as without parse_special (user-defined tokens are
 * split out everywhere, as they are without parse_special). The ranges must be sorted and
 * disjoint (MOEINF_ERR_ARG otherwise). The fragments between the recognised special tokens are
 * the same as the whole text's, so a text whose plain ranges hold no control token's text
 * tokenizes exactly as with parse_special.
 */
enum moeinf_status moeinf_vocab_tokenize_mixed(const struct moeinf_vocab *v, const char *text,
                                               size_t len, bool add_special, const size_t *plain,
                                               size_t n_plain, int32_t **out, size_t *n_out,
                                               struct moeinf_error *err);

/* The bytes of a token (rules above); borrowed from v, not NUL-terminated. An id outside the
 * vocabulary gives "" with *len = 0. */
const char *moeinf_vocab_piece(const struct moeinf_vocab *v, int32_t id, bool special, size_t *len);

/*
 * llama_detokenize's rules: the pieces concatenated (special tokens rendered iff
 * unparse_special), with remove_special dropping a leading BOS (when add_bos) and a trailing
 * EOS (when add_eos), and, when add_space_prefix, one leading space of the first piece removed
 * unless a BOS was dropped. *out is malloc'ed and NUL-terminated (*n_out excludes the NUL).
 * MOEINF_ERR_ARG for an id outside the vocabulary.
 */
enum moeinf_status moeinf_vocab_detokenize(const struct moeinf_vocab *v, const int32_t *ids,
                                           size_t n, bool remove_special, bool unparse_special,
                                           char **out, size_t *n_out, struct moeinf_error *err);

/*
 * Streaming detokenizer: feed pieces as they are generated; what comes out is always valid
 * UTF-8. Complete characters pass at once; the bytes of a character split across tokens are
 * held back (at most 3) until it is complete. Bytes that cannot form a character (a stray
 * continuation, an overlong form, a surrogate, a lead byte whose sequence is cut short by
 * another character) come out as U+FFFD, one per maximal invalid subpart, as Unicode
 * recommends and chat front ends do. moeinf_detok_flush ends the text: a held incomplete
 * character becomes one U+FFFD.
 *
 *   struct moeinf_detok d; moeinf_detok_init(&d);
 *   n = moeinf_detok_push(&d, piece, len, buf);   buf holds >= MOEINF_DETOK_OUT_MAX(len) bytes
 *   n = moeinf_detok_flush(&d, buf);              buf holds >= MOEINF_DETOK_HOLD bytes
 */
#define MOEINF_DETOK_HOLD 4
/* Output bound of one push: every byte, held ones included, may become a 3-byte U+FFFD. */
#define MOEINF_DETOK_OUT_MAX(len) (3 * ((size_t)(len) + MOEINF_DETOK_HOLD))

struct moeinf_detok {
    unsigned char held[MOEINF_DETOK_HOLD];
    size_t n_held;
};

void moeinf_detok_init(struct moeinf_detok *d);
/* Writes the bytes ready to print to out and returns their count. */
size_t moeinf_detok_push(struct moeinf_detok *d, const char *piece, size_t len, char *out);
size_t moeinf_detok_flush(struct moeinf_detok *d, char *out);

#endif
