/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes calls a session owns (session-private.h): tracked, so that cancelling the
 * session's work cancels them, and answered through the session. */
#include <errno.h>
#include <stdlib.h>

#include "cluster.h"
#include "image.h"
#include "kube.h"
#include "placeholders.h"
#include "session-private.h"

struct scall {
	struct up_session *s;
	struct up_kube_call *call;
	void (*done)(struct up_session *s, const struct up_kube_error *err, json_t *obj);
};

static void on_call(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct scall *c = ud;
	struct up_session *s = c->s;
	void (*done)(struct up_session *, const struct up_kube_error *, json_t *) = c->done;

	for (unsigned i = 0; i < UP_SESSION_MAX_CALLS; i++)
		if (s->calls[i] == c)
			s->calls[i] = NULL;
	free(c);
	done(s, err, obj);
}

static int track(struct up_session *s, struct scall *c)
{
	for (unsigned i = 0; i < UP_SESSION_MAX_CALLS; i++)
		if (!s->calls[i]) {
			s->calls[i] = c;
			return 0;
		}
	return -E2BIG;
}

static struct scall *scall_new(struct up_session *s,
			       void (*done)(struct up_session *, const struct up_kube_error *,
					    json_t *))
{
	struct scall *c = calloc(1, sizeof(*c));

	if (c) {
		c->s = s;
		c->done = done;
	}
	return c;
}

enum call_kind { CALL_APPLY, CALL_DELETE, CALL_GET };

static int session_call(struct up_session *s, enum call_kind kind, json_t *obj, const char *path,
			void (*done)(struct up_session *, const struct up_kube_error *, json_t *))
{
	struct up_kube *k = up_cluster_kube(s->cluster);
	struct scall *c;
	int r;

	if (!k)
		return -ENOTCONN;
	c = scall_new(s, done);
	if (!c)
		return -ENOMEM;
	r = track(s, c);
	if (r >= 0 && kind == CALL_APPLY)
		r = up_kube_apply(k, obj, false, on_call, c, &c->call);
	else if (r >= 0 && kind == CALL_DELETE)
		r = up_kube_delete(k, path, on_call, c, &c->call);
	else if (r >= 0)
		r = up_kube_get(k, path, on_call, c, &c->call);
	if (r < 0) {
		for (unsigned i = 0; i < UP_SESSION_MAX_CALLS; i++)
			if (s->calls[i] == c)
				s->calls[i] = NULL;
		free(c);
		return r;
	}
	if (kind == CALL_APPLY)
		s->applied_anything = true;
	return 0;
}

void session_cancel_work(struct up_session *s)
{
	for (unsigned i = 0; i < UP_SESSION_MAX_CALLS; i++)
		if (s->calls[i]) {
			up_kube_cancel(s->calls[i]->call);
			free(s->calls[i]);
			s->calls[i] = NULL;
		}
	if (s->resolve) {
		up_resolve_cancel(s->resolve);
		s->resolve = NULL;
	}
	if (s->image) {
		up_image_cancel(s->image);
		s->image = NULL;
	}
	if (s->timer)
		(void)uv_timer_stop(s->timer);
}

int session_apply(struct up_session *s, json_t *obj, session_done_fn done)
{
	return session_call(s, CALL_APPLY, obj, NULL, done);
}

int session_get(struct up_session *s, const char *path, session_done_fn done)
{
	return session_call(s, CALL_GET, NULL, path, done);
}

int session_delete(struct up_session *s, const char *path, session_done_fn done)
{
	return session_call(s, CALL_DELETE, NULL, path, done);
}
