/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rules.* methods: check (which rule a request meets), render (the proxy's
 * JSON), lint (every problem of some files); suggest is rpc-rules-suggest.c's. All answer
 * asynchronously: files are read and compiled on the thread pool, then check and render resolve
 * placeholders here, so keyring access stays in the daemon.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "agents/agent.h"
#include "bounds.h"
#include "jsonrpc.h"
#include "kube-expose.h"
#include "manager.h"
#include "placeholders.h"
#include "rpc.h"
#include "rules.h"
#include "rules-suggest.h"
#include "secret-store.h"

struct rules_params {
	json_t *rules; /* rules files, in order */
	const char *cwd;
	bool no_default_rules;
	bool allow_exec;
	const char *agent;
	const char *mode;
	const char *method;
	const char *url;
	bool show_secrets;
	json_t *files;
	json_t *kube_context; /* check: the contexts a session would expose (--kube-context) */
	const char *kubeconfig, *kubeconfig_default;
};

#define COMMON_PARAMS                                                                              \
	{"rules", UP_PARAM_STRV, offsetof(struct rules_params, rules), 0, NULL},                   \
		{"cwd", UP_PARAM_STRING, offsetof(struct rules_params, cwd), 0, NULL},             \
		{"no_default_rules", UP_PARAM_BOOL,                                                \
		 offsetof(struct rules_params, no_default_rules), 0, NULL},                        \
		{"allow_exec", UP_PARAM_BOOL, offsetof(struct rules_params, allow_exec), 0, NULL}, \
		{"agent", UP_PARAM_STRING, offsetof(struct rules_params, agent), 0, NULL},         \
	{                                                                                          \
		"mode", UP_PARAM_STRING, offsetof(struct rules_params, mode), 0, NULL              \
	}

static const struct up_param check_params[] = {
	COMMON_PARAMS,
	{"method", UP_PARAM_STRING, offsetof(struct rules_params, method), UP_PARAM_MANDATORY,
	 NULL},
	{"url", UP_PARAM_STRING, offsetof(struct rules_params, url), UP_PARAM_MANDATORY, NULL},
	{"kube_context", UP_PARAM_STRV, offsetof(struct rules_params, kube_context), 0, NULL},
	{"kubeconfig", UP_PARAM_STRING, offsetof(struct rules_params, kubeconfig), 0, NULL},
	{"kubeconfig_default", UP_PARAM_STRING, offsetof(struct rules_params, kubeconfig_default),
	 0, NULL},
	{0},
};

static const struct up_param render_params[] = {
	COMMON_PARAMS,
	{"show_secrets", UP_PARAM_BOOL, offsetof(struct rules_params, show_secrets), 0, NULL},
	{0},
};

static const struct up_param lint_params[] = {
	{"files", UP_PARAM_STRV, offsetof(struct rules_params, files), UP_PARAM_MANDATORY, NULL},
	{"cwd", UP_PARAM_STRING, offsetof(struct rules_params, cwd), 0, NULL},
	{0},
};

enum call_kind { CALL_CHECK, CALL_RENDER, CALL_LINT };

/*
 * One call. Reading and compiling the files runs on the thread pool (they may be
 * large), then placeholders resolve; the request may go away at either step.
 */
struct rules_call {
	struct up_request *req;
	struct up_manager *m;
	enum call_kind kind;
	uv_work_t work;
	bool in_work, cancelled;
	/* inputs, owned: the worker must not touch the request's params */
	json_t *files, *kube_context;
	char *cwd, *agent, *mode, *kubeconfig;
	bool no_defaults, allow_exec, show_secrets, https;
	unsigned port;
	char method[16];
	char host[256];
	char path[8192];
	/* outputs of the worker */
	struct up_ruleset *rs;
	json_t *problems;
	json_t *lint;
	char auth_err[1024]; /* the agent's credentials cannot be used */
	char kube_err[1024]; /* a --kube-context cannot be exposed */
	int r;
	struct up_resolve *job;
};

static void call_free(struct rules_call *c)
{
	up_ruleset_free(c->rs);
	json_decref(c->files);
	json_decref(c->kube_context);
	free(c->kubeconfig);
	json_decref(c->problems);
	json_decref(c->lint);
	up_free_all(c->cwd, c->agent, c->mode, c);
}

/* Relative paths are the client's: resolve them against its cwd. */
static int source_path(const char *file, const char *cwd, char *buf, size_t len)
{
	if (file[0] == '/' || !cwd)
		return snprintf(buf, len, "%s", file) < (int)len ? 0 : -ENAMETOOLONG;
	return snprintf(buf, len, "%s/%s", cwd, file) < (int)len ? 0 : -ENAMETOOLONG;
}

static int load_one(struct up_ruleset *rs, const char *name, const char *cwd, json_t *problems)
{
	char path[PATH_MAX];

	if (source_path(name, cwd, path, sizeof(path)) < 0) {
		(void)json_array_append_new(problems, json_sprintf("%s: path too long", name));
		return -ENAMETOOLONG;
	}
	return up_ruleset_load_file(rs, UP_LAYER_USER, path, name, problems);
}

static int load_files(struct up_ruleset *rs, json_t *files, const char *cwd, json_t *problems)
{
	json_t *f;
	size_t i;
	int r = 0;

	json_array_foreach (files, i, f) {
		int k = load_one(rs, json_string_value(f), cwd, problems);
		if (k == -ENOMEM)
			return k;
		if (k < 0)
			r = k;
	}
	return r;
}

/* The kube layer a session with these --kube-context names would get (blocking: reads files). */
static int load_kube(struct rules_call *c)
{
	_cleanup_(up_kube_exposed_freep) struct up_kube_exposed *k = NULL;
	int r;

	if (json_array_size(c->kube_context) == 0)
		return 0;
	r = up_kube_expose_load(c->kubeconfig, c->kube_context, &k, c->kube_err,
				sizeof(c->kube_err));
	if (r == -ENOMEM)
		c->kube_err[0] = '\0';
	return r < 0 ? r : up_kube_expose_rules(k, c->rs);
}

static void build_work(uv_work_t *w)
{
	struct rules_call *c = w->data;
	int r;

	c->rs = up_ruleset_new();
	c->problems = json_array();
	if (!c->rs || !c->problems) {
		c->r = -ENOMEM;
		return;
	}
	r = c->agent ? up_ruleset_load_agent_auth(c->rs, c->agent, c->mode, c->problems,
						  c->auth_err, sizeof(c->auth_err))
		     : 0;
	if (r != -ENOMEM) {
		int k = load_files(c->rs, c->files, c->cwd, c->problems);
		r = r < 0 ? r : k;
	}
	if (r >= 0)
		r = load_kube(c);
	if (r >= 0)
		r = up_ruleset_finish(c->rs, c->no_defaults, c->problems);
	c->r = r;
}

static void lint_work(uv_work_t *w)
{
	struct rules_call *c = w->data;
	size_t i, total = 0;
	json_t *f, *out = json_array();

	json_array_foreach (c->files, i, f) {
		struct up_ruleset *rs = up_ruleset_new();
		json_t *problems = json_array();

		if (!out || !rs || !problems ||
		    load_one(rs, json_string_value(f), c->cwd, problems) == -ENOMEM) {
			up_ruleset_free(rs);
			json_decref(problems);
			c->r = -ENOMEM;
			break;
		}
		total += json_array_size(problems);
		(void)json_array_append_new(out, json_pack("{s:O, s:I, s:o}", "file", f, "rules",
							   (json_int_t)up_ruleset_count(rs),
							   "problems", problems));
		up_ruleset_free(rs);
	}
	c->lint = c->r < 0 ? (json_decref(out), NULL)
			   : json_pack("{s:o, s:I}", "files", out, "problems", (json_int_t)total);
}

static json_t *check_result(struct rules_call *c)
{
	static const char *const decisions[] = {
		[UP_DECISION_DENY] = "deny",
		[UP_DECISION_ALLOW] = "allow",
		[UP_DECISION_L4] = "l4",
	};
	const struct up_rule *r;
	enum up_decision d =
		up_ruleset_evaluate(c->rs, c->method, c->https, c->host, c->port, c->path, &r);
	json_t *names = json_array(), *res;

	for (size_t i = 0; r && d == UP_DECISION_ALLOW && names && i < r->n_headers; i++)
		(void)json_array_append_new(names, json_string(r->headers[i].name));
	res = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I}", "decision", decisions[d], "method",
			c->method, "scheme", c->https ? "https" : "http", "host", c->host, "port",
			(json_int_t)c->port, "path", c->path, "rules",
			(json_int_t)up_ruleset_count(c->rs));
	if (res && r)
		(void)json_object_set_new(
			res, "rule",
			json_pack("{s:s, s:s, s:s, s:o, s:b}", "name", r->name, "layer",
				  up_rule_layer_name(r->layer), "source", r->source, "headers",
				  names, "aws_sign",
				  d == UP_DECISION_ALLOW && c->https && up_rule_aws_sign(r)));
	else
		json_decref(names);
	/* a denied https request is refused at CONNECT when no rule could take the host */
	if (res && d == UP_DECISION_DENY)
		(void)json_object_set_new(
			res, "stage",
			json_string(c->https && !up_ruleset_match_connect(c->rs, c->host)
					    ? "connect"
					    : "request"));
	if (res && d == UP_DECISION_DENY && !c->https &&
	    (r = up_ruleset_match_port(c->rs, c->method, c->host, c->port, c->path)))
		(void)json_object_set_new(res, "reason",
					  json_sprintf("rule '%s' injects credentials, which "
						       "uplink sends only over HTTPS; use https://",
						       r->name));
	return res;
}

static void on_resolved(int r, enum up_error e, const char *message, void *userdata)
{
	struct rules_call *c = userdata;
	json_t *res;

	c->job = NULL;
	if (r < 0) {
		up_request_error(c->req, e, message);
	} else {
		res = c->kind == CALL_RENDER ? up_ruleset_render(c->rs, c->show_secrets)
					     : check_result(c);
		if (res)
			up_request_reply(c->req, res);
		else
			up_request_error(c->req, UP_ERR_INTERNAL_ERROR, "out of memory");
	}
	call_free(c);
}

static void on_cancel(struct up_request *req, void *userdata)
{
	struct rules_call *c = userdata;

	if (c->in_work) {
		c->cancelled = true; /* the worker's completion frees it */
		return;
	}
	up_resolve_cancel(c->job);
	call_free(c);
}

static void after_work(uv_work_t *w, int status)
{
	struct rules_call *c = w->data;
	struct up_resolve_options o = {.allow_exec = c->allow_exec,
				       .store = up_secret_store_pick()};
	_cleanup_(freep) char *msg = NULL;

	c->in_work = false;
	if (c->cancelled) {
		call_free(c);
		return;
	}
	if (c->kind != CALL_LINT && *c->auth_err) {
		up_request_error(c->req, UP_ERR_AGENT_AUTH_FAILED, c->auth_err);
	} else if (c->kind == CALL_CHECK && *c->kube_err) {
		up_request_error(c->req, UP_ERR_INVALID_PARAMS, c->kube_err);
	} else if (c->r == -ENOMEM || (c->r < 0 && json_array_size(c->problems) == 0)) {
		up_request_errorf(c->req, UP_ERR_INTERNAL_ERROR, "cannot load the rules: %s",
				  strerror(-c->r));
	} else if (c->kind == CALL_LINT) {
		up_request_reply(c->req, TAKE_PTR(c->lint));
	} else if (c->r < 0) {
		msg = up_json_join(c->problems, "\n");
		up_request_error(c->req, UP_ERR_RULES_INVALID, msg ? msg : "the rules are invalid");
	} else if (!o.store) {
		up_request_errorf(c->req, UP_ERR_INVALID_PARAMS, "$%s names no known secret store",
				  UP_SECRET_STORE_ENV);
	} else if (up_resolve_start(up_manager_loop(c->m), c->rs, &o, on_resolved, c, &c->job) >=
		   0) {
		return; /* on_resolved answers and frees */
	} else {
		up_request_error(c->req, UP_ERR_INTERNAL_ERROR, "out of memory");
	}
	call_free(c);
}

/* "/a:/b/c": every element absolute, none empty (the daemon's cwd is not the client's). */
static bool abs_list(const char *s)
{
	if (strlen(s) >= UP_MAX_KUBECONFIG_PATHS)
		return false;
	for (const char *p = s; p; p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL)
		if (*p != '/')
			return false;
	return true;
}

static int copy_inputs(struct rules_call *c, const struct rules_params *p)
{
	json_t *files = c->kind == CALL_LINT ? p->files : p->rules;
	const char *kc;

	if (json_array_size(files) > UP_MAX_RULES_SOURCES) {
		up_request_errorf(c->req, UP_ERR_INVALID_PARAMS, "at most %d rules files at once",
				  UP_MAX_RULES_SOURCES);
		return 0;
	}
	c->files = files ? json_deep_copy(files) : json_array();
	c->cwd = p->cwd ? strdup(p->cwd) : NULL;
	c->agent = p->agent ? strdup(p->agent) : NULL;
	c->mode = p->mode ? strdup(p->mode) : NULL;
	c->no_defaults = p->no_default_rules;
	c->allow_exec = p->allow_exec;
	c->show_secrets = p->show_secrets;
	if (!c->files || (p->cwd && !c->cwd) || (p->agent && !c->agent) || (p->mode && !c->mode))
		return -ENOMEM;
	if (json_array_size(p->kube_context) > UP_MAX_KUBE_CONTEXTS) {
		up_request_errorf(c->req, UP_ERR_INVALID_PARAMS,
				  "--kube-context: at most %d contexts", UP_MAX_KUBE_CONTEXTS);
		return 0;
	}
	/* --kubeconfig, else what kubectl reads where the client runs (as uplink run) */
	kc = p->kubeconfig && *p->kubeconfig ? p->kubeconfig : p->kubeconfig_default;
	if (kc && *kc && !abs_list(kc)) {
		up_request_errorf(c->req, UP_ERR_INVALID_PARAMS,
				  "--kubeconfig: '%.300s' is not an "
				  "absolute path (or a colon list of them, shorter than %d bytes)",
				  kc, UP_MAX_KUBECONFIG_PATHS);
		return 0;
	}
	c->kube_context = p->kube_context ? json_deep_copy(p->kube_context) : NULL;
	c->kubeconfig = kc && *kc ? strdup(kc) : NULL;
	if ((p->kube_context && !c->kube_context) || (kc && *kc && !c->kubeconfig))
		return -ENOMEM;
	return 1;
}

/* 1 when the request may go on, 0 when it was answered. */
static int check_request(struct rules_call *c, const struct rules_params *p)
{
	char why[256];
	int port;

	if (!*p->method || strspn(p->method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(p->method) ||
	    strlen(p->method) >= sizeof(c->method)) {
		up_request_errorf(c->req, UP_ERR_INVALID_PARAMS,
				  "method '%s' is not an uppercase HTTP "
				  "verb such as GET or POST",
				  p->method);
		return 0;
	}
	if (up_url_split(p->url, &c->https, c->host, sizeof(c->host), c->path, sizeof(c->path), why,
			 sizeof(why)) < 0) {
		up_request_errorf(c->req, UP_ERR_INVALID_PARAMS, "url '%s': %s", p->url, why);
		return 0;
	}
	port = up_url_port(p->url);
	if (port < 0) {
		up_request_errorf(c->req, UP_ERR_INVALID_PARAMS,
				  "url '%s': the port must be a number "
				  "from 1 to 65535, e.g. https://host:8443/",
				  p->url);
		return 0;
	}
	c->port = (unsigned)port;
	(void)snprintf(c->method, sizeof(c->method), "%s", p->method);
	return 1;
}

static int start(struct up_request *req, struct rules_params *p, struct up_manager *m,
		 enum call_kind kind)
{
	struct rules_call *c = up_new(struct rules_call, .req = req, .m = m, .kind = kind);
	int r;

	if (!c)
		return -ENOMEM;
	c->work.data = c;
	r = kind == CALL_CHECK ? check_request(c, p) : 1;
	if (r > 0)
		r = copy_inputs(c, p);
	if (r > 0)
		r = uv_queue_work(up_manager_loop(m), &c->work,
				  kind == CALL_LINT ? lint_work : build_work, after_work);
	else if (r == 0)
		r = 1; /* answered already */
	if (r != 0) {
		call_free(c);
		return r > 0 ? 0 : r;
	}
	c->in_work = true;
	up_request_set_cancel(req, on_cancel, c);
	return 0;
}

static int rpc_check(struct up_request *req, void *params, void *userdata)
{
	return start(req, params, userdata, CALL_CHECK);
}

static int rpc_render(struct up_request *req, void *params, void *userdata)
{
	return start(req, params, userdata, CALL_RENDER);
}

static int rpc_lint(struct up_request *req, void *params, void *userdata)
{
	return start(req, params, userdata, CALL_LINT);
}

const struct up_method up_rpc_rules_methods[] = {
	{"rules.check", check_params, sizeof(struct rules_params), rpc_check},
	{"rules.render", render_params, sizeof(struct rules_params), rpc_render},
	{"rules.lint", lint_params, sizeof(struct rules_params), rpc_lint},
	{"rules.suggest", up_suggest_params, sizeof(struct up_suggest_params),
	 up_rpc_rules_suggest},
	{0},
};
