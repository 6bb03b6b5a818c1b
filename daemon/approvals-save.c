/* SPDX-License-Identifier: Apache-2.0 */
/* "Always" in ask mode: an approval's rule saved to a rules file, off the loop (approvals.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "approvals.h"
#include "knobs.h"
#include "log.h"
#include "rules-save.h"
#include "session-private.h"
#include "session.h"
#include "trust.h"

struct save_job {
	uv_work_t work;
	struct up_rules_save s;
	char path[PATH_MAX], own_dir[PATH_MAX], trust_dir[PATH_MAX], comment[1024];
	json_t *rule;
	int r;
	up_approval_saved_fn done;
	void *userdata;
};

static void save_work(uv_work_t *w)
{
	struct save_job *j = w->data;

	j->r = up_rules_save(&j->s);
}

static void save_after(uv_work_t *w, int status)
{
	struct save_job *j = w->data;

	if (status < 0 && j->r == 0) /* cancelled: the loop is closing */
		j->r = status, j->s.e = UP_ERR_SHUTTING_DOWN,
		(void)snprintf(j->s.err, sizeof(j->s.err), "uplinkd is shutting down");
	if (j->r == 0)
		log_info("Saved an approval's rule to %s:%zu%s", j->path, j->s.line,
			 j->s.trusted ? " (trusted again as written)" : "");
	j->done(j->r, &j->s, j->userdata);
	json_decref(j->rule);
	free(j);
}

int up_approvals_save(struct up_session *s, const json_t *rule, const char *file, const char *what,
		      const char *by, up_approval_saved_fn done, void *userdata)
{
	const struct up_knobs *k = up_knobs();
	struct save_job *j = calloc(1, sizeof(*j));
	char day[16];
	time_t now = time(NULL);
	struct tm tm;
	int r;

	if (!j)
		return -ENOMEM;
	r = up_rules_save_default(k->home, k->xdg_config_home, j->path, sizeof(j->path));
	if (r >= 0) {
		memcpy(j->own_dir, j->path, sizeof(j->own_dir));
		*strrchr(j->own_dir, '/') = '\0';
		r = up_trust_default_dir(j->trust_dir, sizeof(j->trust_dir));
	}
	if (r >= 0 && file &&
	    snprintf(j->path, sizeof(j->path), "%s", file) >= (int)sizeof(j->path))
		r = -ENAMETOOLONG;
	(void)gmtime_r(&now, &tm);
	(void)strftime(day, sizeof(day), "%Y-%m-%d", &tm);
	(void)snprintf(j->comment, sizeof(j->comment),
		       "Saved %s by %s from session %s (%s in %s):\n%.400s", day, by,
		       up_session_id(s), s->o.agent, s->o.cwd, what);
	j->rule = json_incref((json_t *)rule);
	j->s = (struct up_rules_save){.path = j->path,
				      .own_dir = j->own_dir,
				      .trust_dir = j->trust_dir,
				      .rule = j->rule,
				      .comment = j->comment,
				      .now = (long long)now};
	j->done = done;
	j->userdata = userdata;
	j->work.data = j;
	if (r >= 0)
		r = uv_queue_work(s->all->loop, &j->work, save_work, save_after);
	if (r < 0) {
		json_decref(j->rule);
		free(j);
	}
	return r;
}
