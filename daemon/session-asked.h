/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "session-options.h"

/*
 * What session.start asked for: a field for each session.start parameter of
 * common/session-options.h, named by its key and generated from the table, so an option
 * reaches the session (and the renderer, through struct up_session_spec) with no code of
 * its own. rpc-session.c copies it from the request once it is checked.
 *
 *   BOOL                           bool
 *   STRING, DURATION, PATH         char *, NULL when not given, else as given ("" too)
 *   PATHS, RULES, WORDS, ARGS,     json_t * array of strings as given (empty when not
 *   SPLIT                          given); rules gets the config files' inline rules too
 *
 * Every string and array is owned by the struct (up_session_asked_done()). What a
 * session derives from a value (a parsed duration, normalised CIDRs, a default) lives
 * beside it in struct up_session_opts or struct up_session_extra.
 */
#define UP_ASKED_FIELD_BOOL(key)     bool key;
#define UP_ASKED_FIELD_STRING(key)   char *key;
#define UP_ASKED_FIELD_DURATION(key) char *key;
#define UP_ASKED_FIELD_PATH(key)     char *key;
#define UP_ASKED_FIELD_PATHS(key)    json_t *key;
#define UP_ASKED_FIELD_RULES(key)    json_t *key;
#define UP_ASKED_FIELD_WORDS(key)    json_t *key;
#define UP_ASKED_FIELD_ARGS(key)     json_t *key;
#define UP_ASKED_FIELD_SPLIT(key)    json_t *key;
#define UP_ASKED_FIELD_MODE(key)
#define UP_ASKED_FIELD_LOCAL(key)

struct up_session_asked {
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_PARAM_##where(UP_ASKED_FIELD_##type(key))
	UP_SESSION_OPTIONS(XX)
#undef XX
};

/* sessions.c: frees what `a` owns and zeroes it. */
void up_session_asked_done(struct up_session_asked *a);
