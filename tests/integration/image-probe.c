/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test driver for uplinkd's image module: runs up_image_ensure() once on a real
 * loop and prints one JSON line per progress event and one for the result. Not
 * installed; used by tests/integration/test_image.py.
 *
 *   image-probe --context DIR --repo REPO --registry URL --log FILE [--force]
 *               [--docker BIN] [--env NAME=VALUE]... [--build-arg NAME=VALUE]...
 *               [--builder auto|legacy|buildkit] [--cancel-on PHASE:STEP]
 *
 * Exit: 0 done, 1 failed, 2 usage, 3 cancelled (after --cancel-on), 4 loop left open.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "errors.h"
#include "http.h"
#include "image.h"

#define MAX_LIST 32

static struct up_image_job *job;
static const char *cancel_phase;
static unsigned cancel_step;
static int status = 1;

static void print(json_t *line)
{
	char *s = json_dumps(line, JSON_COMPACT);

	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(line);
}

static void on_progress(const struct up_image_progress *p, void *ud)
{
	print(json_pack("{s:s, s:s, s:i, s:i, s:s}", "event", "progress", "phase", p->phase, "step",
			(int)p->step, "total", (int)p->total, "message", p->message));
	if (cancel_phase && !strcmp(cancel_phase, p->phase) && p->step >= cancel_step) {
		up_image_cancel(job);
		job = NULL;
		status = 3;
		print(json_pack("{s:s}", "event", "cancelled"));
	}
}

static void on_done(const struct up_image_result *res, void *ud)
{
	job = NULL;
	status = res->r < 0 ? 1 : 0;
	print(json_pack("{s:s, s:b, s:i, s:s?, s:s?, s:s?, s:b, s:s?, s:s?}", "event", "done", "ok",
			res->r >= 0, "r", res->r, "name", res->r < 0 ? up_error_name(res->e) : NULL,
			"ref", res->ref, "tag", res->tag, "built", res->built, "error", res->error,
			"log", res->log_path));
}

static void usage(void)
{
	fprintf(stderr,
		"usage: image-probe --context DIR --repo REPO --registry URL --log FILE [--force]\n"
		"       [--docker BIN] [--env N=V]... [--build-arg N=V]... [--builder B] "
		"[--cancel-on PHASE:STEP]\n");
	exit(2);
}

static void walk_close(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"context", required_argument, NULL, 'c'},
		{"repo", required_argument, NULL, 'r'},
		{"registry", required_argument, NULL, 'R'},
		{"log", required_argument, NULL, 'l'},
		{"force", no_argument, NULL, 'f'},
		{"docker", required_argument, NULL, 'd'},
		{"env", required_argument, NULL, 'e'},
		{"build-arg", required_argument, NULL, 'a'},
		{"builder", required_argument, NULL, 'b'},
		{"cancel-on", required_argument, NULL, 'C'},
		{NULL, 0, NULL, 0},
	};
	const char *env[MAX_LIST + 1] = {0}, *args[MAX_LIST + 1] = {0};
	struct up_image_request req = {.env = env, .build_args = args};
	size_t n_env = 0, n_args = 0;
	struct up_http *http;
	uv_loop_t loop;
	char *colon;
	int c, k;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': req.context_dir = optarg; break;
		case 'r': req.repository = optarg; break;
		case 'R': req.registry_url = optarg; break;
		case 'l': req.log_path = optarg; break;
		case 'f': req.force_rebuild = true; break;
		case 'd': req.docker = optarg; break;
		case 'e':
			if (n_env < MAX_LIST)
				env[n_env++] = optarg;
			break;
		case 'a':
			if (n_args < MAX_LIST)
				args[n_args++] = optarg;
			break;
		case 'b':
			req.builder = up_image_builder_from_string(optarg);
			if ((int)req.builder < 0)
				usage();
			break;
		case 'C':
			colon = strchr(optarg, ':');
			if (!colon)
				usage();
			*colon = '\0';
			cancel_phase = optarg;
			cancel_step = (unsigned)atoi(colon + 1);
			break;
		default: usage();
		}
	}
	if (!req.context_dir || !req.repository || !req.registry_url || !req.log_path)
		usage();
	if (uv_loop_init(&loop) < 0 || up_http_new(&loop, &http) < 0)
		return 2;
	k = up_image_ensure(&loop, http, &req, on_progress, on_done, NULL, &job);
	if (k < 0) {
		fprintf(stderr, "image-probe: up_image_ensure: %s\n", strerror(-k));
		return 2;
	}
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	up_http_free(http);
	(void)uv_run(&loop, UV_RUN_DEFAULT);
	k = uv_loop_close(&loop);
	if (k < 0) {
		fprintf(stderr, "image-probe: the loop has handles left open\n");
		uv_walk(&loop, walk_close, NULL);
		(void)uv_run(&loop, UV_RUN_DEFAULT);
		(void)uv_loop_close(&loop);
		return 4;
	}
	return status;
}
