/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ~/.codex/config.toml as the pod sees it: the host's file line by line, with every key or
 * table that may hold a credential left out (a bearer token, HTTP headers, an MCP server's
 * env, a provider's auth command) and a warning naming each, and uplink's own settings
 * first. TOML is read only as far as that needs: table headers, keys, and where a value
 * ends (strings, multi-line strings, arrays and inline tables spanning lines).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/codex/codex.h"
#include "bounds.h"
#include "fileio.h"

/* Keys or tables left out whatever their name says: they map names to secrets. */
static const char *const dropped_names[] = {"env", "http_headers", "headers", "auth"};
/* codex keys whose names look secret but hold none (a limit, a variable's name). */
static const char *const harmless_names[] = {"model_auto_compact_token_limit",
					     "tool_output_token_limit", "env_key",
					     "env_key_instructions", "bearer_token_env_var"};
/* Top-level keys uplink sets itself in the pod: the host's are left out. */
static const char *const forced_names[] = {"cli_auth_credentials_store", "forced_login_method",
					   "check_for_update_on_startup"};

static bool in_list(const char *s, size_t n, const char *const *list, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (strlen(list[i]) == n && strncmp(s, list[i], n) == 0)
			return true;
	return false;
}

/* A dotted key's segments (quotes stripped), NUL-separated into buf; how many. */
static size_t split_key(const char *s, size_t n, char *buf, size_t cap, const char **seg,
			size_t max)
{
	size_t k = 0, count = 0;
	char quote = 0;

	for (size_t i = 0; i < n && k + 1 < cap; i++) {
		char c = s[i];
		if (quote) {
			if (c == quote)
				quote = 0;
			else
				buf[k++] = c;
		} else if (c == '"' || c == '\'') {
			quote = c;
		} else if (c == '.') {
			buf[k++] = '\0';
		} else if (!isspace((unsigned char)c)) {
			buf[k++] = c;
		}
	}
	buf[k] = '\0';
	for (size_t i = 0; i < k + 1 && count < max; i += strlen(buf + i) + 1)
		seg[count++] = buf + i;
	return count;
}

/* Whether a key path (the table's, then the key's) may hold a credential. */
static bool secret_path(const char *table, const char *key, size_t key_len)
{
	char buf[2 * UP_MAX_HEADER_VALUE];
	const char *seg[64];
	char joined[2 * UP_MAX_HEADER_VALUE];
	size_t n;

	(void)snprintf(joined, sizeof(joined), "%s%s%.*s", table, *table ? "." : "", (int)key_len,
		       key);
	n = split_key(joined, strlen(joined), buf, sizeof(buf), seg, ELEMENTSOF(seg));
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(seg[i]);
		if (in_list(seg[i], len, dropped_names, ELEMENTSOF(dropped_names)))
			return true;
		if (up_agent_secret_name(seg[i]) &&
		    !in_list(seg[i], len, harmless_names, ELEMENTSOF(harmless_names)))
			return true;
	}
	return false;
}

/* ---------------------------------------------------------------- values */

/* Where a value is, across lines: in which string, how deep in [] and {}. */
struct scan {
	int depth;
	char str;   /* 0, '"' or '\'' */
	bool multi; /* a """ or ''' string */
};

static bool open_value(const struct scan *s)
{
	return s->depth > 0 || s->str;
}

static void scan_line(struct scan *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		bool triple = i + 2 < n && p[i + 1] == c && p[i + 2] == c;
		if (s->str) {
			if (c == '\\' && s->str == '"') {
				i++;
			} else if (c == s->str && (!s->multi || triple)) {
				i += s->multi ? 2 : 0;
				s->str = 0;
				s->multi = false;
			}
		} else if (c == '#') {
			return;
		} else if (c == '"' || c == '\'') {
			s->str = c;
			s->multi = triple;
			i += triple ? 2 : 0;
		} else if (c == '[' || c == '{') {
			s->depth++;
		} else if ((c == ']' || c == '}') && s->depth > 0) {
			s->depth--;
		}
	}
	if (s->str && !s->multi) /* a one-line string does not go on past its line */
		s->str = 0;
}

/* ---------------------------------------------------------------- lines */

struct filter {
	char table[UP_MAX_HEADER_VALUE];
	const char *cwd; /* its [projects."<cwd>"] is uplink's */
	bool skip_table, skip_value;
	struct scan value;
	const char *what;
	struct up_agent_prepared *p;
	char *out;
	size_t len, cap;
	int r;
};

static void emit(struct filter *f, const char *s, size_t n)
{
	if (f->r < 0)
		return;
	if (f->len + n + 2 > f->cap) {
		size_t cap = (f->len + n + 2) * 2;
		char *nb = realloc(f->out, cap);
		if (!nb) {
			f->r = -ENOMEM;
			return;
		}
		f->out = nb;
		f->cap = cap;
	}
	memcpy(f->out + f->len, s, n);
	f->len += n;
	f->out[f->len++] = '\n';
	f->out[f->len] = '\0';
}

/* Whether a table header names the cwd's project table. */
static bool is_cwd_table(const struct filter *f, const char *name, size_t n)
{
	char buf[2 * UP_MAX_HEADER_VALUE];
	const char *seg[4];

	return f->cwd && split_key(name, n, buf, sizeof(buf), seg, ELEMENTSOF(seg)) == 2 &&
	       streq(seg[0], "projects") && streq(seg[1], f->cwd);
}

/* The cwd trusted, so that codex does not ask: as a TOML basic string, when it can be one. */
static void trust_cwd(struct filter *f)
{
	char line[UP_MAX_HEADER_VALUE + 64];
	size_t k = 0;

	k += (size_t)snprintf(line, sizeof(line), "[projects.\"");
	for (const char *c = f->cwd; c && *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f || k + 8 >= sizeof(line))
			return;
		if (*c == '"' || *c == '\\')
			line[k++] = '\\';
		line[k++] = *c;
	}
	if (!f->cwd || k + 4 >= sizeof(line))
		return;
	memcpy(line + k, "\"]", 3);
	emit(f, line, strlen(line));
	emit(f, "trust_level = \"trusted\"", strlen("trust_level = \"trusted\""));
}

static void header(struct filter *f, const char *s, size_t n)
{
	size_t open = s[1] == '[' ? 2 : 1;
	const char *end = memchr(s, ']', n);
	size_t name_len = end && end > s + open ? (size_t)(end - s - open) : 0;

	f->skip_table = name_len && secret_path("", s + open, name_len);
	if (!f->skip_table && is_cwd_table(f, s + open, name_len)) {
		f->skip_table = true; /* uplink writes its own, trusted */
		return;
	}
	if (f->skip_table) {
		if (up_agent_warn(f->p,
				  "%s: the table [%.*s] may hold credentials; the pod's copy "
				  "leaves it out (inject them with a rule instead)",
				  f->what, (int)name_len, s + open) < 0)
			f->r = -ENOMEM;
		return;
	}
	(void)snprintf(f->table, sizeof(f->table), "%.*s", (int)name_len, s + open);
	emit(f, s, n);
}

static void assignment(struct filter *f, const char *line, size_t n, const char *s, size_t sn)
{
	const char *eq = memchr(s, '=', sn);
	size_t klen = eq ? (size_t)(eq - s) : sn;
	bool forced;

	while (klen && isspace((unsigned char)s[klen - 1]))
		klen--;
	forced = !*f->table && in_list(s, klen, forced_names, ELEMENTSOF(forced_names));
	f->skip_value = forced || secret_path(f->table, s, klen);
	if (f->skip_value && !forced &&
	    up_agent_warn(f->p,
			  "%s: %s%s%.*s looks like a credential; the pod's copy leaves it out "
			  "(inject it with a rule instead)",
			  f->what, f->table, *f->table ? "." : "", (int)klen, s) < 0)
		f->r = -ENOMEM;
	f->value = (struct scan){0};
	if (eq)
		scan_line(&f->value, eq + 1, sn - (size_t)(eq + 1 - s));
	if (!f->skip_value)
		emit(f, line, n);
}

static void one_line(struct filter *f, const char *line, size_t n)
{
	const char *s = line;
	size_t sn = n;

	if (open_value(&f->value)) { /* a value going on from an earlier line */
		scan_line(&f->value, line, n);
		if (!f->skip_value && !f->skip_table)
			emit(f, line, n);
		return;
	}
	while (sn && isspace((unsigned char)*s))
		s++, sn--;
	if (sn && *s == '[')
		header(f, s, sn);
	else if (f->skip_table)
		return;
	else if (!sn || *s == '#')
		emit(f, line, n);
	else
		assignment(f, line, n, s, sn);
}

static const char *const mode_login[] = {[CODEX_CHATGPT] = "chatgpt", [CODEX_API_KEY] = "api"};

const char *codex_config_toml(const char *host, size_t host_len, enum codex_mode mode,
			      const char *cwd, const char *what, struct up_agent_prepared *p)
{
	struct filter f = {.what = what, .p = p, .cwd = cwd};
	char head[512];
	size_t i = 0;

	(void)snprintf(head, sizeof(head),
		       "# uplink: the pod's settings; the host's follow, less what may hold a "
		       "credential\n"
		       "cli_auth_credentials_store = \"file\"\n"
		       "forced_login_method = \"%s\"\n"
		       "check_for_update_on_startup = false",
		       mode_login[mode]);
	emit(&f, head, strlen(head));
	while (host && i < host_len && f.r == 0) {
		const char *nl = memchr(host + i, '\n', host_len - i);
		size_t n = nl ? (size_t)(nl - host - i) : host_len - i;
		size_t m = n && host[i + n - 1] == '\r' ? n - 1 : n;
		one_line(&f, host + i, m);
		i += n + 1;
	}
	if (f.r == 0 && !open_value(&f.value))
		trust_cwd(&f);
	if (f.r < 0) {
		up_free_secret(f.out, f.cap);
		return NULL;
	}
	return up_agent_keep(p, f.out, f.cap);
}
