/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every agent's prepare() needs: the host's JSON login files read and written back
 * (atomically, 0600), secret-looking names recognised, an OAuth token endpoint POSTed to
 * (libcurl easy: prepare() runs on a worker thread), the auth rules document kept, the
 * usual volumes, the command run under tmux, and the sandbox note of the instructions file.
 */
#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/agent.h"
#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "paths.h"

int up_agent_failf(char *err, size_t len, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return r;
}

/* ---------------------------------------------------------------- JSON files */

void up_json_wipe_decref(json_t *v)
{
	up_json_wipe(v);
	json_decref(v);
}

int up_agent_set_secret(json_t *obj, const char *key, json_t *value)
{
	json_t *old = json_object_get(obj, key);

	if (json_is_string(old))
		up_json_wipe(old);
	return json_object_set_new(obj, key, value);
}

int up_agent_read_json(const char *path, const char *what, const char *tool,
		       const char *missing_hint, json_t **doc, char *err, size_t err_len)
{
	json_error_t jerr;
	char *text = NULL;
	size_t len = 0;
	int r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &text, &len);

	*doc = NULL;
	if (r == -ENOENT)
		return up_agent_failf(err, err_len, r, "%s not found: %s", what, missing_hint);
	if (r == -EFBIG)
		return up_agent_failf(err, err_len, -EINVAL, "%s is larger than %d bytes", what,
				      UP_AGENT_MAX_HOST_FILE);
	if (r < 0)
		return up_agent_failf(err, err_len, r, "cannot read %s: %s", what, strerror(-r));
	/* jerr.text may quote the file, which may hold a secret: only its position is used */
	*doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	up_free_secret(text, len);
	if (!*doc)
		return up_agent_failf(err, err_len, -EINVAL,
				      "%s is not valid JSON (line %d, column %d): fix it, or "
				      "move it aside and run `%s` again",
				      what, jerr.line, jerr.column, tool);
	if (!json_is_object(*doc)) {
		up_json_wipe_decref(*doc);
		*doc = NULL;
		return up_agent_failf(err, err_len, -EINVAL, "%s does not hold a JSON object",
				      what);
	}
	return 0;
}

int up_agent_write_private(const char *path, const char *text, size_t len)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];

	if (!slash)
		return up_write_file_atomic(".", path, text, len, NULL);
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	(void)snprintf(dir, sizeof(dir), "%.*s", (int)(slash == path ? 1 : slash - path), path);
	return up_write_file_atomic(dir, slash + 1, text, len, NULL);
}

int up_agent_write_json(const char *path, const json_t *doc)
{
	char *text = json_dumps(doc, JSON_INDENT(2));
	int r;

	if (!text)
		return -ENOMEM;
	r = up_agent_write_private(path, text, strlen(text));
	up_free_secret(text, strlen(text));
	return r;
}

/* ---------------------------------------------------------------- names and tokens */

static const char *const secret_words[] = {
	"TOKEN",  "SECRET",	"SECRETS",     "PASSWORD", "PASSWD",	    "KEY",
	"APIKEY", "CREDENTIAL", "CREDENTIALS", "BEARER",   "AUTHORIZATION", "COOKIE",
};

static bool secret_word(const char *s, size_t n)
{
	for (size_t i = 0; i < ELEMENTSOF(secret_words); i++)
		if (strlen(secret_words[i]) == n && strncasecmp(s, secret_words[i], n) == 0)
			return true;
	return false;
}

/* The length of the word at `s`: up to a separator or a lower-to-upper case change. */
static size_t word_len(const char *s)
{
	size_t n = 0;

	while (s[n] && isalnum((unsigned char)s[n])) {
		if (n && islower((unsigned char)s[n - 1]) && isupper((unsigned char)s[n]))
			break;
		n++;
	}
	return n;
}

bool up_agent_secret_name(const char *name)
{
	const char *s = name;

	while (*s) {
		size_t n = word_len(s);
		if (n == 0) {
			s++;
			continue;
		}
		if (secret_word(s, n))
			return true;
		s += n;
	}
	return false;
}

bool up_agent_is_token(const char *s)
{
	if (!s || !*s || strlen(s) > UP_MAX_HEADER_VALUE / 2)
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=") ==
	       strlen(s);
}

/* ---------------------------------------------------------------- token endpoints */

static size_t on_data(char *data, size_t size, size_t n, void *userdata)
{
	struct up_agent_body *b = userdata;
	size_t k = size * n;
	char *nb;

	if (b->len + k > UP_AGENT_TOKEN_RESPONSE_MAX) {
		b->too_big = true;
		return 0;
	}
	nb = malloc(b->len + k + 1);
	if (!nb)
		return 0;
	if (b->buf)
		memcpy(nb, b->buf, b->len);
	memcpy(nb + b->len, data, k);
	up_free_secret(b->buf, b->len);
	b->buf = nb;
	b->len += k;
	b->buf[b->len] = '\0';
	return k;
}

void up_agent_body_done(struct up_agent_body *b)
{
	up_free_secret(b->buf, b->len);
	*b = (struct up_agent_body){0};
}

json_t *up_agent_body_json(const struct up_agent_body *b)
{
	json_t *doc = b->buf ? json_loadb(b->buf, b->len, 0, NULL) : NULL;

	if (doc && !json_is_object(doc)) {
		up_json_wipe_decref(doc);
		return NULL;
	}
	return doc;
}

/* ", invalid_grant": the OAuth error code of a failed answer when it is a plain word. */
static const char *oauth_error(const struct up_agent_body *b, char *buf, size_t len)
{
	json_t *doc = up_agent_body_json(b);
	json_t *e = json_object_get(doc, "error");
	const char *s = json_string_value(json_is_object(e) ? json_object_get(e, "code") : e);

	buf[0] = '\0';
	if (s && strlen(s) + 3 <= len && strspn(s, "abcdefghijklmnopqrstuvwxyz_") == strlen(s))
		(void)snprintf(buf, len, ", %s", s);
	up_json_wipe_decref(doc);
	return buf;
}

static CURLcode perform(CURL *e, const char *url, const char *ca, struct curl_slist *h,
			const char *body, struct up_agent_body *b, char *cerr, long *status)
{
	CURLcode c;

	(void)curl_easy_setopt(e, CURLOPT_URL, url);
	(void)curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	(void)curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	(void)curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)UP_AGENT_TOKEN_TIMEOUT_MS);
	(void)curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	(void)curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	(void)curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	(void)curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
	(void)curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr);
	(void)curl_easy_setopt(e, CURLOPT_USERAGENT, "uplinkd");
	c = ca && *ca ? curl_easy_setopt(e, CURLOPT_CAINFO, ca) : CURLE_OK;
	if (c == CURLE_OK)
		c = curl_easy_perform(e);
	(void)curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
	return c;
}

int up_agent_post(const char *url, const char *ca, const char *content_type, const char *body,
		  struct up_agent_body *b, char *err, size_t len)
{
	char cerr[CURL_ERROR_SIZE] = "", code[64], ct[128];
	CURL *e = curl_easy_init();
	struct curl_slist *h = NULL;
	long status = 0;
	CURLcode c = CURLE_OUT_OF_MEMORY;
	int r;

	(void)snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
	h = curl_slist_append(NULL, ct);
	if (e && h)
		c = perform(e, url, ca, h, body, b, cerr, &status);
	if (b->too_big)
		r = up_agent_failf(err, len, -EIO, "the answer of %s is larger than %d bytes", url,
				   UP_AGENT_TOKEN_RESPONSE_MAX);
	else if (c != CURLE_OK)
		r = up_agent_failf(err, len, -EIO, "%s: %s", url,
				   *cerr ? cerr : curl_easy_strerror(c));
	else if (status != 200)
		r = up_agent_failf(err, len, -EIO, "%s answered HTTP %ld%s", url, status,
				   oauth_error(b, code, sizeof(code)));
	else
		r = 0;
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return r;
}

/* ---------------------------------------------------------------- the contribution */

int up_agent_set_auth_rules(struct up_agent_prepared *p, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

	up_json_wipe_decref(doc);
	if (!(p->auth_rules = up_agent_keep(p, text, text ? strlen(text) + 1 : 0)))
		return -ENOMEM;
	p->auth_rules_len = strlen(p->auth_rules);
	return 0;
}

const char *up_agent_dump_json(struct up_agent_prepared *p, json_t *doc, size_t *len)
{
	char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;

	up_json_wipe_decref(doc);
	text = up_agent_keep(p, text, text ? strlen(text) : 0);
	*len = text ? strlen(text) : 0;
	return text;
}

int up_agent_add_file_volume(struct up_agent_prepared *p, enum up_agent_volume_kind kind,
			     const char *volume, const char *key, const char *data, size_t len,
			     const char *mount_path)
{
	struct up_agent_volume *v = up_agent_add_volume(p, kind, volume, NULL, true);

	return v ? up_agent_add_file(p, v, key, data, len, mount_path) : -ENOMEM;
}

int up_agent_add_host_path(struct up_agent_prepared *p, const char *volume, const char *path,
			   const char *type, const char *mount_path, bool rw)
{
	struct up_agent_volume *v =
		up_agent_add_volume(p, UP_AGENT_VOL_HOSTPATH, volume, mount_path, !rw);

	if (!v || !(v->host_path = up_agent_strdup(p, path)) ||
	    !(v->host_path_type = up_agent_strdup(p, type)))
		return -ENOMEM;
	return 0;
}

int up_agent_add_empty_dir(struct up_agent_prepared *p, const char *volume, const char *mount_path,
			   const char *size)
{
	struct up_agent_volume *v =
		up_agent_add_volume(p, UP_AGENT_VOL_EMPTYDIR, volume, mount_path, false);

	if (!v || !(v->medium = up_agent_strdup(p, "Memory")) ||
	    !(v->size_limit = up_agent_strdup(p, size)))
		return -ENOMEM;
	return 0;
}

int up_agent_make_dir(const char *path, char *err, size_t err_len)
{
	char parent[4096];
	int r;

	if ((size_t)snprintf(parent, sizeof(parent), "%s/", path) >= sizeof(parent))
		return up_agent_failf(err, err_len, -ENAMETOOLONG, "%s: path too long", path);
	r = up_mkdir_parents(parent, 0700);
	if (r < 0)
		return up_agent_failf(err, err_len, r, "cannot create %s: %s", path, strerror(-r));
	return 0;
}

static const char *const entrypoint_argv[] = {UP_AGENT_ENTRYPOINT, NULL};

int up_agent_set_command(struct up_agent_prepared *p, const char *const *tool,
			 const char *const *args, char *err, size_t err_len)
{
	const char *argv[UP_AGENT_MAX_ARGS + 16];
	size_t n = 0;
	char *quoted = NULL, *line;
	int r;

	for (size_t i = 0; tool[i] && n < ELEMENTSOF(argv) - UP_AGENT_MAX_ARGS - 1; i++)
		argv[n++] = tool[i];
	for (size_t i = 0; args && args[i]; i++) {
		if (i == UP_AGENT_MAX_ARGS)
			return up_agent_failf(err, err_len, -E2BIG,
					      "more than %d arguments after --", UP_AGENT_MAX_ARGS);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	r = up_shell_quote_argv(argv, &quoted);
	if (r == -E2BIG)
		return up_agent_failf(err, err_len, r,
				      "the arguments after -- are longer than %d bytes",
				      UP_AGENT_MAX_ARGS_LEN);
	if (r < 0)
		return r;
	line = up_agent_printf(p, "exec %s", quoted);
	free(quoted);
	if (!line)
		return -ENOMEM;
	const char *const cmd[] = {"bash", "-lc", line, NULL};
	p->contrib.entrypoint = up_agent_copy_argv(p, entrypoint_argv);
	p->contrib.command = up_agent_copy_argv(p, cmd);
	p->contrib.memory_limit = "4Gi";
	return p->contrib.entrypoint && p->contrib.command ? 0 : -ENOMEM;
}

/* ---------------------------------------------------------------- instructions */

static const char sandbox_md[] =
	"## Sandbox\n"
	"\n"
	"You are running inside uplink: a Kata Containers microVM on Kubernetes whose only way "
	"out is an HTTPS proxy that allows requests by an allow-list of rules.\n"
	"\n"
	"- A request answered with the header `X-Uplink-Denied: 1` (status 403, or 400/431 for a "
	"malformed request) and a JSON body like {\"error\": \"denied by uplink\", \"method\": "
	"\"POST\", \"host\": \"api.example.com\", \"path\": \"/v1/x\", \"hint\": \"add a rule "
	"...\"} was blocked by the proxy. Stop: do not retry it, and do not try to work around the "
	"block (other hosts, other tools, other protocols, other spellings of the path). Tell the "
	"user which request was blocked (method, host, path); the body's \"hint\" names the rule "
	"that would allow it.\n"
	"- A request that seems to hang may be waiting for the user: in ask mode the proxy holds "
	"a request no rule allows (up to a minute) while the user is asked to approve it. Wait "
	"for it; do not send it again meanwhile. If it is let through, go on as usual.\n"
	"- The 403 body's \"asked\" and \"answer\" say what came of that: \"asked\": true with "
	"\"answer\": \"denied\" means the user refused it: do not retry it; tell the user what "
	"you needed it for. \"answer\": \"no answer\" means the user did not answer in time: "
	"tell the user which request waits (method, host, path) and retry it once, only after "
	"they say they approved it (they run `uplink approvals` and `uplink approve`). "
	"\"asked\": false is a plain denial: stop, as above.\n"
	"- Most credentials are injected by the proxy: API keys and tokens in this environment are "
	"placeholders, and that is expected. Do not look for real ones.\n"
	"- There is no DNS: tools must use the proxy (HTTPS_PROXY is set).\n"
	"- If anything else about the sandbox stops you, stop and report it rather than working "
	"around it.\n"
	"- Docker works (a dockerd of your own runs in the VM). A Python virtualenv is at "
	"/opt/venv.\n";

const char *up_agent_instructions(const char *host, size_t host_len, struct up_agent_prepared *p)
{
	bool nl = host && host_len && host[host_len - 1] != '\n';

	if (!host || !host_len)
		return up_agent_strdup(p, sandbox_md);
	return up_agent_printf(p, "%.*s%s\n%s", (int)host_len, host, nl ? "\n" : "", sandbox_md);
}

/* ---- JWTs ---- */

static int b64url_value(int c)
{
	static const char set[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *at = c ? strchr(set, c) : NULL;

	return at ? (int)(at - set) : -1;
}

/* Decodes base64url (no padding) of n bytes; the result is NUL-terminated, or NULL. */
static char *b64url_decode(const char *s, size_t n, size_t *out_len)
{
	char *out = n <= UP_MAX_HEADER_VALUE ? malloc(n * 3 / 4 + 2) : NULL;
	unsigned acc = 0;
	int bits = 0;
	size_t k = 0;

	for (size_t i = 0; out && i < n; i++) {
		int v = b64url_value((unsigned char)s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		if ((bits += 6) >= 8) {
			bits -= 8;
			out[k++] = (char)((acc >> bits) & 0xff);
		}
	}
	if (out)
		out[k] = '\0';
	*out_len = k;
	return out;
}

json_t *up_agent_jwt_claims(const char *jwt)
{
	const char *dot = jwt ? strchr(jwt, '.') : NULL;
	const char *end = dot ? strchr(dot + 1, '.') : NULL;
	size_t len = 0;
	char *payload;
	json_t *doc;

	if (!end || end == dot + 1 || !end[1])
		return NULL;
	payload = b64url_decode(dot + 1, (size_t)(end - dot - 1), &len);
	doc = payload ? json_loadb(payload, len, 0, NULL) : NULL;
	if (payload)
		up_free_secret(payload, len);
	if (doc && !json_is_object(doc)) {
		up_json_wipe_decref(doc);
		return NULL;
	}
	return doc;
}

long long up_agent_jwt_exp(const char *jwt)
{
	json_t *claims = up_agent_jwt_claims(jwt);
	json_t *exp = json_object_get(claims, "exp");
	long long v = json_is_integer(exp) ? (long long)json_integer_value(exp) : 0;

	up_json_wipe_decref(claims);
	return v > 0 ? v : 0;
}

/* ---------------------------------------------------------------- prepare() in parts */

const char *const up_agent_attach_argv[] = {UP_AGENT_ENTRYPOINT, "--attach", NULL};

/* in->mode's place in impl->modes; an unknown one is the default's (up_agent_prepare()
 * refuses it before). */
static size_t mode_index(const struct up_agent_impl *impl, const char *name)
{
	const struct up_agent_mode *m = up_agent_find_mode(impl, name);

	if (!m)
		m = up_agent_find_mode(impl, NULL);
	return m ? (size_t)(m - impl->modes) : 0;
}

int up_agent_prepare_parts(const struct up_agent_impl *impl, const struct up_agent_input *in,
			   struct up_agent_prepared **ret, char *err, size_t err_len)
{
	_cleanup_(up_agent_prepared_freep) struct up_agent_prepared *p = up_agent_prepared_new();
	const struct up_agent_parts *parts = impl->parts;
	struct up_agent_ctx c = {.in = in, .p = p, .err = err, .err_len = err_len};
	int r;

	if (!p)
		return -ENOMEM;
	err[0] = '\0';
	c.mode = mode_index(impl, in->mode);
	if (c.mode >= UP_AGENT_MAX_MODES || !parts->auth[c.mode])
		return up_agent_failf(err, err_len, -EINVAL, "agent %s has no auth for mode %zu",
				      impl->name, c.mode);
	if (parts->home_dir && !(c.dir = up_agent_printf(p, "%s/%s", in->home, parts->home_dir)))
		return -ENOMEM;
	r = parts->auth[c.mode](&c);
	if (r == 0 && !in->rules_only)
		r = parts->contribution(&c);
	if (r == -ENOMEM && !*err)
		(void)snprintf(err, err_len, "out of memory preparing agent %s", impl->name);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

int up_agent_add_shared(struct up_agent_prepared *p, const char *host_dir, const char *pod_dir,
			const struct up_agent_shared *shared)
{
	for (const struct up_agent_shared *s = shared; s->name; s++) {
		char *host = up_agent_printf(p, "%s/%s", host_dir, s->name);
		char *at = pod_dir ? up_agent_printf(p, "%s/%s", pod_dir, s->name) : host;
		struct stat st;
		int r;
		if (!host || !at)
			return -ENOMEM;
		if (stat(host, &st) < 0 || (s->dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
			continue;
		r = up_agent_add_host_path(p, s->volume, host, s->dir ? "Directory" : "File", at,
					   s->rw);
		if (r < 0)
			return r;
	}
	return 0;
}

int up_agent_add_workdir(struct up_agent_prepared *p, const struct up_agent_input *in)
{
	return up_agent_add_host_path(p, "workdir", in->cwd, "Directory", in->cwd, true);
}

int up_agent_add_instructions(struct up_agent_prepared *p, const char *host_path, const char *what,
			      const char *volume, const char *key, const char *at, char *err,
			      size_t err_len)
{
	char *host = NULL;
	size_t len = 0;
	const char *text;
	int r = up_read_file(host_path, UP_AGENT_MAX_HOST_FILE, &host, &len);

	if (r < 0 && r != -ENOENT)
		return up_agent_failf(err, err_len, r, "cannot read %s: %s", what, strerror(-r));
	text = up_agent_instructions(host, len, p);
	free(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(p, UP_AGENT_VOL_CONFIGMAP, volume, key, text, strlen(text),
					at ? at : host_path);
}

int up_agent_finish_pod(struct up_agent_prepared *p, const struct up_agent_input *in,
			const struct up_agent_pod *pod, char *err, size_t err_len)
{
	int r;

	if ((r = up_agent_add_empty_dir(p, "docker-lib", "/var/lib/docker", "2Gi")) < 0 ||
	    (r = up_agent_add_empty_dir(p, "run", "/run", "64Mi")) < 0)
		return r;
	for (const struct up_env *e = pod->env; e && e->name; e++)
		if ((r = up_agent_add_env(p, e->name, e->value)) < 0)
			return r;
	return up_agent_set_command(p, in->debug && pod->debug_tool ? pod->debug_tool : pod->tool,
				    in->args, err, err_len);
}
