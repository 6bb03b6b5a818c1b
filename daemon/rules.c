/* SPDX-License-Identifier: Apache-2.0 */
/* The rule set: layering, regex compilation, matching, and the proxy's JSON. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "bounds.h"
#include "rules-private.h"

struct up_ruleset {
	struct up_rule *rules; /* in load order until finished, then in final order */
	size_t n, cap;
	bool replace_defaults;
	bool finished;
};

static const char *const layer_names[_UP_LAYER_MAX] = {
	[UP_LAYER_AUTH] = "auth",   [UP_LAYER_KUBE] = "kube",	    [UP_LAYER_USER] = "user",
	[UP_LAYER_AGENT] = "agent", [UP_LAYER_GENERIC] = "generic", [UP_LAYER_SESSION] = "session",
};

static const char *const method_names[] = {
#define XX(m) #m,
	UP_HTTP_METHODS(XX)
#undef XX
};

const char *up_rule_layer_name(enum up_rule_layer l)
{
	return l >= 0 && l < _UP_LAYER_MAX ? layer_names[l] : NULL;
}

enum up_rule_layer up_rule_layer_from_name(const char *name)
{
	for (int i = 0; name && i < _UP_LAYER_MAX; i++)
		if (streq(name, layer_names[i]))
			return (enum up_rule_layer)i;
	return _UP_LAYER_INVALID;
}

int up_method_bit(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(method_names); i++)
		if (streq(name, method_names[i]))
			return (int)i;
	return -EINVAL;
}

const char *up_method_name(unsigned bit)
{
	return bit < ELEMENTSOF(method_names) ? method_names[bit] : NULL;
}

bool up_header_name_valid(const char *name)
{
	if (!*name)
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+-.^_`|~", *p))
			return false;
	return true;
}

/*
 * As the addon compiles them with Python's re: host regexes re.ASCII | re.IGNORECASE,
 * path regexes re.ASCII. PCRE2 without UTF or UCP has ASCII classes and case folding.
 */
static pcre2_code *compile(const char *re, bool caseless, int *err, PCRE2_SIZE *off)
{
	return pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, caseless ? PCRE2_CASELESS : 0,
			     err, off, NULL);
}

int up_regex_check(const char *re, char *why, size_t why_len)
{
	PCRE2_UCHAR buf[200];
	PCRE2_SIZE off;
	pcre2_code *code;
	int err;

	code = compile(re, false, &err, &off);
	if (code) {
		pcre2_code_free(code);
		return 0;
	}
	(void)pcre2_get_error_message(err, buf, sizeof(buf));
	(void)snprintf(why, why_len, "%s at offset %zu", (const char *)buf, (size_t)off);
	return -EINVAL;
}

int up_cidr_normalize(const char *in, char *out, size_t out_len)
{
	unsigned char a[16];
	char addr[INET6_ADDRSTRLEN + 1], txt[INET6_ADDRSTRLEN];
	const char *slash = strchr(in, '/');
	size_t alen = slash ? (size_t)(slash - in) : strlen(in);
	int fam, bits, max;
	char *end;

	if (alen == 0 || alen >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, in, alen);
	addr[alen] = '\0';
	fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
	max = fam == AF_INET ? 32 : 128;
	if (inet_pton(fam, addr, a) != 1)
		return -EINVAL;
	bits = max;
	if (slash) {
		if (!isdigit((unsigned char)slash[1]))
			return -EINVAL;
		errno = 0;
		long l = strtol(slash + 1, &end, 10);
		if (*end || errno || l < 0 || l > max)
			return -EINVAL;
		bits = (int)l;
	}
	for (int i = 0; i < max / 8; i++) {
		int keep = bits - i * 8;
		a[i] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (unsigned char)(0xff << (8 - keep));
	}
	if (!inet_ntop(fam, a, txt, sizeof(txt)))
		return -EINVAL;
	return snprintf(out, out_len, "%s/%d", txt, bits) < (int)out_len ? 0 : -ENOBUFS;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void codes_free(void *codes, size_t n)
{
	pcre2_code **c = codes;

	for (size_t i = 0; c && i < n; i++)
		pcre2_code_free(c[i]);
	free(c);
}

void up_rule_done(struct up_rule *r)
{
	free(r->name);
	free(r->source);
	codes_free(r->host_re, r->n_hosts);
	codes_free(r->path_re, r->n_paths);
	strv_free(r->hosts, r->n_hosts);
	strv_free(r->paths, r->n_paths);
	strv_free(r->cidrs, r->n_cidrs);
	strv_free(r->remove, r->n_remove);
	strv_free(r->aws_actions, r->n_aws_actions);
	for (size_t i = 0; i < r->n_headers; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
		if (r->headers[i].resolved)
			explicit_bzero(r->headers[i].resolved, strlen(r->headers[i].resolved));
		free(r->headers[i].resolved);
	}
	free(r->headers);
	*r = (struct up_rule){0};
}

bool up_aws_action_valid(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n <= UP_MAX_AWS_ACTION_LEN &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") == n;
}

static int compile_all(char **v, size_t n, bool caseless, void **out)
{
	pcre2_code **codes;
	PCRE2_SIZE off;
	int err;

	if (n == 0)
		return 0;
	codes = calloc(n, sizeof(*codes));
	if (!codes)
		return -ENOMEM;
	*out = codes;
	for (size_t i = 0; i < n; i++) {
		codes[i] = compile(v[i], caseless, &err, &off);
		if (!codes[i])
			return err == PCRE2_ERROR_NOMEMORY ? -ENOMEM : -EINVAL;
	}
	return 0;
}

struct up_ruleset *up_ruleset_new(void)
{
	return calloc(1, sizeof(struct up_ruleset));
}

struct up_ruleset *up_ruleset_free(struct up_ruleset *rs)
{
	if (!rs)
		return NULL;
	for (size_t i = 0; i < rs->n; i++)
		up_rule_done(&rs->rules[i]);
	up_free_all(rs->rules, rs);
	return NULL;
}

UP_DEFINE_FREEP(struct up_ruleset, up_ruleset_free)

int up_ruleset_take(struct up_ruleset *rs, struct up_rule *r)
{
	int ret;

	if (rs->n >= UP_MAX_RULES) {
		up_rule_done(r);
		return -E2BIG;
	}
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 16;
		struct up_rule *nr = realloc(rs->rules, cap * sizeof(*nr));
		if (!nr) {
			up_rule_done(r);
			return -ENOMEM;
		}
		rs->rules = nr;
		rs->cap = cap;
	}
	ret = compile_all(r->hosts, r->n_hosts, true, &r->host_re);
	if (ret >= 0)
		ret = compile_all(r->paths, r->n_paths, false, &r->path_re);
	if (ret < 0) {
		up_rule_done(r);
		return ret;
	}
	rs->rules[rs->n++] = *r;
	*r = (struct up_rule){0};
	return 0;
}

void up_ruleset_set_replace_defaults(struct up_ruleset *rs)
{
	rs->replace_defaults = true;
}

bool up_ruleset_replace_defaults(const struct up_ruleset *rs)
{
	return rs->replace_defaults;
}

size_t up_ruleset_count(const struct up_ruleset *rs)
{
	return rs->n;
}

struct up_rule *up_ruleset_get(const struct up_ruleset *rs, size_t i)
{
	return i < rs->n ? &rs->rules[i] : NULL;
}

int up_rule_header_set_value(struct up_rule_header *h, const char *value)
{
	char *v = strdup(value);

	if (!v)
		return -ENOMEM;
	if (h->resolved)
		explicit_bzero(h->resolved, strlen(h->resolved));
	free(h->resolved);
	h->resolved = v;
	return 0;
}

int up_rule_header_replace(struct up_rule_header *h, const char *value)
{
	char *v = strdup(value);
	int r;

	if (!v)
		return -ENOMEM;
	r = up_rule_header_set_value(h, value);
	if (r < 0) {
		free(v);
		return r;
	}
	if (h->value)
		explicit_bzero(h->value, strlen(h->value));
	free(h->value);
	h->value = v;
	return 0;
}

static int add_generic(struct up_ruleset *rs)
{
	struct up_rule r = {
		.layer = UP_LAYER_GENERIC,
		.name = strdup("default-readonly"),
		.source = strdup("builtin:generic"),
		.hosts = calloc(1, sizeof(char *)),
		.methods = 1u << up_method_bit("GET") | 1u << up_method_bit("HEAD") |
			   1u << up_method_bit("OPTIONS"),
	};

	if (!r.name || !r.source || !r.hosts || !(r.hosts[0] = strdup(".*"))) {
		r.n_hosts = r.hosts && r.hosts[0] ? 1 : 0;
		up_rule_done(&r);
		return -ENOMEM;
	}
	r.n_hosts = 1;
	return up_ruleset_take(rs, &r);
}

static bool dropped(enum up_rule_layer l)
{
	return l == UP_LAYER_AUTH || l == UP_LAYER_AGENT || l == UP_LAYER_GENERIC;
}

int up_ruleset_finish(struct up_ruleset *rs, bool no_defaults, json_t *problems)
{
	bool keep_defaults = !no_defaults && !rs->replace_defaults;
	struct up_rule *sorted;
	size_t n = 0;
	int r;

	if (rs->finished)
		return -EALREADY;
	rs->finished = true;
	if (keep_defaults) {
		r = add_generic(rs);
		if (r < 0)
			return r;
	}
	sorted = malloc((rs->n ? rs->n : 1) * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	/* A stable pass per layer keeps each layer's own order. */
	for (int l = 0; l < _UP_LAYER_MAX; l++)
		for (size_t i = 0; i < rs->n; i++) {
			if (rs->rules[i].layer != (enum up_rule_layer)l)
				continue;
			if (!keep_defaults && dropped(rs->rules[i].layer))
				up_rule_done(&rs->rules[i]);
			else
				sorted[n++] = rs->rules[i];
		}
	free(rs->rules);
	rs->rules = sorted;
	rs->n = rs->cap = n;
	for (size_t i = 0; i < n; i++)
		if (!rs->rules[i].name && asprintf(&rs->rules[i].name, "<rule[%zu]>", i) < 0)
			return -ENOMEM;
	if (n == 0) {
		(void)json_array_append_new(
			problems, json_string("no rules loaded; uplink would deny everything. Give "
					      "a rules file with --rules, "
					      "or drop --no-default-rules / replace_defaults"));
		return -ENOENT;
	}
	return 0;
}

static bool fullmatch(void *codes, size_t i, const char *s, size_t len)
{
	pcre2_code *code = ((pcre2_code **)codes)[i];
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
	int rc;

	if (!md)
		return false;
	rc = pcre2_match(code, (PCRE2_SPTR)s, len, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL);
	pcre2_match_data_free(md);
	return rc >= 0;
}

static bool any_match(void *codes, size_t n, const char *s)
{
	size_t len = strlen(s);

	for (size_t i = 0; i < n; i++)
		if (fullmatch(codes, i, s, len))
			return true;
	return false;
}

/* Lowercase, without the brackets of an IPv6 literal; false if too long. */
static bool normalize_host(const char *in, char *out, size_t out_len)
{
	size_t n = strlen(in);

	if (n >= out_len)
		return false;
	if (n >= 2 && in[0] == '[' && in[n - 1] == ']') {
		in++;
		n -= 2;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)in[i]);
	out[n] = '\0';
	return true;
}

bool up_path_unsafe(const char *path)
{
	size_t end = strcspn(path, "?");

	for (size_t i = 0; i < end; i++) {
		char c1, c2;

		if (path[i] == '\\')
			return true;
		if (path[i] != '%' || i + 2 >= end)
			continue;
		c1 = path[i + 1];
		c2 = (char)tolower((unsigned char)path[i + 2]);
		if ((c1 == '2' && (c2 == 'e' || c2 == 'f')) || (c1 == '5' && c2 == 'c'))
			return true;
	}
	/* a dot segment, also before a ';' parameter */
	for (size_t i = 0; i <= end;) {
		size_t seg = strcspn(path + i, "/?"), name = strcspn(path + i, "/?;");

		if (name > seg)
			name = seg;
		if ((name == 1 && path[i] == '.') ||
		    (name == 2 && path[i] == '.' && path[i + 1] == '.'))
			return true;
		i += seg + 1;
	}
	return false;
}

static bool reflects(const char *method)
{
	return !strcasecmp(method, "TRACE") || !strcasecmp(method, "TRACK");
}

/* Whether R lets a method-override header say VALUE (trimmed, ASCII upper-cased). */
static bool override_ok(const struct up_rule *r, const char *value)
{
	char m[16];
	size_t n;
	int bit;

	value += strspn(value, " \t");
	n = strlen(value);
	while (n && (value[n - 1] == ' ' || value[n - 1] == '\t'))
		n--;
	if (n >= sizeof(m))
		return !r->methods;
	for (size_t i = 0; i < n; i++)
		m[i] = (char)toupper((unsigned char)value[i]);
	m[n] = '\0';
	if (r->n_headers && reflects(m))
		return false;
	bit = up_method_bit(m);
	return !r->methods || (bit >= 0 && (r->methods & (1u << bit)));
}

/* Whether R takes METHOD at PATH with these method-override values (host aside). */
static bool rule_takes(const struct up_rule *r, const char *method, const char *path,
		       const char *const *overrides)
{
	int bit = up_method_bit(method);

	for (size_t i = 0; overrides && overrides[i]; i++)
		if (!override_ok(r, overrides[i]))
			return false;
	if (r->n_headers && reflects(method))
		return false; /* an origin answering TRACE would echo the credential */
	if (r->methods && (bit < 0 || !(r->methods & (1u << bit))))
		return false;
	return !r->paths || (!up_path_unsafe(path) && any_match(r->path_re, r->n_paths, path));
}

/* up_ruleset_match_overrides() for a host h normalize_host() has already given. */
static const struct up_rule *match_overrides(const struct up_ruleset *rs, const char *method,
					     const char *h, unsigned port, const char *path,
					     const char *const *overrides)
{
	for (size_t i = 0; i < rs->n; i++) {
		const struct up_rule *r = &rs->rules[i];

		if (r->l4 || (port && r->port && r->port != port) ||
		    !rule_takes(r, method, path, overrides))
			continue;
		if (!any_match(r->host_re, r->n_hosts, h))
			continue;
		return r;
	}
	return NULL;
}

const struct up_rule *up_ruleset_match_overrides(const struct up_ruleset *rs, const char *method,
						 const char *host, unsigned port, const char *path,
						 const char *const *overrides)
{
	char h[256];

	if (!normalize_host(host, h, sizeof(h)))
		return NULL;
	return match_overrides(rs, method, h, port, path, overrides);
}

const struct up_rule *up_ruleset_match_port(const struct up_ruleset *rs, const char *method,
					    const char *host, unsigned port, const char *path)
{
	return up_ruleset_match_overrides(rs, method, host, port, path, NULL);
}

const struct up_rule *up_ruleset_match(const struct up_ruleset *rs, const char *method,
				       const char *host, const char *path)
{
	return up_ruleset_match_overrides(rs, method, host, 0, path, NULL);
}

/* A host regex that can only match AWS names: it ends in \.amazonaws\.com, with no '|'. */
static bool names_aws(const char *re)
{
	static const char suffix[] = "\\.amazonaws\\.com";
	size_t n = strlen(re), k = sizeof(suffix) - 1;

	if (n && re[n - 1] == '$')
		n--;
	return !strchr(re, '|') && n > k && !memcmp(re + n - k, suffix, k);
}

bool up_rule_aws_sign(const struct up_rule *r)
{
	if (r->l4 || r->layer == UP_LAYER_GENERIC || r->n_hosts == 0)
		return false;
	for (size_t i = 0; i < r->n_hosts; i++)
		if (!names_aws(r->hosts[i]))
			return false;
	return true;
}

static bool in_cidr(const char *cidr, int fam, const unsigned char *a)
{
	unsigned char net[16];
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(cidr, '/');
	size_t alen = (size_t)(slash - cidr);
	int bits = atoi(slash + 1);

	if (alen >= sizeof(addr))
		return false;
	memcpy(addr, cidr, alen);
	addr[alen] = '\0';
	if (inet_pton(fam, addr, net) != 1)
		return false; /* the other family */
	for (int i = 0; bits > 0; i++, bits -= 8) {
		unsigned char mask = bits >= 8 ? 0xff : (unsigned char)(0xff << (8 - bits));
		if ((a[i] & mask) != net[i])
			return false;
	}
	return true;
}

/* up_ruleset_match_connect() for a host normalize_host() has already given. */
static const struct up_rule *match_connect(const struct up_ruleset *rs, const char *t)
{
	unsigned char a[16];
	int fam = 0;
	size_t best;

	if (inet_pton(AF_INET, t, a) == 1)
		fam = AF_INET;
	else if (inet_pton(AF_INET6, t, a) == 1)
		fam = AF_INET6;
	/* The first rule whose host regex takes the name; an L4 host regex never takes an IP. */
	for (best = 0; best < rs->n; best++) {
		const struct up_rule *r = &rs->rules[best];
		if ((!fam || !r->l4) && any_match(r->host_re, r->n_hosts, t))
			break;
	}
	/* An earlier L4 rule whose CIDR holds the IP wins over it. */
	for (size_t i = 0; fam && i < best; i++)
		for (size_t j = 0; rs->rules[i].l4 && j < rs->rules[i].n_cidrs; j++)
			if (in_cidr(rs->rules[i].cidrs[j], fam, a))
				return &rs->rules[i];
	return best < rs->n ? &rs->rules[best] : NULL;
}

const struct up_rule *up_ruleset_match_connect(const struct up_ruleset *rs, const char *target)
{
	char t[256];

	return normalize_host(target, t, sizeof(t)) ? match_connect(rs, t) : NULL;
}

enum up_decision up_ruleset_evaluate(const struct up_ruleset *rs, const char *method, bool https,
				     const char *host, unsigned port, const char *path,
				     const struct up_rule **rule)
{
	return up_ruleset_evaluate_overrides(rs, method, https, host, port, path, NULL, rule);
}

enum up_decision up_ruleset_evaluate_overrides(const struct up_ruleset *rs, const char *method,
					       bool https, const char *host, unsigned port,
					       const char *path, const char *const *overrides,
					       const struct up_rule **rule)
{
	char h[256];

	*rule = NULL;
	if (!normalize_host(host, h, sizeof(h)))
		return UP_DECISION_DENY;
	if (https) {
		const struct up_rule *first = match_connect(rs, h); /* h is normalized */
		if (!first)
			return UP_DECISION_DENY;
		if (first->l4) {
			*rule = first;
			return UP_DECISION_L4;
		}
	}
	*rule = match_overrides(rs, method, h, port ? port : https ? 443 : 80, path, overrides);
	if (*rule && !https && (*rule)->n_headers)
		*rule = NULL; /* a credential never goes out in clear: the addon denies it too */
	return *rule ? UP_DECISION_ALLOW : UP_DECISION_DENY;
}
