/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Placeholder parsing and resolution. Nothing here blocks the loop: keyring
 * look-ups run on the thread pool, exec commands are children watched by the loop.
 * Secrets live only in the header being built and in the rule's `resolved`; no
 * message built here ever contains one.
 */
#include "placeholders.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "rules.h"
#include "secret-store.h"

#define KEYRING_OPEN "{{keyring:"
#define EXEC_OPEN    "{{exec:"

/*
 * What the proxy refuses in a header value: control characters other than tab, and
 * characters outside Latin-1 (in UTF-8: any lead byte but 0xc2 and 0xc3), and what
 * is not UTF-8 at all.
 */
static bool has_ctl(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n; i++) {
		if ((u[i] < 0x20 && u[i] != '\t') || u[i] == 0x7f)
			return true;
		if (u[i] < 0x80)
			continue;
		if ((u[i] != 0xc2 && u[i] != 0xc3) || i + 1 >= n || (u[i + 1] & 0xc0) != 0x80)
			return true;
		i++;
	}
	return false;
}

static int add_seg(struct up_ph_template *t, enum up_ph_kind kind, const char *a, size_t alen,
		   const char *b, size_t blen)
{
	struct up_ph_segment *s = realloc(t->segs, (t->n + 1) * sizeof(*s));

	if (!s)
		return -ENOMEM;
	t->segs = s;
	s = &s[t->n++];
	*s = (struct up_ph_segment){.kind = kind, .a = strndup(a, alen)};
	if (b)
		s->b = strndup(b, blen);
	if (!s->a || (b && !s->b))
		return -ENOMEM;
	t->has_exec = t->has_exec || kind == UP_PH_EXEC;
	return 0;
}

static int parse_keyring(struct up_ph_template *t, const char **p, char *why, size_t why_len)
{
	const char *svc = *p + strlen(KEYRING_OPEN);
	size_t slen = strcspn(svc, ":}"), ulen;
	const char *user = svc + slen + 1;

	if (slen == 0 || svc[slen] != ':' || (ulen = strcspn(user, "}")) == 0 ||
	    !startswith(user + ulen, "}}")) {
		(void)snprintf(why, why_len,
			       "malformed keyring placeholder; write {{keyring:SERVICE:USER}}");
		return -EINVAL;
	}
	*p = user + ulen + 2;
	return add_seg(t, UP_PH_KEYRING, svc, slen, user, ulen);
}

static int parse_exec(struct up_ph_template *t, const char **p, char *why, size_t why_len)
{
	const char *cmd = *p + strlen(EXEC_OPEN), *end = strstr(cmd, "}}");

	if (!end) {
		(void)snprintf(why, why_len, "unterminated exec placeholder; end it with }}");
		return -EINVAL;
	}
	if (end == cmd) {
		(void)snprintf(why, why_len, "empty exec placeholder; write {{exec:COMMAND}}");
		return -EINVAL;
	}
	*p = end + 2;
	return add_seg(t, UP_PH_EXEC, cmd, (size_t)(end - cmd), NULL, 0);
}

int up_ph_parse(const char *value, struct up_ph_template *t, char *why, size_t why_len)
{
	const char *p = value;
	int r = 0;

	*t = (struct up_ph_template){0};
	while (*p && r >= 0) {
		const char *k = strstr(p, KEYRING_OPEN), *e = strstr(p, EXEC_OPEN);
		const char *next = !k ? e : !e ? k : k < e ? k : e;
		size_t lit = next ? (size_t)(next - p) : strlen(p);

		if (has_ctl(p, lit)) {
			(void)snprintf(why, why_len,
				       "a header value cannot hold a line break, another "
				       "control character, or a character outside Latin-1");
			r = -EINVAL;
			break;
		}
		if (lit)
			r = add_seg(t, UP_PH_LITERAL, p, lit, NULL, 0);
		p += lit;
		if (r >= 0 && next == k && k)
			r = parse_keyring(t, &p, why, why_len);
		else if (r >= 0 && next)
			r = parse_exec(t, &p, why, why_len);
	}
	if (r < 0)
		up_ph_template_done(t);
	return r;
}

void up_ph_template_done(struct up_ph_template *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->segs[i].a);
		free(t->segs[i].b);
	}
	free(t->segs);
	*t = (struct up_ph_template){0};
}

/* Resolution. */

struct exec_run;

struct up_resolve {
	uv_loop_t *loop;
	struct up_ruleset *rs;
	struct up_resolve_options o;
	up_resolve_done_fn done;
	void *userdata;
	size_t rule, header, seg;
	struct up_ph_template t; /* of the current header */
	char *buf;		 /* the current header's value so far: a secret */
	size_t len;
	struct exec_run *exec; /* the child being run, if any */
	bool busy;	       /* a worker or a child is out */
	bool cancelled;	       /* nobody waits: free when the worker or child is back */
};

static void wipe_buf(struct up_resolve *j)
{
	if (j->buf)
		explicit_bzero(j->buf, j->len);
	free(j->buf);
	j->buf = NULL;
	j->len = 0;
}

static void job_free(struct up_resolve *j)
{
	wipe_buf(j);
	up_ph_template_done(&j->t);
	free(j);
}

static const struct up_rule *cur_rule(struct up_resolve *j)
{
	return up_ruleset_get(j->rs, j->rule);
}

/* Ends the job with an error that names the rule and the header. */
_printf_(3, 4) static void fail(struct up_resolve *j, enum up_error e, const char *fmt, ...)
{
	const struct up_rule *r = cur_rule(j);
	char msg[768], full[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(void)snprintf(full, sizeof(full), "rule '%s' (%s), header '%s': %s", r->name,
		       r->source ? r->source : "?", r->headers[j->header].name, msg);
	j->done(e == UP_ERR_INTERNAL_ERROR ? -ENOMEM : -EINVAL, e, full, j->userdata);
	job_free(j);
}

static void advance(struct up_resolve *j);

/* Adds a segment's text and moves on; false when the job failed (and is gone). */
static bool append(struct up_resolve *j, const char *s, size_t n)
{
	char *nb;

	if (j->len + n > UP_MAX_HEADER_VALUE) {
		fail(j, UP_ERR_RULES_INVALID, "the resolved value is longer than %d bytes",
		     UP_MAX_HEADER_VALUE);
		return false;
	}
	nb = malloc(j->len + n + 1);
	if (!nb) {
		fail(j, UP_ERR_INTERNAL_ERROR, "out of memory");
		return false;
	}
	memcpy(nb, j->buf ? j->buf : "", j->len);
	memcpy(nb + j->len, s, n);
	nb[j->len + n] = '\0';
	n += j->len;
	wipe_buf(j);
	j->buf = nb;
	j->len = n;
	j->seg++;
	return true;
}

/* Keyring look-ups, on the thread pool. */

struct keyring_work {
	uv_work_t w;
	struct up_resolve *job;
	const struct up_secret_store_impl *store;
	const char *service, *user; /* the template's, alive as long as the job */
	char *value;
	int r;
	char why[256];
};

static void keyring_run(uv_work_t *w)
{
	struct keyring_work *k = w->data;

	k->r = k->store->lookup(k->service, k->user, &k->value, k->why, sizeof(k->why));
}

static void keyring_report(struct up_resolve *j, struct keyring_work *k)
{
	const char *s = k->service, *u = k->user;

	if (k->r == -ENOENT)
		fail(j, UP_ERR_SECRET_NOT_FOUND,
		     "keyring entry not found: service='%s' username='%s'; create it with: "
		     "keyring set '%s' '%s'  (or: secret-tool store --label=uplink service '%s' "
		     "username '%s')",
		     s, u, s, u, s, u);
	else if (k->r == -EACCES)
		fail(j, UP_ERR_KEYRING_LOCKED,
		     "the keyring holding service='%s' username='%s' is locked; unlock it (log in "
		     "to the desktop session, or run: gnome-keyring-daemon --unlock) and retry",
		     s, u);
	else
		fail(j, UP_ERR_PREREQ_MISSING,
		     "cannot read keyring entry service='%s' username='%s': %s", s, u, k->why);
}

static void keyring_after(uv_work_t *w, int status)
{
	struct keyring_work *k = w->data;
	struct up_resolve *j = k->job;

	j->busy = false;
	if (j->cancelled)
		job_free(j);
	else if (k->r == 0 && k->value) {
		if (append(j, k->value, strlen(k->value)))
			advance(j);
	} else
		keyring_report(j, k);
	if (k->value)
		explicit_bzero(k->value, strlen(k->value));
	free(k->value);
	free(k);
}

static void keyring_start(struct up_resolve *j, const struct up_ph_segment *s)
{
	struct keyring_work *k = calloc(1, sizeof(*k));
	int r;

	if (!k) {
		fail(j, UP_ERR_INTERNAL_ERROR, "out of memory");
		return;
	}
	*k = (struct keyring_work){.job = j, .store = j->o.store, .service = s->a, .user = s->b};
	k->w.data = k;
	r = uv_queue_work(j->loop, &k->w, keyring_run, keyring_after);
	if (r < 0) {
		free(k);
		fail(j, UP_ERR_INTERNAL_ERROR, "cannot queue the keyring look-up: %s",
		     uv_strerror(r));
		return;
	}
	j->busy = true;
}

static void exec_start(struct up_resolve *j, const char *cmd);

/* Every segment of the header's value is resolved: checked, stored, the next header. False
 * when the job failed (and is gone). */
static bool header_done(struct up_resolve *j, struct up_rule_header *h)
{
	if (has_ctl(j->buf ? j->buf : "", j->len)) {
		fail(j, UP_ERR_RULES_INVALID,
		     "the resolved value holds a line break, another "
		     "control character, or a character outside Latin-1; a header "
		     "value "
		     "is one line of Latin-1 text");
		return false;
	}
	if (up_rule_header_set_value(h, j->buf ? j->buf : "") < 0) {
		fail(j, UP_ERR_INTERNAL_ERROR, "out of memory");
		return false;
	}
	wipe_buf(j);
	up_ph_template_done(&j->t);
	j->header++;
	j->seg = 0;
	return true;
}

static void advance(struct up_resolve *j)
{
	char why[256];

	for (;;) {
		const struct up_rule *r = cur_rule(j);
		struct up_rule_header *h;
		const struct up_ph_segment *s;

		if (!r) {
			j->done(0, UP_ERR_INTERNAL_ERROR, NULL, j->userdata);
			job_free(j);
			return;
		}
		if (j->header >= r->n_headers) {
			j->rule++;
			j->header = 0;
			continue;
		}
		h = &r->headers[j->header];
		if (h->literal && !j->t.segs && j->seg == 0) {
			j->header++; /* a literal credential (a kube token): never scanned */
			continue;
		}
		if (!j->t.segs && j->seg == 0 &&
		    up_ph_parse(h->value, &j->t, why, sizeof(why)) < 0) {
			fail(j, UP_ERR_RULES_INVALID, "%s", why);
			return;
		}
		if (j->seg >= j->t.n) {
			if (!header_done(j, h))
				return;
			continue;
		}
		assert(j->t.segs); /* seg < n: the value has been parsed */
		s = &j->t.segs[j->seg];
		if (s->kind == UP_PH_LITERAL) {
			if (!append(j, s->a, strlen(s->a)))
				return;
			continue;
		}
		if (s->kind == UP_PH_KEYRING)
			keyring_start(j, s);
		else
			exec_start(j, s->a);
		return;
	}
}

/* {{exec:CMD}}: /bin/sh -c CMD in its own process group, with a timeout and bounded output. */

struct exec_run {
	struct up_resolve *job;
	const char *cmd; /* the template's */
	uv_process_t proc;
	uv_pipe_t out, err;
	uv_timer_t timer;
	int handles; /* open handles; the run is freed when the last one closes */
	bool out_open, err_open, exited, closing;
	bool timed_out, overflow;
	int64_t status;
	int term_signal;
	char *obuf; /* stdout: the secret */
	size_t olen;
	char ebuf[UP_EXEC_STDERR_MAX + 1];
	size_t elen;
};

static void exec_report(struct up_resolve *j, struct exec_run *x)
{
	const char *b = x->obuf ? x->obuf : "";
	size_t start = 0, end = x->olen;

	if (x->timed_out)
		fail(j, UP_ERR_EXEC_FAILED, "exec placeholder timed out after %u ms: '%s'",
		     j->o.exec_timeout_ms, x->cmd);
	else if (x->overflow)
		fail(j, UP_ERR_EXEC_FAILED, "exec placeholder printed more than %d bytes: '%s'",
		     UP_EXEC_OUTPUT_MAX, x->cmd);
	else if (x->term_signal)
		fail(j, UP_ERR_EXEC_FAILED,
		     "exec placeholder failed (killed by signal %d): '%s'%s%s", x->term_signal,
		     x->cmd, x->elen ? ": " : "", x->ebuf);
	else if (x->status != 0)
		fail(j, UP_ERR_EXEC_FAILED, "exec placeholder failed (exit %lld): '%s'%s%s",
		     (long long)x->status, x->cmd, x->elen ? ": " : "", x->ebuf);
	else {
		while (start < end && isspace((unsigned char)b[start]))
			start++;
		while (end > start && isspace((unsigned char)b[end - 1]))
			end--;
		if (has_ctl(b + start, end - start))
			fail(j, UP_ERR_EXEC_FAILED,
			     "exec placeholder printed a line break, another "
			     "control character, or a character outside Latin-1 inside "
			     "its output: '%s'",
			     x->cmd);
		else if (append(j, b + start, end - start))
			advance(j);
	}
}

static void exec_closed(uv_handle_t *h)
{
	struct exec_run *x = h->data;
	struct up_resolve *j = x->job;

	if (--x->handles > 0)
		return;
	j->busy = false;
	j->exec = NULL;
	if (j->cancelled)
		job_free(j);
	else
		exec_report(j, x);
	if (x->obuf)
		explicit_bzero(x->obuf, x->olen);
	free(x->obuf);
	free(x);
}

static void close_pipe(uv_pipe_t *p, bool *open)
{
	if (!*open)
		return;
	*open = false;
	uv_close((uv_handle_t *)p, exec_closed);
}

static void maybe_done(struct exec_run *x)
{
	if (!x->exited || x->out_open || x->err_open || x->closing)
		return;
	x->closing = true;
	uv_close((uv_handle_t *)&x->timer, exec_closed);
	uv_close((uv_handle_t *)&x->proc, exec_closed);
}

/* Kills the whole group and stops reading: a grandchild may hold the pipes open. */
static void exec_abort(struct exec_run *x)
{
	if (!x->exited)
		(void)uv_kill(-x->proc.pid, SIGKILL);
	close_pipe(&x->out, &x->out_open);
	close_pipe(&x->err, &x->err_open);
	maybe_done(x);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
	struct exec_run *x = p->data;

	x->exited = true;
	x->status = status;
	x->term_signal = term_signal;
	(void)uv_timer_stop(&x->timer);
	/* The group may live on and hold the pipes: make sure it does not. */
	(void)uv_kill(-p->pid, SIGKILL);
	maybe_done(x);
}

static void on_timeout(uv_timer_t *t)
{
	struct exec_run *x = t->data;

	x->timed_out = true;
	exec_abort(x);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char scratch[4096]; /* the loop is single-threaded; each read is copied at once */

	(void)h;
	(void)suggested;
	*buf = uv_buf_init(scratch, sizeof(scratch));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct exec_run *x = s->data;
	bool is_out = s == (uv_stream_t *)&x->out;
	char *nb;

	if (n < 0) {
		close_pipe(is_out ? &x->out : &x->err, is_out ? &x->out_open : &x->err_open);
		maybe_done(x);
		return;
	}
	if (!is_out) {
		size_t room = UP_EXEC_STDERR_MAX - x->elen, k = (size_t)n < room ? (size_t)n : room;
		memcpy(x->ebuf + x->elen, buf->base, k);
		x->elen += k;
		x->ebuf[x->elen] = '\0';
		return;
	}
	if (x->olen + (size_t)n > UP_EXEC_OUTPUT_MAX ||
	    !(nb = realloc(x->obuf, x->olen + (size_t)n + 1))) {
		x->overflow = true;
		exec_abort(x);
		return;
	}
	x->obuf = nb;
	memcpy(x->obuf + x->olen, buf->base, (size_t)n);
	x->olen += (size_t)n;
	explicit_bzero(buf->base, (size_t)n);
}

static int exec_spawn(struct up_resolve *j, struct exec_run *x)
{
	char *args[] = {"/bin/sh", "-c", (char *)x->cmd, NULL};
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&x->out},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&x->err},
	};
	uv_process_options_t o = {
		.exit_cb = on_exit_cb,
		.file = "/bin/sh",
		.args = args,
		.flags = UV_PROCESS_DETACHED, /* its own group, so a timeout kills all of it */
		.stdio_count = 3,
		.stdio = stdio,
	};
	int r;

	(void)uv_pipe_init(j->loop, &x->out, 0);
	(void)uv_pipe_init(j->loop, &x->err, 0);
	(void)uv_timer_init(j->loop, &x->timer);
	x->out.data = x->err.data = x->timer.data = x->proc.data = x;
	x->handles = 3;
	x->out_open = x->err_open = true;
	r = uv_spawn(j->loop, &x->proc, &o);
	if (r < 0)
		return r;
	x->handles = 4;
	(void)uv_read_start((uv_stream_t *)&x->out, on_alloc, on_read);
	(void)uv_read_start((uv_stream_t *)&x->err, on_alloc, on_read);
	(void)uv_timer_start(&x->timer, on_timeout, j->o.exec_timeout_ms, 0);
	return 0;
}

static void exec_start(struct up_resolve *j, const char *cmd)
{
	struct exec_run *x = calloc(1, sizeof(*x));
	int r;

	if (!x) {
		fail(j, UP_ERR_INTERNAL_ERROR, "out of memory");
		return;
	}
	x->job = j;
	x->cmd = cmd;
	j->busy = true;
	j->exec = x;
	r = exec_spawn(j, x);
	if (r < 0) {
		/* The three handles close, then the run reports: it never ran. */
		x->exited = true;
		x->status = 127;
		(void)snprintf(x->ebuf, sizeof(x->ebuf), "cannot start /bin/sh: %s",
			       uv_strerror(r));
		x->elen = strlen(x->ebuf);
		close_pipe(&x->out, &x->out_open);
		close_pipe(&x->err, &x->err_open);
		uv_close((uv_handle_t *)&x->timer, exec_closed);
	}
}

/* The whole set. */

static int check_exec(struct up_resolve *j)
{
	char why[256];

	for (j->rule = 0; j->rule < up_ruleset_count(j->rs); j->rule++) {
		const struct up_rule *r = cur_rule(j);
		for (j->header = 0; j->header < r->n_headers; j->header++) {
			struct up_ph_template t;
			bool has_exec;
			if (r->headers[j->header].literal)
				continue;
			if (up_ph_parse(r->headers[j->header].value, &t, why, sizeof(why)) < 0) {
				fail(j, UP_ERR_RULES_INVALID, "%s", why);
				return -EINVAL;
			}
			has_exec = t.has_exec;
			up_ph_template_done(&t);
			if (has_exec && !j->o.allow_exec) {
				fail(j, UP_ERR_EXEC_NOT_ALLOWED,
				     "uses an {{exec:...}} placeholder, and commands from rules "
				     "run only "
				     "when you allow them: re-run with --allow-exec if you trust "
				     "this rule");
				return -EPERM;
			}
		}
	}
	j->rule = j->header = 0;
	return 0;
}

int up_resolve_start(uv_loop_t *loop, struct up_ruleset *rs, const struct up_resolve_options *o,
		     up_resolve_done_fn done, void *userdata, struct up_resolve **ret)
{
	struct up_resolve *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	*j = (struct up_resolve){
		.loop = loop, .rs = rs, .o = *o, .done = done, .userdata = userdata};
	if (!j->o.exec_timeout_ms)
		j->o.exec_timeout_ms = UP_EXEC_TIMEOUT_MS;
	if (!j->o.store)
		j->o.store = &up_secret_store_libsecret;
	*ret = j;
	if (check_exec(j) < 0)
		return 0;
	advance(j);
	return 0;
}

void up_resolve_cancel(struct up_resolve *j)
{
	if (!j)
		return;
	if (!j->busy) {
		job_free(j);
		return;
	}
	/* A keyring worker cannot be stopped: it finishes, then frees the job. A child is killed.
	 */
	j->cancelled = true;
	if (j->exec)
		exec_abort(j->exec);
}
