/* SPDX-License-Identifier: Apache-2.0 */
/* An approval's rule appended to a rules file (rules-save.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "bounds.h"
#include "errors.h"
#include "fileio.h"
#include "paths.h"
#include "rules-save.h"
#include "rules.h"
#include "trust.h"
#include "yaml-json.h"

/* The keys an approval's rule has, in the order they are written. */
static const char *const rule_keys[] = {"name", "hosts", "methods", "paths"};

int up_rules_save_default(const char *home, const char *config_home, char *buf, size_t len)
{
	int n;

	if (config_home && config_home[0] == '/')
		n = snprintf(buf, len, "%s/uplink/%s", config_home, UP_RULES_SAVE_FILE);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.config/uplink/%s", home, UP_RULES_SAVE_FILE);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the text ---- */

struct text {
	char *d;
	size_t len, cap;
	bool oom;
};

static void put(struct text *t, const char *s, size_t n)
{
	if (t->oom || n > UP_MAX_RULES_FILE_SIZE * 2) { /* far past what a rules file may be */
		t->oom = true;
		return;
	}
	if (!t->d || t->len + n + 1 > t->cap) {
		size_t cap = (t->len + n + 1) * 2;
		char *d = realloc(t->d, cap);

		if (!d) {
			t->oom = true;
			return;
		}
		t->d = d, t->cap = cap;
	}
	memcpy(t->d + t->len, s, n);
	t->len += n;
	t->d[t->len] = '\0';
}

static void puts_(struct text *t, const char *s)
{
	put(t, s, strlen(s));
}

static void indent(struct text *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(t, " ", 1);
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* 'text' with ' doubled: YAML's single-quoted scalar, which keeps every other byte. */
static void quoted(struct text *t, const char *s)
{
	put(t, "'", 1);
	for (const char *q; (q = strchr(s, '\'')); s = q + 1) {
		put(t, s, (size_t)(q - s));
		put(t, "''", 2);
	}
	puts_(t, s);
	put(t, "'", 1);
}

/* The rule as a block list item whose "- " is at column `col`. */
static int write_rule(struct text *t, const json_t *rule, size_t col, char *err, size_t err_len)
{
	const char *key;
	json_t *v, *e;
	size_t i, n = 0;

	if (!json_is_object(rule)) {
		(void)snprintf(err, err_len, "the rule to save is not an object");
		return -EINVAL;
	}
	json_object_foreach ((json_t *)rule, key, v) {
		bool known = false;

		for (i = 0; i < ELEMENTSOF(rule_keys); i++)
			known = known || streq(key, rule_keys[i]);
		if (!known) {
			(void)snprintf(err, err_len,
				       "the rule to save has a key '%.64s' uplink "
				       "does not write",
				       key);
			return -EINVAL;
		}
	}
	for (size_t k = 0; k < ELEMENTSOF(rule_keys); k++) {
		v = json_object_get(rule, rule_keys[k]);
		if (!v)
			continue;
		indent(t, n++ ? col + 2 : col);
		if (n == 1)
			puts_(t, "- ");
		puts_(t, rule_keys[k]);
		puts_(t, ": ");
		if (json_is_string(v) && printable(json_string_value(v))) {
			quoted(t, json_string_value(v));
		} else if (json_is_array(v) && json_array_size(v) > 0) {
			puts_(t, "[");
			json_array_foreach (v, i, e) {
				if (!json_is_string(e) || !printable(json_string_value(e))) {
					(void)snprintf(err, err_len,
						       "the rule's %s holds a value uplink cannot "
						       "write",
						       rule_keys[k]);
					return -EINVAL;
				}
				if (i)
					puts_(t, ", ");
				quoted(t, json_string_value(e));
			}
			puts_(t, "]");
		} else {
			(void)snprintf(err, err_len,
				       "the rule's %s holds a value uplink cannot write",
				       rule_keys[k]);
			return -EINVAL;
		}
		puts_(t, "\n");
	}
	return t->oom ? -ENOMEM : 0;
}

static void write_comment(struct text *t, const char *comment, size_t col)
{
	const char *s = comment ? comment : "";

	while (*s) {
		size_t n = strcspn(s, "\n");

		indent(t, col);
		puts_(t, "# ");
		for (size_t i = 0; i < n; i++)
			put(t, (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? "?" : s + i, 1);
		puts_(t, "\n");
		s += n + (s[n] == '\n');
	}
}

/* ---- where it goes ---- */

enum shape {
	SHAPE_EMPTY,	/* no document: "rules:" and the item are appended */
	SHAPE_NULL,	/* "rules:" is last and empty: the item goes under it */
	SHAPE_SEQUENCE, /* "rules:" is last, a block list: the item follows its last */
};

/* Where the old text takes the item, or -EINVAL with the reason. */
static int shape_of(const char *old, size_t len, const char *label, enum shape *shape, size_t *col,
		    char *err, size_t err_len)
{
	yaml_parser_t parser;
	yaml_document_t doc, next;
	yaml_node_t *root, *value = NULL;
	yaml_node_pair_t *pair;
	int r = -EINVAL;

	(void)yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)old, len);
	if (!yaml_parser_load(&parser, &doc)) {
		(void)snprintf(err, err_len,
			       "%s: not valid YAML (line %zu): fix it first (uplink "
			       "rules lint %s)",
			       label, parser.problem_mark.line + 1, label);
		yaml_parser_delete(&parser);
		return -EINVAL;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		*shape = SHAPE_EMPTY, *col = 2;
		r = 0;
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE ||
	    root->data.mapping.style != YAML_BLOCK_MAPPING_STYLE) {
		(void)snprintf(err, err_len, "%s: not a block mapping with a rules: list", label);
		goto out;
	}
	for (pair = root->data.mapping.pairs.start; pair < root->data.mapping.pairs.top; pair++) {
		yaml_node_t *k = yaml_document_get_node(&doc, pair->key);

		value = NULL;
		if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == 5 &&
		    memcmp(k->data.scalar.value, "rules", 5) == 0)
			value = yaml_document_get_node(&doc, pair->value);
	}
	/* `value` is set only when rules: is the last key */
	if (!value) {
		(void)snprintf(
			err, err_len,
			"%s: its rules: list is not the file's last key, so a rule cannot "
			"be added at its end: move rules: to the end, or save to another file",
			label);
		goto out;
	}
	if (value->type == YAML_SCALAR_NODE && value->data.scalar.length == 0 &&
	    value->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		*shape = SHAPE_NULL, *col = 2;
		r = 0;
	} else if (value->type == YAML_SEQUENCE_NODE &&
		   value->data.sequence.style == YAML_BLOCK_SEQUENCE_STYLE) {
		*shape = SHAPE_SEQUENCE, *col = value->start_mark.column;
		r = 0;
	} else {
		(void)snprintf(err, err_len,
			       "%s: its rules: is not a block list (one '- ' item per rule), so a "
			       "rule cannot be added at its end: rewrite it so, or save to another "
			       "file",
			       label);
		goto out;
	}
	if (yaml_parser_load(&parser, &next)) {
		if (yaml_document_get_root_node(&next)) {
			(void)snprintf(err, err_len, "%s: holds more than one YAML document",
				       label);
			r = -EINVAL;
		}
		yaml_document_delete(&next);
	}
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return r;
}

/* How many rules `text` holds; -EINVAL with its first problem in `err`. */
static int count_rules(const char *text, size_t len, const char *label, size_t *n, char *err,
		       size_t err_len)
{
	struct up_ruleset *rs = up_ruleset_new();
	json_t *problems = json_array();
	int r = rs && problems
			? up_ruleset_load_string(rs, UP_LAYER_USER, label, text, len, problems)
			: -ENOMEM;

	if (r == -EINVAL)
		(void)snprintf(err, err_len, "%s", json_string_value(json_array_get(problems, 0)));
	if (r >= 0)
		*n = up_ruleset_count(rs);
	json_decref(problems);
	up_ruleset_free(rs);
	return r;
}

int up_rules_save_text(const char *old, size_t old_len, const char *label, const json_t *rule,
		       const char *comment, char **out, size_t *out_len, size_t *line, char *err,
		       size_t err_len)
{
	struct text t = {0};
	enum shape shape = SHAPE_EMPTY;
	size_t col = 2, before = 0, after = 0;
	json_t *doc = NULL, *last;
	char why[512];
	int r = 0;

	*out = NULL;
	if (old && old_len > 0) {
		r = shape_of(old, old_len, label, &shape, &col, err, err_len);
		if (r < 0)
			return r;
		if (shape == SHAPE_SEQUENCE) {
			r = count_rules(old, old_len, label, &before, why, sizeof(why));
			if (r == -EINVAL)
				(void)snprintf(err, err_len,
					       "%s has problems already, so uplink does not add to "
					       "it: %s (uplink rules lint %s)",
					       label, why, label);
			if (r < 0)
				return r;
		}
		put(&t, old, old_len);
		if (old[old_len - 1] != '\n')
			puts_(&t, "\n");
	}
	if (shape == SHAPE_EMPTY)
		puts_(&t, "rules:\n");
	write_comment(&t, comment, col);
	*line = 1;
	for (size_t i = 0; t.d && i < t.len; i++)
		*line += t.d[i] == '\n';
	r = write_rule(&t, rule, col, err, err_len);
	if (r < 0 || t.oom) {
		free(t.d);
		return r < 0 ? r : -ENOMEM;
	}
	/* what was written reads back as the file plus exactly this rule */
	r = count_rules(t.d, t.len, label, &after, why, sizeof(why));
	if (r >= 0 && after != before + 1)
		r = -EINVAL, (void)snprintf(why, sizeof(why), "it would hold %zu rules, not %zu",
					    after, before + 1);
	if (r >= 0 && up_yaml_load(t.d, t.len, &doc, why, sizeof(why)) < 0)
		r = -EINVAL;
	last = json_array_get(json_object_get(doc, "rules"),
			      json_array_size(json_object_get(doc, "rules")) - 1);
	if (r >= 0 && !json_equal(last, (json_t *)rule))
		r = -EINVAL, (void)snprintf(why, sizeof(why), "the rule would read back otherwise");
	json_decref(doc);
	if (r == -EINVAL)
		(void)snprintf(err, err_len,
			       "%s cannot take the rule as uplink writes it (%s): add it by hand",
			       label, why);
	if (r < 0) {
		free(t.d);
		return r;
	}
	*out = t.d;
	*out_len = t.len;
	return 0;
}

/* ---- the file ---- */

bool up_rules_save_in_project(const char *path, const char *own_dir)
{
	static const char *const marks[] = {".git", ".uplink.yaml", ".agent-uplink.yaml"};
	char dir[PATH_MAX], probe[PATH_MAX + 32];
	struct stat st;
	char *slash;

	if (own_dir && up_path_under(path, own_dir))
		return false;
	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return true;
	while ((slash = strrchr(dir, '/'))) {
		*slash = '\0';
		for (size_t i = 0; i < ELEMENTSOF(marks); i++) {
			(void)snprintf(probe, sizeof(probe), "%s/%s", dir, marks[i]);
			if (lstat(probe, &st) == 0)
				return true;
		}
	}
	return false;
}

static pthread_mutex_t save_lock = PTHREAD_MUTEX_INITIALIZER;

static int refuse(struct up_rules_save *s, int e, int r, const char *fmt, ...) _printf_(4, 5);
static int refuse(struct up_rules_save *s, int e, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	s->e = e;
	return r;
}

/* The trust store's word on a project's file `path` as it is now (`old`); a refusal if none. */
static int check_trusted(struct up_rules_save *s, bool exists, const char *old, size_t old_len)
{
	char sha[UP_SHA256_HEX_LEN + 1], err[768];
	json_t *store = NULL;
	int r;

	up_sha256_hex(old ? old : "", old_len, sha);
	r = up_trust_load(s->trust_dir, &store, err, sizeof(err));
	if (r < 0)
		return refuse(s, UP_ERR_UNTRUSTED_CONFIG, r, "%s", err);
	s->trusted = exists && up_trust_has(store, s->path, sha);
	json_decref(store);
	if (!s->trusted)
		return refuse(s, UP_ERR_UNTRUSTED_CONFIG, -EPERM,
			      "%s is a project's file (a folder above it holds .git or "
			      ".uplink.yaml) and not one you trusted as it is now: uplink "
			      "writes to a project's rules file only after uplink trust (run in "
			      "the project, it records the rules files its .uplink.yaml names); "
			      "or save to your own rules file (uplink approve ID --save)",
			      s->path);
	return 0;
}

/* Writes `text` over s->path (its folder made first when it is the user's own), keeping the
 * old file's mode, and records a trusted file again as written. */
static int write_saved(struct up_rules_save *s, const char *text, size_t len, bool own,
		       const struct stat *old_st)
{
	char dir[PATH_MAX], sha[UP_SHA256_HEX_LEN + 1], err[768];
	const char *step = NULL;
	json_t *entries;
	int r;

	(void)snprintf(dir, sizeof(dir), "%s", s->path);
	*strrchr(dir, '/') = '\0';
	if (own && (r = up_mkdir_parents(s->path, 0700)) < 0)
		return refuse(s, UP_ERR_INTERNAL_ERROR, r, "cannot create %s: %s", dir,
			      strerror(-r));
	r = up_write_file_atomic(dir[0] ? dir : "/", strrchr(s->path, '/') + 1, text, len, &step);
	if (r < 0)
		return refuse(s, r == -EACCES ? UP_ERR_PERMISSION_DENIED : UP_ERR_INTERNAL_ERROR, r,
			      "cannot write %s (%s): %s", s->path, step ? step : "write",
			      strerror(-r));
	if (old_st && (old_st->st_mode & 07777) != 0600)
		(void)chmod(s->path, old_st->st_mode & 07777);
	if (!s->trusted)
		return 0;
	up_sha256_hex(text, len, sha);
	entries = json_pack("[{s:s, s:s}]", "file", s->path, "sha256", sha);
	r = entries ? up_trust_add(s->trust_dir, entries, s->now, err, sizeof(err)) : -ENOMEM;
	json_decref(entries);
	if (r < 0)
		return refuse(s, UP_ERR_INTERNAL_ERROR, r,
			      "saved the rule to %s, but could not record the file as trusted "
			      "again (%s): run uplink trust in the project",
			      s->path, r == -ENOMEM ? "out of memory" : err);
	return 0;
}

static int save_locked(struct up_rules_save *s)
{
	_cleanup_(freep) char *old = NULL, *text = NULL;
	char err[768];
	size_t old_len = 0, len = 0;
	struct stat st;
	bool exists, own = s->own_dir && up_path_under(s->path, s->own_dir);
	int r;

	if (!up_path_is_normal_abs(s->path) || strlen(s->path) >= PATH_MAX)
		return refuse(s, UP_ERR_INVALID_PARAMS, -EINVAL,
			      "the file to save to must be an absolute path: '%.300s'", s->path);
	exists = lstat(s->path, &st) == 0;
	if (exists && S_ISLNK(st.st_mode))
		return refuse(s, UP_ERR_INVALID_PARAMS, -ELOOP,
			      "%s is a symbolic link: name the file it points to", s->path);
	if (exists && !S_ISREG(st.st_mode))
		return refuse(s, UP_ERR_INVALID_PARAMS, -EINVAL, "%s is not a regular file",
			      s->path);
	if (exists && (r = up_read_file(s->path, UP_MAX_RULES_FILE_SIZE, &old, &old_len)) < 0)
		return refuse(s, r == -EACCES ? UP_ERR_PERMISSION_DENIED : UP_ERR_INVALID_PARAMS, r,
			      "cannot read %s: %s", s->path,
			      r == -EFBIG ? "larger than the rules files' limit" : strerror(-r));
	if (!own && up_rules_save_in_project(s->path, s->own_dir) &&
	    (r = check_trusted(s, exists, old, old_len)) < 0)
		return r;
	r = up_rules_save_text(old, old_len, s->path, s->rule, s->comment, &text, &len, &s->line,
			       err, sizeof(err));
	if (r < 0)
		return refuse(s, r == -ENOMEM ? UP_ERR_INTERNAL_ERROR : UP_ERR_RULES_INVALID, r,
			      "%s", r == -ENOMEM ? "out of memory" : err);
	if (len > UP_MAX_RULES_FILE_SIZE)
		return refuse(s, UP_ERR_RULES_INVALID, -EFBIG,
			      "%s would grow past the rules files' limit (%d bytes)", s->path,
			      UP_MAX_RULES_FILE_SIZE);
	return write_saved(s, text, len, own, exists ? &st : NULL);
}

int up_rules_save(struct up_rules_save *s)
{
	int r;

	s->err[0] = '\0';
	s->e = 0;
	s->trusted = false;
	(void)pthread_mutex_lock(&save_lock);
	r = save_locked(s);
	(void)pthread_mutex_unlock(&save_lock);
	return r;
}
