/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uplink clean, as agent-uplink 0.4.1's `clean` behaves. Exactly one selector;
 * the list of what goes, a [y/N] question on stdin unless -y (EOF is no, as 0.4.1's
 * input() has it, terminal or not), then the daemon stops our sessions and deletes
 * foreign namespaces. Messages go to stderr, the question to stdout, as in 0.4.1.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bounds.h"
#include "client.h"
#include "duration.h"

static int clean_error(const char *msg)
{
	fprintf(stderr, "uplink clean: %s\n", msg);
	return UP_EXIT_USAGE;
}

struct clean_opts {
	bool all, yes, wait;
	const char *older_than, *context;
	json_t *ids;
};

/* 0 or an exit code. */
static int parse_clean(const struct up_args *a, struct clean_opts *o)
{
	char err[256];
	uint64_t secs;
	int n;

	o->all = up_args_flag(a, "all");
	o->older_than = up_args_value(a, "older-than");
	o->yes = up_args_flag(a, "yes");
	o->wait = up_args_flag(a, "wait");
	o->context = up_args_value(a, "deploy-context");
	for (int i = 0; i < a->argc; i++)
		(void)json_array_append_new(o->ids, json_string(a->argv[i]));
	if (o->older_than && up_duration_parse(o->older_than, &secs, err, sizeof(err)) < 0)
		return clean_error(err);
	n = (json_array_size(o->ids) > 0) + (o->older_than != NULL) + o->all;
	if (n == 0)
		return clean_error("clean needs SESSION id(s), --all, or --older-than");
	if (n > 1)
		return clean_error(
			"clean takes exactly one of SESSION id(s), --all, or --older-than");
	return 0;
}

static json_t *clean_params(const struct clean_opts *o, bool dry_run)
{
	json_t *p = json_pack("{s:b, s:b}", "dry_run", dry_run, "wait", o->wait && !dry_run);

	if (json_array_size(o->ids) > 0)
		(void)json_object_set(p, "ids", o->ids);
	if (o->older_than)
		(void)json_object_set_new(p, "older_than", json_string(o->older_than));
	if (o->all)
		(void)json_object_set_new(p, "all", json_true());
	if (o->context)
		(void)json_object_set_new(p, "deploy_context", json_string(o->context));
	return p;
}

/* "delete N namespace(s)? [y/N] " on stdout, the answer from stdin; EOF is no. */
static bool confirm(size_t n)
{
	char line[256], *p, *e;

	printf("delete %zu namespace(s)? [y/N] ", n);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return false;
	for (p = line; isspace((unsigned char)*p); p++)
		;
	for (e = p + strlen(p); e > p && isspace((unsigned char)e[-1]); e--)
		;
	*e = '\0';
	return !strcasecmp(p, "y") || !strcasecmp(p, "yes");
}

static void print_targets(json_t *targets)
{
	json_t *t;
	size_t i;

	fprintf(stderr, "will delete:\n");
	json_array_foreach (targets, i, t) {
		char age[UP_DURATION_FORMAT_MAX] = "0s";
		if (up_duration_format(json_integer_value(json_object_get(t, "age")), age,
				       sizeof(age)) < 0)
			(void)snprintf(age, sizeof(age), "?");
		fprintf(stderr, "  %s (age %s, %s%s)\n", up_json_field(t, "namespace"), age,
			up_json_field(t, "phase"),
			json_is_true(json_object_get(t, "foreign")) ? ", foreign" : "");
	}
}

static int report_result(json_t *res)
{
	json_t *v;
	size_t i;
	int r = UP_EXIT_OK;

	json_array_foreach (json_object_get(res, "errors"), i, v) {
		fprintf(stderr, "uplink clean: %s\n", up_json_text(v));
		r = UP_EXIT_FAILED;
	}
	json_array_foreach (json_object_get(res, "waiting"), i, v) {
		fprintf(stderr, "uplink clean: %s is still there after %d s\n", up_json_text(v),
			UP_CLEAN_WAIT_MAX_S);
		r = UP_EXIT_FAILED;
	}
	return r;
}

static int do_clean(struct up_cli *cli, const struct clean_opts *o)
{
	struct up_rpc_error err = {0};
	json_t *res = NULL, *targets, *t, *v, *names;
	struct clean_opts now = *o;
	size_t i;
	int r = up_cli_call(cli, "session.clean", clean_params(o, true), &res);

	if (r != 0)
		return r;
	json_array_foreach (json_object_get(res, "unmatched"), i, v)
		fprintf(stderr, "no session matches '%s'\n", up_json_text(v));
	targets = json_object_get(res, "targets");
	if (json_array_size(targets) == 0) {
		fprintf(stderr, "nothing to delete\n");
		json_decref(res);
		return UP_EXIT_OK;
	}
	print_targets(targets);
	if (!o->yes && !confirm(json_array_size(targets))) {
		fprintf(stderr, "aborted\n");
		json_decref(res);
		return UP_EXIT_FAILED;
	}
	/* Exactly what was confirmed: the namespaces listed, whatever has aged since. */
	names = json_array();
	json_array_foreach (targets, i, t) {
		fprintf(stderr, "deleting %s\n", up_json_field(t, "namespace"));
		(void)json_array_append(names, json_object_get(t, "namespace"));
	}
	json_decref(res);
	res = NULL;
	now.ids = names;
	now.all = false;
	now.older_than = NULL;
	r = up_rpc_client_call(cli->rpc, "session.clean", clean_params(&now, false),
			       o->wait ? -1 : UP_CLIENT_TIMEOUT_MS, NULL, NULL, &res, &err);
	json_decref(names);
	if (r != 0)
		return up_cli_report(cli, r, &err);
	r = report_result(res);
	json_decref(res);
	return r;
}

int up_cmd_clean(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	struct clean_opts o = {.ids = json_array()};
	int r = parse_clean(a, &o);

	(void)cmd;
	if (r == 0)
		r = do_clean(cli, &o);
	json_decref(o.ids);
	return r;
}
