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
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "bounds.h"
#include "config-file.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "knobs.h"
#include "params.h"
#include "paths.h"
#include "rpc.h"
#include "rules-save.h"
#include "trust.h"

/* ---- finding the files ---- */

static int load_one(struct up_config *c, const char *path, const char *home, json_t *problems)
{
	_cleanup_(freep) char *text = NULL;
	size_t len = 0, first;
	int r;

	/* Read once: these bytes are hashed (the trust store) and parsed, never read again. */
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
	first = json_array_size(c->rules);
	r = up_config_parse(c, path, text, len, home, problems);
	return r < 0 ? r : up_config_read_rules_files(c, first);
}

int up_config_load(struct up_config *c, const char *home, const char *config_home, const char *cwd,
		   json_t *problems)
{
	static const char *const names[] = {UP_CONFIG_FILE, UP_CONFIG_FILE_OLD};
	char dir[PATH_MAX], path[PATH_MAX + 64];
	bool in_home = home && home[0] == '/' && home[1] && up_path_under(cwd, home);
	int r = 0, k, n = 0;

	if (!up_path_is_normal_abs(cwd) || strlen(cwd) >= sizeof(dir))
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
	if (k == -ENOMEM)
		return k;
	r = r < 0 ? r : k;
	/* the rules "Always" saved (rules-save.h): the user's own, after config.yaml's */
	if (up_rules_save_default(home, config_home, path, sizeof(path)) >= 0 &&
	    access(path, F_OK) == 0 && up_config_add_rules_file(c, path, "saved approvals") < 0)
		return -ENOMEM;
	return r;
}

/* ---- session.start's first step ---- */

/*
 * Reading the config files for a request, off the loop: one job for session.start,
 * config.show and the trust store's methods. The job answers the request itself when the
 * files are broken, and hands the merged config (and, for the trust methods, the answer)
 * to `done` otherwise.
 */
typedef void (*loaded_fn)(struct up_request *req, struct up_config *c, json_t *result, void *ud);

enum job_kind {
	JOB_LOAD,    /* session.start, config.show: the cwd's files, checked against the store */
	JOB_TRUST,   /* config.trust: the cwd's project files (or `files`) into the store */
	JOB_UNTRUST, /* config.untrust: `files` out of the store */
	JOB_LIST,    /* config.trusted: the store, each file compared with what it holds now */
	_JOB_KIND_MAX,
};

struct job {
	struct up_request *req; /* NULL once the client went away */
	uv_work_t work;
	enum job_kind kind;
	char *home, *config_home, *cwd;
	json_t *files; /* config.trust's and config.untrust's paths; NULL: the cwd's */
	struct up_config c;
	json_t *problems;
	json_t *result; /* the trust methods' answer */
	char err[1024]; /* the trust store's problem, when trust_r < 0 */
	int r, trust_r;
	bool cancelled;
	loaded_fn done;
	void *ud;
};

static void job_free(struct job *j)
{
	up_config_done(&j->c);
	json_decref(j->problems);
	json_decref(j->files);
	json_decref(j->result);
	up_free_all(j->home, j->config_home, j->cwd, j->ud, j);
}

static void job_cancel(struct up_request *req, void *ud)
{
	struct job *j = ud;

	(void)req;
	j->cancelled = true; /* job_after() frees it */
	j->req = NULL;
}

static bool broken(const struct job *j)
{
	return j->r < 0 || json_array_size(j->problems) > 0;
}

/* The store, into *store; trust_r and err say why not. */
static int load_store(struct job *j, json_t **store)
{
	char dir[PATH_MAX];

	j->trust_r = up_trust_default_dir(dir, sizeof(dir));
	if (j->trust_r < 0) {
		(void)snprintf(j->err, sizeof(j->err),
			       "cannot tell the state folder that holds the "
			       "trust store: set $XDG_STATE_HOME or $HOME for uplinkd");
		return j->trust_r;
	}
	j->trust_r = up_trust_load(dir, store, j->err, sizeof(j->err));
	return j->trust_r;
}

/* Each entry's "state"; the store is read only when a project's file asks for something. */
static void check_trust(struct job *j)
{
	json_t *store = NULL, *e;
	size_t i;
	bool asks = false;

	json_array_foreach (j->c.trust, i, e)
		asks = asks || json_array_size(json_object_get(e, "asks")) > 0;
	if (asks && load_store(j, &store) < 0)
		return;
	if (!store)
		store = json_object();
	j->r = store ? up_config_check_trust(&j->c, store) : -ENOMEM;
	json_decref(store);
}

static void work_load(struct job *j)
{
	j->r = up_config_load(&j->c, j->home, j->config_home, j->cwd, j->problems);
	if (!broken(j))
		check_trust(j);
}

/* config.trust FILE...: each file alone (not the folders above it). */
static void load_named(struct job *j)
{
	json_t *f;
	size_t i;

	json_array_foreach (j->files, i, f) {
		const char *path = json_string_value(f);
		size_t before = json_array_size(j->c.trust);

		if (!up_config_is_project_file(path, j->home)) {
			(void)json_array_append_new(
				j->problems,
				json_sprintf("%s: uplink trust takes a "
					     "project's config file (.uplink.yaml or "
					     ".agent-uplink.yaml, in a folder below "
					     "home); your own files (~/.config/uplink/config.yaml, "
					     "~/.uplink.yaml, --rules "
					     "files) are trusted as they are",
					     path));
			continue;
		}
		j->r = load_one(&j->c, path, j->home, j->problems);
		if (j->r == -ENOMEM)
			return;
		if (j->r >= 0 && json_array_size(j->c.trust) == before)
			(void)json_array_append_new(j->problems,
						    json_sprintf("%s: no such file", path));
	}
}

static void work_trust(struct job *j)
{
	char dir[PATH_MAX];
	json_t *add = json_array(), *out = json_array(), *e, *rf;
	size_t i, k;

	if (j->files)
		load_named(j);
	else
		j->r = up_config_load(&j->c, j->home, j->config_home, j->cwd, j->problems);
	json_array_foreach (j->c.trust, i, e) {
		if (!json_is_true(json_object_get(e, "project")))
			continue;
		(void)json_array_append(out, e);
		(void)json_array_append(add, e);
		json_array_foreach (json_object_get(e, "rules_files"), k, rf)
			(void)json_array_append(add, rf);
	}
	if (!broken(j) && json_array_size(out) == 0)
		(void)json_array_append_new(
			j->problems, json_sprintf("no project's config file applies "
						  "to %s (looked for .uplink.yaml and "
						  ".agent-uplink.yaml from there up to home): "
						  "nothing to trust",
						  j->cwd));
	if (!broken(j) && (j->trust_r = up_trust_default_dir(dir, sizeof(dir))) >= 0)
		j->trust_r = up_trust_add(dir, add, (int64_t)time(NULL), j->err, sizeof(j->err));
	if (!broken(j) && j->trust_r >= 0)
		j->result = json_pack("{s:O}", "trusted", out);
	json_decref(add);
	json_decref(out);
}

static void work_untrust(struct job *j)
{
	char dir[PATH_MAX];
	json_t *removed = NULL, *unknown = json_array(), *f;
	size_t i, k;

	j->trust_r = up_trust_default_dir(dir, sizeof(dir));
	if (j->trust_r >= 0)
		j->trust_r = up_trust_remove(dir, j->files, &removed, j->err, sizeof(j->err));
	json_array_foreach (j->files, i, f) {
		json_t *g;
		bool found = false;
		json_array_foreach (removed, k, g)
			found = found || json_equal(f, g);
		if (!found)
			(void)json_array_append(unknown, f);
	}
	if (j->trust_r >= 0)
		j->result = json_pack("{s:O, s:O}", "removed", removed, "unknown", unknown);
	json_decref(removed);
	json_decref(unknown);
}

/* One trusted file as it is now: "trusted", "changed" or "missing". */
static const char *now_state(const char *path, const char *sha)
{
	_cleanup_(freep) char *text = NULL;
	char have[UP_SHA256_HEX_LEN + 1];
	size_t len = 0;

	if (up_read_file(path, UP_MAX_RULES_FILE_SIZE, &text, &len) < 0)
		return "missing";
	up_sha256_hex(text, len, have);
	return streq(have, sha) ? "trusted" : "changed";
}

static void work_list(struct job *j)
{
	json_t *store = NULL, *out = json_array(), *v;
	const char *path;

	if (load_store(j, &store) < 0 || !out) {
		json_decref(out);
		return;
	}
	json_object_foreach (store, path, v) {
		const char *sha = json_string_value(json_object_get(v, "sha256"));
		(void)json_array_append_new(out, json_pack("{s:s, s:s, s:O, s:s}", "file", path,
							   "sha256", sha, "trusted_at",
							   json_object_get(v, "trusted_at"),
							   "state", now_state(path, sha)));
	}
	j->result = json_pack("{s:o}", "files", out);
	json_decref(store);
}

static void (*const works[_JOB_KIND_MAX])(struct job *j) = {
	[JOB_LOAD] = work_load,
	[JOB_TRUST] = work_trust,
	[JOB_UNTRUST] = work_untrust,
	[JOB_LIST] = work_list,
};

static void job_work(uv_work_t *w)
{
	struct job *j = w->data;

	works[j->kind](j);
	if (j->kind != JOB_LOAD && !broken(j) && j->trust_r >= 0 && !j->result)
		j->r = -ENOMEM;
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
		} else if (broken(j)) {
			char *msg = up_json_join(j->problems, "\n");
			up_request_errorf(j->req, UP_ERR_INVALID_PARAMS, "%s",
					  msg ? msg : "the config files are invalid");
			free(msg);
		} else if (j->trust_r < 0) {
			/* a project's file asks for what the store must allow, and the store is
			 * unreadable */
			up_request_errorf(j->req,
					  j->kind == JOB_LOAD ? UP_ERR_UNTRUSTED_CONFIG
							      : UP_ERR_INTERNAL_ERROR,
					  "%s", j->err);
		} else {
			j->done(j->req, &j->c, j->result, j->ud);
		}
	}
	job_free(j);
}

/* Takes `ud` (freed with the job). */
static int load_for(uv_loop_t *loop, struct up_request *req, enum job_kind kind, const char *home,
		    const char *cwd, const json_t *files, loaded_fn done, void *ud)
{
	const char *xdg = up_knobs()->xdg_config_home;
	struct job *j = calloc(1, sizeof(*j));
	int r;

	if (!j) {
		free(ud);
		return -ENOMEM;
	}
	*j = (struct job){.req = req, .kind = kind, .done = done, .ud = ud};
	j->work.data = j;
	j->home = strdup(home ? home : "");
	j->config_home = xdg ? strdup(xdg) : NULL;
	j->cwd = strdup(cwd ? cwd : "");
	j->files = files ? json_deep_copy(files) : NULL;
	j->problems = json_array();
	r = up_config_init_defaults(&j->c);
	if (r >= 0 && (!j->home || (xdg && !j->config_home) || !j->cwd || !j->problems ||
		       (files && !j->files)))
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

struct show {
	void (*done)(struct up_request *req, struct up_config *c, void *ud);
};

static void show_loaded(struct up_request *req, struct up_config *c, json_t *result, void *ud)
{
	const struct show *sh = ud;

	(void)result;
	sh->done(req, c, NULL);
}

int up_config_show_for(uv_loop_t *loop, struct up_request *req, const char *home, const char *cwd,
		       void (*done)(struct up_request *req, struct up_config *c, void *ud))
{
	struct show *sh = calloc(1, sizeof(*sh));

	if (!sh)
		return -ENOMEM;
	sh->done = done;
	return load_for(loop, req, JOB_LOAD, home, cwd, NULL, show_loaded, sh);
}

static void trust_done(struct up_request *req, struct up_config *c, json_t *result, void *ud)
{
	(void)c;
	(void)ud;
	up_request_reply(req, json_incref(result));
}

int up_config_trust_for(uv_loop_t *loop, struct up_request *req, enum up_config_trust_op op,
			const char *home, const char *cwd, const json_t *files)
{
	static const enum job_kind kinds[] = {
		[UP_TRUST_ADD] = JOB_TRUST,
		[UP_TRUST_REMOVE] = JOB_UNTRUST,
		[UP_TRUST_LIST] = JOB_LIST,
	};

	return load_for(loop, req, kinds[op], home, cwd, files, trust_done, NULL);
}

/* session.start: the files fill in what the request left out, then the usual checks run. */
struct then {
	const struct up_param *table;
	up_config_cont_fn cont;
	void *userdata;
};

static bool refuse_untrusted(struct up_request *req, const struct up_config *c)
{
	const json_t *e;
	char *msg;
	size_t i;
	bool any = false;

	json_array_foreach (c->trust, i, e)
		any = any || up_config_needs_trust(e);
	if (!any)
		return false;
	msg = up_config_untrusted_message(c);
	up_request_errorf(req, UP_ERR_UNTRUSTED_CONFIG, "%s",
			  msg ? msg
			      : "a project's config file "
				"needs trusting first: run uplink trust");
	free(msg);
	return true;
}

static void then_loaded(struct up_request *req, struct up_config *c, json_t *result, void *ud)
{
	struct then *t = ud;
	json_t *from;
	char why[1024];
	int r;

	(void)result;
	if (refuse_untrusted(req, c))
		return; /* before anything of the file is taken: no placeholder resolves, nothing
			   runs */
	from = json_object();
	r = from ? up_config_apply(c, req->params, from) : -ENOMEM;
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
	return load_for(loop, req, JOB_LOAD, home,
			json_string_value(json_object_get(req->params, "cwd")), NULL, then_loaded,
			t);
}
