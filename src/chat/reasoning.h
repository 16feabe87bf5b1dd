/*
 * reasoning.h - the parts of the reasoning splitter (reasoning.c) that moeinf.h does not
 * export: how a chat template's models write their thinking (a row of reasoning.c's table),
 * and a splitter for any such syntax after a prompt given as text. moeinf_chat_reasoning_init
 * composes the two; the tests and the fuzz target call them directly.
 */
#ifndef MOEINF_CHAT_REASONING_H
#define MOEINF_CHAT_REASONING_H

#include "moeinf.h"

/* How a family's models write their thinking. Two forms:
 *   - a block at the start of the text: `start` opens it (or the prompt does), the first of
 *     `ends` closes it, the rest is the answer ("<think>" ... "</think>");
 *   - channels (head_end not NULL; harmony): the text is a run of messages, each a header that
 *     begins with one of `heads` and ends with `head_end`, then a body that runs to one of
 *     `ends`. A body whose header holds `think_channel` is thinking, any other is answer. An
 *     end marker that is also a head stays to begin the next header. Text before any header
 *     is answer. */
struct moeinf_reasoning_syntax {
    const char *start;    /* block form; NULL with channels */
    const char *ends[5];  /* NULL-terminated */
    const char *heads[3]; /* channels: NULL-terminated */
    const char *head_end;
    const char *think_channel;
    bool lead_space; /* block form: whitespace before the start marker is dropped, and so is
                        the answer's leading whitespace after a prompt's closed block (GLM-4.5
                        writes "\n<think>" and "\nanswer") */
};

/* The syntax of the models of chat template `name`: "<think>" ... "</think>" (the families
 * that think, and any template this version does not name), harmony's channels ("harmony":
 * "<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>final<|message|>
 * answer", with or without the <|end|>), glm45's block with lead_space, or NULL for the
 * families that do not think (mistral, llama3, deepseek2, olmoe, kimi-k2). */
const struct moeinf_reasoning_syntax *moeinf_chat_reasoning_syntax(const char *name);

/* A splitter for text generated after `prompt` (prompt_len bytes; may be NULL when 0) in
 * syntax `syn` (NULL: a model that does not think, everything is answer), as moeinf.h
 * describes. MOEINF_ERR_ARG for a syntax without an end marker, with an empty marker, with a
 * start and channels or neither, or prompt NULL with prompt_len > 0. */
enum moeinf_status moeinf_reasoning_init_syntax(const struct moeinf_reasoning_syntax *syn,
                                                const char *prompt, size_t prompt_len, bool extract,
                                                struct moeinf_reasoning **out,
                                                struct moeinf_error *err);

/* moeinf_reasoning_init_syntax for the block form with one start and one end marker.
 * start and end NULL (a model that does not think): everything is answer.
 * MOEINF_ERR_ARG when only one of them is given, or one is empty, or prompt is NULL with
 * prompt_len > 0. */
enum moeinf_status moeinf_reasoning_init(const char *start, const char *end, const char *prompt,
                                         size_t prompt_len, bool extract,
                                         struct moeinf_reasoning **out, struct moeinf_error *err);

#endif
