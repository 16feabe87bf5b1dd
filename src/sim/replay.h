/*
 * replay.h - the simulator: drives the expert cache and a policy (src/experts) over a trace.
 * It holds no policy logic; moeinf_sim_run (moeinf_sim.h) is the public entry.
 */
#ifndef MOEINF_SIM_REPLAY_H
#define MOEINF_SIM_REPLAY_H

#include "experts/policy.h"
#include "moeinf_sim.h"

/* Offline policies, known to the simulator only. */
extern const struct moeinf_policy_ops moeinf_policy_belady;
extern const struct moeinf_policy_ops moeinf_policy_freq_oracle; /* policy_freq_oracle.c */

/* A policy the simulator accepts (online registry first, then offline), or NULL. */
const struct moeinf_policy_ops *moeinf_sim_policy_find(const char *name);

/* The cache size for params on a trace of n_ids experts: cache_experts if > 0, else
 * cache_percent of n_ids rounded to the nearest integer; MOEINF_ERR_ARG when neither is set. */
enum moeinf_status moeinf_sim_cache_size(const struct moeinf_sim_params *params, uint32_t n_ids,
                                         int *out, struct moeinf_error *err);

/* moeinf_sim_run with the policy given as a table (params->policy is ignored): lets tests
 * replay policies that are not registered. */
enum moeinf_status moeinf_sim_replay(const struct moeinf_sim_params *params,
                                     const struct moeinf_policy_ops *ops,
                                     struct moeinf_sim_result *out, struct moeinf_error *err);

#endif
