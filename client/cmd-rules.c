/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uplink rules check | lint | render. All three go through uplinkd: it holds the
 * keyring and runs exec placeholders, and the client stays free of libyaml and
 * PCRE2 (and fast to start). Lint needs no secrets but uses the daemon's parser so
 * that lint and run can never disagree.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bounds.h"
#include "client.h"

struct rules_opts {
	json_t *rules, *kube_context;
	const char *kubeconfig;
	bool no_defaults, allow_exec, json, show_secrets;
};

/* The options of the three commands (each declares its own in main.c). */
static void read_opts(const struct up_args *a, struct rules_opts *o)
{
	const char *v;
	size_t i = 0;

	while ((v = up_args_next(a, "rules", &i)))
		(void)json_array_append_new(o->rules, json_string(v));
	for (i = 0; o->kube_context && (v = up_args_next(a, "kube-context", &i));)
		(void)json_array_append_new(o->kube_context, json_string(v));
	o->kubeconfig = up_args_value(a, "kubeconfig");
	o->no_defaults = up_args_flag(a, "no-default-rules");
	o->allow_exec = up_args_flag(a, "allow-exec");
	o->json = up_args_flag(a, "json");
	o->show_secrets = up_args_flag(a, "show-secrets");
}

static json_t *base_params(const struct rules_opts *o, const char *agent, const char *mode)
{
	char cwd[PATH_MAX];
	json_t *p = json_pack("{s:O, s:b, s:b}", "rules", o->rules, "no_default_rules",
			      o->no_defaults, "allow_exec", o->allow_exec);

	if (p && getcwd(cwd, sizeof(cwd)))
		(void)json_object_set_new(p, "cwd", json_string(cwd));
	if (p && agent)
		(void)json_object_set_new(p, "agent", json_string(agent));
	if (p && mode)
		(void)json_object_set_new(p, "mode", json_string(mode));
	return p;
}

/* Errors of check and render: the rules are bad input (2); a dead daemon stays 3, a mismatch 4. */
static int call(struct up_cli *cli, const char *method, json_t *params, json_t **result)
{
	struct up_rpc_error err = {0};
	int r = up_cli_connect(cli);

	if (r != 0) {
		json_decref(params);
		return r;
	}
	r = up_rpc_client_call(cli->rpc, method, params, UP_EXEC_TIMEOUT_MS + UP_CLIENT_TIMEOUT_MS,
			       NULL, NULL, result, &err);
	if (r < 0) {
		fprintf(stderr, "uplink: talking to uplinkd failed: %s\n", strerror(-r));
		return UP_EXIT_UNREACHABLE;
	}
	if (r > 0) {
		fprintf(stderr, "uplink: %s\n", err.message);
		r = streq(err.name, "PROTOCOL_MISMATCH") ? UP_EXIT_MISMATCH : UP_EXIT_USAGE;
		up_rpc_error_done(&err);
		return r;
	}
	return 0;
}

/* A literal as a regex, as the addon's deny hint writes it ('' for a quote in YAML). */
static void print_escaped(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (strchr(".^$*+?{}[]|()\\", s[i]))
			putchar('\\');
		if (s[i] == '\'')
			putchar('\'');
		putchar(s[i]);
	}
}

static void print_denied(const char *method, const json_t *res)
{
	const char *host = up_json_field(res, "host");
	const char *path = up_json_field(res, "path");

	const char *reason = json_string_value(json_object_get(res, "reason"));
	size_t base = strcspn(path, "?");

	printf("deny   %s %s%s\n", method, host, path);
	if (reason) { /* a rule takes it, but not in clear */
		printf("  %s%s%s\n", reason, host, path);
		return;
	}
	printf("  no rule allows it. To allow it, add to a rules file (--rules FILE):\n"
	       "    rules:\n      - name: allow-");
	for (const char *p = host; *p; p++)
		putchar(isalnum((unsigned char)*p) ? *p : '-');
	printf("\n        hosts: ['");
	print_escaped(host, strlen(host));
	printf("']\n        methods: [%s]\n        paths: ['", method);
	print_escaped(path, base);
	printf("%s']\n", path[base] ? "(\\?.*)?" : "");
}

static void print_check(const char *method, const json_t *res)
{
	const json_t *rule = json_object_get(res, "rule"), *h;
	const char *decision = json_string_value(json_object_get(res, "decision"));
	size_t i;

	if (!rule) {
		print_denied(method, res);
		return;
	}
	if (streq(decision, "l4"))
		printf("l4     CONNECT %s (relayed as raw TCP, never inspected)\n",
		       up_json_field(res, "host"));
	else
		printf("allow  %s %s%s\n", method, up_json_field(res, "host"),
		       up_json_field(res, "path"));
	printf("  rule:   %s\n  layer:  %s\n  source: %s\n", up_json_field(rule, "name"),
	       up_json_field(rule, "layer"), up_json_field(rule, "source"));
	if (json_is_true(json_object_get(rule, "aws_sign")))
		printf("  aws:    requests signed with the agent's dummy AWS keys are re-signed "
		       "with the "
		       "real ones\n");
	if (json_array_size(json_object_get(rule, "headers")) == 0)
		return;
	printf("  inject:");
	json_array_foreach (json_object_get(rule, "headers"), i, h)
		printf("%s %s", i ? "," : "", up_json_text(h));
	printf("\n");
}

int up_cmd_rules_check(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	struct rules_opts o = {.rules = json_array(), .kube_context = json_array()};
	const char *agent = NULL, *mode = NULL, *method, *url;
	json_t *res = NULL, *p;
	int r, n = a->argc;

	if (n != 2 && n != 3 && n != 4) {
		json_decref(o.rules);
		json_decref(o.kube_context);
		return up_cli_usage_error(cmd, "expected [AGENT [MODE]] METHOD URL");
	}
	read_opts(a, &o);
	if (n >= 3)
		agent = a->argv[0];
	if (n == 4)
		mode = a->argv[1];
	method = a->argv[n - 2];
	url = a->argv[n - 1];
	p = base_params(&o, agent, mode);
	json_decref(o.rules);
	(void)json_object_set_new(p, "method", json_string(method));
	(void)json_object_set_new(p, "url", json_string(url));
	if (json_array_size(o.kube_context)) {
		(void)json_object_set_new(p, "kube_context", json_incref(o.kube_context));
		if (o.kubeconfig)
			(void)json_object_set_new(p, "kubeconfig", up_cli_abs_path(o.kubeconfig));
		else
			up_cli_kubeconfig_default(p);
	}
	json_decref(o.kube_context);
	r = call(cli, "rules.check", p, &res);
	if (r != 0)
		return r;
	if (o.json)
		up_print_json(res);
	else
		print_check(method, res);
	r = json_object_get(res, "rule") ? UP_EXIT_OK : UP_EXIT_FAILED;
	json_decref(res);
	return r;
}

int up_cmd_rules_render(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	struct rules_opts o = {.rules = json_array()};
	json_t *res = NULL, *p;
	int r, n = a->argc;

	if (n > 2) {
		json_decref(o.rules);
		return up_cli_usage_error(cmd, "expected at most AGENT MODE");
	}
	read_opts(a, &o);
	p = base_params(&o, n >= 1 ? a->argv[0] : NULL, n == 2 ? a->argv[1] : NULL);
	json_decref(o.rules);
	(void)json_object_set_new(p, "show_secrets", json_boolean(o.show_secrets));
	r = call(cli, "rules.render", p, &res);
	if (r != 0)
		return r;
	up_print_json(res);
	json_decref(res);
	return UP_EXIT_OK;
}

int up_cmd_rules_lint(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	bool json = up_args_flag(a, "json");
	json_t *res = NULL, *files, *f, *pr;
	char cwd[PATH_MAX];
	size_t i, j;
	int r;

	if (a->argc < 1)
		return up_cli_usage_error(cmd, "expected at least one FILE");
	files = json_array();
	for (int k = 0; k < a->argc; k++)
		(void)json_array_append_new(files, json_string(a->argv[k]));
	r = up_cli_call(cli, "rules.lint",
			json_pack("{s:o, s:s}", "files", files, "cwd",
				  getcwd(cwd, sizeof(cwd)) ? cwd : "/"),
			&res);
	if (r != 0)
		return r;
	if (json)
		up_print_json(res);
	else
		json_array_foreach (json_object_get(res, "files"), i, f) {
			json_t *problems = json_object_get(f, "problems");
			if (json_array_size(problems) == 0)
				printf("%s: ok, %lld rules\n", up_json_field(f, "file"),
				       (long long)json_integer_value(json_object_get(f, "rules")));
			json_array_foreach (problems, j, pr)
				printf("%s\n", up_json_text(pr));
		}
	r = json_integer_value(json_object_get(res, "problems")) > 0 ? UP_EXIT_FAILED : UP_EXIT_OK;
	json_decref(res);
	return r;
}

/* Warnings and what is not covered go to stderr, so stdout is the rules file alone. */
static void print_suggest_notes(const json_t *res)
{
	json_t *x;
	size_t i;

	json_array_foreach (json_object_get(res, "warnings"), i, x)
		fprintf(stderr, "uplink: warning: %s\n", up_json_field(x, "message"));
	json_array_foreach (json_object_get(res, "skipped"), i, x) {
		json_int_t n = json_integer_value(json_object_get(x, "requests"));
		fprintf(stderr, "uplink: not covered: %lld %s %s request%s: %s\n", (long long)n,
			up_json_field(x, "method"), up_json_field(x, "host"), n == 1 ? "" : "s",
			up_json_field(x, "why"));
	}
	if (json_integer_value(json_object_get(res, "denied")) == 0)
		fprintf(stderr, "uplink: session %s has no denied requests: nothing to suggest\n",
			up_json_field(res, "id"));
}

int up_cmd_rules_suggest(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	json_t *res = NULL;
	int r;

	if (a->argc != 1)
		return up_cli_usage_error(cmd, "expected SESSION");
	r = up_cli_call(cli, "rules.suggest", json_pack("{s:s}", "id", a->argv[0]), &res);
	if (r != 0)
		return r;
	if (up_args_flag(a, "json"))
		up_print_json(res);
	else
		fputs(up_json_field(res, "yaml"), stdout);
	print_suggest_notes(res);
	json_decref(res);
	return UP_EXIT_OK;
}
