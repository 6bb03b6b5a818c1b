/* SPDX-License-Identifier: Apache-2.0 */
#include "kubeconfig.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "bounds.h"
#include "fileio.h"
#include "knobs.h"
#include "yaml-json.h"

struct kc_file {
	char *path;
	char *dir;
	json_t *doc;
};

struct kc_set {
	struct kc_file files[UP_MAX_KUBECONFIG_FILES];
	size_t n;
	char where[512]; /* the files, for messages */
	char *err;
	size_t err_len;
	bool inspect; /* up_kubeconfig_inspect(): note what --kube-context refuses itself */
};

static int failf(struct kc_set *s, const char *fmt, ...) _printf_(2, 3);
static int failf(struct kc_set *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(s->err, s->err_len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void set_done(struct kc_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->files[i].path);
		free(s->files[i].dir);
		json_decref(s->files[i].doc);
	}
	s->n = 0;
}

static void append_where(struct kc_set *s, const char *path)
{
	size_t used = strlen(s->where);

	(void)snprintf(s->where + used, sizeof(s->where) - used, "%s%s", used ? ", " : "", path);
}

static int load_text(struct kc_set *s, const char *path, const char *text, size_t len)
{
	char yerr[256];
	json_t *doc = NULL;
	int r;

	r = up_yaml_load(text, len, &doc, yerr, sizeof(yerr));
	if (r < 0)
		return failf(s, "kubeconfig %s is not valid YAML: %s", path, yerr);
	if (json_is_null(doc)) {
		json_decref(doc);
		return 0; /* an empty file adds nothing */
	}
	if (!json_is_object(doc)) {
		json_decref(doc);
		return failf(s, "kubeconfig %s is not a mapping of clusters, users and contexts",
			     path);
	}
	if (s->n >= UP_MAX_KUBECONFIG_FILES) {
		json_decref(doc);
		return failf(s, "KUBECONFIG names more than %d files", UP_MAX_KUBECONFIG_FILES);
	}
	struct kc_file *f = &s->files[s->n++];
	const char *slash = strrchr(path, '/');
	f->path = strdup(path);
	f->dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
	f->doc = doc;
	return f->path && f->dir ? 0 : -ENOMEM;
}

static int load_one(struct kc_set *s, const char *path)
{
	_cleanup_(freep) char *text = NULL;
	size_t len;
	int r;

	r = up_read_file(path, UP_MAX_YAML_SIZE, &text, &len);
	if (r == -ENOENT)
		return 0; /* kubectl skips missing files of the list */
	if (r < 0)
		return failf(s, "cannot read kubeconfig %s: %s", path, strerror(-r));
	return load_text(s, path, text, len);
}

static int load_set(struct kc_set *s, const char *paths)
{
	char buf[4096], home_cfg[PATH_MAX], *save = NULL;
	const char *home = up_knobs()->home;
	int r;

	if (!paths || !*paths)
		paths = up_knobs()->kubeconfig;
	if (!paths || !*paths) {
		(void)snprintf(home_cfg, sizeof(home_cfg), "%s/.kube/config", home ? home : "");
		paths = home_cfg;
	}
	if (strlen(paths) >= sizeof(buf))
		return failf(s, "the KUBECONFIG list is longer than %zu bytes", sizeof(buf) - 1);
	memcpy(buf, paths, strlen(paths) + 1);
	for (char *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		append_where(s, p);
		r = load_one(s, p);
		if (r < 0)
			return r;
	}
	if (s->n == 0)
		return failf(s,
			     "no kubeconfig found at %s; point KUBECONFIG at one, or copy your "
			     "cluster's (k3s writes /etc/rancher/k3s/k3s.yaml) to ~/.kube/config",
			     s->where);
	return 0;
}

/* The entry `name` of list `key` ("clusters", "users", "contexts"): the first file wins. */
static json_t *find_named(struct kc_set *s, const char *key, const char *name, size_t *file)
{
	for (size_t i = 0; i < s->n; i++) {
		json_t *list = json_object_get(s->files[i].doc, key), *e;
		size_t k;

		json_array_foreach (list, k, e) {
			const char *n = json_string_value(json_object_get(e, "name"));
			if (n && strcmp(n, name) == 0) {
				*file = i;
				return e;
			}
		}
	}
	return NULL;
}

static const char *current_context(struct kc_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		const char *c =
			json_string_value(json_object_get(s->files[i].doc, "current-context"));
		if (c && *c)
			return c;
	}
	return NULL;
}

static void known_contexts(struct kc_set *s, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		json_t *list = json_object_get(s->files[i].doc, "contexts"), *e;
		size_t k;

		json_array_foreach (list, k, e) {
			const char *n = json_string_value(json_object_get(e, "name"));
			size_t first;
			/* A name defined again by a later file is shadowed: list it once. */
			if (n && used < len && find_named(s, "contexts", n, &first) == e)
				used += (size_t)snprintf(buf + used, len - used, "%s%s",
							 used ? ", " : "", n);
		}
	}
	if (!buf[0])
		(void)snprintf(buf, len, "(none)");
}

static char *resolve_path(const struct kc_file *f, const char *p)
{
	char *out;

	if (p[0] == '/')
		return strdup(p);
	if (asprintf(&out, "%s/%s", f->dir, p) < 0)
		return NULL;
	return out;
}

/*
 * A PEM (or token) given inline as "<key>-data" (base64) or as a file "<key>".
 * Both at once is refused, as kubectl's validation does.
 */
static int data_or_file(struct kc_set *s, size_t fi, json_t *obj, const char *what,
			const char *data_key, const char *file_key, char **out, size_t *out_len)
{
	const char *data = json_string_value(json_object_get(obj, data_key));
	const char *file = json_string_value(json_object_get(obj, file_key));
	_cleanup_(freep) char *path = NULL;
	int r;

	if (data && *data && file && *file)
		return failf(s, "kubeconfig %s: %s sets both %s and %s; keep one",
			     s->files[fi].path, what, data_key, file_key);
	if (data && *data) {
		if (up_base64_decode(data, strlen(data), out, out_len) < 0)
			return failf(s, "kubeconfig %s: %s: %s is not valid base64",
				     s->files[fi].path, what, data_key);
		return 1;
	}
	if (file && *file) {
		path = resolve_path(&s->files[fi], file);
		if (!path)
			return -ENOMEM;
		r = up_read_file(path, UP_MAX_KUBE_CREDENTIAL_FILE, out, out_len);
		if (r < 0)
			return failf(s, "kubeconfig %s: %s: cannot read %s %s: %s",
				     s->files[fi].path, what, file_key, path, strerror(-r));
		return 1;
	}
	return 0;
}

static int strv_from_json(json_t *arr, const char *first, char ***ret)
{
	size_t n = json_array_size(arr), k, o = 0;
	char **v = calloc(n + 2, sizeof(char *));
	json_t *e;

	if (!v)
		return -ENOMEM;
	if (first)
		v[o++] = strdup(first);
	json_array_foreach (arr, k, e) {
		if (!json_is_string(e))
			break;
		v[o++] = strdup(json_string_value(e));
	}
	*ret = v;
	return k == n ? 0 : -EINVAL;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int parse_exec(struct kc_set *s, size_t fi, const char *user, json_t *ex,
		      struct up_kube_exec **ret)
{
	const char *api = json_string_value(json_object_get(ex, "apiVersion"));
	const char *cmd = json_string_value(json_object_get(ex, "command"));
	struct up_kube_exec *e;
	json_t *env, *item;
	size_t k;

	if (!cmd || !*cmd)
		return failf(s, "kubeconfig %s: user '%s': exec has no command", s->files[fi].path,
			     user);
	if (!api || (strcmp(api, "client.authentication.k8s.io/v1") != 0 &&
		     strcmp(api, "client.authentication.k8s.io/v1beta1") != 0))
		return failf(s,
			     "kubeconfig %s: user '%s': exec apiVersion '%s' is not supported; "
			     "use client.authentication.k8s.io/v1 or v1beta1",
			     s->files[fi].path, user, api ? api : "(none)");
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	*ret = e;
	e->api_version = strdup(api);
	e->provide_cluster_info = json_is_true(json_object_get(ex, "provideClusterInfo"));
	const char *hint = json_string_value(json_object_get(ex, "installHint"));
	e->install_hint = hint ? strdup(hint) : NULL;
	/* client-go resolves a command that names a path, not a bare program name. */
	_cleanup_(freep) char *resolved =
		strchr(cmd, '/') ? resolve_path(&s->files[fi], cmd) : strdup(cmd);
	if (!resolved || strv_from_json(json_object_get(ex, "args"), resolved, &e->argv) < 0)
		return failf(s, "kubeconfig %s: user '%s': exec args must be strings",
			     s->files[fi].path, user);
	env = json_object_get(ex, "env");
	e->env = calloc(json_array_size(env) + 1, sizeof(char *));
	if (!e->env)
		return -ENOMEM;
	json_array_foreach (env, k, item) {
		const char *n = json_string_value(json_object_get(item, "name"));
		const char *v = json_string_value(json_object_get(item, "value"));
		if (!n || !v)
			return failf(s,
				     "kubeconfig %s: user '%s': exec env entries need a name and a "
				     "value",
				     s->files[fi].path, user);
		if (asprintf(&e->env[k], "%s=%s", n, v) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The user's client certificate and key: both or neither (inspect: either, told later). */
static int parse_client_cert(struct kc_set *s, size_t fi, json_t *u, const char *what,
			     struct up_kube_context *c)
{
	int has_cert, has_key;

	has_cert = data_or_file(s, fi, u, what, "client-certificate-data", "client-certificate",
				&c->cert_pem, &c->cert_len);
	if (has_cert < 0)
		return has_cert;
	has_key = data_or_file(s, fi, u, what, "client-key-data", "client-key", &c->key_pem,
			       &c->key_len);
	if (has_key < 0)
		return has_key;
	if (has_cert != has_key && !s->inspect) /* inspect: "no supported credentials" later */
		return failf(s, "kubeconfig %s: %s has a client %s but no client %s",
			     s->files[fi].path, what, has_cert ? "certificate" : "key",
			     has_cert ? "key" : "certificate");
	return 0;
}

static int parse_user(struct kc_set *s, struct up_kube_context *c)
{
	json_t *entry, *u;
	size_t fi;
	int r;
	char what[300];

	entry = find_named(s, "users", c->user, &fi);
	if (!entry && s->inspect)
		return c->facts.no_user = true, 0;
	if (!entry)
		return failf(s,
			     "kubeconfig %s: context '%s' names user '%s', which no file defines",
			     c->file, c->name, c->user);
	u = json_object_get(entry, "user");
	(void)snprintf(what, sizeof(what), "user '%s'", c->user);
	if (s->inspect) {
		c->facts.auth_provider = json_object_get(u, "auth-provider") != NULL;
		c->facts.exec = json_object_get(u, "exec") != NULL;
		c->facts.basic_auth =
			json_object_get(u, "username") || json_object_get(u, "password");
	}
	if (json_object_get(u, "auth-provider") && !s->inspect) {
		const char *p = json_string_value(
			json_object_get(json_object_get(u, "auth-provider"), "name"));
		return failf(
			s,
			"kubeconfig %s: user '%s' uses auth-provider '%s', which uplink does not "
			"support; switch it to an exec plugin (for GKE: gke-gcloud-auth-plugin)",
			s->files[fi].path, c->user, p ? p : "?");
	}
	r = parse_client_cert(s, fi, u, what, c);
	if (r < 0)
		return r;
	const char *token = json_string_value(json_object_get(u, "token"));
	const char *token_file = json_string_value(json_object_get(u, "tokenFile"));
	if (token && *token && !(c->token = strdup(token)))
		return -ENOMEM;
	if (token_file && *token_file && !(c->token_file = resolve_path(&s->files[fi], token_file)))
		return -ENOMEM;
	if ((json_object_get(u, "username") || json_object_get(u, "password")) && !s->inspect)
		return failf(s,
			     "kubeconfig %s: user '%s' uses basic auth (username/password), which "
			     "Kubernetes removed; use a token or a client certificate",
			     s->files[fi].path, c->user);
	if (json_object_get(u, "exec") && !s->inspect) {
		r = parse_exec(s, fi, c->user, json_object_get(u, "exec"), &c->exec);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_cluster(struct kc_set *s, struct up_kube_context *c)
{
	json_t *entry, *cl;
	size_t fi;
	char what[300];
	int r;

	entry = find_named(s, "clusters", c->cluster, &fi);
	if (!entry && s->inspect)
		return c->facts.no_cluster = true, 0;
	if (!entry)
		return failf(
			s, "kubeconfig %s: context '%s' names cluster '%s', which no file defines",
			c->file, c->name, c->cluster);
	cl = json_object_get(entry, "cluster");
	const char *server = json_string_value(json_object_get(cl, "server"));
	if ((!server || !*server) && !s->inspect)
		return failf(s, "kubeconfig %s: cluster '%s' has no server", s->files[fi].path,
			     c->cluster);
	if (server && *server && strncmp(server, "https://", 8) != 0 &&
	    strncmp(server, "http://", 7) != 0)
		return failf(s, "kubeconfig %s: cluster '%s': server '%s' is not an http(s) URL",
			     s->files[fi].path, c->cluster, server);
	if (server && *server && !(c->server = strdup(server)))
		return -ENOMEM;
	const char *sni = json_string_value(json_object_get(cl, "tls-server-name"));
	if (sni && *sni)
		c->tls_server_name = strdup(sni);
	c->insecure = json_is_true(json_object_get(cl, "insecure-skip-tls-verify"));
	(void)snprintf(what, sizeof(what), "cluster '%s'", c->cluster);
	r = data_or_file(s, fi, cl, what, "certificate-authority-data", "certificate-authority",
			 &c->ca_pem, &c->ca_len);
	if (r < 0)
		return r;
	if (r > 0 && c->insecure && !s->inspect)
		return failf(s,
			     "kubeconfig %s: cluster '%s' sets both a certificate authority and "
			     "insecure-skip-tls-verify; keep one",
			     s->files[fi].path, c->cluster);
	return 0;
}

static int resolve(struct kc_set *s, const char *context, struct up_kube_context **ret)
{
	_cleanup_(up_kube_context_freep) struct up_kube_context *c = NULL;
	char known[1024];
	json_t *entry, *ctx;
	size_t fi;
	int r;

	if (!context)
		context = UP_DEFAULT_DEPLOY_CONTEXT;
	if (!*context) {
		context = current_context(s);
		if (!context) {
			known_contexts(s, known, sizeof(known));
			return failf(s,
				     "kubeconfig %s sets no current-context; name one with "
				     "--deploy-context (known contexts: %s)",
				     s->where, known);
		}
	}
	entry = find_named(s, "contexts", context, &fi);
	if (!entry) {
		known_contexts(s, known, sizeof(known));
		return failf(s, "kubeconfig %s has no context '%s'; known contexts: %s", s->where,
			     context, known);
	}
	ctx = json_object_get(entry, "context");
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->name = strdup(context);
	c->file = strdup(s->files[fi].path);
	const char *cluster = json_string_value(json_object_get(ctx, "cluster"));
	const char *user = json_string_value(json_object_get(ctx, "user"));
	const char *ns = json_string_value(json_object_get(ctx, "namespace"));
	if ((!cluster || !*cluster) && !s->inspect)
		return failf(s, "kubeconfig %s: context '%s' names no cluster", c->file, context);
	c->cluster = cluster && *cluster ? strdup(cluster) : NULL;
	c->user = user && *user ? strdup(user) : NULL;
	c->namespace = ns && *ns ? strdup(ns) : NULL;
	c->facts.no_cluster = !c->cluster;
	c->facts.no_user = !c->user;
	r = c->cluster ? parse_cluster(s, c) : 0;
	if (r >= 0 && c->user)
		r = parse_user(s, c);
	if (r < 0)
		return r;
	if (!c->name || !c->file || (!c->cluster && !c->facts.no_cluster))
		return -ENOMEM;
	*ret = TAKE_PTR(c);
	return 0;
}

/* Files (`paths`) or a text (`text`, `len`): the context, read strictly or, with inspect, as
 * --kube-context reads it (refusals left to the caller, in its own order). */
static int load_context(const char *paths, const char *text, size_t len, bool inspect,
			const char *context, struct up_kube_context **ret, char *err,
			size_t err_len)
{
	struct kc_set s = {.err = err, .err_len = err_len, .inspect = inspect};
	int r = inspect && !(context && *context) ? -EINVAL
		: text				  ? load_text(&s, "(text)", text, len)
						  : load_set(&s, paths);

	if (r >= 0 && text && s.n == 0)
		r = failf(&s, "the kubeconfig is empty");
	if (r >= 0)
		r = resolve(&s, context, ret);
	set_done(&s);
	return r;
}

int up_kubeconfig_load(const char *paths, const char *context, struct up_kube_context **ret,
		       char *err, size_t err_len)
{
	return load_context(paths, NULL, 0, false, context, ret, err, err_len);
}

int up_kubeconfig_inspect(const char *paths, const char *context, struct up_kube_context **ret,
			  char *err, size_t err_len)
{
	return load_context(paths, NULL, 0, true, context, ret, err, err_len);
}

int up_kubeconfig_from_text(const char *text, size_t len, const char *context, bool inspect,
			    struct up_kube_context **ret, char *err, size_t err_len)
{
	return load_context(NULL, text, len, inspect, context, ret, err, err_len);
}

int up_kubeconfig_contexts(const char *paths, json_t **names, char **current, char *err,
			   size_t err_len)
{
	struct kc_set s = {.err = err, .err_len = err_len};
	int r = load_set(&s, paths);

	if (r >= 0) {
		*names = json_array();
		for (size_t i = 0; i < s.n; i++) {
			json_t *list = json_object_get(s.files[i].doc, "contexts"), *e;
			size_t k;
			json_array_foreach (list, k, e) {
				json_t *n = json_object_get(e, "name");
				size_t dummy;
				if (json_is_string(n) &&
				    find_named(&s, "contexts", json_string_value(n), &dummy) == e)
					(void)json_array_append(*names, n);
			}
		}
		const char *cur = current_context(&s);
		*current = cur ? strdup(cur) : NULL;
	}
	set_done(&s);
	return r;
}

struct up_kube_context *up_kube_context_free(struct up_kube_context *c)
{
	if (!c)
		return NULL;
	up_free_all(c->name, c->file, c->cluster, c->user, c->namespace, c->server,
		    c->tls_server_name, c->ca_pem, c->cert_pem);
	up_free_secret(c->key_pem, c->key_len);
	if (c->token)
		up_free_secret(c->token, strlen(c->token));
	free(c->token_file);
	if (c->exec) {
		strv_free(c->exec->argv);
		strv_free(c->exec->env);
		up_free_all(c->exec->api_version, c->exec->install_hint, c->exec);
	}
	free(c);
	return NULL;
}

UP_DEFINE_FREEP(struct up_kube_context, up_kube_context_free)
