/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test and benchmark driver for uplinkd's Kubernetes client: it runs the daemon's
 * own code (kubeconfig, auth, HTTP on libuv, retries, watches) from the command line
 * and prints one JSON line per result. Not installed; used by tests/integration and
 * tests/bench.
 *
 *   kube-probe [--context C] [--kubeconfig PATHS] get PATH
 *   kube-probe ... list PATH [LABEL-SELECTOR]
 *   kube-probe ... apply [--dry-run] [--sequential] FILE.json...
 *   kube-probe ... delete PATH...
 *   kube-probe ... watch KIND SELECTOR EVENTS [SECONDS]
 *   kube-probe ... logs NAMESPACE POD CONTAINER LINES [SECONDS]
 *   kube-probe ... raw METHOD PATH TIMEOUT-MS [BODY [HEADER VALUE]]   (up_kube_raw)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "kube-watch.h"
#include "kube.h"
#include "kubeconfig.h"

static uv_loop_t *loop;
static struct up_kube *kube;
static int pending, failures;
static long want_events, got_events;
static uv_timer_t deadline;

static void print_result(const char *what, const struct up_kube_error *err, json_t *obj)
{
	json_t *line = json_pack("{s:s, s:b}", "op", what, "ok", err == NULL);

	if (err) {
		(void)json_object_set_new(line, "error",
					  json_pack("{s:i, s:I, s:s, s:s}", "r", err->r, "code",
						    (json_int_t)err->code, "reason", err->reason,
						    "message", err->message));
		failures++;
	} else if (obj) {
		(void)json_object_set(line, "object", obj);
	}
	char *s = json_dumps(line, JSON_COMPACT);
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(line);
}

static void done_one(const struct up_kube_error *err, json_t *obj, void *ud)
{
	print_result(ud, err, obj);
	if (--pending == 0)
		uv_stop(loop);
}

static void apply_next(const struct up_kube_error *err, json_t *obj, void *ud);

static char **seq_files;
static bool seq_dry;

static json_t *load(const char *file)
{
	json_error_t e;
	json_t *o = json_load_file(file, 0, &e);

	if (!o) {
		fprintf(stderr, "kube-probe: %s: %s\n", file, e.text);
		exit(2);
	}
	return o;
}

static void apply_next(const struct up_kube_error *err, json_t *obj, void *ud)
{
	if (ud)
		print_result("apply", err, obj);
	if (!*seq_files) {
		uv_stop(loop);
		return;
	}
	json_t *o = load(*seq_files++);
	if (up_kube_apply(kube, o, seq_dry, apply_next, "apply", NULL) < 0)
		exit(2);
	json_decref(o);
}

static void on_event(enum up_watch_event ev, json_t *obj, void *ud)
{
	json_t *meta = json_object_get(obj, "metadata");
	json_t *line = json_pack("{s:s, s:O?, s:O?, s:O?, s:O?}", "event", up_watch_event_name(ev),
				 "namespace", json_object_get(meta, "namespace"), "name",
				 json_object_get(meta, "name"), "resourceVersion",
				 json_object_get(meta, "resourceVersion"), "phase",
				 json_object_get(json_object_get(obj, "status"), "phase"));
	char *s = json_dumps(line, JSON_COMPACT);

	(void)ud;
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(line);
	if (++got_events >= want_events)
		uv_stop(loop);
}

static void on_state(const char *error, void *ud)
{
	struct up_kube_watch *w = *(struct up_kube_watch **)ud;

	if (error) {
		printf("{\"state\":\"failing\",\"error\":\"%s\"}\n", "see stderr");
		fprintf(stderr, "kube-probe: watch: %s\n", error);
	} else {
		printf("{\"state\":\"synced\",\"objects\":%zu,\"resourceVersion\":\"%s\"}\n",
		       json_object_size(up_kube_watch_cache(w)), up_kube_watch_resource_version(w));
	}
	fflush(stdout);
}

static int on_log_line(const char *line, size_t len, void *ud)
{
	(void)ud;
	json_t *j = json_pack("{s:s%}", "line", line, len);
	char *s = json_dumps(j, JSON_COMPACT);

	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(j);
	if (++got_events >= want_events)
		uv_stop(loop);
	return 0;
}

static void on_log_end(const struct up_kube_error *err, json_t *obj, void *ud)
{
	(void)obj;
	print_result(ud, err, NULL);
	uv_stop(loop);
}

static void on_raw(const struct up_kube_error *err, long status, const char *body, size_t len,
		   void *ud)
{
	json_t *line = json_pack("{s:s, s:b, s:I, s:s%}", "op", "raw", "ok", err == NULL, "status",
				 (json_int_t)status, "body", body ? body : "", len);

	(void)ud;
	if (err)
		(void)json_object_set_new(line, "error",
					  json_pack("{s:i, s:I, s:s, s:s}", "r", err->r, "code",
						    (json_int_t)err->code, "reason", err->reason,
						    "message", err->message));
	char *s = json_dumps(line, JSON_COMPACT);
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(line);
	failures += err != NULL;
	uv_stop(loop);
}

static int raw(int argc, char **argv)
{
	struct up_kube_raw_opts o = {
		.method = argv[1],
		.path = argv[2],
		.timeout_ms = atol(argv[3]),
		.body = argc > 4 ? argv[4] : NULL,
		.body_len = argc > 4 ? strlen(argv[4]) : 0,
		.header_name = argc > 6 ? argv[5] : NULL,
		.header_value = argc > 6 ? argv[6] : NULL,
	};

	return up_kube_raw(kube, &o, on_raw, NULL, NULL);
}

static void on_deadline(uv_timer_t *t)
{
	(void)t;
	fprintf(stderr, "kube-probe: timed out after %ld of %ld events\n", got_events, want_events);
	failures++;
	uv_stop(loop);
}

static int run(int argc, char **argv)
{
	const char *cmd = argv[0];
	int r = 0;

	if (!strcmp(cmd, "get") && argc == 2) {
		pending = 1;
		r = up_kube_get(kube, argv[1], done_one, "get", NULL);
	} else if (!strcmp(cmd, "list") && (argc == 2 || argc == 3)) {
		pending = 1;
		r = up_kube_list(kube, argv[1], argc == 3 ? argv[2] : NULL, NULL, done_one, "list",
				 NULL);
	} else if (!strcmp(cmd, "delete") && argc >= 2) {
		for (int i = 1; i < argc && r >= 0; i++, pending++)
			r = up_kube_delete(kube, argv[i], done_one, "delete", NULL);
	} else if (!strcmp(cmd, "apply") && argc >= 2) {
		bool dry = false, seq = false;
		int i = 1;
		for (; i < argc && argv[i][0] == '-'; i++) {
			dry |= !strcmp(argv[i], "--dry-run");
			seq |= !strcmp(argv[i], "--sequential");
		}
		if (seq) {
			seq_files = argv + i;
			seq_dry = dry;
			apply_next(NULL, NULL, NULL);
			return 0;
		}
		for (; i < argc && r >= 0; i++, pending++) {
			json_t *o = load(argv[i]);
			r = up_kube_apply(kube, o, dry, done_one, "apply", NULL);
			json_decref(o);
		}
	} else if (!strcmp(cmd, "watch") && (argc == 4 || argc == 5)) {
		static struct up_kube_watch *w;
		want_events = atol(argv[3]);
		(void)uv_timer_init(loop, &deadline);
		(void)uv_timer_start(&deadline, on_deadline,
				     (uint64_t)(argc == 5 ? atol(argv[4]) : 30) * 1000, 0);
		uv_unref((uv_handle_t *)&deadline);
		r = up_kube_watch_new(kube, argv[1], *argv[2] ? argv[2] : NULL, on_event, on_state,
				      &w, &w);
	} else if (!strcmp(cmd, "raw") && argc >= 4 && argc <= 7) {
		r = raw(argc, argv);
	} else if (!strcmp(cmd, "logs") && (argc == 5 || argc == 6)) {
		char path[512], full[1024];
		want_events = atol(argv[4]);
		(void)uv_timer_init(loop, &deadline);
		(void)uv_timer_start(&deadline, on_deadline,
				     (uint64_t)(argc == 6 ? atol(argv[5]) : 30) * 1000, 0);
		uv_unref((uv_handle_t *)&deadline);
		r = up_kube_path(path, sizeof(path), "Pod", argv[1], argv[2]);
		if (r >= 0 &&
		    snprintf(path + strlen(path), sizeof(path) - strlen(path), "/log") > 0)
			r = up_kube_query(full, sizeof(full), path, "follow", "true", "container",
					  argv[3], NULL);
		if (r >= 0)
			r = up_kube_stream(kube, full, on_log_line, on_log_end, "logs", NULL);
	} else {
		fprintf(stderr, "kube-probe: bad command line (see the comment at the top of "
				"kube-probe.c)\n");
		return 2;
	}
	if (r < 0) {
		fprintf(stderr, "kube-probe: %s: %s\n", cmd, strerror(-r));
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"context", required_argument, NULL, 'c'},
		{"kubeconfig", required_argument, NULL, 'k'},
		{0},
	};
	const char *context = NULL, *paths = NULL;
	struct up_kube_context *ctx = NULL;
	char err[1024];
	int c, r;

	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'c')
			context = optarg;
		else if (c == 'k')
			paths = optarg;
		else
			return 2;
	}
	if (optind >= argc)
		return 2;
	if (up_kubeconfig_load(paths, context, &ctx, err, sizeof(err)) < 0) {
		printf("{\"op\":\"kubeconfig\",\"ok\":false,\"error\":{\"message\":\"see "
		       "stderr\"}}\n");
		fprintf(stderr, "kube-probe: %s\n", err);
		return 1;
	}
	loop = uv_default_loop();
	if (up_kube_new(loop, ctx, &kube) < 0)
		return 2;
	r = run(argc - optind, argv + optind);
	if (r != 0)
		return r;
	(void)uv_run(loop, UV_RUN_DEFAULT);
	fprintf(stderr, "kube-probe: %lu requests sent\n", up_kube_requests_sent(kube));
	return failures ? 1 : 0;
}
