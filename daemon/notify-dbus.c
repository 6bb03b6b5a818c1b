/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sd-bus backend: org.freedesktop.Notifications on the user bus, every call
 * asynchronous on the daemon's loop (the bus fd in a uv_poll_t, its timeout in a
 * uv_timer_t, sd_bus_process() until it has nothing left). No bus: the log takes
 * over, said once. No server: each notification goes to the log, said once.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

#include "knobs.h"
#include "log.h"
#include "notify-private.h"

#define NAME		"org.freedesktop.Notifications"
#define PATH		"/org/freedesktop/Notifications"
#define IFACE		"org.freedesktop.Notifications"
#define ACTION_SHOW_LOG "show-log"

struct shown {
	uint32_t id;
	char session[64];
};

struct dbus_state {
	struct up_notifier *n;
	sd_bus *bus;
	uv_poll_t poll;
	uv_timer_t timer;
	unsigned handles; /* libuv handles not yet closed */
	bool polling, dead;
	bool actions, markup; /* the server's capabilities */
	bool absent_said;
	bool caps_known; /* until then notifications wait in `queue` */
	struct pending *queue, **queue_tail;
	size_t queued;
	struct shown shown[UP_MAX_NOTIFY_ACTIONS]; /* a ring of notifications with "Show log" */
	size_t next_shown;
	struct up_list terms; /* struct term::link */
};

/* A notification waiting for the server's capabilities, or a Notify in flight. */
struct pending {
	struct dbus_state *b;
	struct pending *next;	    /* dbus_state::queue */
	struct up_notification msg; /* its strings are the copies below */
	char *summary, *body, *icon;
	char session[64];
};

/* A $TERMINAL showing a log; closed at the end if it still runs (it goes on, detached). */
struct term {
	uv_process_t proc;
	struct up_list link; /* dbus_state::terms */
};

static void rearm(struct dbus_state *b);
static void flush_queue(struct dbus_state *b, bool run);
static void show_waiting(struct dbus_state *b);

static void pending_free(void *p)
{
	struct pending *pd = p;

	free(pd->summary);
	free(pd->body);
	free(pd->icon);
	free(pd);
}

static void go_dead(struct dbus_state *b, int r)
{
	if (b->dead)
		return;
	b->dead = true;
	log_info("The user D-Bus connection ended (%s): desktop notifications go to the log",
		 strerror(-r));
	if (b->polling)
		(void)uv_poll_stop(&b->poll);
	(void)uv_timer_stop(&b->timer);
	up_notifier_fall_back(b->n);
	flush_queue(b, false);
	up_notify_questions_unanswerable(b->n);
}

static void process(struct dbus_state *b)
{
	int r;

	if (b->dead || !b->bus)
		return;
	do
		r = sd_bus_process(b->bus, NULL);
	while (r > 0);
	if (r < 0) {
		go_dead(b, r);
		return;
	}
	rearm(b);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	process(p->data);
}

static void on_timer(uv_timer_t *t)
{
	process(t->data);
}

static void rearm(struct dbus_state *b)
{
	int ev = sd_bus_get_events(b->bus), uvev = 0;
	uint64_t until, now;
	struct timespec ts;

	if (ev < 0) {
		go_dead(b, ev);
		return;
	}
	uvev = ((ev & POLLIN) ? UV_READABLE : 0) | ((ev & POLLOUT) ? UV_WRITABLE : 0);
	if (uv_poll_start(&b->poll, uvev, on_poll) == 0)
		b->polling = true;
	if (sd_bus_get_timeout(b->bus, &until) < 0 || until == UINT64_MAX) {
		(void)uv_timer_stop(&b->timer);
		return;
	}
	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	(void)uv_timer_start(&b->timer, on_timer, until > now ? (until - now + 999) / 1000 : 0, 0);
}

static void say_absent(struct dbus_state *b, const sd_bus_error *e)
{
	if (b->absent_said)
		return;
	b->absent_said = true;
	log_info("No desktop notification server answers on the user bus (%s): notifications go "
		 "to the log",
		 e && e->message ? e->message : "no answer");
}

/* ---- "Show log" ---- */

static void on_term_closed(uv_handle_t *h)
{
	free(h->data);
}

static void on_term_exit(uv_process_t *p, int64_t status, int sig)
{
	struct term *t = p->data;

	(void)status;
	(void)sig;
	up_list_remove(&t->link);
	uv_close((uv_handle_t *)p, on_term_closed);
}

static void open_log(struct dbus_state *b, const char *session)
{
	const char *term = up_knobs()->terminal;
	char e[] = "-e", up[] = "uplink", logs[] = "logs", sid[64];
	char *args[] = {NULL, e, up, logs, sid, NULL};
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE}, {.flags = UV_IGNORE}, {.flags = UV_IGNORE}};
	struct term *t;
	int r;

	if (!term || !*term)
		return; /* nowhere to show it: do nothing */
	t = calloc(1, sizeof(*t));
	if (!t)
		return;
	up_list_init(&t->link);
	(void)snprintf(sid, sizeof(sid), "%s", session);
	args[0] = (char *)term;
	t->proc.data = t;
	r = uv_spawn(b->n->loop, &t->proc,
		     &(uv_process_options_t){.file = term,
					     .args = args,
					     .exit_cb = on_term_exit,
					     .flags = UV_PROCESS_DETACHED,
					     .stdio_count = 3,
					     .stdio = stdio});
	if (r < 0) {
		log_warning_errno(
			r, "Cannot run $TERMINAL (%s) to show the log of session %s, ignoring",
			term, session);
		uv_close((uv_handle_t *)&t->proc, on_term_closed);
		return;
	}
	uv_unref((uv_handle_t *)&t->proc);
	up_list_insert_tail(&b->terms, &t->link);
}

/* The open question the server that sent m showed as notification `id`, or NULL. */
static struct up_notify_question *question_of(struct dbus_state *b, sd_bus_message *m, uint32_t id)
{
	const char *sender = sd_bus_message_get_sender(m);
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &b->n->questions) {
		struct up_notify_question *q =
			up_container_of(pos, struct up_notify_question, link);

		if (id && q->id == id && !q->answered && sender && streq(q->sender, sender))
			return q;
	}
	return NULL;
}

static int on_action(sd_bus_message *m, void *ud, sd_bus_error *err)
{
	struct dbus_state *b = ud;
	struct up_notify_question *q;
	const char *key;
	uint32_t id;
	int a;

	(void)err;
	if (sd_bus_message_read(m, "us", &id, &key) < 0)
		return 0;
	q = question_of(b, m, id);
	a = up_notify_answer_of_action(key);
	if (q && a >= 0)
		up_notify_question_answer(q, (enum up_notify_answer)a);
	if (!streq(key, ACTION_SHOW_LOG))
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(b->shown); i++)
		if (b->shown[i].id == id && b->shown[i].session[0]) {
			open_log(b, b->shown[i].session);
			break;
		}
	return 0;
}

static int on_closed(sd_bus_message *m, void *ud, sd_bus_error *err)
{
	struct dbus_state *b = ud;
	struct up_notify_question *q;
	uint32_t id, why;

	(void)err;
	if (sd_bus_message_read(m, "uu", &id, &why) < 0)
		return 0;
	q = question_of(b, m, id);
	if (q) /* dismissed, expired, or closed by the server: the terminal asks */
		up_notify_question_answer(q, UP_NOTIFY_NO_ANSWER);
	for (size_t i = 0; i < ELEMENTSOF(b->shown); i++)
		if (b->shown[i].id == id)
			b->shown[i] = (struct shown){0};
	return 0;
}

/* ---- calls ---- */

static int on_caps(sd_bus_message *m, void *ud, sd_bus_error *err)
{
	struct dbus_state *b = ud;
	char **caps = NULL;

	(void)err;
	b->caps_known = true;
	if (sd_bus_message_is_method_error(m, NULL)) {
		say_absent(b, sd_bus_message_get_error(m));
	} else if (sd_bus_message_read_strv(m, &caps) >= 0) {
		for (char **c = caps; c && *c; c++) {
			b->actions |= streq(*c, "actions");
			b->markup |= streq(*c, "body-markup");
			free(*c);
		}
		free(caps);
		log_debug("The notification server %s actions",
			  b->actions ? "offers" : "does not offer");
	}
	flush_queue(b, false); /* inside sd_bus_process(): the outer loop sends them */
	show_waiting(b);
	return 0;
}

static int on_notified(sd_bus_message *m, void *ud, sd_bus_error *err)
{
	struct pending *pd = ud;
	struct dbus_state *b = pd->b;
	uint32_t id;

	(void)err;
	if (sd_bus_message_is_method_error(m, NULL)) {
		say_absent(b, sd_bus_message_get_error(m));
		up_notifier_log.send(b->n, &pd->msg);
		return 0;
	}
	if (pd->msg.show_log && b->actions && sd_bus_message_read(m, "u", &id) >= 0) {
		struct shown *s = &b->shown[b->next_shown++ % ELEMENTSOF(b->shown)];
		s->id = id;
		memcpy(s->session, pd->session, sizeof(s->session));
	}
	return 0;
}

/* The body as markup when the server reads markup: &, < and > escaped. */
static char *body_text(const struct dbus_state *b, const char *body)
{
	return b->markup ? up_notify_markup_escape(body) : strdup(body);
}

static const char *const show_log_actions[] = {ACTION_SHOW_LOG, "Show log", NULL};

/* Notify's arguments; `actions` are key, label pairs (NULL-terminated), or NULL. */
static int append_notify(sd_bus_message *m, const struct up_notification *msg, const char *body,
			 const char *const *actions)
{
	int r;

	r = sd_bus_message_append(m, "susss", "uplink", (uint32_t)0, msg->icon ? msg->icon : "",
				  msg->summary, body);
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "s");
	for (size_t i = 0; r >= 0 && actions && actions[i]; i++)
		r = sd_bus_message_append(m, "s", actions[i]);
	if (r >= 0)
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_message_append(m, "a{sv}", 1, "urgency", "y", (uint8_t)msg->urgency);
	if (r >= 0)
		r = sd_bus_message_append(m, "i", msg->timeout_ms);
	return r;
}

static int call_notify(struct dbus_state *b, struct pending *pd)
{
	_cleanup_(freep) char *body = body_text(b, pd->msg.body);
	sd_bus_message *m = NULL;
	sd_bus_slot *slot = NULL;
	int r;

	if (!body)
		return -ENOMEM;
	r = sd_bus_message_new_method_call(b->bus, &m, NAME, PATH, IFACE, "Notify");
	if (r >= 0)
		r = append_notify(m, &pd->msg, body,
				  pd->msg.show_log && b->actions ? show_log_actions : NULL);
	if (r >= 0)
		r = sd_bus_call_async(b->bus, &slot, m, on_notified, pd,
				      (uint64_t)UP_NOTIFY_CALL_TIMEOUT_MS * 1000u);
	(void)sd_bus_message_unref(m);
	if (r < 0)
		return r;
	/* The bus owns the call now; pd goes when the slot does, answered or not. */
	(void)sd_bus_slot_set_destroy_callback(slot, pending_free);
	(void)sd_bus_slot_set_floating(slot, 1);
	(void)sd_bus_slot_unref(slot);
	return 0;
}

/* Sends (or, when the bus is gone, logs) one notification; pd is taken. */
static void send_pending(struct dbus_state *b, struct pending *pd)
{
	int r = b->dead || !b->bus ? -ENOTCONN : call_notify(b, pd);

	if (r < 0) {
		log_debug_errno(r, "Cannot send a notification over D-Bus");
		up_notifier_log.send(b->n, &pd->msg);
		pending_free(pd);
	}
}

static void flush_queue(struct dbus_state *b, bool run)
{
	while (b->queue) {
		struct pending *pd = b->queue;

		b->queue = pd->next;
		b->queued--;
		send_pending(b, pd);
	}
	b->queue_tail = &b->queue;
	if (run)
		process(b);
}

static struct pending *pending_new(struct dbus_state *b, const struct up_notification *msg)
{
	struct pending *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->b = b;
	pd->summary = strdup(msg->summary);
	pd->body = strdup(msg->body);
	pd->icon = strdup(msg->icon ? msg->icon : "");
	(void)snprintf(pd->session, sizeof(pd->session), "%s",
		       msg->session_id ? msg->session_id : "");
	if (!pd->summary || !pd->body || !pd->icon) {
		pending_free(pd);
		return NULL;
	}
	pd->msg = *msg;
	pd->msg.summary = pd->summary;
	pd->msg.body = pd->body;
	pd->msg.icon = pd->icon;
	pd->msg.session_id = pd->session;
	return pd;
}

static void dbus_send(struct up_notifier *n, const struct up_notification *msg)
{
	struct dbus_state *b = n->backend;
	struct pending *pd = pending_new(b, msg);

	if (!pd) {
		up_notifier_log.send(n, msg);
		return;
	}
	if (!b->caps_known && b->queued < UP_MAX_NOTIFY_ACTIONS) {
		/* Whether to offer actions and escape markup is not known yet. */
		*b->queue_tail = pd;
		b->queue_tail = &pd->next;
		b->queued++;
		return;
	}
	send_pending(b, pd);
	process(b);
}

/* ---- questions ---- */

/* A question's Notify in flight; freed with its slot. q is NULL once the question went. */
struct q_call {
	struct dbus_state *b;
	struct up_notify_question *q;
};

static void q_call_free(void *p)
{
	struct q_call *c = p;

	if (c->q)
		c->q->call = NULL;
	free(c);
}

/* CloseNotification, its answer not waited for. */
static void close_notification(struct dbus_state *b, uint32_t id)
{
	sd_bus_message *m = NULL;
	int r;

	if (b->dead || !b->bus || id == 0)
		return;
	r = sd_bus_message_new_method_call(b->bus, &m, NAME, PATH, IFACE, "CloseNotification");
	if (r >= 0)
		r = sd_bus_message_append(m, "u", id);
	if (r >= 0)
		r = sd_bus_message_set_expect_reply(m, 0);
	if (r >= 0)
		r = sd_bus_send(b->bus, m, NULL);
	(void)sd_bus_message_unref(m);
	if (r < 0)
		log_debug_errno(r, "Cannot withdraw notification %u, ignoring", id);
}

static int on_question_notified(sd_bus_message *m, void *ud, sd_bus_error *err)
{
	struct q_call *c = ud;
	struct up_notify_question *q = c->q;
	const char *sender = sd_bus_message_get_sender(m);
	uint32_t id = 0;

	(void)err;
	if (sd_bus_message_is_method_error(m, NULL)) {
		say_absent(c->b, sd_bus_message_get_error(m));
		if (q)
			up_notify_question_answer(q, UP_NOTIFY_NO_ANSWER);
		return 0;
	}
	if (sd_bus_message_read(m, "u", &id) < 0 || id == 0) {
		if (q)
			up_notify_question_answer(q, UP_NOTIFY_NO_ANSWER);
		return 0;
	}
	if (!q) { /* withdrawn while Notify was on its way */
		close_notification(c->b, id);
		return 0;
	}
	q->id = id;
	(void)snprintf(q->sender, sizeof(q->sender), "%s", sender ? sender : "");
	return 0;
}

static int call_question(struct dbus_state *b, struct up_notify_question *q)
{
	_cleanup_(freep) char *body = body_text(b, q->body);
	struct q_call *c = calloc(1, sizeof(*c));
	sd_bus_message *m = NULL;
	sd_bus_slot *slot = NULL;
	int r = body && c ? 0 : -ENOMEM;

	if (r >= 0)
		r = sd_bus_message_new_method_call(b->bus, &m, NAME, PATH, IFACE, "Notify");
	if (r >= 0)
		r = append_notify(m,
				  &(struct up_notification){.summary = q->summary,
							    .icon = "dialog-question",
							    .urgency = UP_NOTIFY_CRITICAL,
							    .timeout_ms = 0},
				  body, up_notify_question_actions);
	if (r >= 0)
		r = sd_bus_call_async(b->bus, &slot, m, on_question_notified, c,
				      (uint64_t)UP_NOTIFY_CALL_TIMEOUT_MS * 1000u);
	(void)sd_bus_message_unref(m);
	if (r < 0) {
		free(c);
		return r;
	}
	c->b = b;
	c->q = q;
	q->call = c;
	(void)sd_bus_slot_set_destroy_callback(slot, q_call_free);
	(void)sd_bus_slot_set_floating(slot, 1);
	(void)sd_bus_slot_unref(slot);
	return 0;
}

/* Shows q now that the capabilities are known: without actions, the terminal asks. */
static void show_question(struct dbus_state *b, struct up_notify_question *q)
{
	int r = b->dead || !b->bus || !b->actions ? -EOPNOTSUPP : call_question(b, q);

	if (r < 0) {
		if (r != -EOPNOTSUPP)
			log_debug_errno(r, "Cannot send a question over D-Bus");
		up_notify_question_answer(q, UP_NOTIFY_NO_ANSWER);
	}
}

static void show_waiting(struct dbus_state *b)
{
	struct up_list *pos, *tmp;

	up_list_for_each_safe (pos, tmp, &b->n->questions) {
		struct up_notify_question *q =
			up_container_of(pos, struct up_notify_question, link);

		if (q->waiting) {
			q->waiting = false;
			show_question(b, q);
		}
	}
}

static void dbus_ask(struct up_notifier *n, struct up_notify_question *q)
{
	struct dbus_state *b = n->backend;

	if (!b->caps_known && !b->dead) {
		q->waiting = true; /* on_caps shows it */
		return;
	}
	show_question(b, q);
	process(b);
}

static void dbus_withdraw(struct up_notifier *n, struct up_notify_question *q)
{
	struct dbus_state *b = n->backend;
	struct q_call *c = q->call;

	if (c) { /* its reply withdraws it */
		c->q = NULL;
		q->call = NULL;
		return;
	}
	if (!q->answered && q->id) {
		close_notification(b, q->id);
		process(b);
	}
}

/* ---- open and release ---- */

static void on_handle_closed(uv_handle_t *h)
{
	struct dbus_state *b = h->data;

	if (--b->handles > 0)
		return;
	free(b->n);
	free(b);
}

static void dbus_release(struct up_notifier *n)
{
	struct dbus_state *b = n->backend;

	/* The poll goes before its fd; unsent notifications are dropped: the daemon stops. */
	uv_close((uv_handle_t *)&b->poll, on_handle_closed);
	uv_close((uv_handle_t *)&b->timer, on_handle_closed);
	while (!up_list_empty(&b->terms)) {
		struct term *t = up_container_of(b->terms.next, struct term, link);

		up_list_remove(&t->link);
		uv_close((uv_handle_t *)&t->proc, on_term_closed);
	}
	b->bus = sd_bus_close_unref(b->bus);
	while (b->queue) {
		struct pending *pd = b->queue;

		b->queue = pd->next;
		pending_free(pd);
	}
}

static int subscribe(struct dbus_state *b)
{
	sd_bus_message *m = NULL;
	int r;

	r = sd_bus_match_signal_async(b->bus, NULL, NULL, PATH, IFACE, "ActionInvoked", on_action,
				      NULL, b);
	if (r >= 0)
		r = sd_bus_match_signal_async(b->bus, NULL, NULL, PATH, IFACE, "NotificationClosed",
					      on_closed, NULL, b);
	if (r >= 0)
		r = sd_bus_message_new_method_call(b->bus, &m, NAME, PATH, IFACE,
						   "GetCapabilities");
	if (r >= 0)
		r = sd_bus_call_async(b->bus, NULL, m, on_caps, b,
				      (uint64_t)UP_NOTIFY_CALL_TIMEOUT_MS * 1000u);
	(void)sd_bus_message_unref(m);
	return r;
}

static int dbus_open(struct up_notifier *n)
{
	struct dbus_state *b;
	sd_bus *bus = NULL;
	int r, fd;

	r = sd_bus_open_user(&bus);
	if (r >= 0)
		r = fd = sd_bus_get_fd(bus);
	if (r < 0) {
		(void)sd_bus_close_unref(bus);
		log_info("No user D-Bus (%s): desktop notifications go to the log", strerror(-r));
		return r;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		(void)sd_bus_close_unref(bus);
		return -ENOMEM;
	}
	b->n = n;
	b->bus = bus;
	b->queue_tail = &b->queue;
	up_list_init(&b->terms);
	r = uv_poll_init(n->loop, &b->poll, fd);
	if (r < 0) {
		(void)sd_bus_close_unref(bus);
		free(b);
		return log_warning_errno(
			r, "Cannot watch the user D-Bus: notifications go to the log");
	}
	(void)uv_timer_init(n->loop, &b->timer);
	b->poll.data = b->timer.data = b;
	b->handles = 2;
	n->backend = b;
	n->release = dbus_release;
	r = subscribe(b);
	if (r < 0) {
		log_info("Cannot talk to the user D-Bus (%s): desktop notifications go to the log",
			 strerror(-r));
		b->dead = true;
		return r;
	}
	process(b);
	return 0;
}

const struct up_notifier_impl up_notifier_dbus = {
	.name = "dbus",
	.open = dbus_open,
	.send = dbus_send,
	.ask = dbus_ask,
	.withdraw = dbus_withdraw,
};
