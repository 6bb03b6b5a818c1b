/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The audit log: the mitm container's log followed while a session runs, its audit
 * lines appended to sessions/<id>/audit.jsonl (through the threadpool, in order),
 * and handed to live readers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backoff.h"
#include "bounds.h"
#include "cluster.h"
#include "kube.h"
#include "log.h"
#include "manager.h"
#include "notify.h"
#include "session-audit.h"
#include "session-private.h"
#include "store.h"
#include "write-queue.h"

#define MITM_POD       "mitm"
#define MITM_CONTAINER "mitm"
#define AUDIT_FILE     "audit.jsonl"

struct up_audit_sub {
	struct up_list link; /* audit::subs */
	up_audit_event_fn ev;
	up_audit_end_fn end;
	void *ud;
};

struct audit {
	struct up_list link; /* followers */
	uv_loop_t *loop;
	struct up_cluster *cluster;
	struct up_notifier *notifier; /* denied requests, told at most once a minute */
	char id[16], ns[48], path[PATH_MAX];
	struct up_kube_call *stream;
	uv_timer_t *timer; /* reconnect backoff, then the drain deadline */
	unsigned attempts;
	uint64_t seen;	     /* audit lines known: the index of the next one */
	uint64_t skip;	     /* lines the current stream replays before new ones */
	uint64_t on_stream;  /* audit lines the current stream has given */
	bool draining, done; /* stop asked; finished (file closing, subs told) */
	struct up_list subs; /* up_audit_sub::link */
	/* the file */
	uv_work_t open_work;
	bool opening;
	uv_file open_fd; /* open_run()'s result, handed to the queue by open_after() */
	int open_error;
	struct up_write_queue file;
};

static struct up_list followers = {&followers, &followers};

static void open_stream(struct audit *a);

static struct audit *find(const char *id)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &followers) {
		struct audit *a = up_container_of(pos, struct audit, link);
		if (!a->done && !strcmp(a->id, id))
			return a;
	}
	return NULL;
}

bool up_session_audit_following(const char *id)
{
	return find(id) != NULL;
}

int up_audit_parse_line(const char *line, size_t len, json_t **ret)
{
	json_t *v;

	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n'))
		len--;
	if (len < 2 || len > UP_AUDIT_LINE_MAX || line[0] != '{')
		return -EINVAL;
	v = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(v) || !json_is_string(json_object_get(v, "uplink")) ||
	    strcmp(json_string_value(json_object_get(v, "uplink")), "audit") != 0) {
		json_decref(v);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

bool up_audit_event_denied(const json_t *event)
{
	const char *d = json_string_value(json_object_get(event, "decision"));

	return d && (!strcmp(d, "deny") || !strcmp(d, "connect-refused"));
}

/* ---- the end: file closed, readers told, memory freed once the loop is done ---- */

static void maybe_free(struct audit *a)
{
	if (!a->done || a->opening || up_write_queue_busy(&a->file) || a->timer)
		return;
	up_write_queue_clear(&a->file);
	free(a);
}

static void timer_closed(uv_handle_t *h)
{
	struct audit *a = h->data;

	free(h);
	a->timer = NULL;
	maybe_free(a);
}

static void finish(struct audit *a)
{
	struct up_list *pos, *tmp;

	if (a->done)
		return;
	a->done = true;
	up_list_remove(&a->link);
	if (a->stream) {
		up_kube_cancel(a->stream);
		a->stream = NULL;
	}
	if (a->timer)
		uv_close((uv_handle_t *)a->timer, timer_closed);
	if (a->file.dropped)
		log_warning("Session %s: %zu bytes of audit log could not be written to %s", a->id,
			    a->file.dropped, a->path);
	up_list_for_each_safe (pos, tmp, &a->subs) {
		struct up_audit_sub *sub = up_container_of(pos, struct up_audit_sub, link);
		up_list_remove(&sub->link);
		sub->end(sub->ud);
		free(sub);
	}
	up_write_queue_close(&a->file); /* once the queue is written */
	maybe_free(a);
}

/* ---- the file: opened (and its lines counted) on the threadpool, appended in order ---- */

static void write_failed(void *ud, int error)
{
	struct audit *a = ud;

	log_warning("Session %s: cannot write %s: %s; the audit log stops here", a->id, a->path,
		    uv_strerror(error));
}

static void file_closed(void *ud, int error)
{
	(void)error;
	maybe_free(ud);
}

/* Counts the lines already in the file (a restart picks up where the last run was). */
static void open_run(uv_work_t *w)
{
	struct audit *a = w->data;
	char dir[PATH_MAX], buf[65536];
	ssize_t n;
	int fd;

	(void)snprintf(dir, sizeof(dir), "%s", a->path);
	*strrchr(dir, '/') = '\0';
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		a->open_error = -errno;
		return;
	}
	fd = open(a->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		a->open_error = -errno;
		return;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			a->seen += buf[i] == '\n';
	a->open_fd = fd;
}

static void open_after(uv_work_t *w, int status)
{
	struct audit *a = w->data;

	(void)status;
	a->opening = false;
	if (a->open_error < 0)
		log_warning("Session %s: cannot open %s: %s; its audit log is not kept", a->id,
			    a->path, strerror(-a->open_error));
	up_write_queue_start(&a->file, a->open_fd, a->open_error);
	if (a->done) {
		maybe_free(a);
		return;
	}
	open_stream(a);
}

/* ---- the stream ---- */

static int on_line(const char *line, size_t len, void *ud)
{
	struct audit *a = ud;
	struct up_list *pos, *tmp;
	json_t *ev;

	if (up_audit_parse_line(line, len, &ev) < 0)
		return 0;
	a->attempts = 0;
	if (a->on_stream++ < a->skip) {
		json_decref(ev);
		return 0;
	}
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n'))
		len--;
	up_write_queue_push(&a->file, line, len, true);
	if (up_audit_event_denied(ev)) {
		char what[512];
		(void)snprintf(what, sizeof(what), "%s %s%s",
			       json_is_string(json_object_get(ev, "method"))
				       ? json_string_value(json_object_get(ev, "method"))
				       : "CONNECT",
			       json_is_string(json_object_get(ev, "host"))
				       ? json_string_value(json_object_get(ev, "host"))
				       : "?",
			       json_is_string(json_object_get(ev, "path"))
				       ? json_string_value(json_object_get(ev, "path"))
				       : "");
		(void)up_notify_denied(a->notifier, a->id, what);
	}
	up_list_for_each_safe (pos, tmp, &a->subs) {
		struct up_audit_sub *sub = up_container_of(pos, struct up_audit_sub, link);
		sub->ev(ev, a->seen, sub->ud);
	}
	a->seen++;
	json_decref(ev);
	return 0;
}

static void on_reconnect(uv_timer_t *t)
{
	struct audit *a = t->data;

	if (a->draining)
		finish(a);
	else
		open_stream(a);
}

static void on_end(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct audit *a = ud;
	uint64_t ms;

	(void)obj;
	a->stream = NULL;
	if (a->draining) {
		finish(a);
		return;
	}
	/* The session still runs: the stream dropped, or the log is not there yet. */
	ms = up_backoff_ms(a->attempts++, UP_AUDIT_BACKOFF_BASE_MS, UP_AUDIT_BACKOFF_CAP_MS,
			   (uint32_t)uv_hrtime(), -1);
	log_debug("Session %s: the mitm log stream ended (%s); again in %llu ms", a->id,
		  err ? err->message : "closed", (unsigned long long)ms);
	(void)uv_timer_start(a->timer, on_reconnect, ms, 0);
}

static void open_stream(struct audit *a)
{
	struct up_kube *k = up_cluster_kube(a->cluster);
	char path[256], url[512];
	int r = -ENOTCONN;

	a->skip = a->seen;
	a->on_stream = 0;
	if (k && up_kube_path(path, sizeof(path), "Pod", a->ns, MITM_POD) >= 0 &&
	    snprintf(url, sizeof(url), "%s/log?follow=true&container=%s", path, MITM_CONTAINER) <
		    (int)sizeof(url))
		r = up_kube_stream(k, url, on_line, on_end, a, &a->stream);
	if (r < 0) {
		struct up_kube_error e = {.r = r};
		(void)snprintf(e.message, sizeof(e.message), "%s", strerror(-r));
		on_end(&e, NULL, a);
	}
}

/* ---- the API ---- */

void up_session_audit_start(struct up_session *s)
{
	char dir[PATH_MAX];
	struct audit *a;

	if (find(s->id) || s->o.asked.dry_run)
		return;
	if (up_store_session_dir(s->all->store, s->id, dir, sizeof(dir)) < 0) {
		log_warning("Session %s: the state folder path is too long; no audit log, ignoring",
			    s->id);
		return;
	}
	a = calloc(1, sizeof(*a));
	if (!a || !(a->timer = malloc(sizeof(*a->timer))) ||
	    snprintf(a->path, sizeof(a->path), "%s/" AUDIT_FILE, dir) >= (int)sizeof(a->path)) {
		if (a)
			free(a->timer);
		free(a);
		log_warning("Session %s: cannot follow the audit log: out of memory, ignoring",
			    s->id);
		return;
	}
	a->loop = s->all->loop;
	a->cluster = s->cluster;
	a->notifier = session_notifier(s);
	a->open_fd = -1;
	up_write_queue_init(&a->file, a->loop, UP_AUDIT_QUEUE_MAX, write_failed, file_closed, a);
	(void)snprintf(a->id, sizeof(a->id), "%s", s->id);
	(void)snprintf(a->ns, sizeof(a->ns), "%s", s->ns);
	up_list_init(&a->subs);
	(void)uv_timer_init(a->loop, a->timer);
	a->timer->data = a;
	a->open_work.data = a;
	up_list_insert_tail(&followers, &a->link);
	a->opening = true;
	if (uv_queue_work(a->loop, &a->open_work, open_run, open_after) < 0) {
		a->opening = false;
		up_write_queue_start(&a->file, -1, -ENOMEM);
		open_stream(a);
	}
}

void up_session_audit_stop(struct up_session *s)
{
	struct audit *a = find(s->id);

	if (!a || a->draining)
		return;
	a->draining = true;
	if (!a->stream && !a->opening) {
		finish(a);
		return;
	}
	(void)uv_timer_start(a->timer, on_reconnect, UP_AUDIT_DRAIN_MS, 0);
}

void up_session_audit_cancel(struct up_session *s)
{
	struct audit *a = find(s->id);

	if (a) {
		a->draining = true;
		finish(a);
	}
}

struct up_audit_sub *up_session_audit_subscribe(const char *id, up_audit_event_fn ev,
						up_audit_end_fn end, void *ud)
{
	struct audit *a = find(id);
	struct up_audit_sub *sub;

	if (!a || !(sub = calloc(1, sizeof(*sub))))
		return NULL;
	sub->ev = ev;
	sub->end = end;
	sub->ud = ud;
	up_list_insert_tail(&a->subs, &sub->link);
	return sub;
}

struct up_audit_sub *up_audit_sub_free(struct up_audit_sub *sub)
{
	if (!sub)
		return NULL;
	up_list_remove(&sub->link);
	free(sub);
	return NULL;
}

/* ---- reading the file back ---- */

struct up_audit_read {
	uv_work_t work;
	char *path;
	up_audit_read_fn cb;
	void *ud;
	bool cancelled;
	int r;
	json_t *lines;
	uint64_t first, total;
};

/* The lines of the file's first `end` bytes (before the tail a reader is sent). */
static uint64_t count_lines(int fd, off_t end)
{
	char tmp[65536];
	uint64_t lines = 0;
	ssize_t n;

	for (off_t off = 0; off < end; off += n) {
		n = pread(fd, tmp,
			  (size_t)(end - off) < sizeof(tmp) ? (size_t)(end - off) : sizeof(tmp),
			  off);
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			lines += tmp[i] == '\n';
	}
	return lines;
}

static void read_run(uv_work_t *w)
{
	struct up_audit_read *rd = w->data;
	struct stat st;
	off_t start = 0;
	char *buf = NULL, *p, *nl;
	ssize_t n;
	size_t got = 0, want;
	int fd = open(rd->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	rd->lines = json_array();
	if (fd < 0) {
		rd->r = errno == ENOENT ? 0 : -errno;
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rd->r = -EINVAL;
		goto out;
	}
	/* Count the lines before the tail we send, so indexes stay file line numbers. */
	if (st.st_size > UP_AUDIT_HISTORY_MAX) {
		start = st.st_size - UP_AUDIT_HISTORY_MAX;
		rd->first = count_lines(fd, start);
	}
	want = (size_t)(st.st_size - start);
	buf = malloc(want + 1);
	if (!buf) {
		rd->r = -ENOMEM;
		goto out;
	}
	while (got < want && (n = pread(fd, buf + got, want - got, start + (off_t)got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	p = buf;
	if (start > 0 && (nl = memchr(buf, '\n', got))) { /* a partial first line */
		p = nl + 1;
		rd->first++;
	}
	rd->total = rd->first;
	while ((nl = memchr(p, '\n', got - (size_t)(p - buf)))) {
		json_t *ev;
		if (up_audit_parse_line(p, (size_t)(nl - p), &ev) == 0)
			(void)json_array_append_new(rd->lines, ev);
		else
			(void)json_array_append_new(rd->lines, json_null()); /* keeps the indexes */
		rd->total++;
		p = nl + 1;
	}
out:
	free(buf);
	(void)close(fd);
}

static void read_after(uv_work_t *w, int status)
{
	struct up_audit_read *rd = w->data;

	(void)status;
	if (!rd->cancelled)
		rd->cb(rd->r, rd->lines, rd->first, rd->total, rd->ud);
	json_decref(rd->lines);
	free(rd->path);
	free(rd);
}

int up_audit_read_start(uv_loop_t *loop, const char *path, up_audit_read_fn cb, void *ud,
			struct up_audit_read **ret)
{
	struct up_audit_read *rd = up_new(struct up_audit_read, .cb = cb, .ud = ud);
	int r;

	if (!rd || !(rd->path = strdup(path))) {
		free(rd);
		return -ENOMEM;
	}
	rd->work.data = rd;
	r = uv_queue_work(loop, &rd->work, read_run, read_after);
	if (r < 0) {
		free(rd->path);
		free(rd);
		return r;
	}
	*ret = rd;
	return 0;
}

void up_audit_read_cancel(struct up_audit_read *r)
{
	if (r)
		r->cancelled = true;
}

/* The path of a session's audit log, for session.logs. */
int up_session_audit_path(const struct up_session *s, char *buf, size_t len)
{
	char dir[PATH_MAX];

	if (up_store_session_dir(s->all->store, s->id, dir, sizeof(dir)) < 0 ||
	    snprintf(buf, len, "%s/" AUDIT_FILE, dir) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}
