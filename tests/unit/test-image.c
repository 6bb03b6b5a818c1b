/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agent images: the build-context hash (stability, what changes it, what it refuses,
 * its limits), reading docker's lines, and whole jobs against a docker stand-in
 * (tests/data/image/fake-docker) with --force-rebuild, so no registry is needed here
 * (tests/integration/test_image.py has the real dockerd and registry). The child runner
 * and the log writer are in test-image-run.c.
 */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "bounds.h"
#include "fileio.h"
#include "http.h"
#include "image-private.h"
#include "image.h"
#include "image-fixture.h"

static int hash_of(const char *dir, const char *const *args, const struct up_image_limits *lim,
		   char hex[65], char *err, size_t err_len)
{
	return up_image_context_hash(dir, NULL, args, lim, hex, err, err_len);
}

static void ctx_hash(char hex[65])
{
	char dir[128], err[512];
	int r;

	(void)snprintf(dir, sizeof(dir), "%s/ctx", tmp);
	r = hash_of(dir, NULL, NULL, hex, err, sizeof(err));
	if (r < 0)
		fail_msg("hash failed: %s", err);
}

static int ctx_refused(char *err, size_t err_len)
{
	char dir[128], hex[65];

	(void)snprintf(dir, sizeof(dir), "%s/ctx", tmp);
	return hash_of(dir, NULL, NULL, hex, err, err_len);
}

static void test_hash_stable(void **state)
{
	char a[65], b[65], c[65], tag[21], dir[128], err[256];

	(void)state;
	ctx_hash(a);
	ctx_hash(b);
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), 64);
	/* The same content elsewhere, copied with other timestamps and other read bits. */
	sh("cp -r %s/ctx %s/other && chmod 600 %s/other/hello.txt && touch -d 2001-01-01 "
	   "%s/other/*",
	   tmp, tmp, tmp, tmp);
	(void)snprintf(dir, sizeof(dir), "%s/other", tmp);
	assert_int_equal(hash_of(dir, NULL, NULL, c, err, sizeof(err)), 0);
	assert_string_equal(a, c);
	up_image_tag(a, tag);
	assert_int_equal(strlen(tag), 20);
	assert_memory_equal(tag, "ctx-", 4);
	assert_memory_equal(tag + 4, a, 16);
}

/* The fixture as committed hashes to this: a change to the algorithm shows here. */
static void test_hash_golden(void **state)
{
	char hex[65], err[256];

	(void)state;
	assert_int_equal(hash_of(DATA "/basic", NULL, NULL, hex, err, sizeof(err)), 0);
	assert_string_equal(hex,
			    "803fac66f03077ca78ede86231bbb84daad35edde1287025e9cb0a92bb9f13aa");
}

/* Each run with $D the context folder. */
static const char *const changes[] = {
	"printf 'hello from the fixturE\\n' > $D/hello.txt", /* one byte */
	"chmod +x $D/hello.txt",			     /* the executable bit */
	"chmod -x $D/run.sh",
	"mv $D/sub/nested.txt $D/sub/nested2.txt",	 /* a rename */
	"echo new > $D/added",				 /* an added file */
	"mkdir $D/empty",				 /* an added folder */
	"rm $D/sub/link && ln -s ../run.sh $D/sub/link", /* a symlink's target */
	"rm $D/sub/link && cp $D/hello.txt $D/sub/link", /* a symlink made a file */
	"printf '' > $D/sub/nested.txt",		 /* emptied */
	"mkdir $D/x && mv $D/hello.txt $D/x/",		 /* moved into a folder */
};

static void test_hash_changes(void **state)
{
	char before[65], after[65];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(changes); i++) {
		assert_int_equal(setup(state), 0);
		ctx_hash(before);
		sh("D=%s/ctx; %s", tmp, changes[i]);
		ctx_hash(after);
		if (!strcmp(before, after))
			fail_msg("'%s' did not change the hash", changes[i]);
		assert_int_equal(teardown(state), 0);
	}
	/* Build args are part of it. */
	assert_int_equal(setup(state), 0);
	{
		const char *const a1[] = {"USER_UID=1000", NULL}, *const a2[] = {"USER_UID=1001",
										 NULL};
		char h1[65], h2[65], dir[128], err[256];
		(void)snprintf(dir, sizeof(dir), "%s/ctx", tmp);
		assert_int_equal(hash_of(dir, a1, NULL, h1, err, sizeof(err)), 0);
		assert_int_equal(hash_of(dir, a2, NULL, h2, err, sizeof(err)), 0);
		assert_string_not_equal(h1, h2);
		ctx_hash(before);
		assert_string_not_equal(h1, before);
	}
	assert_int_equal(teardown(state), 0);
}

/* .dockerignore: what docker does not see does not change the tag; what it sees does. */
static void test_hash_dockerignore(void **state)
{
	char base[65], h[65];

	(void)state;
	sh("mkdir -p %s/ctx/sub && echo code > %s/ctx/agent.c && echo h > %s/ctx/sub/x.h && "
	   "echo keep > %s/ctx/sub/keep.h && mkfifo %s/ctx/sub/fifo",
	   tmp, tmp, tmp, tmp, tmp);
	sh("printf '# comment\n*.c\n/sub\n!sub/keep.h\n\n' > %s/ctx/.dockerignore", tmp);
	ctx_hash(base); /* the FIFO in an ignored folder is never even looked at */
	sh("echo more >> %s/ctx/agent.c && echo more >> %s/ctx/sub/x.h", tmp, tmp);
	ctx_hash(h);
	assert_string_equal(base, h);
	sh("echo more >> %s/ctx/sub/keep.h", tmp);
	ctx_hash(h);
	assert_string_not_equal(base, h); /* taken back by "!" */
	memcpy(base, h, sizeof(h));
	sh("echo more >> %s/ctx/hello.txt", tmp);
	ctx_hash(h);
	assert_string_not_equal(base, h);
	memcpy(base, h, sizeof(h));
	sh("echo '*.c' >> %s/ctx/.dockerignore", tmp); /* docker sees .dockerignore itself */
	ctx_hash(h);
	assert_string_not_equal(base, h);
}

static void test_refuse_special(void **state)
{
	char err[512];
	int sfd;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	(void)state;
	sh("mkfifo %s/ctx/sub/fifo", tmp);
	assert_int_equal(ctx_refused(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'sub/fifo' is a FIFO"));
	sh("rm %s/ctx/sub/fifo", tmp);

	sfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(sfd >= 0);
	(void)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ctx/sock", tmp);
	assert_int_equal(bind(sfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(ctx_refused(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'sock' is a socket"));
	close(sfd);
	sh("rm %s/ctx/sock", tmp);

	sh("rm %s/ctx/Dockerfile", tmp);
	assert_int_equal(ctx_refused(err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no Dockerfile"));
	sh("ln -s hello.txt %s/ctx/Dockerfile", tmp);
	assert_int_equal(ctx_refused(err, sizeof(err)), -ENOENT);
}

static const char *const escaping[] = {"../../outside", "/etc/passwd", "../../x", "a/../../../x",
				       ""};
static const char *const staying[] = {"../hello.txt", "./nested.txt",	      "x/../../run.sh",
				      "dangling",     "..//sub/./nested.txt", "../outside"};

static void test_refuse_escaping_symlinks(void **state)
{
	char err[512];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(escaping); i++) {
		if (!*escaping[i])
			continue; /* symlink(2) refuses an empty target */
		sh("rm -f %s/ctx/sub/l && ln -s '%s' %s/ctx/sub/l", tmp, escaping[i], tmp);
		assert_int_equal(ctx_refused(err, sizeof(err)), -ELOOP);
		assert_non_null(strstr(err, "'sub/l' points outside the folder"));
	}
	for (size_t i = 0; i < ELEMENTSOF(staying); i++) {
		sh("rm -f %s/ctx/sub/l && ln -s '%s' %s/ctx/sub/l", tmp, staying[i], tmp);
		if (ctx_refused(err, sizeof(err)) < 0)
			fail_msg("'%s' refused: %s", staying[i], err);
	}
	/* The root itself may be reached through a symlink. */
	{
		char dir[128], hex[65];
		sh("rm -f %s/ctx/sub/l && ln -s ctx %s/via", tmp, tmp);
		(void)snprintf(dir, sizeof(dir), "%s/via", tmp);
		assert_int_equal(hash_of(dir, NULL, NULL, hex, err, sizeof(err)), 0);
	}
}

static void test_limits(void **state)
{
	struct up_image_limits files = {.max_files = 3}, bytes = {.max_bytes = 100};
	char dir[128], hex[65], err[512], path[160];

	(void)state;
	(void)snprintf(dir, sizeof(dir), "%s/ctx", tmp);
	assert_int_equal(hash_of(dir, NULL, &files, hex, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "more than 3 files and folders"));
	/* 62 + 23 + 19 + 7 bytes: past 100. */
	assert_int_equal(hash_of(dir, NULL, &bytes, hex, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "more than 100 bytes"));
	bytes.max_bytes = 62 + 23 + 19 + 7;
	assert_int_equal(hash_of(dir, NULL, &bytes, hex, err, sizeof(err)), 0);
	/* Nesting. */
	(void)snprintf(path, sizeof(path), "%s/ctx", tmp);
	sh("cd %s && for i in $(seq 1 %d); do mkdir d && cd d; done", path,
	   UP_IMAGE_CONTEXT_MAX_DEPTH + 1);
	assert_int_equal(hash_of(dir, NULL, NULL, hex, err, sizeof(err)), -ELOOP);
	assert_non_null(strstr(err, "nests folders"));
	/* A missing folder. */
	assert_int_equal(hash_of("/nonexistent/ctx", NULL, NULL, hex, err, sizeof(err)), -ENOENT);
}

struct line_case {
	bool push;
	const char *line;
	enum up_image_line_kind kind;
	unsigned step, total;
	const char *message;
};

static const struct line_case lines[] = {
	{false, "Step 3/7 : RUN apt-get update && apt-get install -y tmux", UP_IMAGE_LINE_STEP, 3,
	 7, "RUN apt-get update && apt-get install -y tmux"},
	{false, "Step 1/2 : FROM local/bb:1", UP_IMAGE_LINE_STEP, 1, 2, "FROM local/bb:1"},
	{false, "Step 10/12 : COPY . /app\r", UP_IMAGE_LINE_STEP, 10, 12, "COPY . /app"},
	{false, " ---> Running in 3c4f", UP_IMAGE_LINE_OTHER, 0, 0, ""},
	{false, "Step 8/7 : nonsense", UP_IMAGE_LINE_OTHER, 0, 0, ""},
	{false, "Step x/7 : nonsense", UP_IMAGE_LINE_OTHER, 0, 0, ""},
	{false, "Sending build context to Docker daemon  2.048kB", UP_IMAGE_LINE_OTHER, 0, 0, ""},
	{false, "#5 [2/3] RUN echo hi", UP_IMAGE_LINE_STEP, 2, 3, "RUN echo hi"},
	{false, "#7 [stage-1 4/5] COPY --from=build /x /y", UP_IMAGE_LINE_STEP, 4, 5,
	 "COPY --from=build /x /y"},
	{false, "#1 [internal] load build definition from Dockerfile", UP_IMAGE_LINE_OTHER, 0, 0,
	 ""},
	{false, "#5 0.254 hi", UP_IMAGE_LINE_OTHER, 0, 0, ""},
	{true, "5f70bf18a086: Preparing", UP_IMAGE_LINE_LAYER, 0, 0, "5f70bf18a086"},
	{true, "5f70bf18a086: Waiting", UP_IMAGE_LINE_LAYER, 0, 0, "5f70bf18a086"},
	{true, "5f70bf18a086: Pushed", UP_IMAGE_LINE_LAYER_DONE, 0, 0, "5f70bf18a086"},
	{true, "a1b2c3d4e5f6: Layer already exists", UP_IMAGE_LINE_LAYER_DONE, 0, 0,
	 "a1b2c3d4e5f6"},
	{true, "a1b2c3d4e5f6: Mounted from uplink/base", UP_IMAGE_LINE_LAYER_DONE, 0, 0,
	 "a1b2c3d4e5f6"},
	{true, "ctx-0123456789abcdef: digest: sha256:abcd size: 527", UP_IMAGE_LINE_DIGEST, 0, 0,
	 "ctx-0123456789abcdef: digest: sha256:abcd size: 527"},
	{true, "The push refers to repository [localhost:5000/uplink/claude]", UP_IMAGE_LINE_OTHER,
	 0, 0, ""},
	{true, "Get \"http://x/v2/\": dial tcp: connection refused", UP_IMAGE_LINE_OTHER, 0, 0, ""},
	{true, "Step 3/7 : RUN x", UP_IMAGE_LINE_OTHER, 0, 0, ""},
};

static void test_parse_lines(void **state)
{
	struct up_image_line l;
	char longline[400];

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
		enum up_image_line_kind k = up_image_parse_line(lines[i].push, lines[i].line, &l);
		if (k != lines[i].kind)
			fail_msg("'%s': kind %d, expected %d", lines[i].line, k, lines[i].kind);
		assert_int_equal(l.step, lines[i].step);
		assert_int_equal(l.total, lines[i].total);
		assert_string_equal(l.message, lines[i].message);
	}
	/* A long instruction is cut to the message size. */
	memset(longline, 'x', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	memcpy(longline, "Step 1/1 : RUN ", 15);
	assert_int_equal(up_image_parse_line(false, longline, &l), UP_IMAGE_LINE_STEP);
	assert_int_equal(strlen(l.message), sizeof(l.message) - 1);
}

static void test_repo_path_and_builder(void **state)
{
	(void)state;
	assert_string_equal(up_image_repo_path("localhost:5000/uplink/claude"), "uplink/claude");
	assert_string_equal(up_image_repo_path("localhost/uplink/claude"), "uplink/claude");
	assert_string_equal(up_image_repo_path("registry.example.com/a/b"), "a/b");
	assert_string_equal(up_image_repo_path("uplink/claude"), "uplink/claude");
	assert_string_equal(up_image_repo_path("claude"), "claude");
	assert_int_equal(up_image_builder_from_string("legacy"), UP_IMAGE_BUILDER_LEGACY);
	assert_int_equal(up_image_builder_from_string("nope"), _UP_IMAGE_BUILDER_INVALID);
	assert_string_equal(up_image_builder_to_string(UP_IMAGE_BUILDER_BUILDKIT), "buildkit");
}

/* ---- Whole jobs against the stand-in, forced (no registry) ---- */

struct job_state {
	char events[32][160];
	int n_events;
	bool done;
	int r;
	enum up_error e;
	bool built, asked, present;
	char ref[128], error[2048];
	bool cancel_on_step2;
	struct up_image_job *job;
};

static void job_progress(const struct up_image_progress *p, void *ud)
{
	struct job_state *s = ud;

	if (s->n_events < 32)
		(void)snprintf(s->events[s->n_events++], sizeof(s->events[0]), "%s %u/%u %s",
			       p->phase, p->step, p->total, p->message);
	if (s->cancel_on_step2 && p->step == 2 && !strcmp(p->phase, "build")) {
		up_image_cancel(s->job);
		s->job = NULL;
	}
}

static void job_done(const struct up_image_result *res, void *ud)
{
	struct job_state *s = ud;

	s->done = true;
	s->r = res->r;
	s->e = res->e;
	s->built = res->built;
	s->asked = res->asked;
	s->present = res->present;
	(void)snprintf(s->ref, sizeof(s->ref), "%s", res->ref ? res->ref : "");
	(void)snprintf(s->error, sizeof(s->error), "%s", res->error ? res->error : "");
}

static void run_job(struct job_state *s, const char *docker, const char *const *env)
{
	char dir[128], log[128];
	struct up_image_request req = {.context_dir = dir,
				       .repository = "localhost:5000/uplink/test",
				       .registry_url = "http://127.0.0.1:1",
				       .force_rebuild = true,
				       .log_path = log,
				       .docker = docker,
				       .env = env};
	struct up_http *http;
	uv_loop_t loop;

	(void)snprintf(dir, sizeof(dir), "%s/ctx", tmp);
	(void)snprintf(log, sizeof(log), "%s/build.log", tmp);
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_http_new(&loop, &http), 0);
	assert_int_equal(up_image_ensure(&loop, http, &req, job_progress, job_done, s, &s->job), 0);
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	up_http_free(http);
	close_loop(&loop);
}

static void test_job_build_and_push(void **state)
{
	static const char *const want[] = {
		"build 0/0 docker build",
		"build 1/3 FROM local/bb:1",
		"build 2/3 RUN make",
		"build 3/3 COPY hello.txt /hello.txt",
		"push 0/0 docker push",
		"push 1/2 layer a1b2c3d4e5f6 pushed",
		"push 2/2 layer 5f70bf18a086 pushed",
	};
	struct job_state s = {0};
	char hex[65], tag[21], expect[128], *log = NULL, path[128];
	size_t len;

	(void)state;
	run_job(&s, DATA "/fake-docker", NULL);
	assert_true(s.done);
	if (s.r < 0)
		fail_msg("job failed: %s", s.error);
	assert_true(s.built);
	ctx_hash(hex);
	up_image_tag(hex, tag);
	(void)snprintf(expect, sizeof(expect), "localhost:5000/uplink/test:%s", tag);
	assert_string_equal(s.ref, expect);
	assert_int_equal(s.n_events, (int)ELEMENTSOF(want) + 1);
	for (size_t i = 0; i < ELEMENTSOF(want); i++)
		assert_string_equal(s.events[i], want[i]);
	assert_true(
		!strncmp(s.events[ELEMENTSOF(want)], "push 2/2 ctx-0123456789abcdef: digest:", 38));
	/* The log has the probe, both commands and all their output. */
	(void)snprintf(path, sizeof(path), "%s/build.log", tmp);
	assert_int_equal(up_read_file(path, 1 << 20, &log, &len), 0);
	assert_non_null(strstr(log, "buildx version\ndocker: 'buildx' is not a docker command."));
	/* Builds use the host's network: no bridge is needed (dockerd --bridge=none). */
	assert_non_null(
		strstr(log, " build --network host --no-cache -t localhost:5000/uplink/test:ctx-"));
	assert_non_null(strstr(log, "Step 3/3 : COPY hello.txt /hello.txt\nSuccessfully built"));
	assert_non_null(strstr(log, " push localhost:5000/uplink/test:ctx-"));
	assert_non_null(strstr(log, "5f70bf18a086: Pushed\n"));
	free(log);
}

static void test_job_build_fails(void **state)
{
	const char *const env[] = {"FAKE_DOCKER_FAIL=build", NULL};
	struct job_state s = {0};
	char logpath[160];

	(void)state;
	run_job(&s, DATA "/fake-docker", env);
	assert_true(s.done);
	assert_int_equal(s.r, -EIO);
	assert_int_equal(s.e, UP_ERR_IMAGE_BUILD_FAILED);
	assert_false(s.built);
	assert_non_null(
		strstr(s.error, "docker build failed at step 2/3 (RUN make) with exit code 2"));
	assert_non_null(
		strstr(s.error, "\n  The command '/bin/sh -c make' returned a non-zero code: 2"));
	assert_non_null(strstr(s.error, "No targets specified"));
	(void)snprintf(logpath, sizeof(logpath), "full log: %s/build.log", tmp);
	assert_non_null(strstr(s.error, logpath));
}

static void test_job_errors(void **state)
{
	const char *const env[] = {"FAKE_DOCKER_SLEEP=30", NULL};
	struct job_state s = {0};
	uint64_t t0;

	(void)state;
	/* No docker. */
	run_job(&s, "/nonexistent/docker", NULL);
	assert_true(s.done);
	assert_int_equal(s.r, UV_ENOENT);
	assert_int_equal(s.e, UP_ERR_PREREQ_MISSING);
	assert_non_null(strstr(s.error, "cannot run '/nonexistent/docker'"));

	/* A bad context: named, before anything runs. */
	memset(&s, 0, sizeof(s));
	sh("mkfifo %s/ctx/fifo", tmp);
	run_job(&s, DATA "/fake-docker", NULL);
	assert_int_equal(s.r, -EINVAL);
	assert_int_equal(s.e, UP_ERR_IMAGE_CONTEXT_INVALID);
	assert_non_null(strstr(s.error, "the build context "));
	assert_non_null(strstr(s.error, "'fifo' is a FIFO"));
	assert_int_equal(s.n_events, 0);
	sh("rm %s/ctx/fifo", tmp);

	/* Cancelled during a step: docker's group is killed, nothing more is reported. */
	memset(&s, 0, sizeof(s));
	s.cancel_on_step2 = true;
	t0 = uv_hrtime();
	run_job(&s, DATA "/fake-docker", env);
	assert_false(s.done);
	assert_true(uv_hrtime() - t0 < 5000000000ull);
	assert_string_equal(s.events[s.n_events - 1], "build 2/3 RUN make");
}

/* With no registry listening, the check fails and says which registry and what to do. */
static void test_job_registry_unreachable(void **state)
{
	char dir[128], log[128];
	struct up_image_request req = {.context_dir = dir,
				       .repository = "localhost:5000/uplink/test",
				       .registry_url = "http://127.0.0.1:1/",
				       .log_path = log,
				       .docker = DATA "/fake-docker"};
	struct job_state s = {0};
	struct up_http *http;
	uv_loop_t loop;

	(void)state;
	(void)snprintf(dir, sizeof(dir), "%s/ctx", tmp);
	(void)snprintf(log, sizeof(log), "%s/build.log", tmp);
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_http_new(&loop, &http), 0);
	assert_int_equal(up_image_ensure(&loop, http, &req, job_progress, job_done, &s, NULL), 0);
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	up_http_free(http);
	close_loop(&loop);
	assert_true(s.done);
	assert_true(s.r < 0);
	assert_int_equal(s.e, UP_ERR_REGISTRY_UNREACHABLE);
	assert_non_null(strstr(s.error, "cannot reach the registry at http://127.0.0.1:1 "));
	assert_non_null(strstr(s.error, "--force-rebuild"));
	assert_int_equal(access(log, F_OK), -1); /* nothing built, no log */
}

/* --dry-run: a hash, maybe a question to the registry, never docker nor a log. */
static void plan_job(struct job_state *s, const char *registry_url, bool force)
{
	char dir[128];
	struct up_image_request req = {.context_dir = dir,
				       .repository = "localhost:5000/uplink/test",
				       .registry_url = registry_url,
				       .force_rebuild = force,
				       .plan_only = true,
				       .docker = "/nonexistent/docker"};
	struct up_http *http;
	uv_loop_t loop;

	*s = (struct job_state){0};
	(void)snprintf(dir, sizeof(dir), "%s/ctx", tmp);
	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(up_http_new(&loop, &http), 0);
	assert_int_equal(up_image_ensure(&loop, http, &req, job_progress, job_done, s, NULL), 0);
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	up_http_free(http);
	close_loop(&loop);
	assert_true(s->done);
	assert_false(s->built);
	assert_non_null(strstr(s->ref, "localhost:5000/uplink/test:ctx-"));
}

static void test_job_plan_only(void **state)
{
	struct job_state s;

	(void)state;
	plan_job(&s, NULL, false); /* nothing to ask: the hash alone */
	assert_int_equal(s.r, 0);
	assert_false(s.asked);
	plan_job(&s, "http://127.0.0.1:1", true); /* forced: a run would not ask either */
	assert_int_equal(s.r, 0);
	assert_false(s.asked);
	plan_job(&s, "http://127.0.0.1:1", false); /* the question fails; the ref is still named */
	assert_true(s.r < 0);
	assert_int_equal(s.e, UP_ERR_REGISTRY_UNREACHABLE);
	assert_false(s.asked);
	assert_non_null(strstr(s.error, "cannot reach the registry at http://127.0.0.1:1 "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hash_stable, setup, teardown),
		cmocka_unit_test(test_hash_golden),
		cmocka_unit_test(test_hash_changes),
		cmocka_unit_test_setup_teardown(test_hash_dockerignore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuse_special, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuse_escaping_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test(test_parse_lines),
		cmocka_unit_test(test_repo_path_and_builder),
		cmocka_unit_test_setup_teardown(test_job_build_and_push, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_build_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_registry_unreachable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_plan_only, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
