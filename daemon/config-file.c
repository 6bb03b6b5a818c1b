/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Config files (config-file.h). libyaml's document API is used here only to find the
 * keys, their lines and the text of inline rules; the rules themselves are read by
 * rules-parse.c, from a rules document built so that its lines are the config file's.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "bounds.h"
#include "config-file.h"
#include "duration.h"
#include "rules.h"
#include "session-options.h"
#include "trust.h"
#include "yaml-json.h"

enum kind {
	K_STRING,
	K_DURATION,
	K_BOOL,
	K_MODE_FLAG, /* anthropic: true / bedrock: true */
	K_RULES,
	K_ARGS,
	K_PATH,	 /* one host path: "~/x" under home, "x" next to the file */
	K_WORDS, /* a list of strings; adds to the flag's */
	K_PATHS, /* a list of host paths; adds to the flag's */
};

struct key {
	const char *name;  /* in the file */
	const char *canon; /* the session.start param (and config.show's name) */
	enum kind kind;
	size_t offset;
	const char *mode; /* K_MODE_FLAG */
};

/* The config keys of session-options.h, then 0.4.1's names. */
#define F(field)	  offsetof(struct up_config, field)
#define KEY_BOOL(key)	  {#key, #key, K_BOOL, F(key), NULL},
#define KEY_STRING(key)	  {#key, #key, K_STRING, F(key), NULL},
#define KEY_DURATION(key) {#key, #key, K_DURATION, F(key), NULL},
#define KEY_PATH(key)	  {#key, #key, K_PATH, F(key), NULL},
#define KEY_PATHS(key)	  {#key, #key, K_PATHS, 0, NULL},
#define KEY_RULES(key)	  {#key, #key, K_RULES, F(key), NULL},
#define KEY_WORDS(key)	  {#key, #key, K_WORDS, 0, NULL},
#define KEY_SPLIT(key)	  KEY_WORDS(key)
#define KEY_ARGS(key)	  {#key, #key, K_ARGS, F(key), NULL},
#define KEY_MODE(key)	  {#key, "mode", K_MODE_FLAG, F(mode), #key},
static const struct key keys[] = {
/* A generated row ends with its comma (clang-format would indent the next as a continuation). */
/* clang-format off */
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_CONFIG_##where(KEY_##type(key))
	UP_SESSION_OPTIONS(XX)
#undef XX
	{"auth_mode", "mode", K_STRING, F(mode), NULL},
	{"claude_args", "args", K_ARGS, F(args), NULL},
};
/* clang-format on */
enum { N_OLD_NAMES = 2 }; /* the last rows of keys[] */

/* The keys config.show lists, in this order: each canonical key once (no MODE flag, no old name).
 */
static bool shown(const struct key *k)
{
	return k < keys + ELEMENTSOF(keys) - N_OLD_NAMES && k->kind != K_MODE_FLAG;
}

static bool adds_up(const struct key *k)
{
	return k->kind == K_WORDS || k->kind == K_PATHS;
}

static const struct key *key_find_canon(const char *canon)
{
	for (size_t i = 0; i < ELEMENTSOF(keys); i++)
		if (streq(keys[i].canon, canon))
			return &keys[i];
	return NULL;
}

int up_config_init_defaults(struct up_config *c)
{
	*c = (struct up_config){.notifications = true};
	c->ttl = strdup("24h");
	c->idle_timeout = strdup("4h");
	c->rules = json_array();
	c->args = json_array();
	c->origins = json_object();
	c->files = json_array();
	c->lists = json_object();
	c->project = json_object();
	c->trust = json_array();
	return c->ttl && c->idle_timeout && c->rules && c->args && c->origins && c->files &&
			       c->lists && c->project && c->trust
		       ? 0
		       : -ENOMEM;
}

void up_config_done(struct up_config *c)
{
	for (size_t i = 0; i < ELEMENTSOF(keys); i++)
		if (keys[i].kind == K_STRING || keys[i].kind == K_DURATION ||
		    keys[i].kind == K_PATH) {
			char **s = (char **)(void *)((char *)c + keys[i].offset);
			free(*s);
			*s = NULL;
		}
	json_decref(c->rules);
	json_decref(c->args);
	json_decref(c->origins);
	json_decref(c->files);
	json_decref(c->lists);
	json_decref(c->project);
	json_decref(c->trust);
	c->rules = c->args = c->origins = c->files = c->lists = c->project = c->trust = NULL;
}

/* ---- one file ---- */

struct pctx {
	struct up_config *c;
	const char *path, *home, *text;
	size_t len;
	yaml_document_t *doc;
	json_t *problems;
	json_t *asks; /* this file's asks (c->trust), for a project's file; else NULL */
	int n_problems;
	bool oom;
};

/* One problem at `m` (NULL: the top of the file); up_yaml_prescan() reports here too. */
static void add_problem(void *ud, const yaml_mark_t *m, const char *msg)
{
	struct pctx *p = ud;

	p->n_problems++;
	if (json_array_append_new(
		    p->problems, json_sprintf("%s:%zu: %s", p->path, m ? m->line + 1 : 1, msg)) < 0)
		p->oom = true;
}

#define problem(ctx, n, ...) up_yaml_problem(add_problem, (ctx), (n), __VA_ARGS__)

static json_t *origin(const struct pctx *p, const yaml_node_t *n)
{
	return json_sprintf("%s:%zu", p->path, n->start_mark.line + 1);
}

/* How a value reads in a message: a short excerpt of a scalar, or its kind. */
static const char *shape(const yaml_node_t *n, char *buf, size_t len)
{
	if (!n || up_yaml_node_is_null(n))
		return "null";
	if (n->type == YAML_MAPPING_NODE)
		return "a mapping";
	if (n->type == YAML_SEQUENCE_NODE)
		return "a list";
	(void)snprintf(buf, len, "%s%.40s%s",
		       n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "" : "'",
		       (const char *)n->data.scalar.value,
		       n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "" : "'");
	return buf;
}

/* The text of a string-like scalar (not null, not a boolean, no NUL byte), or NULL. */
static const char *str(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE || up_yaml_node_is_null(n) ||
	    up_yaml_node_boolean(n) >= 0)
		return NULL;
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return NULL;
	return (const char *)n->data.scalar.value;
}

/* True when a nearer file already set `canon`: this file's value is then ignored. */
static bool taken(const struct pctx *p, const char *canon)
{
	return json_object_get(p->c->origins, canon) != NULL;
}

/*
 * allow_exec from a project's file (one between the cwd and home, which a cloned repository
 * can bring) is refused, trusted or not: it would let the repository run commands here.
 */
static const char *const reaching[] = {"allow_exec"};

/*
 * What a project's file may set only once the user trusts it (trust.h): what widens what the
 * agent reaches, what runs in the session, and where its credentials live.
 */
static const struct {
	const char *canon, *what; /* what NULL: needs no trust */
} trusted_only[] = {
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_CONFIG_##where({#key, trust}, )
	UP_SESSION_OPTIONS(XX)
#undef XX
};

bool up_config_is_project_file(const char *path, const char *home)
{
	const char *slash = strrchr(path, '/');
	size_t dir = slash ? (size_t)(slash - path) : 0;

	return slash &&
	       (streq(slash + 1, UP_CONFIG_FILE) || streq(slash + 1, UP_CONFIG_FILE_OLD)) &&
	       !(home && strlen(home) == dir && !strncmp(path, home, dir));
}

static bool project_file(const struct pctx *p)
{
	return up_config_is_project_file(p->path, p->home);
}

static void ask(struct pctx *p, json_t *at, json_t *what)
{
	if (!at || !what ||
	    json_array_append_new(p->asks, json_pack("{s:o, s:o}", "at", at, "what", what)) < 0)
		p->oom = true;
}

static void note_reach(struct pctx *p, const char *canon, const yaml_node_t *n)
{
	const struct key *k = key_find_canon(canon);

	for (size_t i = 0; i < ELEMENTSOF(reaching); i++)
		if (streq(reaching[i], canon) && project_file(p) &&
		    !json_object_get(p->c->project, canon) &&
		    json_object_set_new(p->c->project, canon, origin(p, n)) < 0)
			p->oom = true;
	if (!p->asks ||
	    (k->kind == K_BOOL && !*(const bool *)(const void *)((const char *)p->c + k->offset)))
		return; /* not a project's file; or false, which widens nothing */
	for (size_t i = 0; i < ELEMENTSOF(trusted_only); i++)
		if (trusted_only[i].what && streq(trusted_only[i].canon, canon))
			ask(p, origin(p, n), json_sprintf("%s: %s", canon, trusted_only[i].what));
}

static void set_origin(struct pctx *p, const char *canon, const yaml_node_t *n)
{
	if (json_object_set_new(p->c->origins, canon, origin(p, n)) < 0)
		p->oom = true;
	note_reach(p, canon, n);
}

static char *expand_path(const struct pctx *p, const char *s);

static void read_string(struct pctx *p, const struct key *k, const yaml_node_t *kn,
			const yaml_node_t *v)
{
	char **field = (char **)(void *)((char *)p->c + k->offset), buf[64], err[256];
	const char *s = str(v);
	uint64_t d;

	if (!s) {
		problem(p, v, "'%s' expects a string, got %s", k->name, shape(v, buf, sizeof(buf)));
		return;
	}
	if (k->kind == K_DURATION && up_duration_parse(s, &d, err, sizeof(err)) < 0) {
		problem(p, v, "'%s': %s", k->name, err);
		return;
	}
	if (taken(p, k->canon))
		return;
	free(*field);
	*field = k->kind == K_PATH ? expand_path(p, s) : strdup(s);
	if (!*field)
		p->oom = true;
	set_origin(p, k->canon, kn);
}

static void read_bool(struct pctx *p, const struct key *k, const yaml_node_t *kn,
		      const yaml_node_t *v)
{
	int b = up_yaml_node_boolean(v);
	char buf[64];

	if (b < 0) {
		problem(p, v, "'%s' expects a boolean (true/false), got %s", k->name,
			shape(v, buf, sizeof(buf)));
		return;
	}
	if (k->kind == K_MODE_FLAG) {
		if (!b || taken(p, k->canon))
			return; /* false is a no-op, as in 0.4.1 */
		free(p->c->mode);
		p->c->mode = strdup(k->mode);
		if (!p->c->mode)
			p->oom = true;
		set_origin(p, k->canon, kn);
		return;
	}
	if (taken(p, k->canon))
		return;
	*(bool *)(void *)((char *)p->c + k->offset) = b;
	set_origin(p, k->canon, kn);
}

/* Appends an item of a list and where it came from. */
static void list_add(struct pctx *p, const char *canon, json_t *list, json_t *item,
		     const yaml_node_t *n)
{
	json_t *o = json_object_get(p->c->origins, canon);

	if (!o) {
		o = json_array();
		if (json_object_set_new(p->c->origins, canon, o) < 0)
			o = NULL;
	}
	if (!item || !o || json_array_append_new(list, item) < 0 ||
	    json_array_append_new(o, origin(p, n)) < 0)
		p->oom = true;
	note_reach(p, canon, n);
}

/*
 * A rules document holding only the rule at node `n`, laid out so that its lines (and,
 * for block style, its columns) are the config file's: problems then point into it.
 */
static char *rule_document(const struct pctx *p, const yaml_node_t *n)
{
	size_t line = n->start_mark.line, col = n->start_mark.column;
	size_t from = n->start_mark.index, to = n->end_mark.index;
	size_t cap = line + col + (to - from) + 32, pos = 0;
	char *d;

	if (to > p->len || from > to)
		return NULL;
	d = malloc(cap);
	if (!d)
		return NULL;
	if (line == 0) {
		/* `rules: [{...}]` on the first line: flow style */
		pos += (size_t)snprintf(d, cap, "rules: [");
		while (pos < col)
			d[pos++] = ' ';
		memcpy(d + pos, p->text + from, to - from);
		pos += to - from;
		d[pos++] = '\n';
		d[pos++] = ']';
	} else {
		pos += (size_t)snprintf(d, cap, "rules:");
		for (size_t i = 0; i < line; i++)
			d[pos++] = '\n';
		for (size_t i = 0; i + 2 < col; i++)
			d[pos++] = ' ';
		d[pos++] = '-';
		d[pos++] = ' ';
		memcpy(d + pos, p->text + from, to - from);
		pos += to - from;
	}
	d[pos++] = '\n';
	d[pos] = '\0';
	return d;
}

static void read_inline_rule(struct pctx *p, const yaml_node_t *n)
{
	_cleanup_(freep) char *text = rule_document(p, n);
	struct up_ruleset *rs = up_ruleset_new();
	json_t *tree = NULL, *item;
	size_t before = json_array_size(p->problems);
	char err[256];
	int r;

	if (!text || !rs) {
		up_ruleset_free(rs);
		p->oom = true;
		return;
	}
	r = up_ruleset_load_string(rs, UP_LAYER_USER, p->path, text, strlen(text), p->problems);
	if (r >= 0 && p->asks && up_config_rules_asks(rs, p->asks) < 0)
		r = -ENOMEM;
	up_ruleset_free(rs);
	if (r == -ENOMEM) {
		p->oom = true;
		return;
	}
	if (r < 0) {
		p->n_problems += (int)(json_array_size(p->problems) - before);
		if (json_array_size(p->problems) == before)
			problem(p, n, "this inline rule is invalid");
		return;
	}
	if (up_yaml_load(text, strlen(text), &tree, err, sizeof(err)) < 0) {
		problem(p, n, "this inline rule is invalid: %s", err);
		return;
	}
	item = json_pack("{s:s, s:o, s:s, s:O}", "file", p->path, "source", origin(p, n), "text",
			 text, "rule", json_array_get(json_object_get(tree, "rules"), 0));
	json_decref(tree);
	list_add(p, "rules", p->c->rules, item, n);
}

/* "~/x" -> home/x; "x" -> the config file's folder/x. NULL on allocation failure. */
static char *expand_path(const struct pctx *p, const char *s)
{
	char buf[PATH_MAX + 256];
	const char *slash;

	if (s[0] == '/')
		return strdup(s);
	if (streq(s, "~") || startswith(s, "~/")) {
		(void)snprintf(buf, sizeof(buf), "%s%s", p->home, s + 1);
		return strdup(buf);
	}
	slash = strrchr(p->path, '/');
	(void)snprintf(buf, sizeof(buf), "%.*s/%s", slash ? (int)(slash - p->path) : 1,
		       slash ? p->path : ".", s);
	return strdup(buf);
}

/* The items so far of a list that adds up (K_WORDS, K_PATHS), or NULL. */
static json_t *list_of(struct pctx *p, const char *canon)
{
	json_t *l = json_object_get(p->c->lists, canon);

	if (!l && json_object_set_new(p->c->lists, canon, l = json_array()) < 0)
		l = NULL;
	return l;
}

static void read_list_item(struct pctx *p, const struct key *k, const yaml_node_t *v)
{
	char buf[64];
	const char *s = str(v);

	if (k->kind == K_RULES && v->type == YAML_MAPPING_NODE) {
		read_inline_rule(p, v);
		return;
	}
	if (!s && v->type == YAML_SCALAR_NODE && !up_yaml_node_is_null(v) && k->kind == K_ARGS)
		s = (const char *)v->data.scalar.value; /* args: true stays the word "true" */
	if (!s) {
		problem(p, v,
			k->kind == K_RULES ? "'%s' items are rules files (paths) or inline rules "
					     "(mappings), got %s"
					   : "'%s' items are strings, got %s",
			k->name, shape(v, buf, sizeof(buf)));
		return;
	}
	if (k->kind == K_RULES || k->kind == K_PATHS) {
		char *path = expand_path(p, s);
		list_add(p, k->canon, k->kind == K_RULES ? p->c->rules : list_of(p, k->canon),
			 path ? json_string(path) : NULL, v);
		free(path);
	} else {
		list_add(p, k->canon, k->kind == K_ARGS ? p->c->args : list_of(p, k->canon),
			 json_string(s), v);
	}
}

static void read_list(struct pctx *p, const struct key *k, const yaml_node_t *v)
{
	if (up_yaml_node_is_null(v))
		return;
	if (v->type != YAML_SEQUENCE_NODE) {
		read_list_item(p, k, v); /* a scalar counts as a one-item list */
		return;
	}
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
	     it++)
		read_list_item(p, k, yaml_document_get_node(p->doc, *it));
}

static void unknown_key(struct pctx *p, const yaml_node_t *kn, const char *name)
{
	char known[1024] = "";
	size_t pos = 0;

	/* Each old name right after the key it stands for. */
	for (size_t i = 0; i < ELEMENTSOF(keys) - N_OLD_NAMES; i++) {
		pos += (size_t)snprintf(known + pos, sizeof(known) - pos, "%s%s", i ? ", " : "",
					keys[i].name);
		for (size_t j = ELEMENTSOF(keys) - N_OLD_NAMES; j < ELEMENTSOF(keys); j++)
			if (streq(keys[j].canon, keys[i].name))
				pos += (size_t)snprintf(known + pos, sizeof(known) - pos, ", %s",
							keys[j].name);
	}
	problem(p, kn, "unknown key '%s'; known keys: %s", name, known);
}

static void read_top(struct pctx *p, yaml_node_t *root)
{
	if (!root || up_yaml_node_is_null(root))
		return; /* an empty file sets nothing */
	if (root->type != YAML_MAPPING_NODE) {
		problem(p, root, "expected a YAML mapping at the top level (key: value lines)");
		return;
	}
	for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
	     pr < root->data.mapping.pairs.top; pr++) {
		yaml_node_t *kn = yaml_document_get_node(p->doc, pr->key),
			    *v = yaml_document_get_node(p->doc, pr->value);
		const char *name = kn && kn->type == YAML_SCALAR_NODE
					   ? (const char *)kn->data.scalar.value
					   : NULL;
		const struct key *k = NULL;
		bool dup = false;

		for (yaml_node_pair_t *q = root->data.mapping.pairs.start; name && q < pr; q++) {
			yaml_node_t *o = yaml_document_get_node(p->doc, q->key);
			dup = dup || (o && o->type == YAML_SCALAR_NODE &&
				      streq((const char *)o->data.scalar.value, name));
		}
		if (!name) {
			problem(p, kn, "keys are names, not lists or mappings");
			continue;
		}
		if (dup) {
			problem(p, kn, "'%s' is set twice in this file; keep one", name);
			continue;
		}
		for (size_t i = 0; i < ELEMENTSOF(keys) && !k; i++)
			if (streq(keys[i].name, name))
				k = &keys[i];
		if (!k) {
			unknown_key(p, kn, name);
			continue;
		}
		switch (k->kind) {
		case K_STRING:
		case K_DURATION:
		case K_PATH: read_string(p, k, kn, v); break;
		case K_BOOL:
		case K_MODE_FLAG: read_bool(p, k, kn, v); break;
		case K_RULES:
		case K_ARGS:
		case K_WORDS:
		case K_PATHS: read_list(p, k, v); break;
		}
	}
}

int up_config_parse(struct up_config *c, const char *path, const char *text, size_t len,
		    const char *home, json_t *problems)
{
	struct pctx p = {
		.c = c, .path = path, .home = home, .text = text, .len = len, .problems = problems};
	char sha[UP_SHA256_HEX_LEN + 1];
	yaml_document_t doc;
	yaml_parser_t parser;
	bool project = up_config_is_project_file(path, home);

	up_sha256_hex(text, len, sha);
	p.asks = project ? json_array() : NULL;
	if (json_array_append_new(c->files, json_string(path)) < 0 || (project && !p.asks) ||
	    json_array_append_new(c->trust,
				  json_pack("{s:s, s:s, s:b, s:o, s:[]}", "file", path, "sha256",
					    sha, "project", project, "asks",
					    project ? p.asks : json_array(), "rules_files")) < 0)
		return -ENOMEM;
	(void)up_yaml_prescan(text, len, "config", add_problem, &p);
	if (p.n_problems > 0)
		return p.oom ? -ENOMEM : -EINVAL;
	(void)yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_parser_delete(&parser);
		return -ENOMEM;
	}
	p.doc = &doc;
	read_top(&p, yaml_document_get_root_node(&doc));
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (p.oom)
		return -ENOMEM;
	return p.n_problems > 0 ? -EINVAL : 0;
}

/* ---- what the files say, and applying it ---- */

static json_t *value_of(const struct up_config *c, const struct key *k)
{
	const void *f = (const char *)c + k->offset;

	switch (k->kind) {
	case K_STRING:
	case K_DURATION:
	case K_PATH: return *(char *const *)f ? json_string(*(char *const *)f) : json_null();
	case K_BOOL:
	case K_MODE_FLAG: return json_boolean(*(const bool *)f);
	case K_RULES: {
		json_t *out = json_array(), *v;
		size_t i;
		json_array_foreach (c->rules, i, v)
			(void)json_array_append(out, json_is_string(v) ? v
						     : json_object_get(v, "path")
							     ? json_object_get(v, "path")
							     : json_object_get(v, "rule"));
		return out;
	}
	case K_ARGS: return json_deep_copy(c->args);
	case K_WORDS:
	case K_PATHS: {
		json_t *l = json_object_get(c->lists, k->canon);
		return l ? json_deep_copy(l) : json_array();
	}
	}
	return json_null();
}

/*
 * A list that adds up: the flag's items, then the files' (nearest first), each once.
 * With `sources`, also where each item came from: "flag" or FILE:LINE.
 */
static json_t *joined(const struct up_config *c, const struct key *k, const json_t *flag,
		      json_t **sources)
{
	json_t *out = json_is_array(flag) ? json_deep_copy(flag) : json_array(), *v, *w;
	json_t *from = json_object_get(c->origins, k->canon), *src = sources ? json_array() : NULL;
	size_t i, j;
	bool oom = !out || (sources && !src);

	for (i = 0; !oom && src && i < json_array_size(out); i++)
		oom = json_array_append_new(src, json_string("flag")) < 0;
	json_array_foreach (json_object_get(c->lists, k->canon), i, v) {
		bool dup = false;
		json_array_foreach (out, j, w)
			dup = dup || json_equal(v, w);
		if (!oom && !dup)
			oom = json_array_append(out, v) < 0 ||
			      (src && json_array_append(src, json_array_get(from, i)) < 0);
	}
	if (oom) {
		json_decref(out);
		json_decref(src);
		return NULL;
	}
	if (sources)
		*sources = src;
	return out;
}

json_t *up_config_show(const struct up_config *c, const json_t *flags)
{
	json_t *values = json_object(), *o;

	for (const struct key *k = keys; k < keys + ELEMENTSOF(keys); k++) {
		json_t *src = json_object_get(c->origins, k->name),
		       *flag = json_object_get(flags, k->name);

		if (!shown(k))
			continue;

		if (adds_up(k) && (src || json_array_size(flag) > 0)) {
			json_t *sources = NULL, *value = joined(c, k, flag, &sources);
			o = value ? json_pack("{s:o, s:o}", "value", value, "source", sources)
				  : NULL;
		} else if (flag && !json_is_null(flag) && !json_is_false(flag) &&
			   k->kind != K_RULES &&
			   !(json_is_array(flag) && json_array_size(flag) == 0))
			o = json_pack("{s:O, s:s}", "value", flag, "source", "flag");
		else if (src)
			o = json_pack("{s:o, s:O}", "value", value_of(c, k), "source", src);
		else
			o = json_pack("{s:o, s:s}", "value", value_of(c, k), "source", "default");
		if (!o || json_object_set_new(values, k->name, o) < 0) {
			json_decref(values);
			return NULL;
		}
	}
	return json_pack("{s:O, s:o}", "files", c->files, "values", values);
}

/* The sentence for allow_exec from a project's file (see `reaching`), into from_files' "warnings".
 */
static int warn_project(json_t *from_files, const char *at)
{
	json_t *w = json_object_get(from_files, "warnings");

	if (!w && json_object_set_new(from_files, "warnings", w = json_array()) < 0)
		return -ENOMEM;
	return json_array_append_new(
		       w, json_sprintf("%s: allow_exec is not taken from a project's config "
				       "file, trusted or not (a repository could run commands on "
				       "this machine with it); pass "
				       "--allow-exec, or set it in ~/.config/uplink/config.yaml",
				       at)) < 0
		       ? -ENOMEM
		       : 0;
}

int up_config_apply(const struct up_config *c, json_t *params, json_t *from_files)
{
	for (const struct key *k = keys; k < keys + ELEMENTSOF(keys); k++) {
		json_t *have = json_object_get(params, k->canon),
		       *src = json_object_get(c->origins, k->canon);
		const char *project = json_string_value(json_object_get(c->project, k->canon));
		bool exec = streq(k->canon, "allow_exec");

		if (k->kind == K_BOOL &&
		    !*(const bool *)(const void *)((const char *)c + k->offset))
			project = NULL; /* false widens nothing */

		if (!shown(k) || k->kind == K_RULES || !src)
			continue;
		if (project && exec && from_files && warn_project(from_files, project) < 0)
			return -ENOMEM;
		if (project && exec)
			continue; /* the flag alone, or a user's own file */
		if (streq(k->canon, "notifications")) {
			/* No flag: the files alone can turn a session's notifications off. */
			if (!c->notifications &&
			    json_object_set_new(params, "no_notifications", json_true()) < 0)
				return -ENOMEM;
			continue;
		}
		if (adds_up(k)) {
			if (json_object_set_new(params, k->canon, joined(c, k, have, NULL)) < 0)
				return -ENOMEM;
			continue;
		}
		if (k->kind == K_ARGS ? json_array_size(have) > 0
				      : have && !json_is_null(have) && !json_is_false(have))
			continue; /* a flag beats the files */
		if (json_object_set_new(params, k->canon, value_of(c, k)) < 0)
			return -ENOMEM;
		if (from_files && json_is_string(src) &&
		    json_object_set(from_files, k->canon, src) < 0)
			return -ENOMEM;
	}
	return 0;
}

int up_config_add_rules(json_t *rules, const json_t *config_rules)
{
	json_t *v;
	size_t i;

	json_array_foreach (config_rules, i, v)
		if (json_array_append(rules, (json_t *)v) < 0)
			return -ENOMEM;
	return 0;
}

int up_config_add_rules_file(struct up_config *c, const char *path, const char *origin)
{
	json_t *o = json_object_get(c->origins, "rules");

	if (!o && (!(o = json_array()) || json_object_set_new(c->origins, "rules", o) < 0))
		return -ENOMEM;
	if (json_array_append_new(c->rules, json_string(path)) < 0 ||
	    json_array_append_new(o, json_string(origin)) < 0)
		return -ENOMEM;
	return 0;
}

int up_config_load_rules_item(struct up_ruleset *rs, const json_t *item, json_t *problems)
{
	const char *text = json_string_value(json_object_get(item, "text"));
	json_t *error = json_object_get(item, "error");

	if (error)
		return json_array_append(problems, error) < 0 ? -ENOMEM : -EINVAL;
	if (json_is_string(item))
		return up_ruleset_load_file(rs, UP_LAYER_USER, json_string_value(item),
					    json_string_value(item), problems);
	if (!text)
		return -EINVAL;
	return up_ruleset_load_string(rs, UP_LAYER_USER,
				      json_string_value(json_object_get(item, "file")), text,
				      strlen(text), problems);
}
