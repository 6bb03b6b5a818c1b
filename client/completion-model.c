/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The completion model read from a command's usage and its --help text: an option is a "-x" or
 * "--word" at the start of a word; it takes a value when an upper-case placeholder (FILE,
 * SESSION) or a list of choices (json|yaml) follows it after one space; "-a, --long" and
 * "-y|--yes" share the long option's value. Positional arguments are the usage's words that
 * are neither options nor their values.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"

const char *const up_completion_agents[] = {"claude", "codex", "gemini", "opencode", NULL};

struct kind_name {
	const char *placeholder;
	enum comp_kind kind;
};

/* Placeholders whose values can be completed; any other one takes a value left to the user. */
static const struct kind_name placeholders[] = {
	{"FILE", COMP_FILE},	   {"PATH", COMP_FILE},	  {"PATHS", COMP_FILE},	 {"DIR", COMP_DIR},
	{"SESSION", COMP_SESSION}, {"AGENT", COMP_AGENT}, {"CTX", COMP_CONTEXT}, {NULL, COMP_NONE},
};

/* Options whose NAME is a kubeconfig context. */
static const char *const context_opts[] = {"--deploy-context", "--kube-context", NULL};

static const char *const kind_names[] = {
	[COMP_NONE] = "none",	    [COMP_FILE] = "file",   [COMP_DIR] = "dir",
	[COMP_SESSION] = "session", [COMP_AGENT] = "agent", [COMP_CONTEXT] = "context",
	[COMP_CHOICE] = "choice",
};

const char *comp_kind_name(enum comp_kind k)
{
	return kind_names[k];
}

static bool in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++)
		if (streq(list[i], s))
			return true;
	return false;
}

/* A placeholder word: FILE, HOST:PORT, json|yaml (not prose, not another option). */
static bool placeholder_word(const char *w)
{
	if (!*w || *w == '-')
		return false;
	if (strchr(w, '|'))
		return true;
	return isupper((unsigned char)w[0]) &&
	       (!w[1] || isupper((unsigned char)w[1]) || w[1] == ':');
}

static void value_of(const char *w, struct comp_value *v)
{
	v->kind = COMP_NONE;
	v->choices[0] = '\0';
	if (strchr(w, '|')) {
		v->kind = COMP_CHOICE;
		(void)snprintf(v->choices, sizeof(v->choices), "%s", w);
		for (char *c = v->choices; *c; c++)
			if (*c == '|')
				*c = ',';
		return;
	}
	for (size_t i = 0; placeholders[i].placeholder; i++)
		if (streq(w, placeholders[i].placeholder))
			v->kind = placeholders[i].kind;
}

/* Copies the word at s (up to a space, ']', ',' or end) into w; returns its length. */
static size_t word_at(const char *s, char *w, size_t len, const char *stops)
{
	size_t n = strcspn(s, stops);

	(void)snprintf(w, len, "%.*s", (int)(n < len ? n : len - 1), s);
	return n;
}

static struct comp_opt *find_opt(struct comp_cmd *c, const char *name)
{
	for (size_t i = 0; i < c->n_opts; i++)
		if (streq(c->opts[i].name, name))
			return &c->opts[i];
	if (c->n_opts >= UP_MAX_COMPLETION_OPTS)
		return NULL;
	struct comp_opt *o = &c->opts[c->n_opts++];
	(void)snprintf(o->name, sizeof(o->name), "%s", name);
	return o;
}

/* The option at s (s[0] == '-'); returns the bytes it spans, 0 if none, -E2BIG if full. */
static int read_opt(struct comp_cmd *c, const char *s, struct comp_opt **alias)
{
	char name[UP_MAX_COMPLETION_WORD], val[UP_MAX_COMPLETION_WORD];
	size_t n = word_at(s, name, sizeof(name), " ,|]:)\n\t.");
	bool long_opt = n > 2 && s[1] == '-' && isalpha((unsigned char)s[2]);

	if (!long_opt && !(n == 2 && isalpha((unsigned char)s[1])))
		return 0;
	struct comp_opt *o = find_opt(c, name);
	if (!o)
		return -E2BIG;
	if (s[n] == ' ' && s[n + 1] != ' ') {
		word_at(s + n + 1, val, sizeof(val), " ]\n\t");
		if (placeholder_word(val)) {
			o->takes_value = true;
			value_of(val, &o->value);
			if (in_list(context_opts, o->name))
				o->value.kind = COMP_CONTEXT;
		}
	}
	if (*alias && o->takes_value && !(*alias)->takes_value) {
		(*alias)->takes_value = true;
		(*alias)->value = o->value;
	}
	/* "-f, --follow" and "-y|--yes" name one option; "--all, or" does not */
	bool paired = (s[n] == ',' && s[n + 1] == ' ' && s[n + 2] == '-') ||
		      (s[n] == '|' && s[n + 1] == '-');
	*alias = paired && !o->takes_value ? o : NULL;
	return (int)n;
}

static int read_opts(struct comp_cmd *c, const char *text)
{
	struct comp_opt *alias = NULL;

	for (const char *s = text; s && *s; s++) {
		if (*s == '\n')
			alias = NULL;
		if (*s != '-' || (s > text && !strchr(" [|,(\n", s[-1])))
			continue;
		int n = read_opt(c, s, &alias);
		if (n < 0)
			return n;
		s += n > 0 ? n - 1 : 0;
	}
	return 0;
}

/* Positional words of the usage: "AGENT", "[SESSION...]", "[AGENT [MODE]] METHOD URL". */
static int read_positionals(struct comp_cmd *c, const char *usage)
{
	char w[UP_MAX_COMPLETION_WORD];
	bool value_next = false;

	for (const char *s = usage; *s;) {
		s += strspn(s, " ");
		size_t n = word_at(s, w, sizeof(w), " ");
		char *p = w + strspn(w, "[");
		bool closes = strchr(p, ']') != NULL;
		p[strcspn(p, "]")] = '\0';
		bool repeats = strstr(p, "...") != NULL;
		p[strcspn(p, ".")] = '\0';
		s += n;
		if (streq(p, "--"))
			break; /* what follows is the agent's */
		if (*p == '-') {
			value_next = !closes && !strchr(p, '|');
			continue;
		}
		if (value_next || !*p || streq(p, "OPTIONS")) {
			value_next = false;
			continue;
		}
		if (c->n_pos >= UP_MAX_COMPLETION_POS)
			return -E2BIG;
		value_of(p, &c->pos[c->n_pos++]);
		c->pos_repeats = repeats;
	}
	return 0;
}

/* The options listed in `uplink CMD --help`, as the user reads them. */
static int read_help(struct comp_cmd *c, const struct up_command *cmd)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int r;

	if (!f)
		return -ENOMEM;
	up_cli_command_help(cmd, f);
	if (fclose(f) != 0 || !text) {
		free(text);
		return -ENOMEM;
	}
	r = read_opts(c, text);
	free(text);
	return r;
}

int comp_cmd_read(const struct up_command *cmd, struct comp_cmd *out)
{
	size_t sp = strcspn(cmd->pattern, " ");
	int r;

	memset(out, 0, sizeof(*out));
	out->cmd = cmd;
	(void)snprintf(out->first, sizeof(out->first), "%.*s", (int)sp, cmd->pattern);
	(void)snprintf(out->sub, sizeof(out->sub), "%s",
		       cmd->pattern[sp] ? cmd->pattern + sp + 1 : "");
	if (!find_opt(out, "-h") || !find_opt(out, "--help"))
		return -E2BIG;
	r = read_opts(out, cmd->usage);
	if (r >= 0)
		r = read_help(out, cmd);
	if (r >= 0)
		r = read_positionals(out, cmd->usage);
	return r;
}
