/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one parser of every command's argv: each command declares its options beside its
 * entry in up_commands[] (main.c); main() parses once, answers --help, and refuses an
 * unknown option or a missing value in one line (exit 2) before the command runs.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

enum { OPT_BASE = 1000 };

static size_t count_options(const struct up_option *o)
{
	size_t n = 0;

	while (o && o[n].name)
		n++;
	return n;
}

/*
 * getopt's short option string; ":" tells a missing value. Options may come anywhere among
 * the arguments (`uplink stop ID --wait`); "--" ends them.
 */
static void short_options(const struct up_command *cmd, size_t n, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, ":h");

	for (size_t i = 0; i < n && used + 3 < len; i++) {
		if (!cmd->options[i].short_name)
			continue;
		buf[used++] = cmd->options[i].short_name;
		if (cmd->options[i].value)
			buf[used++] = ':';
	}
	buf[used] = '\0';
}

static const struct up_option *by_short(const struct up_command *cmd, int c)
{
	for (const struct up_option *o = cmd->options; o && o->name; o++)
		if (o->short_name == c)
			return o;
	return NULL;
}

/* The option getopt stopped at (a short one by its letter, a long one as given), in one line. */
static int refuse(const struct up_command *cmd, int c, char **argv)
{
	char letter[3] = {'-', (char)optopt, '\0'};
	const char *arg = optopt && optopt < OPT_BASE ? letter : argv[optind - 1];

	fprintf(stderr, "uplink %s: %s '%s'%s (see uplink %s --help)\n", cmd->pattern,
		c == ':' ? "option" : "unknown option", arg, c == ':' ? " needs a value" : "",
		cmd->pattern);
	return UP_EXIT_USAGE;
}

static int record(struct up_args *a, const struct up_option *o, const char *value)
{
	if (a->n_hits == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 8;
		struct up_arg_hit *h = realloc(a->hits, cap * sizeof(*h));
		if (!h)
			return UP_EXIT_FAILED;
		a->hits = h;
		a->cap = cap;
	}
	a->hits[a->n_hits].opt = o;
	a->hits[a->n_hits].value = value;
	a->n_hits++;
	return 0;
}

int up_args_parse(const struct up_command *cmd, int argc, char **argv, struct up_args *a)
{
	size_t n = count_options(cmd->options);
	struct option *longs = calloc(n + 2, sizeof(*longs));
	char shorts[2 * UP_MAX_COMMAND_OPTIONS + 8];
	size_t k = 0;
	int c, r = 0;

	*a = (struct up_args){0};
	if (!longs || n > UP_MAX_COMMAND_OPTIONS) {
		free(longs);
		fprintf(stderr, "uplink %s: out of memory parsing the command line\n",
			cmd->pattern);
		return UP_EXIT_FAILED;
	}
	for (size_t i = 0; i < n; i++)
		if (cmd->options[i].name[0]) /* "": a row of a shared table that is no option */
			longs[k++] = (struct option){cmd->options[i].name,
						     cmd->options[i].value ? required_argument
									   : no_argument,
						     NULL, OPT_BASE + (int)i};
	longs[k] = (struct option){"help", no_argument, NULL, 'h'};
	short_options(cmd, n, shorts, sizeof(shorts));
	optind = 0;
	opterr = 0;
	while (r == 0 && (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		const struct up_option *o =
			c >= OPT_BASE ? &cmd->options[c - OPT_BASE] : by_short(cmd, c);
		if (c == 'h')
			r = -1;
		else if (c == '?' || c == ':' || !o)
			r = refuse(cmd, c, argv);
		else
			r = record(a, o, o->value ? optarg : NULL);
	}
	free(longs);
	if (r == -1)
		up_cli_command_help(cmd, stdout);
	a->argc = argc - optind;
	a->argv = argv + optind;
	return r;
}

void up_args_done(struct up_args *a)
{
	free(a->hits);
	*a = (struct up_args){0};
}

const char *up_args_next(const struct up_args *a, const char *name, size_t *i)
{
	for (; *i < a->n_hits; (*i)++)
		if (!strcmp(a->hits[*i].opt->name, name))
			return a->hits[(*i)++].value;
	return NULL;
}

bool up_args_flag(const struct up_args *a, const char *name)
{
	for (size_t i = 0; i < a->n_hits; i++)
		if (!strcmp(a->hits[i].opt->name, name))
			return true;
	return false;
}

const char *up_args_value(const struct up_args *a, const char *name)
{
	const char *last = NULL, *v;
	size_t i = 0;

	while ((v = up_args_next(a, name, &i)))
		last = v;
	return last;
}
