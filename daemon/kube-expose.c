/* SPDX-License-Identifier: Apache-2.0 */
/* --kube-context: host contexts exposed to the agent through the mitm (kube-expose.h). */
#include "kube-expose.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "fileio.h"
#include "kubeconfig.h"
#include "rules-private.h"
#include "rules.h"

struct up_kube_exposed *up_kube_exposed_new(void)
{
	return calloc(1, sizeof(struct up_kube_exposed));
}

static void ctx_done(struct up_kube_exposed_ctx *x)
{
	up_free_all(x->name, x->cluster, x->user, x->namespace, x->server, x->host, x->ca_pem);
	if (x->token)
		up_free_secret(x->token, strlen(x->token));
	if (x->client_pem)
		up_free_secret(x->client_pem, x->client_len);
	*x = (struct up_kube_exposed_ctx){0};
}

struct up_kube_exposed *up_kube_exposed_free(struct up_kube_exposed *k)
{
	if (!k)
		return NULL;
	for (size_t i = 0; i < k->n; i++)
		ctx_done(&k->ctx[i]);
	up_free_all(k->ctx, k);
	return NULL;
}

UP_DEFINE_FREEP(struct up_kube_exposed, up_kube_exposed_free)

static int _printf_(4, 5) refuse(char *why, size_t len, const char *ctx, const char *fmt, ...)
{
	int n = snprintf(why, len, "--kube-context %s: ", ctx);
	va_list ap;

	if (n >= 0 && (size_t)n < len) {
		va_start(ap, fmt);
		(void)vsnprintf(why + n, len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

char *up_regex_escape(const char *s)
{
	char *out = malloc(2 * strlen(s) + 1), *o = out;

	for (; out && *s; s++) {
		if (!isalnum((unsigned char)*s) && *s != '_')
			*o++ = '\\';
		*o++ = *s;
	}
	if (out)
		*o = '\0';
	return out;
}

char *up_pem_concat(const char *cert, size_t cert_len, const char *key, size_t key_len,
		    size_t *out_len)
{
	char *out = malloc(cert_len + key_len + 3);
	size_t n = 0;

	if (!out)
		return NULL;
	memcpy(out, cert, cert_len);
	n = cert_len;
	if (n == 0 || out[n - 1] != '\n')
		out[n++] = '\n';
	memcpy(out + n, key, key_len);
	n += key_len;
	if (key_len == 0 || out[n - 1] != '\n')
		out[n++] = '\n';
	out[n] = '\0';
	*out_len = n;
	return out;
}

bool up_kube_host_no_proxy(const char *host, const char *no_proxy)
{
	size_t n = strlen(host);

	for (const char *p = no_proxy; p && *p; p += strspn(p, ", ")) {
		size_t k = strcspn(p, ",");
		const char *e = p;
		while (k && e[k - 1] == ' ')
			k--;
		/* "name" is that host; ".local" (or "local") that domain and its hosts */
		if ((k == n && !strncmp(host, e, k)) ||
		    (e[0] == '.' && n >= k && !strncmp(host + n - k, e, k)) ||
		    (e[0] == '.' && n == k - 1 && !strncmp(host, e + 1, n)))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

/* A token as the user file or tokenFile gives it; trailing white space trimmed (0.4.1). */
static int read_token(const struct up_kube_context *c, char **token, char *why, size_t len)
{
	char *text = NULL;
	size_t n;
	int r;

	if (c->token) {
		*token = strdup(c->token);
		return *token ? 0 : -ENOMEM;
	}
	r = up_read_file(c->token_file, UP_MAX_KUBE_CREDENTIAL_FILE, &text, &n);
	if (r < 0) { /* an explicit failure: the caller must not read *token */
		if (r == -ENOENT)
			(void)refuse(why, len, c->name, "tokenFile '%s' not found", c->token_file);
		else
			(void)refuse(why, len, c->name, "cannot read tokenFile '%s': %s",
				     c->token_file, strerror(-r));
		return -EINVAL;
	}
	while (n > 0 && isspace((unsigned char)text[n - 1]))
		text[--n] = '\0';
	*token = text;
	return 0;
}

/* A header value is one line of Latin-1 (manifests/mitm/README.md); a token is plain ASCII. */
static bool token_ok(const char *t)
{
	if (!*t)
		return false;
	for (; *t; t++)
		if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
			return false;
	return true;
}

/*
 * The port of an https server URL (443 when it names none), or -EINVAL when its authority
 * holds a user name or password (it would reach the agent's kubeconfig) or a bad port.
 */
int up_kube_server_port(const char *server)
{
	const char *a = startswith(server, "https://") ? server + 8 : NULL;

	if (!a || memchr(a, '@', strcspn(a, "/?#")))
		return -EINVAL;
	return up_url_port(server); /* rules.h: the one parser of a URL's port */
}

/* A DNS name (letters, digits, '-', '.') or an IP literal: what a kube rule's host may be. */
static bool host_ok(const char *host)
{
	unsigned char bin[16];

	if (inet_pton(AF_INET6, host, bin) == 1)
		return true;
	return *host && strspn(host, "abcdefghijklmnopqrstuvwxyz0123456789-.") == strlen(host);
}

/*
 * What the cluster side must have, checked in this order (the first failure is reported):
 * a cluster and a user entry; a server URL without a user name or password in it; no
 * insecure-skip-tls-verify, and a CA that holds a PEM certificate; an https URL with a
 * valid port and a host that is a DNS name or an IP address; no tls-server-name; an API
 * host no earlier context has. `host` and `port` are filled.
 */
static int check_cluster(const struct up_kube_exposed *k, const struct up_kube_context *c,
			 char *host, size_t host_len, int *port, char *why, size_t len)
{
	char path[4096], err[256];
	bool https;

	if (c->facts.no_cluster)
		return refuse(why, len, c->name, "no cluster found in kubeconfig");
	if (c->facts.no_user)
		return refuse(why, len, c->name, "no user found in kubeconfig");
	if (!c->server)
		return refuse(why, len, c->name, "cluster has no server URL");
	const char *auth = strstr(c->server, "://");
	auth = auth ? auth + 3 : c->server;
	if (memchr(auth, '@', strcspn(auth, "/?#"))) /* before any message quotes the URL */
		return refuse(why, len, c->name,
			      "the server URL has a user name or password in it; write it as "
			      "https://HOST[:PORT] and keep credentials in the user entry");
	if (c->insecure)
		return refuse(
			why, len, c->name,
			"insecure-skip-tls-verify is not supported; a cluster "
			"CA (certificate-authority or certificate-authority-data) is required");
	if (!c->ca_pem || !c->ca_len)
		return refuse(why, len, c->name,
			      "cluster has no certificate-authority-data (or "
			      "certificate-authority file); a cluster CA is required");
	if (!memmem(c->ca_pem, c->ca_len, "-----BEGIN CERTIFICATE-----", 27))
		return refuse(why, len, c->name,
			      "the cluster's certificate authority holds no PEM "
			      "certificate");
	if (up_url_split(c->server, &https, host, host_len, path, sizeof(path), err, sizeof(err)) <
	    0)
		return refuse(why, len, c->name, "server '%s': %s", c->server, err);
	if (!https)
		return refuse(why, len, c->name,
			      "server '%s' is not https; the mitm would send the "
			      "credentials in clear",
			      c->server);
	if ((*port = up_kube_server_port(c->server)) < 0)
		return refuse(why, len, c->name,
			      "the server URL '%s' has a bad port; write it as https://HOST[:PORT]",
			      c->server);
	if (!host_ok(host))
		return refuse(why, len, c->name,
			      "the server's host '%.100s' is not a DNS name or an IP address",
			      host);
	if (c->tls_server_name)
		return refuse(why, len, c->name,
			      "tls-server-name is not supported: the mitm verifies the server "
			      "against the host of its URL; use a server URL whose host is in the "
			      "server's certificate");
	for (size_t i = 0; i < k->n; i++)
		if (streq(k->ctx[i].host, host))
			return refuse(why, len, c->name,
				      "contexts '%s' and '%s' both resolve to API "
				      "server host '%s'; they cannot both be selected",
				      c->name, k->ctx[i].name, host);
	return 0;
}

/*
 * The user side, after check_cluster(): no exec or auth-provider plugin, no username and
 * password; then a token (or tokenFile: it wins over a client certificate) that can go in
 * a header, or else a client certificate and key, not for an IPv6 API host.
 */
static int take_credential(struct up_kube_exposed_ctx *x, const struct up_kube_context *c,
			   const char *host, char *why, size_t len)
{
	int r;

	if (c->facts.exec || c->facts.auth_provider)
		return refuse(
			why, len, c->name,
			"exec and auth-provider credentials are not supported: "
			"uplink cannot run the plugin inside the proxy; use a static bearer token "
			"or a client certificate instead");
	if (c->facts.basic_auth)
		return refuse(why, len, c->name,
			      "username/password credentials are not supported; use "
			      "a static bearer token or a client certificate instead");
	if (c->token || c->token_file) { /* a token wins over a client certificate (0.4.1) */
		if ((r = read_token(c, &x->token, why, len)) < 0)
			return r;
		if (!token_ok(x->token))
			return refuse(why, len, c->name,
				      "the token is empty or holds white space or "
				      "control characters; it cannot be sent in a header");
		return 0;
	}
	if (!c->cert_pem || !c->key_pem)
		return refuse(why, len, c->name,
			      "no supported credentials found; expected token, "
			      "tokenFile, or client-certificate-data + client-key-data");
	if (strchr(host, ':'))
		return refuse(
			why, len, c->name,
			"a client certificate for the IPv6 API server address "
			"'%s' cannot be presented (mitmproxy names the file after the address, "
			"which is no valid Secret key); use a host name or a token",
			host);
	x->client_pem =
		up_pem_concat(c->cert_pem, c->cert_len, c->key_pem, c->key_len, &x->client_len);
	return x->client_pem ? 0 : -ENOMEM;
}

static char *dup0(const char *s)
{
	return s ? strdup(s) : NULL;
}

int up_kube_expose_add(struct up_kube_exposed *k, const struct up_kube_context *c, char *why,
		       size_t len)
{
	struct up_kube_exposed_ctx x = {0};
	char host[256];
	int r, port = 443;

	if (k->n >= UP_MAX_KUBE_CONTEXTS)
		return refuse(why, len, c->name, "at most %d contexts", UP_MAX_KUBE_CONTEXTS);
	if ((r = check_cluster(k, c, host, sizeof(host), &port, why, len)) < 0)
		return r;
	x.port = (unsigned)port;
	if ((r = take_credential(&x, c, host, why, len)) < 0) {
		ctx_done(&x);
		return r;
	}
	struct up_kube_exposed_ctx *grown = realloc(k->ctx, (k->n + 1) * sizeof(*grown));
	if (grown)
		k->ctx = grown;
	x.name = strdup(c->name);
	x.cluster = strdup(c->cluster);
	x.user = strdup(c->user);
	x.namespace = dup0(c->namespace);
	x.server = strdup(c->server);
	x.host = strdup(host);
	x.ca_pem = strndup(c->ca_pem, c->ca_len);
	if (!grown || !x.name || !x.cluster || !x.user || (c->namespace && !x.namespace) ||
	    !x.server || !x.host || !x.ca_pem) {
		ctx_done(&x);
		return -ENOMEM;
	}
	k->ctx[k->n++] = x;
	return 0;
}

int up_kube_expose_load(const char *paths, const json_t *names, struct up_kube_exposed **ret,
			char *why, size_t len)
{
	_cleanup_(up_kube_exposed_freep) struct up_kube_exposed *k = up_kube_exposed_new();
	char err[1024];
	json_t *v;
	size_t i;
	int r;

	if (!k)
		return -ENOMEM;
	json_array_foreach (names, i, v) {
		_cleanup_(up_kube_context_freep) struct up_kube_context *c = NULL;
		const char *name = json_string_value(v);
		bool again = false;
		for (size_t j = 0; j < i; j++)
			again = again || streq(json_string_value(json_array_get(names, j)), name);
		if (again)
			continue; /* named twice: once is enough */
		r = up_kubeconfig_inspect(paths, name, &c, err, sizeof(err));
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			return refuse(why, len, name, "%s", err);
		if ((r = up_kube_expose_add(k, c, why, len)) < 0)
			return r;
	}
	*ret = TAKE_PTR(k);
	return 0;
}

/* ---------------------------------------------------------------- products */

/* The methods the Kubernetes API (and kubectl) use; never TRACE, which would echo the token. */
static const char *const kube_methods[] = {"GET",   "HEAD",   "POST",	"PUT",
					   "PATCH", "DELETE", "OPTIONS"};

static int one_rule(const struct up_kube_exposed_ctx *x, struct up_rule *r)
{
	r->layer = UP_LAYER_KUBE;
	for (size_t i = 0; i < sizeof(kube_methods) / sizeof(kube_methods[0]); i++)
		r->methods |= 1u << up_method_bit(kube_methods[i]);
	r->port = x->port; /* the token goes to the API server's port alone */
	if (asprintf(&r->name, "kube-%s", x->name) < 0 ||
	    asprintf(&r->source, "kubeconfig:%s", x->name) < 0)
		return -ENOMEM;
	if (!(r->hosts = calloc(2, sizeof(char *))) || !(r->hosts[0] = up_regex_escape(x->host)))
		return -ENOMEM;
	r->n_hosts = 1;
	if (!x->token) {
		/* The agent sends the placeholder token; the API server must see the certificate
		 * alone. */
		if (!(r->remove = calloc(2, sizeof(char *))) ||
		    !(r->remove[0] = strdup("Authorization")))
			return -ENOMEM;
		r->n_remove = 1;
		return 0;
	}
	if (!(r->headers = calloc(1, sizeof(*r->headers))))
		return -ENOMEM;
	r->n_headers = 1;
	r->headers[0].name = strdup("Authorization");
	r->headers[0].literal = true;
	/* What rules.check shows: the value itself is already resolved, never a template. */
	r->headers[0].value = strdup("Bearer <the token of the kubeconfig>");
	if (!r->headers[0].name || !r->headers[0].value ||
	    asprintf(&r->headers[0].resolved, "Bearer %s", x->token) < 0)
		return r->headers[0].resolved = NULL, -ENOMEM;
	return 0;
}

int up_kube_expose_rules(const struct up_kube_exposed *k, struct up_ruleset *rs)
{
	int r;

	for (size_t i = 0; k && i < k->n; i++) {
		struct up_rule rule = {0};
		r = one_rule(&k->ctx[i], &rule);
		if (r < 0) {
			up_rule_done(&rule);
			return r;
		}
		if ((r = up_ruleset_take(rs, &rule)) < 0)
			return r;
	}
	return 0;
}

static json_t *b64_string(const char *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);
	json_t *s;

	if (!out)
		return NULL;
	int n = EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)data, (int)len);
	s = json_stringn(out, (size_t)n);
	free(out);
	return s;
}

static int add_context(json_t *doc, const struct up_kube_exposed_ctx *x, const char *ca_pem)
{
	json_t *ctx = json_pack("{s:s, s:s}", "cluster", x->cluster, "user", x->user);

	if (ctx && x->namespace &&
	    json_object_set_new(ctx, "namespace", json_string(x->namespace)) < 0)
		return json_decref(ctx), -ENOMEM;
	if (json_array_append_new(json_object_get(doc, "contexts"),
				  json_pack("{s:s, s:o*}", "name", x->name, "context", ctx)) < 0)
		return -ENOMEM;
	/* Two contexts may share a user or a cluster (of different servers: no, see the checks). */
	json_t *users = json_object_get(doc, "users"), *clusters = json_object_get(doc, "clusters"),
	       *e;
	size_t i;
	bool have_user = false, have_cluster = false;
	json_array_foreach (users, i, e)
		have_user =
			have_user || streq(json_string_value(json_object_get(e, "name")), x->user);
	json_array_foreach (clusters, i, e)
		have_cluster = have_cluster ||
			       streq(json_string_value(json_object_get(e, "name")), x->cluster);
	if (!have_user &&
	    json_array_append_new(users, json_pack("{s:s, s:{s:s}}", "name", x->user, "user",
						   "token", UP_KUBE_PLACEHOLDER_TOKEN)) < 0)
		return -ENOMEM;
	if (!have_cluster &&
	    json_array_append_new(clusters,
				  json_pack("{s:s, s:{s:s, s:o*}}", "name", x->cluster, "cluster",
					    "server", x->server, "certificate-authority-data",
					    b64_string(ca_pem, strlen(ca_pem)))) < 0)
		return -ENOMEM;
	return 0;
}

json_t *up_kube_expose_kubeconfig(const struct up_kube_exposed *k, const char *session_ca_pem)
{
	json_t *doc;

	if (!k || k->n == 0 || !session_ca_pem)
		return NULL;
	doc = json_pack("{s:s, s:s, s:s, s:{}, s:[], s:[], s:[]}", "apiVersion", "v1", "kind",
			"Config", "current-context", k->ctx[0].name, "preferences", "clusters",
			"users", "contexts");
	for (size_t i = 0; doc && i < k->n; i++)
		if (add_context(doc, &k->ctx[i], session_ca_pem) < 0)
			return json_decref(doc), NULL;
	return doc;
}

int up_kube_expose_ca_bundle(const struct up_kube_exposed *k, char **bundle)
{
	size_t n = *bundle ? strlen(*bundle) : 0;

	if (n > 0 && (*bundle)[n - 1] != '\n') {
		char *grown = realloc(*bundle, n + 2);
		if (!grown)
			return -ENOMEM;
		*bundle = grown;
		grown[n++] = '\n';
		grown[n] = '\0';
	}
	for (size_t i = 0; k && i < k->n; i++) {
		size_t add = strlen(k->ctx[i].ca_pem);
		char *grown = realloc(*bundle, n + add + 2);
		if (!grown)
			return -ENOMEM;
		*bundle = grown;
		memcpy(grown + n, k->ctx[i].ca_pem, add);
		n += add;
		if (add == 0 || grown[n - 1] != '\n')
			grown[n++] = '\n';
		grown[n] = '\0';
	}
	return 0;
}
