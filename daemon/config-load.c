/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Config files (config-file.h), the reading side: which files a cwd has, and the thread-pool
 * job that reads them for session.start and config.show. Parsing one file and merging are
 * config-file.c's.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "bounds.h"
#include "config-file.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "params.h"
#include "rpc.h"

/* ---- finding the files ---- */

static int load_one(struct up_config *c, const char *path, const char *home, json_t *problems)
{
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;
	int r;

	r = up_read_file(path, UP_MAX_CONFIG_FILE_SIZE, &text, &len);
	if (r == -ENOENT || r == -ENOTDIR)
		return 0;
	if (r == -EFBIG)
		return json_array_append_new(problems,
					     json_sprintf("%s: larger than %d bytes", path,
							  UP_MAX_CONFIG_FILE_SIZE)) < 0
			       ? -ENOMEM
			       : -EINVAL;
	if (r < 0)
		return json_array_append_new(problems,
					     json_sprintf("%s: cannot read the config file: %s",
							  path, strerror(-r))) < 0
			       ? -ENOMEM
			       : -EINVAL;
	return up_config_parse(c, path, text, len, home, problems);
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

int up_config_load(struct up_config *c, const char *home, const char *config_home, const char *cwd,
		   json_t *problems)
{
	static const char *const names[] = {UP_CONFIG_FILE, UP_CONFIG_FILE_OLD};
	char dir[PATH_MAX], path[PATH_MAX + 64];
	bool in_home = home && home[0] == '/' && home[1] && under(cwd, home);
	int r = 0, k, n = 0;

	if (cwd[0] != '/' || strstr(cwd, "/../") || strstr(cwd, "/./") ||
	    strlen(cwd) >= sizeof(dir))
		return 0; /* session.start refuses such a cwd itself */
	(void)snprintf(dir, sizeof(dir), "%s", cwd);
	for (;;) {
		for (size_t i = 0; i < ELEMENTSOF(names); i++) {
			(void)snprintf(path, sizeof(path), "%s%s%s", dir,
				       streq(dir, "/") ? "" : "/", names[i]);
			k = load_one(c, path, home, problems);
			if (k == -ENOMEM)
				return k;
			r = r < 0 ? r : k;
		}
		if (!in_home || streq(dir, home) || ++n >= UP_MAX_CONFIG_FILES)
			break;
		*strrchr(dir, '/') = '\0';
		if (!dir[0])
			break;
	}
	if (config_home && config_home[0] == '/')
		(void)snprintf(path, sizeof(path), "%s/uplink/config.yaml", config_home);
	else if (home && home[0] == '/')
		(void)snprintf(path, sizeof(path), "%s/.config/uplink/config.yaml", home);
	else
		return r;
	k = load_one(c, path, home, problems);
	return k == -ENOMEM ? k : r < 0 ? r : k;
}

/* ---- session.start's first step ---- */

/*
 * Reading the config files for a request, off the loop: one job for session.start and
 * config.show alike. The job answers the request itself when the files are broken, and
 * hands the merged config to `done` otherwise.
 */
typedef void (*loaded_fn)(struct up_request *req, struct up_config *c, void *ud);

struct job {
	struct up_request *req; /* NULL once the client went away */
	uv_work_t work;
	char *home, *config_home, *cwd;
	struct up_config c;
	json_t *problems;
	int r;
	bool cancelled;
	loaded_fn done;
	void *ud;
};

static void job_free(struct job *j)
{
	up_config_done(&j->c);
	json_decref(j->problems);
	free(j->home);
	free(j->config_home);
	free(j->cwd);
	free(j->ud);
	free(j);
}

static void job_cancel(struct up_request *req, void *ud)
{
	struct job *j = ud;

	(void)req;
	j->cancelled = true; /* job_after() frees it */
	j->req = NULL;
}

static void job_work(uv_work_t *w)
{
	struct job *j = w->data;

	j->r = up_config_load(&j->c, j->home, j->config_home, j->cwd, j->problems);
}

static void job_after(uv_work_t *w, int status)
{
	struct job *j = w->data;

	(void)status;
	if (!j->cancelled) {
		up_request_set_cancel(j->req, NULL, NULL);
		if (j->r == -ENOMEM) {
			up_request_error(j->req, UP_ERR_INTERNAL_ERROR,
					 "out of memory reading the config files");
		} else if (j->r < 0 || json_array_size(j->problems) > 0) {
			char *msg = up_json_join(j->problems, "\n");
			up_request_errorf(j->req, UP_ERR_INVALID_PARAMS, "%s",
					  msg ? msg : "the config files are invalid");
			free(msg);
		} else {
			j->done(j->req, &j->c, j->ud);
		}
	}
	job_free(j);
}

/* Takes `ud` (freed with the job). */
static int load_for(uv_loop_t *loop, struct up_request *req, const char *home, const char *cwd,
		    loaded_fn done, void *ud)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	struct job *j = calloc(1, sizeof(*j));
	int r;

	if (!j) {
		free(ud);
		return -ENOMEM;
	}
	*j = (struct job){.req = req, .done = done, .ud = ud};
	j->work.data = j;
	j->home = strdup(home ? home : "");
	j->config_home = xdg ? strdup(xdg) : NULL;
	j->cwd = strdup(cwd ? cwd : "");
	j->problems = json_array();
	r = up_config_init_defaults(&j->c);
	if (r >= 0 && (!j->home || (xdg && !j->config_home) || !j->cwd || !j->problems))
		r = -ENOMEM;
	if (r >= 0)
		r = uv_queue_work(loop, &j->work, job_work, job_after);
	if (r < 0) {
		job_free(j);
		return r;
	}
	up_request_set_cancel(req, job_cancel, j);
	return 0;
}

int up_config_show_for(uv_loop_t *loop, struct up_request *req, const char *home, const char *cwd,
		       void (*done)(struct up_request *req, struct up_config *c, void *ud))
{
	return load_for(loop, req, home, cwd, done, NULL);
}

/* session.start: the files fill in what the request left out, then the usual checks run. */
struct then {
	const struct up_param *table;
	up_config_cont_fn cont;
	void *userdata;
};

static void then_loaded(struct up_request *req, struct up_config *c, void *ud)
{
	struct then *t = ud;
	json_t *from = json_object();
	char why[1024];
	int r = from ? up_config_apply(c, req->params, from) : -ENOMEM;

	if (r >= 0 &&
	    up_params_dispatch(t->table, req->params, req->pstruct, why, sizeof(why)) < 0) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS, "from the config files: %s", why);
		json_decref(from);
		return;
	}
	if (r >= 0)
		r = t->cont(req, req->pstruct, t->userdata, c->rules, from);
	json_decref(from);
	if (r < 0)
		up_request_error(req, UP_ERR_INTERNAL_ERROR,
				 "internal error in uplinkd; see its log");
}

int up_config_then(uv_loop_t *loop, struct up_request *req, const struct up_param *table,
		   const char *home, up_config_cont_fn cont, void *userdata)
{
	struct then *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	*t = (struct then){.table = table, .cont = cont, .userdata = userdata};
	return load_for(loop, req, home, json_string_value(json_object_get(req->params, "cwd")),
			then_loaded, t);
}
