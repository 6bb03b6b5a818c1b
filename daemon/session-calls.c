/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a session asks of the world outside the loop, as one table (session-private.h):
 * up_session_kube_ops over the deploy cluster (kube.c, cluster.c), the image job and the
 * audit follower. And the Kubernetes calls a session owns: tracked, so that cancelling the
 * session's work cancels them, and answered through the session.
 */
#include <errno.h>
#include <stdlib.h>

#include "cluster.h"
#include "image.h"
#include "kube.h"
#include "placeholders.h"
#include "session-audit.h"
#include "session-private.h"

/* ---- the real table: the deploy cluster through kube.c ---- */

static int kube_apply(struct up_session *s, json_t *obj, up_session_call_cb cb, void *ud,
		      void **call)
{
	struct up_kube *k = up_cluster_kube(s->cluster);

	return k ? up_kube_apply(k, obj, false, cb, ud, (struct up_kube_call **)call) : -ENOTCONN;
}

static int kube_get(struct up_session *s, const char *path, up_session_call_cb cb, void *ud,
		    void **call)
{
	struct up_kube *k = up_cluster_kube(s->cluster);

	return k ? up_kube_get(k, path, cb, ud, (struct up_kube_call **)call) : -ENOTCONN;
}

static int kube_delete(struct up_session *s, const char *path, up_session_call_cb cb, void *ud,
		       void **call)
{
	struct up_kube *k = up_cluster_kube(s->cluster);

	return k ? up_kube_delete(k, path, cb, ud, (struct up_kube_call **)call) : -ENOTCONN;
}

static void kube_cancel(void *call)
{
	up_kube_cancel(call);
}

static json_t *kube_pod(const struct up_session *s, const char *name)
{
	struct up_kube_watch *pods = up_cluster_pods(s->cluster);

	return pods ? up_kube_watch_get(pods, s->ns, name) : NULL;
}

static const struct up_kube_context *kube_context(const struct up_session *s)
{
	struct up_kube *k = up_cluster_kube(s->cluster);

	return k ? up_kube_get_context(k) : NULL;
}

static int image(struct up_session *s, const struct up_image_request *req,
		 void (*progress)(const struct up_image_progress *p, void *ud),
		 void (*done)(const struct up_image_result *res, void *ud), void *ud, void **job)
{
	return up_image_ensure(s->all->loop, s->all->http, req, progress, done, ud,
			       (struct up_image_job **)job);
}

static void image_cancel(void *job)
{
	up_image_cancel(job);
}

const struct up_session_cluster_ops up_session_kube_ops = {
	.apply = kube_apply,
	.get = kube_get,
	.delete = kube_delete,
	.cancel = kube_cancel,
	.pod = kube_pod,
	.context = kube_context,
	.image = image,
	.image_cancel = image_cancel,
	.audit_start = up_session_audit_start,
	.prepare = session_prepare_run,
};

/* ---- the calls a session owns ---- */

struct scall {
	struct up_session *s;
	void *call;
	session_done_fn done;
	session_done_ud_fn done_ud; /* instead of done: also told when the call is cancelled */
	void *ud;
};

static void untrack(struct up_session *s, struct scall *c)
{
	for (unsigned i = 0; i < UP_SESSION_MAX_CALLS; i++)
		if (s->calls[i] == c)
			s->calls[i] = NULL;
}

static void on_call(const struct up_kube_error *err, json_t *obj, void *ud)
{
	struct scall *c = ud;
	struct up_session *s = c->s;
	session_done_fn done = c->done;
	session_done_ud_fn done_ud = c->done_ud;
	void *cud = c->ud;

	untrack(s, c);
	free(c);
	if (done_ud)
		done_ud(s, err, obj, cud);
	else
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

enum call_kind { CALL_APPLY, CALL_DELETE, CALL_GET };

static int session_call(struct up_session *s, enum call_kind kind, json_t *obj, const char *path,
			struct scall *c)
{
	int r;

	if (!c)
		return -ENOMEM;
	r = track(s, c);
	if (r >= 0 && kind == CALL_APPLY)
		r = s->ops->apply(s, obj, on_call, c, &c->call);
	else if (r >= 0 && kind == CALL_DELETE)
		r = s->ops->delete (s, path, on_call, c, &c->call);
	else if (r >= 0)
		r = s->ops->get(s, path, on_call, c, &c->call);
	if (r < 0) {
		untrack(s, c);
		free(c);
		return r;
	}
	if (kind == CALL_APPLY)
		s->applied_anything = true;
	return 0;
}

void session_cancel_work(struct up_session *s)
{
	static const struct up_kube_error cancelled = {
		.r = -ECANCELED, .message = "the session's work was cancelled"};

	for (unsigned i = 0; i < UP_SESSION_MAX_CALLS; i++)
		if (s->calls[i]) {
			struct scall *c = s->calls[i];

			s->calls[i] = NULL;
			s->ops->cancel(c->call);
			if (c->done_ud)
				c->done_ud(s, &cancelled, NULL, c->ud);
			free(c);
		}
	if (s->resolve) {
		up_resolve_cancel(s->resolve);
		s->resolve = NULL;
	}
	if (s->image) {
		s->ops->image_cancel(s->image);
		s->image = NULL;
	}
	if (s->timer)
		(void)uv_timer_stop(s->timer);
	session_ranges_cancel(s);
}

int session_apply(struct up_session *s, json_t *obj, session_done_fn done)
{
	return session_call(s, CALL_APPLY, obj, NULL, up_new(struct scall, .s = s, .done = done));
}

int session_apply_ud(struct up_session *s, json_t *obj, session_done_ud_fn done, void *ud)
{
	return session_call(s, CALL_APPLY, obj, NULL,
			    up_new(struct scall, .s = s, .done_ud = done, .ud = ud));
}

bool session_apply_rest(struct up_session *s, const json_t *objs, bool (*skip)(const json_t *o),
			session_done_fn done)
{
	s->pending = 0;
	for (size_t i = 1; i < json_array_size(objs); i++) {
		json_t *o = json_array_get(objs, i);
		if (skip && skip(o))
			continue;
		if (session_apply(s, o, done) < 0) {
			session_fail(s, UP_ERR_CLUSTER_UNREACHABLE,
				     "the deploy cluster is not available");
			return false;
		}
		s->pending++;
	}
	return true;
}

int session_get(struct up_session *s, const char *path, session_done_fn done)
{
	return session_call(s, CALL_GET, NULL, path, up_new(struct scall, .s = s, .done = done));
}

int session_delete(struct up_session *s, const char *path, session_done_fn done)
{
	return session_call(s, CALL_DELETE, NULL, path, up_new(struct scall, .s = s, .done = done));
}
