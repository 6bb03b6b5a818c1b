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
	{ "cwd", UP_PARAM_STRING, offsetof(struct show_params, cwd), UP_PARAM_MANDATORY, NULL },
	{ 0 },
};

struct show {
	struct up_request *req;
	uv_work_t work;
	char *home, *config_home, *cwd;
	struct up_config c;
	json_t *problems;
	int r;
	bool cancelled;
};

static void show_free(struct show *s)
{
	up_config_done(&s->c);
	json_decref(s->problems);
	free(s->home);
	free(s->config_home);
	free(s->cwd);
	free(s);
}

static void show_cancel(struct up_request *req, void *ud)
{
	struct show *s = ud;

	(void)req;
	s->cancelled = true;
	s->req = NULL;
}

static void show_work(uv_work_t *w)
{
	struct show *s = w->data;

	s->r = up_config_load(&s->c, s->home, s->config_home, s->cwd, s->problems);
}

static void show_after(uv_work_t *w, int status)
{
	struct show *s = w->data;
	json_t *out;

	(void)status;
	if (s->cancelled) {
		show_free(s);
		return;
	}
	up_request_set_cancel(s->req, NULL, NULL);
	if (s->r == -ENOMEM || !(out = up_config_show(&s->c, NULL)))
		up_request_error(s->req, UP_ERR_INTERNAL_ERROR, "out of memory reading the config files");
	else if (json_array_size(s->problems) > 0) {
		char *msg = up_json_join(s->problems, "\n");
		json_decref(out);
		up_request_errorf(s->req, UP_ERR_INVALID_PARAMS, "%s", msg ? msg : "the config files are invalid");
		free(msg);
	} else
		up_request_reply(s->req, out);
	show_free(s);
}

static int rpc_show(struct up_request *req, void *params, void *userdata)
{
	const struct show_params *p = params;
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = up_manager_sessions(userdata)->home;
	struct show *s;

	if (p->cwd[0] != '/' || strstr(p->cwd, "/../") || strstr(p->cwd, "/./")) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS, "the folder '%s' must be an absolute, "
				  "normalised path", p->cwd);
		return 0;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->req = req;
	s->work.data = s;
	s->home = strdup(home ? home : "");
	s->config_home = xdg ? strdup(xdg) : NULL;
	s->cwd = strdup(p->cwd);
	s->problems = json_array();
	if (up_config_init_defaults(&s->c) < 0 || !s->home || (xdg && !s->config_home) || !s->cwd ||
	    !s->problems || uv_queue_work(up_manager_loop(userdata), &s->work, show_work, show_after) < 0) {
		show_free(s);
		return -ENOMEM;
	}
	up_request_set_cancel(req, show_cancel, s);
	return 0;
}

static const struct up_method config_methods[] = {
	{ "config.show", show_params, sizeof(struct show_params), rpc_show, 0 },
	{ 0 },
};

int up_rpc_config_register(struct up_rpc *rpc, struct up_manager *m)
{
	return up_rpc_register(rpc, config_methods, m);
}
