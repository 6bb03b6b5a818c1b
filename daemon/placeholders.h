/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "errors.h"
#include "util.h"

/*
 * Placeholders in header values: {{keyring:SERVICE:USER}} (SERVICE has no ':' or
 * '}', USER no '}') and {{exec:CMD}} (CMD is the shortest text up to the first
 * "}}"). Resolution is one pass over the value as written: what a placeholder
 * resolves to is never scanned again.
 */
enum up_ph_kind {
	UP_PH_LITERAL,
	UP_PH_KEYRING,
	UP_PH_EXEC,
};

struct up_ph_segment {
	enum up_ph_kind kind;
	char *a; /* literal text, keyring service, or exec command */
	char *b; /* keyring user */
};

struct up_ph_template {
	struct up_ph_segment *segs;
	size_t n;
	bool has_exec;
};

/* Splits a value; -EINVAL with why for a malformed placeholder or a line break. */
int up_ph_parse(const char *value, struct up_ph_template *t, char *why, size_t why_len) _wur_;
void up_ph_template_done(struct up_ph_template *t);

struct up_ruleset;
struct up_secret_store_impl;

struct up_resolve_options {
	bool allow_exec;
	unsigned exec_timeout_ms; /* 0: UP_EXEC_TIMEOUT_MS */
	const struct up_secret_store_impl *store;
};

/*
 * Called once when every header of the set is resolved (r == 0) or on the first
 * failure (r < 0, with the error and a sentence that names the rule, the header and
 * the entry or command, never a secret).
 */
typedef void (*up_resolve_done_fn)(int r, enum up_error e, const char *message, void *userdata);

struct up_resolve;

/*
 * Resolves the placeholders of every header of `rs` (finished), rule by rule in
 * final order, one look-up at a time: keyring look-ups on the libuv thread pool,
 * exec commands with uv_spawn, a timeout and bounded output. Without allow_exec an
 * exec placeholder anywhere fails the whole set before anything runs. `done` may be
 * called before this returns. `rs` must live until `done`, or until
 * up_resolve_cancel(). Returns 0 or -ENOMEM (then `done` is never called).
 */
int up_resolve_start(uv_loop_t *loop, struct up_ruleset *rs, const struct up_resolve_options *o,
		     up_resolve_done_fn done, void *userdata, struct up_resolve **ret) _wur_;
/* Stops the work: `done` is not called; the job frees itself once its worker or child is gone. */
void up_resolve_cancel(struct up_resolve *job);
