/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy's JSON: rendering a rule set, reading one back, and splitting URLs. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "placeholders.h"
#include "rules-private.h"

static json_t *strv_json(char **v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0)
			return json_decref(a), NULL;
	return a;
}

static json_t *methods_json(unsigned mask)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && up_method_name(i); i++)
		if ((mask & (1u << i)) &&
		    json_array_append_new(a, json_string(up_method_name(i))) < 0)
			return json_decref(a), NULL;
	return a;
}

static json_t *headers_json(const struct up_rule *r, bool show_secrets)
{
	json_t *h = json_object();

	for (size_t i = 0; h && i < r->n_headers; i++) {
		const struct up_rule_header *x = &r->headers[i];
		const char *v = !x->resolved ? x->value : show_secrets ? x->resolved : UP_REDACTED;
		if (json_object_set_new(h, x->name, json_string(v)) < 0)
			return json_decref(h), NULL;
	}
	return h;
}

/* Optional keys are left out when absent: no "methods" = any method, no "paths" = any path. */
static json_t *rule_json(const struct up_rule *r, bool show_secrets)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "name", r->name, "layer",
			      up_rule_layer_name(r->layer), "source", r->source ? r->source : "");
	int ret = o ? 0 : -1;

	if (ret == 0 && r->l4)
		ret = json_object_set_new(o, "l4_forward", json_true());
	if (ret == 0 && (r->n_hosts || !r->l4))
		ret = json_object_set_new(o, "hosts", strv_json(r->hosts, r->n_hosts));
	if (ret == 0 && r->l4 && r->n_cidrs)
		ret = json_object_set_new(o, "cidrs", strv_json(r->cidrs, r->n_cidrs));
	if (ret == 0 && !r->l4 && r->methods)
		ret = json_object_set_new(o, "methods", methods_json(r->methods));
	if (ret == 0 && !r->l4 && r->paths)
		ret = json_object_set_new(o, "paths", strv_json(r->paths, r->n_paths));
	if (ret == 0 && !r->l4 && r->port)
		ret = json_object_set_new(o, "port", json_integer(r->port));
	if (ret == 0 && up_rule_aws_sign(r))
		ret = json_object_set_new(o, "aws_sign", json_true());
	if (ret == 0 && r->n_aws_actions)
		ret = json_object_set_new(o, "aws_allow_credential_actions",
					  strv_json(r->aws_actions, r->n_aws_actions));
	if (ret == 0 && !r->l4 && (r->n_headers || r->n_remove)) {
		json_t *inject = json_object();
		ret = inject ? json_object_set_new(o, "inject", inject) : -1;
		if (ret == 0 && r->n_headers)
			ret = json_object_set_new(inject, "headers", headers_json(r, show_secrets));
		if (ret == 0 && r->n_remove)
			ret = json_object_set_new(inject, "remove",
						  strv_json(r->remove, r->n_remove));
	}
	if (ret < 0)
		return json_decref(o), NULL;
	return o;
}

json_t *up_ruleset_render(const struct up_ruleset *rs, bool show_secrets)
{
	json_t *rules = json_array();

	for (size_t i = 0; rules && i < up_ruleset_count(rs); i++)
		if (json_array_append_new(rules, rule_json(up_ruleset_get(rs, i), show_secrets)) <
		    0) {
			json_decref(rules);
			return NULL;
		}
	/* json_pack's "o" consumes the array even when it fails */
	return rules ? json_pack("{s:i, s:o}", "version", UP_RULES_FORMAT_VERSION, "rules", rules)
		     : NULL;
}

/* Reading the format back (test vectors, round trips). */

/* A list of regexes, of CIDRs (`cidr`) or, with `plain`, of AWS action names. */
static int json_strv_kind(const json_t *a, char ***out, size_t *n, bool cidr, bool plain)
{
	size_t i;
	json_t *v;
	char norm[64];

	if (!json_is_array(a) || json_array_size(a) > UP_MAX_RULE_ITEMS)
		return -EINVAL;
	*out = calloc(json_array_size(a) + 1, sizeof(char *));
	if (!*out)
		return -ENOMEM;
	json_array_foreach (a, i, v) {
		const char *s = json_string_value(v);
		char why[256];
		if (!s || (plain  ? !up_aws_action_valid(s)
			   : cidr ? up_cidr_normalize(s, norm, sizeof(norm)) < 0
				  : up_regex_check(s, why, sizeof(why)) < 0))
			return -EINVAL;
		(*out)[*n] = strdup(cidr ? norm : s);
		if (!(*out)[*n])
			return -ENOMEM;
		(*n)++;
	}
	return 0;
}

static int json_strv(const json_t *a, char ***out, size_t *n, bool cidr)
{
	return json_strv_kind(a, out, n, cidr, false);
}

/* The header names a rule removes: a JSON array of valid names. */
static int json_rule_removes(const json_t *rm, struct up_rule *r)
{
	size_t i;
	json_t *v;

	if (!(r->remove = calloc(json_array_size(rm) + 1, sizeof(char *))))
		return -ENOMEM;
	json_array_foreach (rm, i, v) {
		if (!json_is_string(v) || !up_header_name_valid(json_string_value(v)))
			return -EINVAL;
		if (!(r->remove[r->n_remove] = strdup(json_string_value(v))))
			return -ENOMEM;
		r->n_remove++;
	}
	return 0;
}

static int json_rule_headers(const json_t *inject, struct up_rule *r)
{
	const json_t *h = json_object_get(inject, "headers"),
		     *rm = json_object_get(inject, "remove");
	const char *k;
	json_t *v;
	int e;

	if (!inject)
		return 0;
	if ((h && !json_is_object(h)) || (!h && !rm) || (rm && !json_is_array(rm)))
		return -EINVAL;
	if (rm && (e = json_rule_removes(rm, r)) < 0)
		return e;
	if (!h)
		return 0;
	r->headers = calloc(json_object_size(h) + 1, sizeof(*r->headers));
	if (!r->headers)
		return -ENOMEM;
	json_object_foreach ((json_t *)h, k, v) {
		struct up_rule_header *x = &r->headers[r->n_headers];
		if (!json_is_string(v) || !up_header_name_valid(k))
			return -EINVAL;
		x->name = strdup(k);
		x->value = strdup(json_string_value(v));
		x->resolved = strdup(json_string_value(v));
		r->n_headers++;
		if (!x->name || !x->value || !x->resolved)
			return -ENOMEM;
	}
	return 0;
}

static int json_rule(const json_t *o, struct up_rule *r)
{
	bool l4 = json_is_true(json_object_get(o, "l4_forward"));
	const json_t *m = json_object_get(o, "methods"), *v;
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *layer = json_string_value(json_object_get(o, "layer"));
	const char *source = json_string_value(json_object_get(o, "source"));
	size_t i;
	int ret;

	r->l4 = l4;
	r->layer = layer ? up_rule_layer_from_name(layer) : UP_LAYER_USER;
	if (!json_is_object(o) || r->layer == _UP_LAYER_INVALID)
		return -EINVAL;
	r->name = name ? strdup(name) : NULL;
	r->source = strdup(source ? source : "json");
	if ((name && !r->name) || !r->source)
		return -ENOMEM;
	ret = json_object_get(o, "hosts")
		      ? json_strv(json_object_get(o, "hosts"), &r->hosts, &r->n_hosts, false)
		      : 0;
	if (ret >= 0 && json_object_get(o, "paths"))
		ret = json_strv(json_object_get(o, "paths"), &r->paths, &r->n_paths, false);
	if (ret >= 0 && json_object_get(o, "cidrs"))
		ret = json_strv(json_object_get(o, "cidrs"), &r->cidrs, &r->n_cidrs, true);
	if (ret >= 0 && json_object_get(o, "aws_allow_credential_actions"))
		ret = json_strv_kind(json_object_get(o, "aws_allow_credential_actions"),
				     &r->aws_actions, &r->n_aws_actions, false, true);
	if (ret >= 0)
		ret = json_rule_headers(json_object_get(o, "inject"), r);
	if (ret < 0)
		return ret;
	if ((v = json_object_get(o, "port"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 65535)
			return -EINVAL;
		r->port = (unsigned)json_integer_value(v);
	}
	if (m && !json_is_array(m))
		return -EINVAL;
	json_array_foreach (m, i, v) {
		int bit = json_is_string(v) ? up_method_bit(json_string_value(v)) : -EINVAL;
		if (bit < 0)
			return -EINVAL;
		r->methods |= 1u << bit;
	}
	return 0;
}

static int load_list(struct up_ruleset *rs, const json_t *a, const char *key, json_t *problems)
{
	size_t i;
	json_t *o;
	int r;

	if (a && !json_is_array(a)) {
		(void)json_array_append_new(problems, json_sprintf("'%s' must be an array", key));
		return -EINVAL;
	}
	json_array_foreach (a, i, o) {
		struct up_rule rule = {0};
		r = json_rule(o, &rule);
		if (r < 0) {
			up_rule_done(&rule);
			(void)json_array_append_new(
				problems, json_sprintf("%s[%zu]: not a valid rule", key, i));
			return r;
		}
		r = up_ruleset_take(rs, &rule);
		if (r < 0)
			return r;
	}
	return 0;
}

int up_ruleset_load_json(struct up_ruleset *rs, const json_t *doc, json_t *problems)
{
	int r;

	if (!json_is_object(doc)) {
		(void)json_array_append_new(problems,
					    json_string("the rules document must be an object"));
		return -EINVAL;
	}
	if (json_integer_value(json_object_get(doc, "version")) != UP_RULES_FORMAT_VERSION) {
		(void)json_array_append_new(problems, json_sprintf("the rules document must have "
								   "\"version\": %d",
								   UP_RULES_FORMAT_VERSION));
		return -EINVAL;
	}
	r = load_list(rs, json_object_get(doc, "rules"), "rules", problems);
	return r;
}

/* Where an http(s) URL's host starts (after any user@) and its authority ends; NULL when
 * the scheme is neither. */
static const char *url_host(const char *url, bool *https, const char **end)
{
	const char *a;

	*https = startswith(url, "https://");
	a = *https ? url + 8 : startswith(url, "http://") ? url + 7 : NULL;
	if (!a)
		return NULL;
	*end = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(*end - a)))
		a = (const char *)memchr(a, '@', (size_t)(*end - a)) + 1;
	return a;
}

int up_url_split(const char *url, bool *https, char *host, size_t host_len, char *path,
		 size_t path_len, char *why, size_t why_len)
{
	const char *end, *p = url_host(url, https, &end);
	size_t n;

	if (!p) {
		(void)snprintf(why, why_len, "the URL must start with http:// or https://");
		return -EINVAL;
	}
	if (*p == '[') {
		const char *rb = memchr(p, ']', (size_t)(end - p));
		if (!rb) {
			(void)snprintf(why, why_len, "the URL's IPv6 host lacks its ']'");
			return -EINVAL;
		}
		n = (size_t)(rb - p - 1);
		p++;
	} else {
		const char *colon = memchr(p, ':', (size_t)(end - p));
		n = (size_t)((colon ? colon : end) - p);
	}
	if (n == 0 || n >= host_len) {
		(void)snprintf(why, why_len,
			       n ? "the URL's host is too long" : "the URL has no host");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		host[i] = (char)tolower((unsigned char)p[i]);
	host[n] = '\0';
	n = strcspn(end, "#");
	if (n + 2 > path_len) {
		(void)snprintf(why, why_len, "the URL's path is too long");
		return -EINVAL;
	}
	(void)snprintf(path, path_len, "%s%.*s", *end == '/' ? "" : "/", (int)n, end);
	return 0;
}

int up_url_port(const char *url)
{
	bool https;
	const char *end, *colon, *a = url_host(url, &https, &end);
	char *e;
	long port;

	if (!a)
		return -EINVAL;
	if (*a == '[') {
		const char *rb = memchr(a, ']', (size_t)(end - a));
		colon = rb && rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(a, ':', (size_t)(end - a));
	}
	if (!colon)
		return https ? 443 : 80;
	errno = 0;
	port = strtol(colon + 1, &e, 10);
	if (e != end || colon + 1 == end || !isdigit((unsigned char)colon[1]) || errno ||
	    port < 1 || port > 65535)
		return -EINVAL;
	return (int)port;
}
