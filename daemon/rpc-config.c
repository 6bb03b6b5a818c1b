/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.show: the merged config files for a folder, and where each value came from; and the
 * trust store's methods (config.trust, config.untrust, config.trusted: trust.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "bounds.h"
#include "config-file.h"
#include "jsonrpc.h"
#include "manager.h"
#include "paths.h"
#include "rpc.h"
#include "session.h"

struct show_params {
	const char *cwd;
};

static const struct up_param show_params[] = {
	{"cwd", UP_PARAM_STRING, offsetof(struct show_params, cwd), UP_PARAM_MANDATORY, NULL},
	{0},
};

/* The project files that ask for something, each with its state; and the refusal, if any. */
static int add_trust(json_t *out, const struct up_config *c)
{
	json_t *list = json_array(), *e;
	size_t i;
	bool refused = false;
	char *msg;

	if (!list || json_object_set_new(out, "trust", list) < 0)
		return -ENOMEM;
	json_array_foreach (c->trust, i, e) {
		if (json_array_size(json_object_get(e, "asks")) == 0)
			continue;
		refused = refused || up_config_needs_trust(e);
		if (json_array_append_new(list, json_pack("{s:O, s:O, s:O, s:O}", "file",
							  json_object_get(e, "file"), "state",
							  json_object_get(e, "state"), "asks",
							  json_object_get(e, "asks"), "rules_files",
							  json_object_get(e, "rules_files"))) < 0)
			return -ENOMEM;
	}
	if (!refused)
		return 0;
	msg = up_config_untrusted_message(c);
	if (!msg || json_object_set_new(out, "untrusted", json_string(msg)) < 0) {
		free(msg);
		return -ENOMEM;
	}
	free(msg);
	return 0;
}

static void shown(struct up_request *req, struct up_config *c, void *ud)
{
	json_t *out = up_config_show(c, NULL);

	(void)ud;
	if (out && add_trust(out, c) >= 0)
		up_request_reply(req, out);
	else {
		json_decref(out);
		up_request_error(req, UP_ERR_INTERNAL_ERROR,
				 "out of memory reading the config files");
	}
}

static int rpc_show(struct up_request *req, void *params, void *userdata)
{
	const struct show_params *p = params;

	if (!up_path_is_normal_abs(p->cwd)) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS,
				  "the folder '%s' must be an absolute, "
				  "normalised path",
				  p->cwd);
		return 0;
	}
	return up_config_show_for(up_manager_loop(userdata), req,
				  up_sessions_home(up_manager_sessions(userdata)), p->cwd, shown);
}

struct trust_params {
	const char *cwd;
	json_t *files;
};

static const struct up_param trust_params[] = {
	{"cwd", UP_PARAM_STRING, offsetof(struct trust_params, cwd), 0, NULL},
	{"files", UP_PARAM_STRV, offsetof(struct trust_params, files), 0, NULL},
	{0},
};

static bool normalised(const char *path)
{
	return path[0] == '/' && !strstr(path, "/../") && !strstr(path, "/./") &&
	       !strstr(path, "//");
}

/* Each path absolute and normalised, at most UP_MAX_TRUST_ARGS; else the request is answered. */
static bool bad_paths(struct up_request *req, const struct trust_params *p, bool need_files)
{
	json_t *f;
	size_t i;

	if (need_files ? json_array_size(p->files) == 0 : !p->files && !p->cwd) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS,
				  need_files ? "name the files (\"files\")"
					     : "give \"cwd\" (the folder whose project files to "
					       "trust) or \"files\"");
		return true;
	}
	if (json_array_size(p->files) > UP_MAX_TRUST_ARGS) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS, "at most %d files at once",
				  UP_MAX_TRUST_ARGS);
		return true;
	}
	json_array_foreach (p->files, i, f)
		if (!normalised(json_string_value(f))) {
			up_request_errorf(req, UP_ERR_INVALID_PARAMS,
					  "the file '%s' must be an absolute, "
					  "normalised path",
					  json_string_value(f));
			return true;
		}
	if (p->cwd && !normalised(p->cwd)) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS,
				  "the folder '%s' must be an absolute, "
				  "normalised path",
				  p->cwd);
		return true;
	}
	return false;
}

static int trust_call(struct up_request *req, const struct trust_params *p, void *userdata,
		      enum up_config_trust_op op)
{
	return up_config_trust_for(up_manager_loop(userdata), req, op,
				   up_sessions_home(up_manager_sessions(userdata)), p->cwd,
				   p->files);
}

static int rpc_trust(struct up_request *req, void *params, void *userdata)
{
	const struct trust_params *p = params;

	return bad_paths(req, p, false) ? 0 : trust_call(req, p, userdata, UP_TRUST_ADD);
}

static int rpc_untrust(struct up_request *req, void *params, void *userdata)
{
	const struct trust_params *p = params;

	return bad_paths(req, p, true) ? 0 : trust_call(req, p, userdata, UP_TRUST_REMOVE);
}

static int rpc_trusted(struct up_request *req, void *params, void *userdata)
{
	struct trust_params none = {0};

	(void)params;
	return trust_call(req, &none, userdata, UP_TRUST_LIST);
}

const struct up_method up_rpc_config_methods[] = {
	{"config.show", show_params, sizeof(struct show_params), rpc_show},
	{"config.trust", trust_params, sizeof(struct trust_params), rpc_trust},
	{"config.untrust", trust_params, sizeof(struct trust_params), rpc_untrust},
	{"config.trusted", NULL, 0, rpc_trusted},
	{0},
};
