/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rule suggestions from a session's denied requests (rules-suggest.h says what is
 * suggested and how paths are generalised). The denials are gathered per host and path
 * pattern, patterns seen with the same methods share a rule, and the rules file is
 * emitted by libyaml, its comments put between the emitted lines afterwards.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "rules.h"
#include "rules-suggest.h"
#include "session-audit.h"
#include "yaml-json.h"

#define READ_ONLY_METHODS ((1u << 0) | (1u << 5) | (1u << 6)) /* GET, HEAD, OPTIONS */

/* ---- what reads as an id, what looks random ---- */

static bool all_of(const char *s, size_t len, const char *set)
{
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr(set, s[i]))
			return false;
	return true;
}

static size_t count_of(const char *s, size_t len, int (*is)(int))
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += is((unsigned char)s[i]) != 0;
	return n;
}

#define DIGITS "0123456789"
#define HEX    DIGITS "abcdefABCDEF"
#define TOKEN  DIGITS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-"

static bool is_uuid(const char *s, size_t len)
{
	if (len != 36)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-'
							      : !isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

bool up_suggest_segment_is_id(const char *seg, size_t len)
{
	size_t digits = count_of(seg, len, isdigit), letters = count_of(seg, len, isalpha);

	if (len == 0)
		return false;
	if (!all_of(seg, len, TOKEN "._~"))
		return true; /* percent-encoded data, '@', ':', ... */
	if (digits == len || is_uuid(seg, len))
		return true;
	if (len >= 7 && digits > 0 && all_of(seg, len, HEX))
		return true;
	return all_of(seg, len, TOKEN) && (len >= 32 || (len >= 16 && digits && letters));
}

bool up_suggest_label_random(const char *label, size_t len)
{
	size_t run = 0, longest = 0, changes = 0;
	int last = 0; /* 1 letter, 2 digit */

	if (up_suggest_segment_is_id(label, len))
		return true;
	if (len < 8)
		return false;
	for (size_t i = 0; i < len; i++) {
		int c = tolower((unsigned char)label[i]);
		int kind = isalpha(c) ? 1 : isdigit(c) ? 2 : 0;

		run = kind == 1 && !strchr("aeiouy", c) ? run + 1 : 0;
		longest = run > longest ? run : longest;
		changes += kind && last && kind != last;
		last = kind ? kind : last;
	}
	return longest >= 5 || changes >= 4;
}

/* ---- regexes ---- */

/* s as a regex that matches exactly s; returns the bytes written or -ENAMETOOLONG. */
static int regex_escape(const char *s, size_t n, char *buf, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (o + 3 > len)
			return -ENAMETOOLONG;
		if (strchr(".^$*+?{}[]|()\\", s[i]))
			buf[o++] = '\\';
		buf[o++] = s[i];
	}
	if (o >= len)
		return -ENAMETOOLONG;
	buf[o] = '\0';
	return (int)o;
}

int up_suggest_path_pattern(const char *path, char *buf, size_t len)
{
	size_t end = strcspn(path, "?"), keep = end;
	int n;

	if (path[0] != '/')
		return -EINVAL;
	for (size_t i = 1; i <= end;) {
		size_t seg = strcspn(path + i, "/?");

		if (i + seg > end)
			seg = end - i;
		if (up_suggest_segment_is_id(path + i, seg)) {
			keep = i - 1; /* up to the '/' before the id */
			break;
		}
		i += seg + 1;
	}
	n = regex_escape(path, keep, buf, len);
	if (n < 0 || keep == end)
		return n < 0 ? n : 0;
	if ((size_t)n + strlen(UP_SUGGEST_TAIL) + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf + n, UP_SUGGEST_TAIL, strlen(UP_SUGGEST_TAIL) + 1);
	return 0;
}

/* ---- gathering the denials ---- */

struct gather {
	json_t *hosts;	 /* host -> {"connects", "patterns": {pattern -> entry}} */
	json_t *skipped; /* [{"method", "host", "requests", "why"}] */
	json_int_t denied, patterns;
};

static const char *str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static void skip(struct gather *g, const char *method, const char *host, const char *why)
{
	json_t *s;
	size_t i;

	method = method ? method : "?";
	host = host ? host : "?";
	json_array_foreach (g->skipped, i, s)
		if (streq(str_of(s, "method"), method) && streq(str_of(s, "host"), host) &&
		    streq(str_of(s, "why"), why)) {
			(void)json_object_set_new(
				s, "requests",
				json_integer(json_integer_value(json_object_get(s, "requests")) +
					     1));
			return;
		}
	if (json_array_size(g->skipped) < UP_SUGGEST_MAX_SKIPPED)
		(void)json_array_append_new(g->skipped,
					    json_pack("{s:s, s:s, s:i, s:s}", "method", method,
						      "host", host, "requests", 1, "why", why));
}

/* A host a rule can name: an ASCII name or an IP literal, as the addon normalised it. */
static bool host_ok(const char *h)
{
	size_t n = h ? strlen(h) : 0;

	return n > 0 && n <= 253 && all_of(h, n, DIGITS "abcdefghijklmnopqrstuvwxyz.-_:") &&
	       h[0] != '.' && h[0] != '-';
}

static bool path_ok(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > UP_SUGGEST_PATH_MAX)
		return false;
	for (; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			return false;
	return true;
}

static json_t *host_entry(struct gather *g, const char *host)
{
	json_t *h = json_object_get(g->hosts, host);

	if (h || json_object_size(g->hosts) >= UP_SUGGEST_MAX_HOSTS)
		return h;
	h = json_pack("{s:i, s:{}}", "connects", 0, "patterns");
	return json_object_set_new(g->hosts, host, h) == 0 ? h : NULL;
}

/*
 * A path as an example shows it: each id segment as <id> (a token in a path, as chat and
 * webhook APIs put it there, stays out of a file that may be shared), a query as "?...".
 * Cut short (never overflowing) when len is too small.
 */
static void example_path(const char *path, char *buf, size_t len)
{
	size_t end = strcspn(path, "?"), o = 0;

	for (size_t i = 1; i <= end;) {
		size_t seg = strcspn(path + i, "/?");
		bool id = up_suggest_segment_is_id(path + i, seg);
		const char *piece = id ? "<id>" : path + i;
		size_t n = id ? 4 : seg;

		if (o + n + 2 > len)
			break;
		buf[o++] = '/';
		memcpy(buf + o, piece, n);
		o += n;
		i += seg + 1;
	}
	buf[o] = '\0';
	if (path[end] && o + 5 <= len)
		memcpy(buf + o, "?...", 5);
}

static void add_example(json_t *examples, const char *method, const char *path)
{
	char shown[UP_SUGGEST_PATH_MAX * 3 + 8]; /* "/1" grows to "/<id>" */
	json_t *x;
	size_t i;

	example_path(path, shown, sizeof(shown));
	json_array_foreach (examples, i, x)
		if (streq(str_of(x, "method"), method) && streq(str_of(x, "path"), shown))
			return;
	if (json_array_size(examples) < UP_SUGGEST_EXAMPLES)
		(void)json_array_append_new(
			examples, json_pack("{s:s, s:s}", "method", method, "path", shown));
}

/* 0 when counted, else why it cannot be (a literal). */
static const char *add_request(struct gather *g, const char *method, const char *host,
			       const char *path)
{
	char pattern[UP_SUGGEST_PATH_MAX * 2 + 32];
	json_t *h, *pats, *e;
	int bit = up_method_bit(method);

	if (bit < 0 || streq(method, "CONNECT"))
		return "a method a rule cannot list (rules list GET POST PUT DELETE PATCH HEAD "
		       "OPTIONS TRACE)";
	if (!path_ok(path))
		return "a path a rules file cannot hold (not printable ASCII, or too long)";
	if (up_path_unsafe(path))
		return "a path a rule with paths refuses (a dot segment, an encoded '.', '/' or "
		       "'\\')";
	if (up_suggest_path_pattern(path, pattern, sizeof(pattern)) < 0)
		return "a path too long for a pattern";
	h = host_entry(g, host);
	if (!h)
		return "more hosts than a suggestion holds";
	pats = json_object_get(h, "patterns");
	e = json_object_get(pats, pattern);
	if (!e) {
		if (g->patterns >= UP_SUGGEST_MAX_PATTERNS)
			return "more path patterns than a suggestion holds";
		e = json_pack("{s:i, s:i, s:b, s:[]}", "methods", 0, "requests", 0, "query", 0,
			      "examples");
		if (json_object_set_new(pats, pattern, e) < 0)
			return "out of memory";
		g->patterns++;
	}
	(void)json_object_set_new(
		e, "methods",
		json_integer(json_integer_value(json_object_get(e, "methods")) | (1 << bit)));
	(void)json_object_set_new(
		e, "requests",
		json_integer(json_integer_value(json_object_get(e, "requests")) + 1));
	if (strchr(path, '?'))
		(void)json_object_set_new(e, "query", json_true());
	add_example(json_object_get(e, "examples"), method, path);
	return NULL;
}

/* A refused CONNECT: counted on its host (which gets a rule even without requests). */
static const char *add_connect(struct gather *g, const char *host)
{
	json_t *h = host_entry(g, host);

	if (!h)
		return "more hosts than a suggestion holds";
	(void)json_object_set_new(
		h, "connects",
		json_integer(json_integer_value(json_object_get(h, "connects")) + 1));
	return NULL;
}

static void gather_one(struct gather *g, const json_t *ev)
{
	const char *decision = str_of(ev, "decision"), *method = str_of(ev, "method");
	const char *host = str_of(ev, "host"), *why;

	if (!json_is_object(ev) || !up_audit_event_denied(ev))
		return;
	g->denied++;
	if (!host_ok(host))
		why = "a host a rule cannot name as it was logged";
	else if (json_is_string(json_object_get(ev, "reason")))
		why = "denied by design, not for want of a rule (uplink logs shows the reason)";
	else if (streq(decision, "connect-refused"))
		why = add_connect(g, host);
	else if (method && streq(method, "CONNECT"))
		why = "a raw TCP flow: only an l4_forward rule relays it, which is never suggested";
	else
		why = add_request(g, method ? method : "", host, str_of(ev, "path"));
	if (why)
		skip(g, method, host, why);
}

/* ---- rules ---- */

static json_t *methods_of(unsigned mask)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && i < 16; i++)
		if (mask & (1u << i))
			(void)json_array_append_new(a, json_string(up_method_name(i)));
	return a;
}

static json_t *rule_new(const char *host, size_t nth, unsigned mask)
{
	char name[300], re[600];
	size_t o;

	o = (size_t)snprintf(name, sizeof(name), "suggested-");
	for (const char *p = host; *p && o + 1 < sizeof(name); p++)
		name[o++] = isalnum((unsigned char)*p) ? *p : '-';
	name[o] = '\0';
	if (nth > 0)
		(void)snprintf(name + o, sizeof(name) - o, "-%zu", nth + 1);
	if (regex_escape(host, strlen(host), re, sizeof(re)) < 0)
		return NULL;
	return json_pack("{s:s, s:s, s:s, s:o, s:i, s:i, s:[]}", "name", name, "host", host,
			 "hosts_re", re, "methods", methods_of(mask), "requests", 0, "connects", 0,
			 "examples");
}

static void rule_add_pattern(json_t *rule, const char *pattern, const json_t *e)
{
	json_t *paths = json_object_get(rule, "paths"), *x;
	char re[UP_SUGGEST_PATH_MAX * 2 + 48];
	size_t i;

	if (!paths) {
		paths = json_array();
		(void)json_object_set_new(rule, "paths", paths);
	}
	(void)snprintf(re, sizeof(re), "%s%s", pattern,
		       json_is_true(json_object_get(e, "query")) ? UP_SUGGEST_QUERY : "");
	(void)json_array_append_new(paths, json_string(re));
	(void)json_object_set_new(
		rule, "requests",
		json_integer(json_integer_value(json_object_get(rule, "requests")) +
			     json_integer_value(json_object_get(e, "requests"))));
	json_array_foreach (json_object_get(e, "examples"), i, x)
		if (json_array_size(json_object_get(rule, "examples")) < UP_SUGGEST_EXAMPLES)
			(void)json_array_append(json_object_get(rule, "examples"), x);
}

/* The rules of one host: its patterns grouped by the methods seen with them. */
static int host_rules(const char *host, const json_t *h, json_t *out)
{
	json_t *pats = json_object_get(h, "patterns"), *e, *first = NULL;
	json_int_t connects = json_integer_value(json_object_get(h, "connects"));
	json_t *by_mask = json_object();
	const char *pattern;
	char key[16];

	if (!by_mask)
		return -ENOMEM;
	json_object_foreach (pats, pattern, e) {
		unsigned mask = (unsigned)json_integer_value(json_object_get(e, "methods"));
		json_t *rule;

		(void)snprintf(key, sizeof(key), "%u", mask);
		rule = json_object_get(by_mask, key);
		if (!rule) {
			rule = rule_new(host, json_object_size(by_mask), mask);
			if (!rule || json_object_set_new(by_mask, key, rule) < 0 ||
			    json_array_append(out, rule) < 0) {
				json_decref(by_mask);
				return -ENOMEM;
			}
		}
		first = first ? first : rule;
		rule_add_pattern(rule, pattern, e);
	}
	json_decref(by_mask);
	if (!first && connects > 0) { /* only refused CONNECTs: read-only, any path */
		first = rule_new(host, 0, READ_ONLY_METHODS);
		if (!first || json_array_append_new(out, first) < 0)
			return -ENOMEM;
	}
	if (first)
		(void)json_object_set_new(first, "connects", json_integer(connects));
	return 0;
}

/* ---- warnings ---- */

static bool ip_literal(const char *host)
{
	unsigned char buf[16];

	return strchr(host, ':') || inet_pton(AF_INET, host, buf) == 1;
}

/* The last two labels of a name ("evil.example" of "a.b.evil.example"), or NULL. */
static const char *parent_of(const char *host)
{
	const char *last = strrchr(host, '.'), *p;

	if (!last || last == host)
		return NULL;
	for (p = last - 1; p > host && p[-1] != '.'; p--)
		;
	return p == host ? NULL : p;
}

static void warn(json_t *warnings, const char *host, const char *kind, json_t *message)
{
	if (message && json_array_size(warnings) < UP_SUGGEST_MAX_WARNINGS)
		(void)json_array_append_new(warnings, json_pack("{s:s, s:s, s:o}", "host", host,
								"kind", kind, "message", message));
	else
		json_decref(message);
}

static void warn_host(json_t *warnings, const char *host)
{
	const char *end = strrchr(host, '.');

	if (ip_literal(host)) {
		warn(warnings, host, "ip-literal",
		     json_sprintf("%s is an IP address: a destination without a name is a common "
				  "way to move data out; allow it only if you know the service",
				  host));
		return;
	}
	for (const char *l = host; end && l < end;) {
		size_t n = strcspn(l, ".");

		if (up_suggest_label_random(l, n)) {
			warn(warnings, host, "random-subdomain",
			     json_sprintf(
				     "%s: the label '%.*s' looks random, as names made to "
				     "carry data out do; allow it only if you know the service",
				     host, (int)n, l));
			return;
		}
		l += n + 1;
	}
}

static void warn_subdomains(json_t *warnings, const json_t *hosts)
{
	json_t *parents = json_object(), *v;
	const char *host, *parent;

	json_object_foreach ((json_t *)hosts, host, v) {
		const char *p = ip_literal(host) ? NULL : parent_of(host);
		if (p && parents)
			(void)json_object_set_new(
				parents, p,
				json_integer(json_integer_value(json_object_get(parents, p)) + 1));
	}
	json_object_foreach (parents, parent, v)
		if (json_integer_value(v) >= UP_SUGGEST_SUBDOMAINS_WARN)
			warn(warnings, parent, "many-subdomains",
			     json_sprintf("%lld hosts under %s were denied: many names under one "
					  "domain can carry data out in the names themselves; each "
					  "has its own rule, keep only those you know",
					  (long long)json_integer_value(v), parent));
	json_decref(parents);
}

/* ---- the rules file ---- */

static json_t *yaml_tree(const json_t *rules)
{
	json_t *list = json_array(), *rule, *doc = json_pack("{s:o}", "rules", list);
	size_t i;

	json_array_foreach (rules, i, rule) {
		json_t *r = json_pack("{s:O, s:[O], s:O}", "name", json_object_get(rule, "name"),
				      "hosts", json_object_get(rule, "hosts_re"), "methods",
				      json_object_get(rule, "methods"));
		if (r && json_object_get(rule, "paths"))
			(void)json_object_set(r, "paths", json_object_get(rule, "paths"));
		if (!r || json_array_append_new(list, r) < 0) {
			json_decref(doc);
			return NULL;
		}
	}
	return doc;
}

/* The line (from 0) of each rule's mapping in the emitted text, in order; -EIO. */
static int rule_lines(const char *text, size_t *lines, size_t n)
{
	yaml_parser_t p;
	yaml_event_t ev;
	size_t depth = 0, k = 0;
	bool done = false;
	int r = 0;

	if (!yaml_parser_initialize(&p))
		return -ENOMEM;
	yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
	while (!done && r == 0) {
		if (!yaml_parser_parse(&p, &ev)) {
			r = -EIO;
			break;
		}
		if (ev.type == YAML_MAPPING_START_EVENT && depth == 2)
			r = k < n ? (lines[k++] = ev.start_mark.line, 0) : -EIO;
		if (ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT)
			depth++;
		if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT)
			depth--;
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return r == 0 && k != n ? -EIO : r;
}

/* The warnings about `host` (NULL: those about a parent domain, for the head). */
static void comment_warnings(FILE *f, const json_t *warnings, const char *host)
{
	json_t *w;
	size_t i;

	json_array_foreach (warnings, i, w) {
		bool parent = streq(str_of(w, "kind"), "many-subdomains");

		if (host ? !parent && streq(str_of(w, "host"), host) : parent)
			fprintf(f, "# WARNING: %s\n", str_of(w, "message"));
	}
}

static void comment_rule(FILE *f, const json_t *rule, const json_t *warnings)
{
	json_int_t n = json_integer_value(json_object_get(rule, "requests"));
	json_int_t c = json_integer_value(json_object_get(rule, "connects"));
	json_t *x;
	size_t i;

	fprintf(f, "\n# %s:", str_of(rule, "host"));
	if (n > 0)
		fprintf(f, " %lld denied request%s%s", (long long)n, n == 1 ? "" : "s",
			c > 0 ? "," : "");
	if (c > 0)
		fprintf(f, " %lld refused CONNECT%s", (long long)c, c == 1 ? "" : "s");
	if (n == 0)
		fprintf(f, "; the requests inside were never seen, so this rule is read-only on "
			   "any path\n");
	else
		fprintf(f, ", e.g.\n");
	json_array_foreach (json_object_get(rule, "examples"), i, x)
		fprintf(f, "#   %s %s\n", str_of(x, "method"), str_of(x, "path"));
	comment_warnings(f, warnings, str_of(rule, "host"));
}

static void comment_head(FILE *f, const char *id, json_int_t denied, json_int_t covered,
			 const json_t *warnings)
{
	fprintf(f,
		"# Rules that would have allowed the requests session %s was denied: %lld denied,\n"
		"# %lld covered below (uplink rules suggest %s). Each rule allows its exact host,\n"
		"# its methods and its paths: a path keeps its leading segments up to the first "
		"id,\n"
		"# and the rest matches one or more segments (README.md, \"Rule suggestions\").\n"
		"# Read every rule before you use it; keep only what the agent should reach.\n",
		id, (long long)denied, (long long)covered, id);
	comment_warnings(f, warnings, NULL);
}

static int suggest_yaml(const json_t *rules, const json_t *warnings, const char *id,
			json_int_t denied, json_int_t covered, char **ret)
{
	json_t *doc = yaml_tree(rules);
	_cleanup_(freep) char *text = doc ? up_yaml_dump(doc) : NULL;
	_cleanup_(freep) size_t *lines = calloc(json_array_size(rules) + 1, sizeof(*lines));
	size_t n = json_array_size(rules), k = 0, line = 0, len = 0;
	char *out = NULL;
	FILE *f;
	int r;

	json_decref(doc);
	*ret = NULL;
	if (!text || !lines)
		return -ENOMEM;
	r = rule_lines(text, lines, n);
	if (r < 0)
		return r;
	f = open_memstream(&out, &len);
	if (!f)
		return -ENOMEM;
	comment_head(f, id, denied, covered, warnings);
	for (const char *p = text; *p; line++) {
		size_t l = strcspn(p, "\n");

		if (k < n && lines[k] == line)
			comment_rule(f, json_array_get(rules, k++), warnings);
		fprintf(f, "%.*s\n", (int)l, p);
		p += l + (p[l] == '\n');
	}
	if (fclose(f) != 0 || !out || k != n) {
		free(out);
		return k != n ? -EIO : -ENOMEM;
	}
	*ret = out;
	return 0;
}

/* ---- the whole suggestion ---- */

static json_t *public_rule(const json_t *rule)
{
	json_t *r = json_deep_copy(rule);

	if (r)
		(void)json_object_del(r, "hosts_re");
	return r;
}

int up_rules_suggest(const json_t *events, const char *id, json_t **ret)
{
	struct gather g = {.hosts = json_object(), .skipped = json_array()};
	json_t *rules = json_array(), *warnings = json_array(), *h, *ev, *res = NULL, *pub;
	json_int_t covered = 0;
	const char *host;
	char *yaml = NULL;
	size_t i;
	int r = -ENOMEM;

	*ret = NULL;
	if (!g.hosts || !g.skipped || !rules || !warnings)
		goto done;
	json_array_foreach (events, i, ev)
		gather_one(&g, ev);
	json_object_foreach (g.hosts, host, h) {
		if (host_rules(host, h, rules) < 0)
			goto done;
		warn_host(warnings, host);
	}
	warn_subdomains(warnings, g.hosts);
	json_array_foreach (rules, i, h)
		covered += json_integer_value(json_object_get(h, "requests")) +
			   json_integer_value(json_object_get(h, "connects"));
	r = suggest_yaml(rules, warnings, id, g.denied, covered, &yaml);
	if (r < 0)
		goto done;
	pub = json_array();
	json_array_foreach (rules, i, h)
		(void)json_array_append_new(pub, public_rule(h));
	res = json_pack("{s:s, s:I, s:I, s:o, s:O, s:O, s:s}", "id", id, "denied", g.denied,
			"covered", covered, "rules", pub, "warnings", warnings, "skipped",
			g.skipped, "yaml", yaml);
	r = res ? 0 : -ENOMEM;
	*ret = res;
done:
	free(yaml);
	json_decref(g.hosts);
	json_decref(g.skipped);
	json_decref(rules);
	json_decref(warnings);
	return r;
}
