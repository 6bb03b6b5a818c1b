/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Credentials renewed while a session runs (DESIGN.md "Rules and credentials"): the AWS
 * profiles' exports before the earliest one expires. The export runs on the threadpool;
 * the mitm's Secret is then re-applied (server-side apply of the rendered Secret with the
 * new data), Kubernetes updates the mounted file, and the addon reloads it when it
 * changes. A failure is retried with capped backoff; if the credentials expire anyway the
 * user gets one desktop notification (again only after a success).
 *
 * One timer per session, armed for the next thing due. The state is its own object so
 * that a job in flight when the session goes can finish: the session detaches it
 * (s = NULL) and the job's completion frees it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aws.h"
#include "backoff.h"
#include "bounds.h"
#include "fileio.h"
#include "log.h"
#include "manager.h"
#include "manifests.h"
#include "notify.h"
#include "session-private.h"

struct session_refresh {
	struct up_session *s; /* NULL once the session has gone: the job in flight frees this */
	uv_timer_t *timer;    /* freed by its close callback */
	uv_work_t work;
	bool busy;     /* a job is on the threadpool */
	bool notified; /* the user was told the credentials expired; until a success */
	unsigned attempt;
	long divisor; /* UPLINK_DEBUG_TIME_DIVISOR: tests make minutes seconds */
	uint64_t expires_ms; /* uv_now() when the credentials in the Secret stop working; 0 never */

	/* The job: its input (copied on the loop) and its results. */
	json_t *profiles;
	char *creds_json; /* secret */
	int64_t aws_expires;
	int r;
	char why[1024];
};

static long time_divisor(void)
{
	const char *div = getenv("UPLINK_DEBUG_TIME_DIVISOR");
	long d = div ? strtol(div, NULL, 10) : 1;

	return d > 1 ? d : 1;
}

static void timer_closed(uv_handle_t *h)
{
	free(h);
}

static void job_done_free(struct session_refresh *rf)
{
	if (rf->creds_json)
		up_free_secret(rf->creds_json, strlen(rf->creds_json));
	rf->creds_json = NULL;
	json_decref(rf->profiles);
	rf->profiles = NULL;
}

static void refresh_destroy(struct session_refresh *rf)
{
	job_done_free(rf);
	free(rf);
}

static void on_timer(uv_timer_t *t);

static void schedule(struct session_refresh *rf, uint64_t ms)
{
	if (rf->timer && !rf->s->all->closing)
		(void)uv_timer_start(rf->timer, on_timer, ms, 0);
}

/* The next renewal, from when the credentials now in the Secret expire. */
static void schedule_from_expiry(struct session_refresh *rf, int64_t expires)
{
	int64_t ms = up_refresh_delay_ms((int64_t)time(NULL), expires, rf->divisor);
	int64_t left = expires - (int64_t)time(NULL);

	rf->expires_ms = expires ? uv_now(rf->s->all->loop) + (uint64_t)(left > 0 ? left : 0) * 1000 /
								 (uint64_t)rf->divisor
				 : 0;
	if (ms < 0)
		return; /* nothing that expires */
	log_debug("Session %s: credentials renewed in %lld ms", rf->s->id, (long long)ms);
	schedule(rf, (uint64_t)ms);
}

static void failed(struct session_refresh *rf, const char *why)
{
	struct up_session *s = rf->s;
	uint64_t ms = up_backoff_ms(rf->attempt++, UP_REFRESH_RETRY_BASE_MS / (uint64_t)rf->divisor,
				    UP_REFRESH_RETRY_CAP_MS / (uint64_t)rf->divisor, (uint32_t)uv_hrtime(), -1);

	log_warning("Session %s: cannot renew its credentials: %s; again in %llu ms", s->id, why,
		    (unsigned long long)ms);
	if (rf->expires_ms && uv_now(s->all->loop) >= rf->expires_ms && !rf->notified) {
		rf->notified = true;
		up_notify_credential_failed(up_manager_notifier(s->all->m), s->o.agent, s->id, why);
	}
	schedule(rf, ms);
}

static void on_secret_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	struct session_refresh *rf = s->refresh;

	(void)obj;
	if (!rf)
		return;
	if (err) {
		char why[1200];
		(void)snprintf(why, sizeof(why), "updating Secret %s failed: %.1024s",
			       UP_MANIFEST_AWS_SECRET, err->message);
		failed(rf, why);
		return;
	}
	log_info("Session %s: AWS credentials renewed (%zu profiles)", s->id,
		 json_array_size(s->o.extra->aws_profiles));
	rf->attempt = 0;
	rf->notified = false;
	s->o.extra->aws_expires_at = rf->aws_expires;
	schedule_from_expiry(rf, rf->aws_expires);
}

static void job_run(uv_work_t *w)
{
	struct session_refresh *rf = w->data;

	rf->why[0] = '\0';
	rf->r = up_aws_export_all(rf->profiles, &rf->creds_json, &rf->aws_expires, rf->why,
				  sizeof(rf->why));
}

/* The new map into the rendered Secret (the old value wiped), and that Secret applied. */
static int patch_secret(struct session_refresh *rf)
{
	struct up_session *s = rf->s;
	json_t *secret = up_manifests_find(s->objects, "Secret", UP_MANIFEST_AWS_SECRET);
	int r;

	if (!secret)
		return snprintf(rf->why, sizeof(rf->why), "the session has no Secret %s",
				UP_MANIFEST_AWS_SECRET), -ENOENT;
	r = up_manifests_secret_put(secret, UP_MANIFEST_AWS_KEY, rf->creds_json, strlen(rf->creds_json));
	if (r >= 0)
		r = session_apply(s, secret, on_secret_applied);
	if (r < 0)
		(void)snprintf(rf->why, sizeof(rf->why), "cannot update Secret %s: %s",
			       UP_MANIFEST_AWS_SECRET, strerror(-r));
	return r;
}

static void job_after(uv_work_t *w, int status)
{
	struct session_refresh *rf = w->data;

	(void)status;
	rf->busy = false;
	if (!rf->s) { /* the session went while the job ran */
		refresh_destroy(rf);
		return;
	}
	if (rf->s->state != UP_SESSION_RUNNING || rf->s->all->closing) {
		job_done_free(rf);
		return;
	}
	if (rf->r >= 0 && patch_secret(rf) >= 0) {
		job_done_free(rf);
		return;
	}
	job_done_free(rf);
	failed(rf, rf->why[0] ? rf->why : strerror(-rf->r));
}

static void on_timer(uv_timer_t *t)
{
	struct session_refresh *rf = t->data;
	int r;

	if (rf->busy || rf->s->state != UP_SESSION_RUNNING)
		return;
	rf->profiles = json_deep_copy(rf->s->o.extra->aws_profiles);
	if (!rf->profiles) {
		failed(rf, "out of memory");
		return;
	}
	rf->work.data = rf;
	rf->busy = true;
	r = uv_queue_work(rf->s->all->loop, &rf->work, job_run, job_after);
	if (r < 0) {
		rf->busy = false;
		job_done_free(rf);
		failed(rf, uv_strerror(r));
	}
}

void session_refresh_arm(struct up_session *s)
{
	const struct up_session_extra *x = s->o.extra;
	struct session_refresh *rf;

	if (s->refresh || !x || json_array_size(x->aws_profiles) == 0 || !x->aws_expires_at)
		return; /* nothing that expires */
	rf = calloc(1, sizeof(*rf));
	if (!rf || !(rf->timer = malloc(sizeof(*rf->timer)))) {
		free(rf);
		log_warning("Session %s: out of memory; its credentials will not be renewed", s->id);
		return;
	}
	rf->s = s;
	rf->divisor = time_divisor();
	(void)uv_timer_init(s->all->loop, rf->timer);
	rf->timer->data = rf;
	s->refresh = rf;
	schedule_from_expiry(rf, x->aws_expires_at);
}

void session_refresh_free(struct up_session *s)
{
	struct session_refresh *rf = s->refresh;

	if (!rf)
		return;
	s->refresh = NULL;
	uv_close((uv_handle_t *)rf->timer, timer_closed);
	rf->timer = NULL;
	rf->s = NULL;
	if (!rf->busy)
		refresh_destroy(rf);
}
