/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "rpc.h"
#include "util.h"

/*
 * Rule suggestions (`uplink rules suggest SESSION`): from a session's audit events, a rules
 * file that would have allowed its denied requests and nothing broader than the
 * generalisation below (README.md "Rule suggestions" says the same for users).
 *
 * - One rule per host and set of methods: the host exactly as seen (every regex character
 *   escaped; rules match the whole host), the methods seen with its paths, and the paths'
 *   patterns. Never a catch-all host, never a port, never a header.
 * - A path (its query left out) keeps its leading segments up to the first id; the id and
 *   everything after it become "one or more segments" (UP_SUGGEST_TAIL). A path without
 *   an id is kept exactly. A query, when one of the paths had one, becomes (\?.*)?.
 * - A refused CONNECT (the requests inside were never seen) gets a read-only rule (GET,
 *   HEAD, OPTIONS on any path of that host) unless the host has a rule already.
 * - Requests a rule cannot allow are left out and listed in "skipped" with why.
 * - Warnings for IP literals, random-looking host labels and parents with many subdomains.
 *
 * Pure: no I/O, no loop, no logging. Comments in the YAML are put between the lines
 * libyaml's emitter wrote (it writes none itself), at the rules' own lines as the parser
 * reports them.
 */

/* The regex that replaces a path's segments from the first id on: one or more segments. */
#define UP_SUGGEST_TAIL		   "(/[^/]+)+/?"
/* What a path pattern gets when one of its requests had a query. */
#define UP_SUGGEST_QUERY	   "(\\?.*)?"
/* A parent domain (its last two labels) with this many denied hosts below it warns. */
#define UP_SUGGEST_SUBDOMAINS_WARN 5

/*
 * Whether a path segment (len bytes, no '/') reads as an id rather than a route's name:
 * all digits; a UUID; hexadecimal of 7 or more characters with a digit; 16 or more
 * characters of [A-Za-z0-9_-] with a letter and a digit, or 32 or more of them; or any
 * character outside [A-Za-z0-9._~-] (percent-encoded data, '@', ':', ...).
 */
bool up_suggest_segment_is_id(const char *seg, size_t len);
/*
 * Whether a host label looks random (generated rather than named): an id as above, or 8
 * or more characters with 5 consonants in a row (y counts as a vowel) or 4 changes
 * between letters and digits.
 */
bool up_suggest_label_random(const char *label, size_t len);
/*
 * The path pattern (a regex) for the path part of PATH (before any '?'), as above.
 * -ENAMETOOLONG when buf is short, -EINVAL for a path that does not start with '/'.
 */
int up_suggest_path_pattern(const char *path, char *buf, size_t len) _wur_;

/*
 * The suggestion for session `id` from its audit events (objects, in order; others are
 * ignored): {"id", "denied", "covered", "rules": [{"name", "host", "methods", "paths"?,
 * "requests", "connects", "examples": [{"method", "path"}]}], "warnings": [{"host",
 * "kind", "message"}], "skipped": [{"method", "host", "requests", "why"}], "yaml"}.
 * Examples are paths with each id segment as <id> and a query as "?...". Returns 0,
 * -ENOMEM, or -EIO when the emitter fails.
 */
int up_rules_suggest(const json_t *events, const char *id, json_t **ret) _wur_;

/* rules.suggest {id} -> the object above; listed in rpc-rules.c's table. */
struct up_suggest_params {
	const char *id;
};
extern const struct up_param up_suggest_params[];
int up_rpc_rules_suggest(struct up_request *req, void *params, void *userdata);
