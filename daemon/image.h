/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "errors.h"
#include "http.h"
#include "util.h"

/*
 * Agent images. The tag is a hash of the agent's build context (plus the build
 * arguments), so an image is rebuilt exactly when its context changed or the caller
 * forces it:
 *
 *   hash the context (threadpool) -> HEAD /v2/<repo>/manifests/<tag> (libcurl on the
 *   loop) -> [absent or forced] docker build, docker push (child processes whose output
 *   goes line by line to a log file, written off the loop, and to a progress callback)
 *   -> done(ref, built)
 *
 * Nothing here blocks the loop.
 */
struct up_image_job;

enum up_image_builder {
	UP_IMAGE_BUILDER_AUTO,	   /* BuildKit when `docker buildx version` works, else legacy */
	UP_IMAGE_BUILDER_LEGACY,   /* DOCKER_BUILDKIT=0: "Step N/M :" lines */
	UP_IMAGE_BUILDER_BUILDKIT, /* DOCKER_BUILDKIT=1 --progress=plain: "#N [K/M] ..." lines */
	_UP_IMAGE_BUILDER_MAX,
	_UP_IMAGE_BUILDER_INVALID = -EINVAL,
};

/* All strings are copied by up_image_ensure(). */
struct up_image_request {
	const char *context_dir; /* absolute, e.g. ".../agents": what docker build is given */
	/* The Dockerfile, relative to context_dir ("claude/Dockerfile"); NULL: "Dockerfile". */
	const char *dockerfile;
	/* The top-level entries of the context the tag covers ("common", "claude"); the
	 * Dockerfile may COPY only from them. NULL-terminated; NULL: the whole context. */
	const char *const *hash_only;
	const char *repository;	  /* e.g. "localhost:5000/uplink/claude" */
	const char *registry_url; /* for the HEAD, e.g. "http://127.0.0.1:5000" */
	bool force_rebuild;	  /* skip the registry check; build with --no-cache */
	/* --dry-run: hash the context and ask the registry (registry_url NULL: only hash), and
	 * build nothing; the result says what a run would do. No log is written. */
	bool plan_only;
	const char *log_path; /* the full docker output goes here (truncated, 0600) */
	const char *docker;   /* "docker" when NULL; searched in PATH */
	const char *const *
		env; /* "NAME=value" added to docker's environment (DOCKER_HOST); NULL-terminated */
	const char *const
		*build_args; /* "NAME=value" for --build-arg, part of the hash; NULL-terminated */
	enum up_image_builder builder;
};

struct up_image_progress {
	const char *phase;   /* "build" or "push" */
	unsigned step;	     /* 0 before the first step */
	unsigned total;	     /* 0 when not known yet */
	const char *message; /* short: the Dockerfile instruction or the push status */
};

/*
 * r is 0 (ref and built valid) or -errno with `error` a sentence that names the step,
 * the exit code, the last lines of output and the log file, or the registry and what to do.
 */
struct up_image_result {
	int r;
	enum up_error e; /* on failure: IMAGE_CONTEXT_INVALID, REGISTRY_UNREACHABLE,
			  * IMAGE_BUILD_FAILED, PREREQ_MISSING (no docker) or INTERNAL_ERROR */
	const char *ref; /* "<repository>:ctx-<16 hex>" */
	const char *tag;
	bool built;
	/* plan_only: whether the registry was asked (not when forced or without registry_url),
	 * and whether it has ref. On a failed question, r < 0 and ref is still set. */
	bool asked, present;
	const char *error;
	const char *log_path;
};

typedef void (*up_image_progress_fn)(const struct up_image_progress *p, void *ud);
/* Called once; the job is gone when it returns. */
typedef void (*up_image_done_fn)(const struct up_image_result *res, void *ud);

/* The job belongs to the loop until done or up_image_cancel(); *ret may be NULL. */
int up_image_ensure(uv_loop_t *loop, struct up_http *http, const struct up_image_request *req,
		    up_image_progress_fn progress, up_image_done_fn done, void *ud,
		    struct up_image_job **ret) _wur_;
/*
 * Stops the job: the HTTP request is dropped, docker's process group killed, and no
 * callback runs any more. The memory goes once the loop has closed what it held.
 * Not to be called after done.
 */
void up_image_cancel(struct up_image_job *job);

const char *up_image_builder_to_string(enum up_image_builder b);
enum up_image_builder up_image_builder_from_string(const char *s);

/* ---- The pieces, public for tests. ---- */

/* Limits for a context; 0 means the default of bounds.h. */
struct up_image_limits {
	size_t max_files;
	size_t max_bytes;
};

/* Which part of a context a tag covers; NULL fields as in struct up_image_request. */
struct up_image_scope {
	const char *dockerfile;
	const char *const *only;
};

/*
 * Blocking: hashes `dir` (every regular file's relative path, executable bit and bytes,
 * symlinks by their target, folders by name, sorted by path) and the build args with
 * SHA-256, into 64 hex digits plus NUL. With a scope, only its top-level entries (and the
 * root's .dockerignore) count, and its Dockerfile must exist. Refuses special files,
 * symlinks that leave the folder and contexts past the limits (-EINVAL, -ELOOP, -EFBIG)
 * with `err` saying which.
 */
int up_image_context_hash(const char *dir, const struct up_image_scope *scope,
			  const char *const *build_args, const struct up_image_limits *lim,
			  char hex[65], char *err, size_t err_len) _wur_;

/* The tag for a hash: "ctx-" and its first 16 hex digits. */
void up_image_tag(const char *hex, char tag[21]);

/* The registry path of a repository: "localhost:5000/uplink/claude" -> "uplink/claude". */
const char *up_image_repo_path(const char *repository);

enum up_image_line_kind {
	UP_IMAGE_LINE_OTHER,
	UP_IMAGE_LINE_STEP,	  /* build: step/total/message */
	UP_IMAGE_LINE_LAYER,	  /* push: a layer is known (message: id) */
	UP_IMAGE_LINE_LAYER_DONE, /* push: a layer is in the registry (message: id) */
	UP_IMAGE_LINE_DIGEST,	  /* push: "<tag>: digest: sha256:... size: N" */
};

struct up_image_line {
	unsigned step, total;
	char message[128];
};

/* What one line of `docker build` (either builder) or `docker push` says. */
enum up_image_line_kind up_image_parse_line(bool push, const char *line, struct up_image_line *out);
