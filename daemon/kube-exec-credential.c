/* SPDX-License-Identifier: Apache-2.0 */
#include "kube-exec-credential.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>

#include "bounds.h"
#include "fileio.h"
#include "log.h"
#include "loop-read.h"

extern char **environ;

struct up_exec_cred *up_exec_cred_free(struct up_exec_cred *c)
{
	if (!c)
		return NULL;
	if (c->token)
		up_free_secret(c->token, strlen(c->token));
	free(c->cert_pem);
	up_free_secret(c->key_pem, c->key_len);
	free(c);
	return NULL;
}

int up_parse_rfc3339(const char *s, int64_t *ms)
{
	struct tm tm = {0};
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	long frac_ms = 0, off = 0;

	if (!p)
		return -EINVAL;
	if (*p == '.') {
		long scale = 100;
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac_ms += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int h, m;
		if (sscanf(p + 1, "%2d:%2d", &h, &m) != 2)
			return -EINVAL;
		off = (h * 3600L + m * 60L) * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	*ms = ((int64_t)timegm(&tm) - off) * 1000 + frac_ms;
	return 0;
}

static char *dup_field(json_t *status, const char *key, size_t *len)
{
	const char *v = json_string_value(json_object_get(status, key));

	if (!v || !*v)
		return NULL;
	if (len)
		*len = strlen(v);
	return strdup(v);
}

int up_exec_cred_parse(const char *text, size_t len, const char *api_version,
		       struct up_exec_cred **ret, char *err, size_t err_len)
{
	json_t *doc = json_loadb(text, len, 0, NULL);
	json_t *status = json_object_get(doc, "status");
	const char *kind = json_string_value(json_object_get(doc, "kind"));
	const char *api = json_string_value(json_object_get(doc, "apiVersion"));
	const char *exp = json_string_value(json_object_get(status, "expirationTimestamp"));
	struct up_exec_cred *c;
	int r = -EINVAL;

	if (!doc) {
		(void)snprintf(err, err_len, "it did not print a JSON ExecCredential");
		return -EINVAL;
	}
	if (!kind || strcmp(kind, "ExecCredential") != 0) {
		(void)snprintf(err, err_len, "it printed a '%s', not an ExecCredential",
			       kind ? kind : "?");
		goto out;
	}
	if (api && api_version && strcmp(api, api_version) != 0) {
		(void)snprintf(err, err_len, "it answered in %s, but the kubeconfig asked for %s",
			       api, api_version);
		goto out;
	}
	if (!json_is_object(status)) {
		(void)snprintf(err, err_len, "its ExecCredential has no status");
		goto out;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		r = -ENOMEM;
		goto out;
	}
	c->token = dup_field(status, "token", NULL);
	c->cert_pem = dup_field(status, "clientCertificateData", &c->cert_len);
	c->key_pem = dup_field(status, "clientKeyData", &c->key_len);
	if (!c->token && !(c->cert_pem && c->key_pem)) {
		(void)snprintf(err, err_len,
			       "its ExecCredential holds neither a token nor a client "
			       "certificate and key");
		up_exec_cred_free(c);
		goto out;
	}
	if (exp && up_parse_rfc3339(exp, &c->expiry_ms) < 0) {
		(void)snprintf(err, err_len,
			       "its expirationTimestamp '%.64s' is not an RFC 3339 time", exp);
		up_exec_cred_free(c);
		goto out;
	}
	*ret = c;
	r = 0;
out:
	/* The document held the secret too. */
	json_decref(doc);
	return r;
}

/* One run of a plugin: done when the process has exited and both pipes are closed. */
struct run {
	uv_loop_t *loop;
	uv_process_t proc;
	uv_pipe_t out, err;
	uv_timer_t timer;
	char *outbuf, *errbuf;
	size_t out_len, err_len;
	bool out_over;
	int open_handles;
	int64_t exit_status;
	int term_signal;
	bool timed_out;
	int spawn_error;
	char cmd[256];
	char *api_version, *hint;
	up_exec_cred_fn cb;
	void *ud;
};

static void run_finish(struct run *r)
{
	struct up_exec_cred *cred = NULL;
	char why[512], msg[1024];
	const char *hint = r->hint ? r->hint : "check that the plugin works: run it in a terminal";
	int k = 0;

	/* The last line of stderr is usually the plugin's own reason. */
	while (r->err_len > 0 &&
	       (r->errbuf[r->err_len - 1] == '\n' || r->errbuf[r->err_len - 1] == ' '))
		r->errbuf[--r->err_len] = '\0';
	const char *last = r->errbuf ? strrchr(r->errbuf, '\n') : NULL;
	last = last ? last + 1 : (r->errbuf ? r->errbuf : "");

	if (r->spawn_error) {
		(void)snprintf(msg, sizeof(msg), "cannot run the exec credential plugin %s: %s; %s",
			       r->cmd, uv_strerror(r->spawn_error), hint);
		k = r->spawn_error;
	} else if (r->timed_out) {
		(void)snprintf(msg, sizeof(msg),
			       "the exec credential plugin %s did not finish within %d s; %s",
			       r->cmd, UP_KUBE_EXEC_TIMEOUT_MS / 1000, hint);
		k = -ETIMEDOUT;
	} else if (r->term_signal) {
		(void)snprintf(msg, sizeof(msg),
			       "the exec credential plugin %s was killed by signal %d", r->cmd,
			       r->term_signal);
		k = -EIO;
	} else if (r->exit_status != 0) {
		(void)snprintf(msg, sizeof(msg),
			       "the exec credential plugin %s exited with %lld%s%.300s; %s", r->cmd,
			       (long long)r->exit_status, *last ? ": " : "", last, hint);
		k = -EIO;
	} else if (r->out_over) {
		(void)snprintf(msg, sizeof(msg),
			       "the exec credential plugin %s printed more than %d bytes", r->cmd,
			       UP_MAX_EXEC_CREDENTIAL);
		k = -EFBIG;
	} else if ((k = up_exec_cred_parse(r->outbuf ? r->outbuf : "", r->out_len, r->api_version,
					   &cred, why, sizeof(why))) < 0) {
		(void)snprintf(msg, sizeof(msg), "the exec credential plugin %s failed: %s", r->cmd,
			       why);
	}
	r->cb(k, k < 0 ? msg : NULL, cred, r->ud);
	up_free_secret(r->outbuf, r->out_len);
	free(r->errbuf);
	free(r->api_version);
	free(r->hint);
	free(r);
}

static void on_closed(uv_handle_t *h)
{
	struct run *r = h->data;

	if (--r->open_handles == 0)
		run_finish(r);
}

static void append(char **buf, size_t *len, size_t max, const char *p, size_t n, bool *over)
{
	if (*len + n > max) {
		if (over)
			*over = true;
		n = max - *len;
	}
	if (n == 0)
		return;
	char *b = realloc(*buf, *len + n + 1);
	if (!b)
		return;
	memcpy(b + *len, p, n);
	*len += n;
	b[*len] = '\0';
	*buf = b;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct run *r = s->data;

	if (n < 0) {
		uv_close((uv_handle_t *)s, on_closed);
		return;
	}
	if (s == (uv_stream_t *)&r->out)
		append(&r->outbuf, &r->out_len, UP_MAX_EXEC_CREDENTIAL, buf->base, (size_t)n,
		       &r->out_over);
	else
		append(&r->errbuf, &r->err_len, UP_KUBE_EXEC_STDERR_MAX, buf->base, (size_t)n,
		       NULL);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
	struct run *r = p->data;

	r->exit_status = status;
	r->term_signal = r->timed_out ? 0 : sig;
	(void)uv_timer_stop(&r->timer);
	uv_close((uv_handle_t *)&r->timer, on_closed);
	uv_close((uv_handle_t *)p, on_closed);
}

static void on_timeout(uv_timer_t *t)
{
	struct run *r = t->data;

	r->timed_out = true;
	(void)uv_process_kill(&r->proc, SIGKILL);
}

static char *exec_info(const struct up_kube_context *ctx)
{
	json_t *info = json_pack("{s:s, s:s, s:{s:b}}", "apiVersion", ctx->exec->api_version,
				 "kind", "ExecCredential", "spec", "interactive", 0);
	char *s;

	if (info && ctx->exec->provide_cluster_info) {
		json_t *cluster = json_pack("{s:s}", "server", ctx->server);
		if (ctx->ca_pem) {
			/* certificate-authority-data is base64 of the PEM. */
			size_t n = 4 * ((ctx->ca_len + 2) / 3) + 1;
			char *b64 = malloc(n);
			if (b64) {
				(void)EVP_EncodeBlock((unsigned char *)b64,
						      (const unsigned char *)ctx->ca_pem,
						      (int)ctx->ca_len);
				(void)json_object_set_new(cluster, "certificate-authority-data",
							  json_string(b64));
				free(b64);
			}
		}
		if (ctx->insecure)
			(void)json_object_set_new(cluster, "insecure-skip-tls-verify", json_true());
		(void)json_object_set_new(json_object_get(info, "spec"), "cluster", cluster);
	}
	s = info ? json_dumps(info, JSON_COMPACT) : NULL;
	json_decref(info);
	return s;
}

static int build_env(const struct up_kube_context *ctx, char ***ret)
{
	size_t n = 0, m = 0, o = 0;
	_cleanup_(freep) char *info = exec_info(ctx);
	char **env;

	while (environ[n])
		n++;
	while (ctx->exec->env[m])
		m++;
	env = calloc(n + m + 2, sizeof(char *));
	if (!env || !info || asprintf(&env[o++], "KUBERNETES_EXEC_INFO=%s", info) < 0) {
		free(env);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m; i++)
		env[o++] = strdup(ctx->exec->env[i]);
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21) != 0)
			env[o++] = strdup(environ[i]);
	*ret = env;
	return 0;
}

int up_kube_exec_run(uv_loop_t *loop, const struct up_kube_context *ctx, up_exec_cred_fn cb,
		     void *ud)
{
	struct run *r = up_new(struct run, .loop = loop, .cb = cb, .ud = ud);
	uv_stdio_container_t stdio[3];
	uv_process_options_t opts = {0};
	char **env = NULL;
	int k;

	if (!r)
		return -ENOMEM;
	r->api_version = strdup(ctx->exec->api_version);
	r->hint = ctx->exec->install_hint ? strdup(ctx->exec->install_hint) : NULL;
	(void)snprintf(r->cmd, sizeof(r->cmd), "'%s' (user '%s' of %s)", ctx->exec->argv[0],
		       ctx->user ? ctx->user : "?", ctx->file);
	k = build_env(ctx, &env);
	if (k < 0)
		goto fail;
	(void)uv_pipe_init(loop, &r->out, 0);
	(void)uv_pipe_init(loop, &r->err, 0);
	r->out.data = r->err.data = r->proc.data = r->timer.data = r;
	stdio[0].flags = UV_IGNORE;
	stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[1].data.stream = (uv_stream_t *)&r->out;
	stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	stdio[2].data.stream = (uv_stream_t *)&r->err;
	opts.file = ctx->exec->argv[0];
	opts.args = ctx->exec->argv;
	opts.env = env;
	opts.stdio = stdio;
	opts.stdio_count = 3;
	opts.exit_cb = on_exit_cb;
	k = uv_spawn(loop, &r->proc, &opts);
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	free(env);
	if (k < 0) {
		/* Reported from run_finish() once the unused pipes are closed: one path for all. */
		r->spawn_error = k;
		r->open_handles = 2;
		uv_close((uv_handle_t *)&r->out, on_closed);
		uv_close((uv_handle_t *)&r->err, on_closed);
		return 0;
	}
	r->open_handles = 4; /* process, timer, two pipes */
	(void)uv_timer_init(loop, &r->timer);
	(void)uv_timer_start(&r->timer, on_timeout, UP_KUBE_EXEC_TIMEOUT_MS, 0);
	(void)uv_read_start((uv_stream_t *)&r->out, up_loop_read_alloc, on_read);
	(void)uv_read_start((uv_stream_t *)&r->err, up_loop_read_alloc, on_read);
	return 0;
fail:
	free(r->api_version);
	free(r->hint);
	free(r);
	return k;
}
