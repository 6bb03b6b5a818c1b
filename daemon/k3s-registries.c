/* SPDX-License-Identifier: Apache-2.0 */
#include "k3s-registries.h"

#include <errno.h>
#include <string.h>

#include "bounds.h"
#include "fileio.h"
#include "knobs.h"
#include "util.h"
#include "yaml-json.h"

bool up_k3s_is_local(const char *server)
{
	return server &&
	       (streq(server, "https://127.0.0.1:6443") || streq(server, "https://localhost:6443"));
}

void up_k3s_registries_check(const char *server, struct up_k3s_check *c)
{
	const char *forced = up_knobs()->k3s_registries;
	_cleanup_(freep) char *text = NULL;
	json_t *doc = NULL;
	size_t n;
	int r;

	*c = (struct up_k3s_check){.path = forced && *forced ? forced : UP_K3S_REGISTRIES_PATH};
	if (!(forced && *forced) && !up_k3s_is_local(server)) {
		c->verdict = UP_K3S_SKIPPED;
		return;
	}
	r = up_read_file(c->path, UP_MAX_YAML_SIZE, &text, &n);
	if (r < 0) {
		c->verdict = r == -ENOENT ? UP_K3S_MISSING : UP_K3S_UNREADABLE;
		c->err = r;
		return;
	}
	if (up_yaml_load(text, n, &doc, c->yaml_error, sizeof(c->yaml_error)) < 0) {
		c->verdict = UP_K3S_INVALID;
		return;
	}
	c->verdict = json_object_get(json_object_get(doc, "mirrors"), "localhost:5000")
			     ? UP_K3S_OK
			     : UP_K3S_NO_MIRROR;
	json_decref(doc);
}
