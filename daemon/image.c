/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One image job: hash the context on the threadpool, ask the registry for the tag,
 * and when it is absent (or the caller forces it) run docker build and docker push,
 * their output to a log file and to progress callbacks. One completion path: finish().
 */
#include "image.h"

#include <stdarg.h>
#include <stdio.h>

#include "bounds.h"
#include "image-private.h"
#include "log.h"

extern char **environ;

enum job_state {
	JOB_HASHING,
	JOB_CHECKING,
	JOB_OPENING_LOG,
	JOB_PROBING, /* docker buildx version: can we use BuildKit? */
	JOB_BUILDING,
	JOB_PUSHING,
	JOB_FINISHING, /* flushing and closing the log */
	_JOB_STATE_MAX,
	_JOB_STATE_INVALID = -EINVAL,
};

static const char *const job_state_names[_JOB_STATE_MAX] = {
	[JOB_HASHING] = "hashing",	   [JOB_CHECKING] = "checking",
	[JOB_OPENING_LOG] = "opening-log", [JOB_PROBING] = "probing",
	[JOB_BUILDING] = "building",	   [JOB_PUSHING] = "pushing",
	[JOB_FINISHING] = "finishing",
};

static const char registry_accept[] =
	"application/vnd.docker.distribution.manifest.v2+json, "
	"application/vnd.docker.distribution.manifest.list.v2+json, "
	"application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json";

struct hash_work {
	uv_work_t req;
	struct up_image_job *job; /* NULL once the job is cancelled: the work then frees itself */
	char *dir;
	char *dockerfile; /* NULL: "Dockerfile" */
	char **only;	  /* NULL: the whole context */
	char **args;
	char hex[65];
	char err[512];
	int r;
};

struct layer {
	char id[65];
	bool done;
};

struct up_image_job {
	uv_loop_t *loop;
	struct up_http *http;
	enum job_state state;
	/* The request, copied. */
	char *context_dir, *dockerfile, *repository, *registry_url, *log_path, *docker;
	char **env, **build_args;
	bool force;
	enum up_image_builder builder;
	/* What it found. */
	char hex[65], tag[21];
	char *ref;
	bool built, plan_only, asked, present;
	/* What is in flight: at most one of these. */
	struct hash_work *work;
	struct up_http_req *req;
	struct up_image_log *log;
	struct up_image_run *run;
	/* Output of the running command. */
	char tail[UP_IMAGE_ERROR_TAIL_LINES][256];
	unsigned tail_n;
	struct up_image_line step;
	struct layer layers[UP_IMAGE_MAX_PUSH_LAYERS];
	unsigned n_layers, n_done;
	/* The outcome. */
	int r;
	enum up_error e;
	char *error;
	up_image_progress_fn progress;
	up_image_done_fn done;
	void *ud;
};

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **strv_copy(const char *const *v)
{
	size_t n = 0;
	char **c;

	while (v && v[n])
		n++;
	c = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; c && i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			strv_free(c);
			return NULL;
		}
	return c;
}

static void job_free(struct up_image_job *j)
{
	strv_free(j->env);
	strv_free(j->build_args);
	up_free_all(j->context_dir, j->dockerfile, j->repository, j->registry_url, j->log_path,
		    j->docker, j->ref, j->error, j);
}

static void set_state(struct up_image_job *j, enum job_state s)
{
	log_debug("image %s: %s -> %s", j->repository, job_state_names[j->state],
		  job_state_names[s]);
	j->state = s;
}

static void progress(struct up_image_job *j, const char *phase, unsigned step, unsigned total,
		     const char *msg)
{
	struct up_image_progress p = {.phase = phase, .step = step, .total = total, .message = msg};

	if (j->progress)
		j->progress(&p, j->ud);
}

static void report(struct up_image_job *j)
{
	struct up_image_result res = {.r = j->r,
				      .e = j->e,
				      .ref = j->ref,
				      .tag = j->tag,
				      .built = j->built,
				      .asked = j->asked,
				      .present = j->present,
				      .error = j->error,
				      .log_path = j->log_path};

	j->done(&res, j->ud);
	job_free(j);
}

static void on_log_closed(int r, void *ud)
{
	struct up_image_job *j = ud;

	j->log = NULL;
	if (r < 0 && j->r == 0)
		log_warning_errno(r, "Failed to write the build log %s, ignoring", j->log_path);
	report(j);
}

/* The one way out: records the outcome, closes the log if open, then calls done. */
static void finish(struct up_image_job *j, enum up_error e, int r, const char *fmt, ...)
	_printf_(4, 5);
static void finish(struct up_image_job *j, enum up_error e, int r, const char *fmt, ...)
{
	va_list ap;

	j->r = r;
	j->e = r < 0 ? e : _UP_ERR_INVALID;
	if (fmt) {
		va_start(ap, fmt);
		if (vasprintf(&j->error, fmt, ap) < 0)
			j->error = NULL;
		va_end(ap);
	}
	set_state(j, JOB_FINISHING);
	if (j->log)
		up_image_log_close(j->log, on_log_closed, j);
	else
		report(j);
}

/* ---- Running docker ---- */

static char **child_env(struct up_image_job *j, bool buildkit)
{
	size_t n = 0, m = 0, o = 0;
	char **env;

	while (environ[n])
		n++;
	while (j->env[m])
		m++;
	env = calloc(n + m + 2, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; i < m; i++)
		env[o++] = j->env[i];
	env[o++] = buildkit ? "DOCKER_BUILDKIT=1" : "DOCKER_BUILDKIT=0";
	for (size_t i = 0; i < n; i++) {
		size_t k = strcspn(environ[i], "=");
		bool shadowed = startswith(environ[i], "DOCKER_BUILDKIT=");
		for (size_t a = 0; a < m && !shadowed; a++)
			shadowed = !strncmp(j->env[a], environ[i], k) && j->env[a][k] == '=';
		if (!shadowed)
			env[o++] = environ[i];
	}
	return env;
}

static void on_line(const char *line, size_t len, void *ud);
static void on_exit_run(const struct up_image_exit *e, void *ud);

static int run(struct up_image_job *j, enum job_state s, char **argv, uint64_t timeout_ms)
{
	char **env = child_env(j, j->builder == UP_IMAGE_BUILDER_BUILDKIT);
	int k;

	if (!env)
		return -ENOMEM;
	set_state(j, s);
	j->tail_n = 0;
	j->step = (struct up_image_line){0};
	up_image_log_write(j->log, "$", 1);
	for (size_t i = 0; argv[i]; i++) {
		up_image_log_write(j->log, " ", 1);
		up_image_log_write(j->log, argv[i], strlen(argv[i]));
	}
	up_image_log_write(j->log, "\n", 1);
	k = up_image_run_start(j->loop, argv, env, timeout_ms, on_line, on_exit_run, j, &j->run);
	free(env);
	return k;
}

static void push_line(struct up_image_job *j, enum up_image_line_kind kind,
		      const struct up_image_line *l)
{
	unsigned i;

	if (kind == UP_IMAGE_LINE_DIGEST) {
		progress(j, "push", j->n_layers, j->n_layers, l->message);
		return;
	}
	for (i = 0; i < j->n_layers && strcmp(j->layers[i].id, l->message) != 0; i++)
		;
	if (i == j->n_layers) {
		if (i == UP_IMAGE_MAX_PUSH_LAYERS)
			return;
		(void)snprintf(j->layers[i].id, sizeof(j->layers[i].id), "%.64s", l->message);
		j->n_layers++;
	}
	if (kind == UP_IMAGE_LINE_LAYER_DONE && !j->layers[i].done) {
		char msg[96];
		j->layers[i].done = true;
		j->n_done++;
		(void)snprintf(msg, sizeof(msg), "layer %.64s pushed", l->message);
		progress(j, "push", j->n_done, j->n_layers, msg);
	}
}

static void on_line(const char *line, size_t len, void *ud)
{
	struct up_image_job *j = ud;
	struct up_image_line l;
	enum up_image_line_kind kind;

	up_image_log_write(j->log, line, len);
	up_image_log_write(j->log, "\n", 1);
	if (j->state == JOB_PROBING)
		return;
	if (len > 0) {
		unsigned slot = j->tail_n++ % UP_IMAGE_ERROR_TAIL_LINES;
		(void)snprintf(j->tail[slot], sizeof(j->tail[slot]), "%s", line);
	}
	kind = up_image_parse_line(j->state == JOB_PUSHING, line, &l);
	if (kind == UP_IMAGE_LINE_STEP && l.step != j->step.step) {
		j->step = l;
		progress(j, "build", l.step, l.total, l.message);
	} else if (kind != UP_IMAGE_LINE_OTHER && kind != UP_IMAGE_LINE_STEP) {
		push_line(j, kind, &l);
	}
}

static void start_build(struct up_image_job *j);
static void start_push(struct up_image_job *j);

/* "docker build failed at step 3/7 (RUN false) with exit code 1; its last lines: ... full log: P"
 */
static void fail_step(struct up_image_job *j, const struct up_image_exit *e)
{
	char what[160], how[160], tail[UP_IMAGE_ERROR_TAIL_LINES * 260] = "";
	unsigned n = j->tail_n < UP_IMAGE_ERROR_TAIL_LINES ? j->tail_n : UP_IMAGE_ERROR_TAIL_LINES;
	size_t o = 0;

	if (j->state == JOB_BUILDING && j->step.step)
		(void)snprintf(what, sizeof(what), "docker build failed at step %u/%u (%.100s)",
			       j->step.step, j->step.total, j->step.message);
	else
		(void)snprintf(what, sizeof(what), "docker %s failed",
			       j->state == JOB_BUILDING ? "build" : "push");
	if (e->timed_out)
		(void)snprintf(how, sizeof(how), "a timeout (it ran for %d minutes)",
			       (j->state == JOB_BUILDING ? UP_IMAGE_BUILD_TIMEOUT_MS
							 : UP_IMAGE_PUSH_TIMEOUT_MS) /
				       60000);
	else if (e->signal)
		(void)snprintf(how, sizeof(how), "killed by signal %d", e->signal);
	else
		(void)snprintf(how, sizeof(how), "exit code %lld", (long long)e->status);
	for (unsigned i = j->tail_n - n; i < j->tail_n && o < sizeof(tail); i++)
		o += (size_t)snprintf(tail + o, sizeof(tail) - o, "\n  %s",
				      j->tail[i % UP_IMAGE_ERROR_TAIL_LINES]);
	finish(j, UP_ERR_IMAGE_BUILD_FAILED, -EIO, "%s with %s; its last lines:%s\nfull log: %s",
	       what, how, n ? tail : " (none)", j->log_path);
}

static void on_exit_run(const struct up_image_exit *e, void *ud)
{
	struct up_image_job *j = ud;
	bool ok = !e->spawn_error && !e->timed_out && !e->signal && e->status == 0;

	j->run = NULL;
	if (e->spawn_error) {
		finish(j, UP_ERR_PREREQ_MISSING, e->spawn_error,
		       "cannot run '%s': %s; install Docker (apt-get install docker.io) "
		       "or name the docker binary",
		       j->docker, uv_strerror(e->spawn_error));
		return;
	}
	switch (j->state) {
	case JOB_PROBING:
		j->builder = ok ? UP_IMAGE_BUILDER_BUILDKIT : UP_IMAGE_BUILDER_LEGACY;
		log_debug("image %s: using the %s builder", j->repository,
			  up_image_builder_to_string(j->builder));
		start_build(j);
		break;
	case JOB_BUILDING:
		if (ok)
			start_push(j);
		else
			fail_step(j, e);
		break;
	default:
		if (!ok) {
			fail_step(j, e);
			break;
		}
		j->built = true;
		finish(j, _UP_ERR_INVALID, 0, NULL);
		break;
	}
}

static void start_probe(struct up_image_job *j)
{
	char *argv[] = {j->docker, "buildx", "version", NULL};
	int k = run(j, JOB_PROBING, argv, UP_IMAGE_PROBE_TIMEOUT_MS);

	if (k < 0)
		finish(j, UP_ERR_PREREQ_MISSING, k, "cannot run '%s': %s", j->docker, strerror(-k));
}

static void start_build(struct up_image_job *j)
{
	size_t n = 0, o = 0;
	char **argv;
	int k;

	while (j->build_args[n])
		n++;
	argv = calloc(2 * n + 14, sizeof(char *));
	if (!argv) {
		finish(j, UP_ERR_INTERNAL_ERROR, -ENOMEM, "out of memory");
		return;
	}
	argv[o++] = j->docker;
	argv[o++] = "build";
	/* The build's RUN steps reach the package registries as the host does: docker's
	 * default bridge may not exist (dockerd --bridge=none) or be cut off by the host's
	 * firewall, and a proxy the host uses may listen on its loopback. The Dockerfile is
	 * ours, so the host's network is no wider than the user's own shell. */
	argv[o++] = "--network";
	argv[o++] = "host";
	if (j->builder == UP_IMAGE_BUILDER_BUILDKIT)
		argv[o++] = "--progress=plain";
	if (j->force)
		argv[o++] = "--no-cache";
	for (size_t i = 0; i < n; i++) {
		argv[o++] = "--build-arg";
		argv[o++] = j->build_args[i];
	}
	if (j->dockerfile) {
		argv[o++] = "-f";
		argv[o++] = j->dockerfile;
	}
	argv[o++] = "-t";
	argv[o++] = j->ref;
	argv[o++] = j->context_dir;
	k = run(j, JOB_BUILDING, argv, UP_IMAGE_BUILD_TIMEOUT_MS);
	free(argv);
	if (k < 0)
		finish(j, UP_ERR_IMAGE_BUILD_FAILED, k, "cannot start docker build: %s",
		       strerror(-k));
	else
		progress(j, "build", 0, 0, "docker build"); /* last: the callback may cancel */
}

static void start_push(struct up_image_job *j)
{
	char *argv[] = {j->docker, "push", j->ref, NULL};
	int k;

	j->n_layers = j->n_done = 0;
	k = run(j, JOB_PUSHING, argv, UP_IMAGE_PUSH_TIMEOUT_MS);
	if (k < 0)
		finish(j, UP_ERR_IMAGE_BUILD_FAILED, k, "cannot start docker push: %s",
		       strerror(-k));
	else
		progress(j, "push", 0, 0, "docker push"); /* last: the callback may cancel */
}

static void on_log_opened(int r, void *ud)
{
	struct up_image_job *j = ud;

	if (r < 0) {
		finish(j, UP_ERR_IMAGE_BUILD_FAILED, r,
		       "cannot write the build log %s: %s; check the session's state folder",
		       j->log_path, uv_strerror(r));
		return;
	}
	if (j->builder == UP_IMAGE_BUILDER_AUTO)
		start_probe(j);
	else
		start_build(j);
}

static void start_pipeline(struct up_image_job *j)
{
	int k;

	set_state(j, JOB_OPENING_LOG);
	k = up_image_log_open(j->loop, j->log_path, on_log_opened, j, &j->log);
	if (k < 0)
		finish(j, UP_ERR_IMAGE_BUILD_FAILED, k, "cannot write the build log %s: %s",
		       j->log_path, uv_strerror(k));
}

/* ---- Asking the registry ---- */

static void on_head(struct up_http_req *req, const struct up_http_result *res, void *ud)
{
	struct up_image_job *j = ud;

	j->req = NULL;
	j->asked = res->r >= 0;
	j->present = res->r >= 0 && res->status == 200;
	if (res->r < 0)
		finish(j, UP_ERR_REGISTRY_UNREACHABLE, res->r,
		       "cannot reach the registry at %s (%s); check that it is running and that "
		       "the registry setting names it, or use --force-rebuild",
		       j->registry_url, res->error ? res->error : strerror(-res->r));
	else if (res->status == 200)
		finish(j, _UP_ERR_INVALID, 0, NULL);
	else if (res->status == 404 && j->plan_only)
		finish(j, _UP_ERR_INVALID, 0, NULL); /* a run would build it */
	else if (res->status == 404)
		start_pipeline(j);
	else if (res->status == 401 || res->status == 403)
		finish(j, UP_ERR_REGISTRY_UNREACHABLE, -EACCES,
		       "the registry at %s refused to say whether %s exists (HTTP %ld); uplink "
		       "reads registries without credentials: use one that allows it, or "
		       "--force-rebuild",
		       j->registry_url, j->ref, res->status);
	else
		finish(j, UP_ERR_REGISTRY_UNREACHABLE, -EPROTO,
		       "the registry at %s answered HTTP %ld when asked for %s; check it with "
		       "curl -I %s/v2/, or use --force-rebuild",
		       j->registry_url, res->status, j->ref, j->registry_url);
}

static void start_check(struct up_image_job *j)
{
	_cleanup_(freep) char *url = NULL;
	size_t n = strlen(j->registry_url);
	struct up_http_opts o = {.method = "HEAD",
				 .accept = registry_accept,
				 .timeout_ms = UP_IMAGE_REGISTRY_TIMEOUT_MS,
				 .max_body = 4096};
	int k;

	while (n > 0 && j->registry_url[n - 1] == '/')
		j->registry_url[--n] = '\0';
	set_state(j, JOB_CHECKING);
	if (asprintf(&url, "%s/v2/%s/manifests/%s", j->registry_url,
		     up_image_repo_path(j->repository), j->tag) < 0) {
		url = NULL;
		finish(j, UP_ERR_INTERNAL_ERROR, -ENOMEM, "out of memory");
		return;
	}
	o.url = url;
	k = up_http_start(j->http, &o, on_head, NULL, j, &j->req);
	if (k < 0)
		finish(j, UP_ERR_REGISTRY_UNREACHABLE, k,
		       "cannot ask the registry at %s for %s: %s", j->registry_url, j->ref,
		       strerror(-k));
}

/* ---- Hashing ---- */

static void hash_work(uv_work_t *req)
{
	struct hash_work *w = req->data;

	struct up_image_scope scope = {.dockerfile = w->dockerfile,
				       .only = (const char *const *)w->only};

	w->r = up_image_context_hash(w->dir, &scope, (const char *const *)w->args, NULL, w->hex,
				     w->err, sizeof(w->err));
}

static void hash_work_free(struct hash_work *w)
{
	free(w->dir);
	free(w->dockerfile);
	strv_free(w->only);
	strv_free(w->args);
	free(w);
}

static void hash_done(uv_work_t *req, int status)
{
	struct hash_work *w = req->data;
	struct up_image_job *j = w->job;

	if (!j) {
		hash_work_free(w);
		return;
	}
	j->work = NULL;
	if (status < 0 || w->r < 0) {
		finish(j, UP_ERR_IMAGE_CONTEXT_INVALID, status < 0 ? status : w->r,
		       "the build context %s cannot be used: %s", j->context_dir,
		       status < 0 ? uv_strerror(status) : w->err);
		hash_work_free(w);
		return;
	}
	memcpy(j->hex, w->hex, sizeof(j->hex));
	hash_work_free(w);
	up_image_tag(j->hex, j->tag);
	if (asprintf(&j->ref, "%s:%s", j->repository, j->tag) < 0) {
		j->ref = NULL;
		finish(j, UP_ERR_INTERNAL_ERROR, -ENOMEM, "out of memory");
	} else if (j->plan_only && (j->force || !j->registry_url)) {
		finish(j, _UP_ERR_INVALID, 0, NULL); /* a run would build it, without asking */
	} else if (j->force) {
		start_pipeline(j);
	} else {
		start_check(j);
	}
}

static int copy_request(struct up_image_job *j, const struct up_image_request *q)
{
	j->context_dir = strdup(q->context_dir);
	/* docker build -f takes a path of its own, not one relative to the context */
	if (q->dockerfile && asprintf(&j->dockerfile, "%s/%s", q->context_dir, q->dockerfile) < 0)
		return -ENOMEM;
	j->repository = strdup(q->repository);
	j->registry_url = q->registry_url ? strdup(q->registry_url) : NULL;
	j->log_path = strdup(q->log_path ? q->log_path : "");
	j->docker = strdup(q->docker ? q->docker : "docker");
	j->env = strv_copy(q->env);
	j->build_args = strv_copy(q->build_args);
	j->force = q->force_rebuild;
	j->plan_only = q->plan_only;
	j->builder = q->builder;
	if (!j->context_dir || !j->repository || (q->registry_url && !j->registry_url) ||
	    !j->log_path || !j->docker || !j->env || !j->build_args)
		return -ENOMEM;
	return 0;
}

int up_image_ensure(uv_loop_t *loop, struct up_http *http, const struct up_image_request *req,
		    up_image_progress_fn progress_cb, up_image_done_fn done, void *ud,
		    struct up_image_job **ret)
{
	struct up_image_job *j;
	struct hash_work *w;
	int k;

	if (!req->context_dir || !req->repository ||
	    (!req->plan_only && (!req->registry_url || !req->log_path)) || !done ||
	    !up_image_builder_to_string(req->builder))
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	w = calloc(1, sizeof(*w));
	if (!j || !w) {
		free(j);
		free(w);
		return -ENOMEM;
	}
	*j = (struct up_image_job){.loop = loop,
				   .http = http,
				   .progress = progress_cb,
				   .done = done,
				   .ud = ud,
				   .state = JOB_HASHING};
	k = copy_request(j, req);
	w->job = j;
	w->req.data = w;
	w->dir = strdup(req->context_dir);
	w->dockerfile = req->dockerfile ? strdup(req->dockerfile) : NULL;
	w->only = req->hash_only ? strv_copy(req->hash_only) : NULL;
	w->args = strv_copy(req->build_args);
	if (k >= 0 && (!w->dir || !w->args || (req->dockerfile && !w->dockerfile) ||
		       (req->hash_only && !w->only)))
		k = -ENOMEM;
	if (k >= 0)
		k = uv_queue_work(loop, &w->req, hash_work, hash_done);
	if (k < 0) {
		hash_work_free(w);
		job_free(j);
		return k;
	}
	j->work = w;
	if (ret)
		*ret = j;
	return 0;
}

void up_image_cancel(struct up_image_job *j)
{
	if (!j)
		return;
	log_debug("image %s: cancelled while %s", j->repository, job_state_names[j->state]);
	if (j->work) {
		j->work->job = NULL;
		(void)uv_cancel((uv_req_t *)&j->work->req); /* hash_done() runs with UV_ECANCELED */
	}
	if (j->req)
		up_http_cancel(j->req);
	if (j->run)
		up_image_run_kill(j->run);
	if (j->log)
		up_image_log_close(j->log, NULL, NULL);
	job_free(j);
}
