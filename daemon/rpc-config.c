/* SPDX-License-Identifier: Apache-2.0 */
/* config.show: the merged config files for a folder, and where each value came from. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config-file.h"
#include "jsonrpc.h"
#include "manager.h"
#include "rpc.h"
#include "session-private.h"

struct show_params {
	const char *cwd;
};

static const struct up_param show_params[] = {
	{"cwd", UP_PARAM_STRING, offsetof(struct show_params, cwd), UP_PARAM_MANDATORY, NULL},
	{0},
};

static void shown(struct up_request *req, struct up_config *c, void *ud)
{
	json_t *out = up_config_show(c, NULL);

	(void)ud;
	if (out)
		up_request_reply(req, out);
	else
		up_request_error(req, UP_ERR_INTERNAL_ERROR,
				 "out of memory reading the config files");
}

static int rpc_show(struct up_request *req, void *params, void *userdata)
{
	const struct show_params *p = params;

	if (p->cwd[0] != '/' || strstr(p->cwd, "/../") || strstr(p->cwd, "/./")) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS,
				  "the folder '%s' must be an absolute, "
				  "normalised path",
				  p->cwd);
		return 0;
	}
	return up_config_show_for(up_manager_loop(userdata), req,
				  up_manager_sessions(userdata)->home, p->cwd, shown);
}

static const struct up_method config_methods[] = {
	{"config.show", show_params, sizeof(struct show_params), rpc_show, 0},
	{0},
};

int up_rpc_config_register(struct up_rpc *rpc, struct up_manager *m)
{
	return up_rpc_register(rpc, config_methods, m);
}
