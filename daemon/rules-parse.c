/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reads one rules file with libyaml. Every problem names FILE:LINE:COL and the rule,
 * and says how to fix it; all problems of a file are reported, not just the first.
 * This is the only file that sees YAML nodes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "bounds.h"
#include "duration.h"
#include "fileio.h"
#include "placeholders.h"
#include "rules-private.h"
#include "yaml-json.h"

struct problem {
	size_t line, col, seq;
	json_t *text;
};

struct pctx {
	const char *source;
	yaml_document_t *doc;
	json_t *problems;
	unsigned n_problems;
	struct problem found[UP_MAX_RULES_PROBLEMS]; /* sorted by place before they are reported */
	char label[200];			     /* "rule 'NAME': " while a rule is read */
	struct up_rule *rules;
	size_t n_rules;
	bool replace_defaults;
	enum up_rule_layer layer;
};

/* A rule being read, and where its keys were. */
struct rb {
	struct up_rule r;
	yaml_node_t *node;
	yaml_node_t *host, *hosts, *methods, *paths, *inject, *cidrs, *refresh, *aws_actions;
};

/* One problem at `m` (NULL: the top of the file); up_yaml_prescan() reports here too. */
static void add_problem(void *ud, const yaml_mark_t *m, const char *msg)
{
	struct pctx *c = ud;
	struct problem *p;

	if (c->n_problems >= UP_MAX_RULES_PROBLEMS)
		return;
	p = &c->found[c->n_problems++];
	p->line = m ? m->line + 1 : 1;
	p->col = m ? m->column + 1 : 1;
	p->seq = c->n_problems;
	p->text = json_sprintf("%s:%zu:%zu: %s%s", c->source, p->line, p->col, c->label, msg);
}

#define problem(ctx, n, ...) up_yaml_problem(add_problem, (ctx), (n), __VA_ARGS__)

static int cmp_problem(const void *a, const void *b)
{
	const struct problem *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : 1;
}

static void report_problems(struct pctx *c)
{
	qsort(c->found, c->n_problems, sizeof(c->found[0]), cmp_problem);
	for (unsigned i = 0; i < c->n_problems; i++)
		if (json_array_size(c->problems) < UP_MAX_RULES_PROBLEMS && c->found[i].text)
			(void)json_array_append_new(c->problems, c->found[i].text);
		else
			json_decref(c->found[i].text);
}

static yaml_node_t *node(struct pctx *c, int id)
{
	return yaml_document_get_node(c->doc, id);
}

/* The text of a string scalar, or NULL (not a scalar, null, or holding a NUL byte). */
static const char *str(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE || up_yaml_node_is_null(n))
		return NULL;
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return NULL;
	return (const char *)n->data.scalar.value;
}

static bool too_many(struct pctx *c, yaml_node_t *n, size_t count, const char *what)
{
	if (count <= UP_MAX_RULE_ITEMS)
		return false;
	problem(c, n, "%s has %zu entries; at most %d are allowed", what, count, UP_MAX_RULE_ITEMS);
	return true;
}

/* Reports a key seen before in the same mapping; true if it is a duplicate. */
static bool duplicate(struct pctx *c, yaml_node_t *map, yaml_node_pair_t *pair)
{
	const char *k = str(node(c, pair->key));

	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < pair; p++) {
		const char *o = str(node(c, p->key));
		if (k && o && streq(k, o)) {
			problem(c, node(c, pair->key), "duplicate key '%s'; keep only one", k);
			return true;
		}
	}
	return false;
}

static int strv_add(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(char *));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = strdup(s);
	if (!nv[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* One item of a list: `s` is its text, NULL when it is not a string; < 0 stops the walk. */
typedef int (*item_fn)(struct pctx *c, struct rb *b, yaml_node_t *item, const char *s, void *ud);

/* Each item of the list `v` (the value of `key`) to `fn`, once their number is within bounds. */
static int each_item(struct pctx *c, struct rb *b, yaml_node_t *v, const char *key, item_fn fn,
		     void *ud)
{
	if (too_many(c, v, (size_t)(v->data.sequence.items.top - v->data.sequence.items.start),
		     key))
		return 0;
	for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top;
	     i++) {
		yaml_node_t *item = node(c, *i);
		int r = fn(c, b, item, str(item), ud);

		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether the regex `re` of `kind` ("host", "path") at `n` is short enough and compiles. */
static bool regex_ok(struct pctx *c, yaml_node_t *n, const char *kind, const char *re)
{
	char why[256];

	if (strlen(re) > UP_MAX_REGEX_LEN) {
		problem(c, n, "%s regex is longer than %d characters", kind, UP_MAX_REGEX_LEN);
		return false;
	}
	if (up_regex_check(re, why, sizeof(why)) < 0) {
		problem(c, n, "invalid %s regex '%s': %s", kind, re, why);
		return false;
	}
	return true;
}

struct regex_list {
	const char *key, *kind, *empty; /* 'hosts', "host" and what an empty list means */
	char ***out;
	size_t *n_out;
};

static int regex_item(struct pctx *c, struct rb *b, yaml_node_t *item, const char *re, void *ud)
{
	struct regex_list *l = ud;

	(void)b;
	if (!re) {
		problem(c, item, "'%s' must be a list of regex strings; this entry is not a string",
			l->key);
		return 0;
	}
	return regex_ok(c, item, l->kind, re) ? strv_add(l->out, l->n_out, re) : 0;
}

/* A list of regexes ('hosts', 'paths'). */
static int read_regexes(struct pctx *c, struct rb *b, yaml_node_t *v, struct regex_list *l)
{
	if (!v || v->type != YAML_SEQUENCE_NODE) {
		problem(c, v, "'%s' must be a list of regex strings, e.g. %s: ['%s']", l->key,
			l->key, streq(l->kind, "host") ? "api\\.example\\.com" : "/v1/.*");
		return 0;
	}
	if (v->data.sequence.items.start == v->data.sequence.items.top) {
		problem(c, v, "%s", l->empty);
		return 0;
	}
	return each_item(c, b, v, l->key, regex_item, l);
}

static int key_name(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	const char *s = str(v);

	if (!s) {
		problem(c, v, "'name' must be a string");
		return 0;
	}
	free(b->r.name);
	b->r.name = strdup(s);
	return b->r.name ? 0 : -ENOMEM;
}

static int key_host(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	const char *s = str(v);

	b->host = k;
	if (!s) {
		problem(c, v, "'host' must be a string regex");
		return 0;
	}
	return regex_ok(c, v, "host", s) ? strv_add(&b->r.hosts, &b->r.n_hosts, s) : 0;
}

static int key_hosts(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	b->hosts = k;
	return read_regexes(c, b, v,
			    &(struct regex_list){"hosts", "host",
						 "'hosts' is an empty list; list at least one host",
						 &b->r.hosts, &b->r.n_hosts});
}

static int key_paths(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	int r;

	b->paths = k;
	r = read_regexes(c, b, v,
			 &(struct regex_list){"paths", "path",
					      "'paths' is an empty list, which would match no "
					      "path; omit 'paths' entirely to allow any path",
					      &b->r.paths, &b->r.n_paths});
	if (r == 0 && !b->r.paths) {
		/* Invalid: keep "some paths" so that the rule is never read as "any path". */
		b->r.paths = calloc(1, sizeof(char *));
		r = b->r.paths ? 0 : -ENOMEM;
	}
	return r;
}

/* Whether the value `v` is a `type` node: an empty value (null) is not and says nothing, any
 * other kind is the problem `wrong`. */
static bool is_a(struct pctx *c, yaml_node_t *v, yaml_node_type_t type, const char *wrong)
{
	if (up_yaml_node_is_null(v))
		return false;
	if (v->type != type) {
		problem(c, v, "%s", wrong);
		return false;
	}
	return true;
}

static int method_item(struct pctx *c, struct rb *b, yaml_node_t *item, const char *m, void *ud)
{
	int bit = m ? up_method_bit(m) : -EINVAL;

	(void)ud;
	if (!m)
		problem(c, item, "'methods' must be a list of strings; this entry is not a string");
	else if (bit < 0)
		problem(c, item,
			"invalid method '%s'; methods are uppercase HTTP verbs: "
			"GET, POST, PUT, DELETE, PATCH, HEAD, OPTIONS, CONNECT, TRACE",
			m);
	else
		b->r.methods |= 1u << bit;
	return 0;
}

static int key_methods(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	b->methods = k;
	if (!is_a(c, v, YAML_SEQUENCE_NODE,
		  "'methods' must be a list of strings, e.g. methods: [GET, POST]"))
		return 0;
	return each_item(c, b, v, "methods", method_item, NULL);
}

static int read_header(struct pctx *c, struct rb *b, yaml_node_t *kn, yaml_node_t *vn)
{
	struct up_ph_template t = {0};
	const char *k = str(kn), *v = str(vn);
	struct up_rule_header *h;
	char why[256];

	if (!k || !up_header_name_valid(k)) {
		problem(c, kn,
			"'%s' is not a valid HTTP header name (letters, digits and "
			"!#$%%&'*+-.^_`|~)",
			k ? k : "?");
		return 0;
	}
	if (!v) {
		problem(c, vn, "header '%s' must be a string; quote the value", k);
		return 0;
	}
	if (strlen(v) > UP_MAX_HEADER_VALUE) {
		problem(c, vn, "header '%s' is longer than %d bytes", k, UP_MAX_HEADER_VALUE);
		return 0;
	}
	if (up_ph_parse(v, &t, why, sizeof(why)) < 0) {
		problem(c, vn, "header '%s': %s", k, why);
		return 0;
	}
	up_ph_template_done(&t);
	h = realloc(b->r.headers, (b->r.n_headers + 1) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	b->r.headers = h;
	h = &h[b->r.n_headers];
	*h = (struct up_rule_header){.name = strdup(k), .value = strdup(v)};
	b->r.n_headers++;
	return h->name && h->value ? 0 : -ENOMEM;
}

static int read_headers(struct pctx *c, struct rb *b, yaml_node_t *v)
{
	yaml_node_pair_t *p;
	int r;

	if (!is_a(c, v, YAML_MAPPING_NODE,
		  "'inject.headers' must be a mapping of header names to strings"))
		return 0;
	if (too_many(c, v, (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start),
		     "'inject.headers'"))
		return 0;
	for (p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
		if (duplicate(c, v, p))
			continue;
		r = read_header(c, b, node(c, p->key), node(c, p->value));
		if (r < 0)
			return r;
	}
	return 0;
}

static int key_inject(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	int r;

	b->inject = k;
	if (!is_a(c, v, YAML_MAPPING_NODE, "'inject' must be a mapping with a 'headers' mapping"))
		return 0;
	for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top;
	     p++) {
		const char *name = str(node(c, p->key));

		if (duplicate(c, v, p))
			continue;
		if (!name || !streq(name, "headers")) {
			problem(c, node(c, p->key),
				"unknown key '%s' under 'inject'; expected 'headers'",
				name ? name : "?");
			continue;
		}
		r = read_headers(c, b, node(c, p->value));
		if (r < 0)
			return r;
	}
	return 0;
}

static int key_l4(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	int t = up_yaml_node_boolean(v);

	if (t < 0)
		problem(c, v, "'l4_forward' must be true or false");
	b->r.l4 = t == 1;
	return 0;
}

static int cidr_item(struct pctx *c, struct rb *b, yaml_node_t *item, const char *s, void *ud)
{
	char norm[64];

	(void)ud;
	if (!s)
		problem(c, item,
			"'cidrs' must be a list of CIDR strings; this entry is not a string");
	else if (up_cidr_normalize(s, norm, sizeof(norm)) < 0)
		problem(c, item,
			"invalid CIDR '%s'; write an address with an optional prefix length, e.g. "
			"10.0.0.0/8 or 2001:db8::/32",
			s);
	else if (strv_add(&b->r.cidrs, &b->r.n_cidrs, norm) < 0)
		return -ENOMEM;
	return 0;
}

static int key_cidrs(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	b->cidrs = k;
	if (!v || v->type != YAML_SEQUENCE_NODE) {
		problem(c, v, "'cidrs' must be a list of CIDR strings, e.g. cidrs: ['10.0.0.0/8']");
		return 0;
	}
	if (v->data.sequence.items.start == v->data.sequence.items.top) {
		problem(c, v, "'cidrs' is an empty list; omit it instead");
		return 0;
	}
	return each_item(c, b, v, "cidrs", cidr_item, NULL);
}

/* refresh: DURATION, how often the daemon renews the rule's {{exec:...}} values. */
static int key_refresh(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	const char *s = str(v);
	char err[256];
	uint64_t secs;

	b->refresh = k;
	if (!s || !*s) {
		problem(c, v, "'refresh' must be a duration such as 30m or 12h");
		return 0;
	}
	if (up_duration_parse(s, &secs, err, sizeof(err)) < 0)
		problem(c, v, "'refresh': %s", err);
	else if (secs < 60)
		problem(c, v, "'refresh' must be at least 1m, not %s", s);
	else
		b->r.refresh_s = secs;
	return 0;
}

static int aws_action_item(struct pctx *c, struct rb *b, yaml_node_t *item, const char *s, void *ud)
{
	(void)ud;
	if (!s || !up_aws_action_valid(s))
		problem(c, item,
			"'%.100s' is not an AWS action name; write it as the API names it, letters "
			"and digits (at most %d), e.g. AssumeRole",
			s ? s : "?", UP_MAX_AWS_ACTION_LEN);
	else if (strv_add(&b->r.aws_actions, &b->r.n_aws_actions, s) < 0)
		return -ENOMEM;
	return 0;
}

/* aws_allow_credential_actions: [NAME, ...], the credential-issuing AWS actions re-signed. */
static int key_aws_actions(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v)
{
	b->aws_actions = k;
	if (!v || v->type != YAML_SEQUENCE_NODE ||
	    v->data.sequence.items.start == v->data.sequence.items.top) {
		problem(c, v,
			"'aws_allow_credential_actions' must be a non-empty list of AWS action "
			"names, e.g. aws_allow_credential_actions: [AssumeRole]");
		return 0;
	}
	return each_item(c, b, v, "aws_allow_credential_actions", aws_action_item, NULL);
}

typedef int (*key_fn)(struct pctx *c, struct rb *b, yaml_node_t *k, yaml_node_t *v);

static const struct {
	const char *key;
	key_fn fn;
} rule_keys[] = {
	{"name", key_name},	  {"host", key_host},
	{"hosts", key_hosts},	  {"methods", key_methods},
	{"paths", key_paths},	  {"inject", key_inject},
	{"l4_forward", key_l4},	  {"cidrs", key_cidrs},
	{"refresh", key_refresh}, {"aws_allow_credential_actions", key_aws_actions},
};

/* Near-misses that would otherwise widen a rule silently. */
static const char *const rule_key_hints[][2] = {
	{"method", "methods"},
	{"path", "paths"},
	{"cidr", "cidrs"},
	{"header", "inject"},
	{"headers", "inject"},
	{"l4", "l4_forward"},
	{"l4forward", "l4_forward"},
	{"injects", "inject"},
	{"hostname", "hosts"},
	{"aws_credential_actions", "aws_allow_credential_actions"},
	{"aws_allow_actions", "aws_allow_credential_actions"},
};

static void unknown_rule_key(struct pctx *c, yaml_node_t *k, const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(rule_key_hints); i++)
		if (streq(name, rule_key_hints[i][0])) {
			problem(c, k, "unknown key '%s'; did you mean '%s'?", name,
				rule_key_hints[i][1]);
			return;
		}
	problem(c, k,
		"unknown key '%s'; a rule has name, hosts (or host), methods, paths, "
		"inject, refresh, aws_allow_credential_actions, l4_forward and cidrs",
		name);
}

static bool has_exec(const struct up_rule *r)
{
	for (size_t i = 0; i < r->n_headers; i++)
		if (r->headers[i].value && strstr(r->headers[i].value, "{{exec:"))
			return true;
	return false;
}

static void check_rule(struct pctx *c, struct rb *b)
{
	static const char *const l4_why = "an L4 rule forwards whole connections, so there is no "
					  "method, path or header to act on; remove it or write "
					  "a separate HTTP rule";

	if (b->host && b->hosts)
		problem(c, b->hosts, "both 'host' and 'hosts' are set; keep only 'hosts'");
	if (b->r.l4) {
		yaml_node_t *bad[] = {b->methods, b->paths, b->inject, b->refresh, b->aws_actions};
		const char *names[] = {"methods", "paths", "inject", "refresh",
				       "aws_allow_credential_actions"};
		for (size_t i = 0; i < ELEMENTSOF(bad); i++)
			if (bad[i])
				problem(c, bad[i], "l4_forward rule cannot set '%s': %s", names[i],
					l4_why);
		if (!b->host && !b->hosts && !b->cidrs)
			problem(c, b->node, "l4_forward rule needs 'hosts' and/or 'cidrs'");
		return;
	}
	if (b->cidrs)
		problem(c, b->cidrs,
			"'cidrs' is only for l4_forward rules; add 'l4_forward: true' "
			"or remove 'cidrs'");
	if (!b->host && !b->hosts)
		problem(c, b->node,
			"missing required field 'hosts'; list the host regexes this rule "
			"allows, e.g. hosts: ['api\\.example\\.com']");
	if (b->aws_actions && b->r.n_aws_actions && !up_rule_aws_sign(&b->r))
		problem(c, b->aws_actions,
			"'aws_allow_credential_actions' needs a rule the proxy "
			"re-signs under: every host regex must end in "
			"'\\.amazonaws\\.com' (with no '|'), e.g. hosts: "
			"['sts\\.amazonaws\\.com']");
	if (b->refresh && !has_exec(&b->r))
		problem(c, b->refresh,
			"'refresh' renews {{exec:...}} values, and this rule's "
			"inject.headers have none; remove it");
}

static void set_label(struct pctx *c, yaml_node_t *rule, size_t index)
{
	const char *name = NULL;

	for (yaml_node_pair_t *p = rule->data.mapping.pairs.start; p < rule->data.mapping.pairs.top;
	     p++) {
		const char *k = str(node(c, p->key));
		if (k && streq(k, "name"))
			name = str(node(c, p->value));
	}
	if (name)
		(void)snprintf(c->label, sizeof(c->label), "rule '%.150s': ", name);
	else
		(void)snprintf(c->label, sizeof(c->label), "rule #%zu (unnamed): ", index + 1);
}

static int read_rule_keys(struct pctx *c, struct rb *b)
{
	for (yaml_node_pair_t *p = b->node->data.mapping.pairs.start;
	     p < b->node->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(c, p->key);
		const char *name = str(k);
		size_t i;
		int r;

		if (!name) {
			problem(c, k, "rule keys must be strings");
			continue;
		}
		if (duplicate(c, b->node, p))
			continue;
		for (i = 0; i < ELEMENTSOF(rule_keys); i++)
			if (streq(name, rule_keys[i].key))
				break;
		if (i == ELEMENTSOF(rule_keys)) {
			unknown_rule_key(c, k, name);
			continue;
		}
		r = rule_keys[i].fn(c, b, k, node(c, p->value));
		if (r < 0)
			return r;
	}
	return 0;
}

static int read_rule(struct pctx *c, yaml_node_t *n, size_t index)
{
	struct rb b = {.node = n};
	unsigned before = c->n_problems;
	struct up_rule *nr;
	int r;

	c->label[0] = '\0';
	if (n->type != YAML_MAPPING_NODE) {
		problem(c, n, "rule #%zu must be a mapping with 'name', 'hosts' and so on",
			index + 1);
		return 0;
	}
	set_label(c, n, index);
	r = read_rule_keys(c, &b);
	if (r >= 0)
		check_rule(c, &b);
	c->label[0] = '\0';
	if (r < 0 || c->n_problems != before) {
		up_rule_done(&b.r);
		return r;
	}
	if (asprintf(&b.r.source, "%s:%zu", c->source, n->start_mark.line + 1) < 0) {
		b.r.source = NULL;
		up_rule_done(&b.r);
		return -ENOMEM;
	}
	nr = realloc(c->rules, (c->n_rules + 1) * sizeof(*nr));
	if (!nr) {
		up_rule_done(&b.r);
		return -ENOMEM;
	}
	b.r.layer = c->layer;
	c->rules = nr;
	c->rules[c->n_rules++] = b.r;
	return 0;
}

static int read_rules(struct pctx *c, yaml_node_t *v)
{
	size_t n, i = 0;
	int r;

	if (!is_a(c, v, YAML_SEQUENCE_NODE,
		  "'rules' must be a list of rules (each item starting with '- ')"))
		return 0;
	n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
	if (n > UP_MAX_RULES) {
		problem(c, v, "'rules' has %zu rules; at most %d are allowed", n, UP_MAX_RULES);
		return 0;
	}
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
	     it++, i++) {
		r = read_rule(c, node(c, *it), i);
		if (r < 0)
			return r;
	}
	return 0;
}

static int read_top(struct pctx *c, yaml_node_t *root)
{
	int r;

	if (!root || up_yaml_node_is_null(root))
		return 0; /* an empty file has no rules */
	if (root->type != YAML_MAPPING_NODE) {
		problem(c, root, "expected a YAML mapping at the top level, with a 'rules' list");
		return 0;
	}
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
		const char *name = str(k);

		if (duplicate(c, root, p))
			continue;
		if (name && streq(name, "rules")) {
			r = read_rules(c, v);
			if (r < 0)
				return r;
		} else if (name && streq(name, "replace_defaults")) {
			int t = up_yaml_node_boolean(v);
			if (t < 0)
				problem(c, v, "'replace_defaults' must be true or false");
			c->replace_defaults = t == 1;
		} else
			problem(c, k,
				"unknown key '%s' at the top level; expected 'rules' or "
				"'replace_defaults'",
				name ? name : "?");
	}
	return 0;
}

static int commit(struct pctx *c, struct up_ruleset *rs)
{
	int r = 0;

	if (c->replace_defaults && c->layer == UP_LAYER_USER)
		up_ruleset_set_replace_defaults(rs);
	for (size_t i = 0; i < c->n_rules; i++)
		if (r >= 0)
			r = up_ruleset_take(rs, &c->rules[i]);
		else
			up_rule_done(&c->rules[i]);
	free(c->rules);
	c->rules = NULL;
	return r;
}

int up_ruleset_load_string(struct up_ruleset *rs, enum up_rule_layer layer, const char *source,
			   const char *text, size_t len, json_t *problems)
{
	struct pctx c = {.source = source, .problems = problems, .layer = layer};
	yaml_document_t doc;
	yaml_parser_t parser;
	int r = 0;

	(void)up_yaml_prescan(text, len, "rules", add_problem, &c);
	if (c.n_problems > 0) {
		report_problems(&c);
		return -EINVAL;
	}
	(void)yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_parser_delete(&parser);
		return parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL;
	}
	c.doc = &doc;
	r = read_top(&c, yaml_document_get_root_node(&doc));
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	report_problems(&c);
	if (r >= 0 && c.n_problems == 0)
		return commit(&c, rs) < 0 ? -ENOMEM : 0;
	for (size_t i = 0; i < c.n_rules; i++)
		up_rule_done(&c.rules[i]);
	free(c.rules);
	c.rules = NULL;
	return r < 0 ? r : -EINVAL;
}

int up_ruleset_load_file(struct up_ruleset *rs, enum up_rule_layer layer, const char *path,
			 const char *label, json_t *problems)
{
	_cleanup_(closep) int fd = -1;
	_cleanup_(freep) char *text = NULL;
	struct stat st;
	size_t len = 0;
	int r;

	if (!label)
		label = path;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		(void)json_array_append_new(
			problems,
			json_sprintf("%s: cannot read the rules file: %s", label, strerror(errno)));
		return -EINVAL;
	}
	if (!S_ISREG(st.st_mode)) {
		(void)json_array_append_new(problems,
					    json_sprintf("%s: not a regular file", label));
		return -EINVAL;
	}
	r = up_read_file_fd(fd, UP_MAX_RULES_FILE_SIZE, &text, &len);
	if (r == -EFBIG) {
		(void)json_array_append_new(problems,
					    json_sprintf("%s: larger than %d bytes; split it",
							 label, UP_MAX_RULES_FILE_SIZE));
		return -EINVAL;
	}
	if (r < 0) {
		(void)json_array_append_new(
			problems,
			json_sprintf("%s: cannot read the rules file: %s", label, strerror(-r)));
		return r == -ENOMEM ? r : -EINVAL;
	}
	return up_ruleset_load_string(rs, layer, label, text, len, problems);
}
