/* SPDX-License-Identifier: Apache-2.0 */
/* The kubeconfig parser (YAML included) on arbitrary text, for the current context and a named one. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct up_kube_context *c = NULL;
	char err[1024];

	if (up_kubeconfig_load_text((const char *)data, size, "", &c, err, sizeof(err)) == 0) {
		if (!c->server || strncmp(c->server, "http", 4) != 0)
			__builtin_trap();
		c = up_kube_context_free(c);
	} else if (strlen(err) == 0) {
		__builtin_trap(); /* every failure says why */
	}
	if (up_kubeconfig_load_text((const char *)data, size, "x", &c, err, sizeof(err)) == 0)
		c = up_kube_context_free(c);
	return 0;
}
