/* SPDX-License-Identifier: Apache-2.0 */
/* The API's paths: the kinds uplinkd uses, their paths, and query strings (kube.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kube.h"

static const struct up_kube_resource resources[] = {
	{"Namespace", "v1", "namespaces", false},
	{"Pod", "v1", "pods", true},
	{"Secret", "v1", "secrets", true},
	{"ConfigMap", "v1", "configmaps", true},
	{"Service", "v1", "services", true},
	{"Event", "v1", "events", true},
	{"ServiceAccount", "v1", "serviceaccounts", true},
	{"Deployment", "apps/v1", "deployments", true},
	{"NetworkPolicy", "networking.k8s.io/v1", "networkpolicies", true},
	{"RuntimeClass", "node.k8s.io/v1", "runtimeclasses", false},
	{0},
};

const struct up_kube_resource *up_kube_resource_find(const char *kind)
{
	for (const struct up_kube_resource *r = resources; r->kind; r++)
		if (strcmp(r->kind, kind) == 0)
			return r;
	return NULL;
}

/* Names and namespaces are DNS labels or subdomains: nothing that could bend a path. */
static bool safe_segment(const char *s)
{
	return s && *s && strlen(s) <= 253 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == strlen(s) &&
	       strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int up_kube_path(char *buf, size_t len, const char *kind, const char *ns, const char *name)
{
	const struct up_kube_resource *r = up_kube_resource_find(kind);
	int n;

	if (!r || (ns && !safe_segment(ns)) || (name && !safe_segment(name)))
		return -EINVAL;
	n = snprintf(buf, len, "%s%s%s%s/%s%s%s", strchr(r->api_version, '/') ? "/apis/" : "/api/",
		     r->api_version, r->namespaced && ns ? "/namespaces/" : "",
		     r->namespaced && ns ? ns : "", r->plural, name ? "/" : "", name ? name : "");
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

static int url_encode(char *out, size_t len, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
		if (o + (plain ? 1 : 3) >= len)
			return -ENAMETOOLONG;
		if (plain) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return (int)o;
}

int up_kube_query(char *buf, size_t len, const char *path, ...)
{
	size_t used;
	const char *key;
	bool first = !strchr(path, '?');
	va_list ap;
	int r = 0;

	if (strlen(path) >= len)
		return -ENAMETOOLONG;
	memcpy(buf, path, strlen(path) + 1);
	used = strlen(buf);
	va_start(ap, path);
	while ((key = va_arg(ap, const char *))) {
		const char *val = va_arg(ap, const char *);
		if (!val)
			continue;
		int n = snprintf(buf + used, len - used, "%c%s=", first ? '?' : '&', key);
		if (n < 0 || (size_t)n >= len - used) {
			r = -ENAMETOOLONG;
			break;
		}
		used += (size_t)n;
		n = url_encode(buf + used, len - used, val);
		if (n < 0) {
			r = n;
			break;
		}
		used += (size_t)n;
		first = false;
	}
	va_end(ap);
	return r;
}
