/*
 * reasoning.h - the parts of the reasoning splitter (reasoning.c) that moeinf.h does not
 * export: the markers a chat template's models think between, and a splitter for any markers
 * after a prompt given as text. moeinf_chat_reasoning_init composes the two; the tests and the
 * fuzz target call them directly.
 */
#ifndef MOEINF_CHAT_REASONING_H
#define MOEINF_CHAT_REASONING_H

#include "moeinf.h"

/* The markers the models of chat template `name` think between: "<think>", "</think>" (the
 * families that think, and any template this version does not name), or NULL, NULL for the
 * families that do not (mistral, llama3, deepseek2, olmoe). */
void moeinf_chat_reasoning_markers(const char *name, const char **start, const char **end);

/* A splitter for text generated after `prompt` (prompt_len bytes; may be NULL when 0), as
 * moeinf.h describes. start and end NULL (a model that does not think): everything is answer.
 * MOEINF_ERR_ARG when only one of them is given, or one is empty, or prompt is NULL with
 * prompt_len > 0. */
enum moeinf_status moeinf_reasoning_init(const char *start, const char *end, const char *prompt,
                                         size_t prompt_len, bool extract,
                                         struct moeinf_reasoning **out, struct moeinf_error *err);

#endif
