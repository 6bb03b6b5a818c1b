/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A running session's limits: its time to live (--ttl) and, while no client is
 * attached, its idle limit (--idle-timeout). One timer per session, armed for the next
 * thing due (a warning UP_SESSION_WARN_BEFORE_S ahead, or the end), so an idle daemon
 * wakes only when something is due.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bounds.h"
#include "knobs.h"
#include "log.h"
#include "manager.h"
#include "session-private.h"
#include "store.h"

static int64_t warn_before(void)
{
	const char *env = up_knobs()->warn_before_s; /* tests use seconds, not minutes */
	long v = env ? strtol(env, NULL, 10) : -1;

	return v >= 0 ? v : UP_SESSION_WARN_BEFORE_S;
}

static void life_closed(uv_handle_t *h)
{
	free(h);
}

void session_life_free(struct up_session *s)
{
	if (s->life) {
		uv_close((uv_handle_t *)s->life, life_closed);
		s->life = NULL;
	}
}

static void warn(struct up_session *s, const char *limit, int64_t left)
{
	log_notice("Session %s: its %s ends in %lld s; uplink extend %s DURATION%s gives it more",
		   s->id, limit, (long long)left, s->id,
		   *limit == 'i' ? ", or attaching to it" : "");
	session_notify_expiring(s, limit, left);
}

static void on_life(uv_timer_t *t)
{
	struct up_session *s = t->data;
	int64_t now = (int64_t)time(NULL), w = warn_before();
	int64_t ttl_end = up_record_expires_at(s->record);
	int64_t idle = up_record_idle_timeout(s->record);
	int64_t idle_end = s->attached || !idle ? INT64_MAX : s->idle_since + idle;

	if (s->state != UP_SESSION_RUNNING)
		return;
	if (now >= ttl_end) {
		(void)up_session_stop(s, "its time to live (--ttl) ran out");
		return;
	}
	if (now >= idle_end) {
		(void)up_session_stop(s, "no client was attached for its --idle-timeout");
		return;
	}
	if (!s->warned_ttl && now >= ttl_end - w) {
		s->warned_ttl = true;
		warn(s, "time to live", ttl_end - now);
	}
	if (!s->warned_idle && now >= idle_end - w) {
		s->warned_idle = true;
		warn(s, "idle limit", idle_end - now);
	}
	session_life_arm(s);
}

void session_life_arm(struct up_session *s)
{
	int64_t now = (int64_t)time(NULL), w = warn_before(), next;
	int64_t ttl_end = up_record_expires_at(s->record);
	int64_t idle = up_record_idle_timeout(s->record);
	int64_t idle_end = s->attached || !idle ? INT64_MAX : s->idle_since + idle;

	if (s->state != UP_SESSION_RUNNING || s->all->closing)
		return;
	if (!s->life) {
		s->life = malloc(sizeof(*s->life));
		if (!s->life)
			return;
		(void)uv_timer_init(s->all->loop, s->life);
		s->life->data = s;
	}
	next = ttl_end < idle_end ? ttl_end : idle_end;
	if (!s->warned_ttl && ttl_end - w < next)
		next = ttl_end - w;
	if (!s->warned_idle && idle_end != INT64_MAX && idle_end - w < next)
		next = idle_end - w;
	(void)uv_timer_start(s->life, on_life, next > now ? (uint64_t)(next - now) * 1000 : 0, 0);
}

void up_session_attached(struct up_session *s, int delta)
{
	if (delta < 0 && s->attached == 0)
		return;
	s->attached = (unsigned)((int)s->attached + delta);
	if (s->attached == 0) {
		/* The idle clock starts when the last client leaves. */
		s->idle_since = (int64_t)time(NULL);
		s->warned_idle = false;
	}
	session_life_arm(s);
}

int up_session_extend(struct up_session *s, uint64_t by_s)
{
	int64_t now = (int64_t)time(NULL);
	int64_t from = up_record_expires_at(s->record);
	int r;

	if (s->state != UP_SESSION_RUNNING && !up_session_state_is_starting(s->state))
		return -EALREADY;
	r = up_record_set_expires_at(s->record, (from > now ? from : now) + (int64_t)by_s, now);
	if (r < 0)
		return r;
	s->warned_ttl = false;
	session_save(s);
	session_life_arm(s);
	return 0;
}
