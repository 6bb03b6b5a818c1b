/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubeconfig parser (YAML included) on arbitrary text, for the current context and a named
 * one; and the --kube-context path: the lenient reading, the refusals, the agent's kubeconfig
 * and the kube rules.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube-expose.h"
#include "kubeconfig.h"
#include "rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct up_kube_context *c = NULL;
	char err[1024];

	if (up_kubeconfig_from_text((const char *)data, size, "", false, &c, err, sizeof(err)) ==
	    0) {
		if (!c->server || strncmp(c->server, "http", 4) != 0)
			__builtin_trap();
		c = up_kube_context_free(c);
	} else if (strlen(err) == 0) {
		__builtin_trap(); /* every failure says why */
	}
	if (up_kubeconfig_from_text((const char *)data, size, "x", false, &c, err, sizeof(err)) ==
	    0)
		c = up_kube_context_free(c);
	if (up_kubeconfig_from_text((const char *)data, size, "x", true, &c, err, sizeof(err)) ==
	    0) {
		struct up_kube_exposed *k = up_kube_exposed_new();
		struct up_ruleset *rs = up_ruleset_new();
		if (k && rs && up_kube_expose_add(k, c, err, sizeof(err)) == 0) {
			json_decref(up_kube_expose_kubeconfig(k, "-----BEGIN CERTIFICATE-----\n"));
			if (up_kube_expose_rules(k, rs) < 0)
				__builtin_trap(); /* an exposed context always makes a valid rule */
		} else if (k && rs && strlen(err) == 0) {
			__builtin_trap();
		}
		up_ruleset_free(rs);
		up_kube_exposed_free(k);
		c = up_kube_context_free(c);
	}
	return 0;
}
