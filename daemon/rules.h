/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * The allow-list: rules files parsed with libyaml (every problem located as
 * FILE:LINE:COL), regexes validated with PCRE2, layers put in order, requests
 * matched, and the proxy's JSON rendered. No I/O but reading the files, no loop,
 * no logging: callers decide what to say. Placeholders in header values are kept
 * as written until up_rule_header_set_value() stores what they resolved to.
 */

/* First match wins, in this order. */
enum up_rule_layer {
	UP_LAYER_AUTH,	  /* the agent's own credentials */
	UP_LAYER_KUBE,	  /* --kube-context API servers */
	UP_LAYER_USER,	  /* --rules files, then inline config rules, in order */
	UP_LAYER_AGENT,	  /* the agent's default rules */
	UP_LAYER_GENERIC, /* read-only catch-all */
	UP_LAYER_SESSION, /* approved in ask mode for this session: last, as in the proxy */
	_UP_LAYER_MAX,
	_UP_LAYER_INVALID = -1,
};

const char *up_rule_layer_name(enum up_rule_layer l);
enum up_rule_layer up_rule_layer_from_name(const char *name);

/* HTTP methods a rule may list; a rule's set is a bit mask of these (0 = any). */
#define UP_HTTP_METHODS(XX) \
	XX(GET) XX(POST) XX(PUT) XX(DELETE) XX(PATCH) XX(HEAD) XX(OPTIONS) XX(CONNECT) XX(TRACE)

/* The bit of an uppercase method name, or -EINVAL; and back. */
int up_method_bit(const char *name);
const char *up_method_name(unsigned bit);

struct up_rule_header {
	char *name;
	char *value;	/* as written, placeholders included */
	char *resolved; /* NULL until resolved; a secret: never log it */
	bool literal;	/* `resolved` is the credential itself (a kube token), set by its maker:
			 * never scanned for placeholders, kept when the set is resolved again */
};

struct up_rule {
	char *name;
	enum up_rule_layer layer;
	char *source; /* "FILE:LINE" */
	bool l4;
	char **hosts;
	size_t n_hosts;
	unsigned methods; /* bit i = i-th of UP_HTTP_METHODS; 0 = any */
	char **paths;	  /* NULL: any path */
	size_t n_paths;
	char **cidrs; /* l4 only, normalised */
	size_t n_cidrs;
	struct up_rule_header *headers;
	size_t n_headers;
	char **remove; /* header names taken off allowed requests (inject.remove); NULL: none */
	size_t n_remove;
	unsigned port;	    /* only requests to this port (kube rules); 0: any */
	char **aws_actions; /* aws_allow_credential_actions: credential-issuing AWS actions the
			     * proxy re-signs under this rule; NULL: none */
	size_t n_aws_actions;
	uint64_t refresh_s;	 /* refresh: DURATION: its {{exec:...}} values renewed this often; 0
				    never */
	void *host_re, *path_re; /* compiled (pcre2_code **) */
};

struct up_ruleset;

struct up_ruleset *up_ruleset_new(void);
struct up_ruleset *up_ruleset_free(struct up_ruleset *rs);
void up_ruleset_freep(struct up_ruleset **rs);

/*
 * Parses one rules file (YAML text) and appends its rules to `layer`. Every problem
 * is appended to `problems` (a JSON array of strings, "SOURCE:LINE:COL: ..."); the
 * rules of a file with problems are not kept. Returns 0, -EINVAL when there were
 * problems, -ENOMEM.
 */
int up_ruleset_load_string(struct up_ruleset *rs, enum up_rule_layer layer, const char *source,
			   const char *text, size_t len, json_t *problems) _wur_;
/* Same, reading the file at `path` (bounded by UP_MAX_RULES_FILE_SIZE); problems name `label`
 * (NULL: path). */
int up_ruleset_load_file(struct up_ruleset *rs, enum up_rule_layer layer, const char *path,
			 const char *label, json_t *problems) _wur_;

/*
 * The layers an agent and mode bring (agents/agent.h): its auth rules, prepared for the
 * daemon's own user, and its default rules file. -ENOENT with a problem for an unknown
 * agent or mode.
 */
int up_ruleset_load_agent(struct up_ruleset *rs, const char *agent, const char *mode,
			  json_t *problems) _wur_;
/*
 * Appends rules given in the proxy's JSON format (what up_ruleset_render() makes):
 * {"version": 1, "rules": [...]}. Header values are taken as resolved. Layers come
 * from each rule's "layer". The order of the document is kept as the final order.
 */
int up_ruleset_load_json(struct up_ruleset *rs, const json_t *doc, json_t *problems) _wur_;

/*
 * Puts the layers in order and adds the generic read-only catch-all, unless
 * `no_defaults` or a user file said replace_defaults (then only kube and user rules
 * stay). No rule left is an error (-ENOENT with a problem). Call once, after loading.
 */
int up_ruleset_finish(struct up_ruleset *rs, bool no_defaults, json_t *problems) _wur_;

size_t up_ruleset_count(const struct up_ruleset *rs);
struct up_rule *up_ruleset_get(const struct up_ruleset *rs, size_t i);
bool up_ruleset_replace_defaults(const struct up_ruleset *rs);

/* Stores a header's resolved value (copied). */
int up_rule_header_set_value(struct up_rule_header *h, const char *value) _wur_;
/* Replaces the value as written and the resolved one (a literal credential renewed). */
int up_rule_header_replace(struct up_rule_header *h, const char *value) _wur_;

/*
 * The first HTTP rule that allows METHOD on HOST (compared case-insensitively) at PORT and
 * PATH (path plus query), or NULL: deny. A rule with a port takes only requests to that port;
 * PORT 0 leaves rules' ports out of it (up_ruleset_match()).
 */
const struct up_rule *up_ruleset_match_port(const struct up_ruleset *rs, const char *method,
					    const char *host, unsigned port, const char *path);
const struct up_rule *up_ruleset_match(const struct up_ruleset *rs, const char *method,
				       const char *host, const char *path);

/*
 * Whether the proxy re-signs AWS requests made with the agent's dummy keys under this rule:
 * an HTTP rule outside the generic layer whose every host regex names AWS hosts (ends in
 * \.amazonaws\.com and has no '|'). Rendered as "aws_sign": true.
 */
bool up_rule_aws_sign(const struct up_rule *r);

/*
 * The same with OVERRIDES: the values of the request's method-override headers
 * (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override; NULL-terminated, or NULL).
 * A rule limiting methods takes the request only if each value (trimmed, ASCII
 * upper-cased) is one of them too; an injecting rule never takes TRACE or TRACK, as the
 * method or an override (an origin would echo the credential); a rule with paths never
 * takes a path up_path_unsafe() refuses.
 */
const struct up_rule *up_ruleset_match_overrides(const struct up_ruleset *rs, const char *method,
						 const char *host, unsigned port, const char *path,
						 const char *const *overrides);
/*
 * Whether the path part of PATH (before '?') holds a dot segment ("." or "..", also
 * before a ';' parameter), an encoded '.', '/' or '\\' (%2e %2f %5c) or a '\\': spellings
 * a normalising origin reads as another path than the one the rule's regexes saw.
 */
bool up_path_unsafe(const char *path);
/*
 * The first rule that could take a CONNECT to TARGET: an L4 rule (relay bytes), an
 * HTTP rule (intercept and decide per request), or NULL (refuse). Host regexes of
 * L4 rules never match an IP literal; an IP literal meets L4 rules through cidrs.
 */
const struct up_rule *up_ruleset_match_connect(const struct up_ruleset *rs, const char *target);

enum up_decision {
	UP_DECISION_DENY,
	UP_DECISION_ALLOW,
	UP_DECISION_L4,
};

/*
 * The whole decision the proxy makes for one request: for https (a CONNECT first)
 * the connect check, then the request check. *rule is the deciding rule or NULL.
 */
/* (A plain-http request that an injecting rule would take is denied: the addon never sends a
 * credential in clear.) */
/* PORT is the request's port (0: the scheme's default, 443 or 80), compared with rules' ports. */
enum up_decision up_ruleset_evaluate(const struct up_ruleset *rs, const char *method, bool https,
				     const char *host, unsigned port, const char *path,
				     const struct up_rule **rule);
/* The same with the request's method-override header values (see up_ruleset_match_overrides). */
enum up_decision up_ruleset_evaluate_overrides(const struct up_ruleset *rs, const char *method,
					       bool https, const char *host, unsigned port,
					       const char *path, const char *const *overrides,
					       const struct up_rule **rule);

/*
 * Splits an http(s) URL into its scheme, a lowercase host (no port, no brackets) and the path
 * with its query ("/" when empty). Returns 0 or -EINVAL with why.
 */
int up_url_split(const char *url, bool *https, char *host, size_t host_len, char *path,
		 size_t path_len, char *why, size_t why_len) _wur_;
/* The port of an http(s) URL (443 or 80 when it names none), or -EINVAL for a bad one. */
int up_url_port(const char *url) _wur_;

/*
 * The proxy's input, as manifests/mitm/README.md describes it:
 * {"version": 1, "rules": [{"name", "layer", "source", "hosts", "methods"?, "paths"?,
 * "inject"?: {"headers"?: {...}, "remove"?: [...]}, "port"?, "aws_sign"?,
 * "aws_allow_credential_actions"?} | {"name", "layer", "source", "l4_forward": true,
 * "hosts"?, "cidrs"?}]} in final order; "methods" and "paths" are left out for "any".
 * Header values are the resolved ones, shown as "<redacted>" unless `show_secrets`;
 * unresolved ones render as written. NULL on allocation failure.
 */
json_t *up_ruleset_render(const struct up_ruleset *rs, bool show_secrets);
#define UP_RULES_FORMAT_VERSION 1
#define UP_REDACTED		"<redacted>"
