/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PREPARING: the record written, then on the threadpool the host side of the agent, the
 * mounts, AWS, the rules and the CA (s->ops->prepare, session_prepare_run for real), then
 * on the loop the warnings told and the credential placeholders resolved; then BUILDING.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ca.h"
#include "config-file.h"
#include "jsonrpc.h"
#include "kube.h"
#include "log.h"
#include "placeholders.h"
#include "rules.h"
#include "secret-store.h"
#include "session-private.h"
#include "store.h"

void session_prepare_run(struct up_session *s)
{
	char err[1024] = "";
	json_t *f;
	size_t i;
	int r;

	if (session_extras_prepare(s) < 0) /* host mounts, --mitm-ca-cert, git: session-extras.c */
		return;
	r = session_agent_prepare(s, err, sizeof(err));
	if (r < 0) {
		s->prep_e = UP_ERR_PREREQ_MISSING;
		s->prep_error = strdup(err);
		return;
	}
	(void)session_agent_warnings(s, s->warnings);
	if (session_aws_prepare(s) < 0) /* --aws-profiles and the agent's: session-aws.c */
		return;
	r = session_agent_rules(s, s->problems);
	json_array_foreach (s->o.asked.rules, i, f)
		if (r != -ENOMEM) {
			int k = up_config_load_rules_item(s->rs, f,
							  s->problems); /* a path or inline */
			r = r < 0 ? r : k;
		}
	if (r >= 0)
		r = up_ruleset_finish(s->rs, s->o.asked.no_default_rules, s->problems);
	if (r < 0 || json_array_size(s->problems) > 0) {
		s->prep_error = up_json_join(s->problems, "\n");
		s->prep_e = UP_ERR_RULES_INVALID;
		return;
	}
	session_aws_warn_rules(s, s->warnings);
	if (!s->o.image && !s->o.registry) /* a read: a dry run tells it too */
		session_registry_check(s->server[0] ? s->server : NULL, s->registry_problem,
				       sizeof(s->registry_problem));
	r = up_ca_new(s->id, session_now(), up_record_expires_at(s->record), &s->ca, err,
		      sizeof(err));
	if (r < 0) {
		s->prep_e = UP_ERR_INTERNAL_ERROR;
		s->prep_error = strdup(err);
	}
}

static void prepare_work(uv_work_t *w)
{
	struct up_session *s = w->data;

	s->problems = json_array();
	s->warnings = json_array();
	s->rs = up_ruleset_new();
	if (!s->problems || !s->warnings || !s->rs) {
		s->prep_e = UP_ERR_INTERNAL_ERROR;
		s->prep_error = strdup("out of memory");
		return;
	}
	s->ops->prepare(s);
}

static void on_resolved(int r, enum up_error e, const char *message, void *ud)
{
	struct up_session *s = ud;

	s->resolve = NULL;
	if (r < 0) {
		session_fail(s, e, "%s", message);
		return;
	}
	session_progress(s, "prepare", 1, 1, "rules and credentials ready (%zu rules)",
			 up_ruleset_count(s->rs));
	session_step_build(s);
}

static void prepare_after(uv_work_t *w, int status)
{
	struct up_session *s = w->data;
	struct up_resolve_options o = {.allow_exec = s->o.asked.allow_exec,
				       .store = up_secret_store_pick()};
	json_t *warning;
	size_t i;
	int r;

	(void)status;
	s->in_work = false;
	if (s->freeing) {
		up_session_free(s);
		return;
	}
	if (s->all->closing || up_session_state_is_terminal(s->state))
		return;
	json_array_foreach (s->warnings, i, warning) {
		log_warning("Session %s: %s", s->id, json_string_value(warning));
		session_progress(s, "warning", 0, 0, "%s", json_string_value(warning));
	}
	if (s->prep_error) {
		session_fail(s, s->prep_e, "%s", s->prep_error);
		return;
	}
	session_progress(s, "prepare", 0, 1, "resolving credential placeholders");
	r = up_resolve_start(s->all->loop, s->rs, &o, on_resolved, s, &s->resolve);
	if (r < 0)
		session_fail(s, UP_ERR_INTERNAL_ERROR, "cannot resolve placeholders: %s",
			     strerror(-r));
}

static void on_record_saved(int r, const char *err, json_t *result, void *ud)
{
	struct up_session *s = ud;
	const struct up_kube_context *ctx;

	(void)result;
	if (s->all->closing || up_session_state_is_terminal(s->state))
		return;
	if (r < 0) {
		/* The record must exist before anything in the cluster does. */
		session_fail(s, UP_ERR_INTERNAL_ERROR, "cannot write the session record: %s", err);
		return;
	}
	/* What the worker may need of the cluster, copied while on the loop. */
	ctx = s->ops->context(s);
	if (ctx) {
		(void)snprintf(s->server, sizeof(s->server), "%s", ctx->server);
		free(s->server_ca);
		s->server_ca = ctx->ca_pem ? strndup(ctx->ca_pem, ctx->ca_len) : NULL;
	}
	session_ranges_read(s); /* alongside the preparation: session-ranges.c */
	s->work.data = s;
	s->in_work = true;
	r = uv_queue_work(s->all->loop, &s->work, prepare_work, prepare_after);
	if (r < 0) {
		s->in_work = false;
		session_fail(s, UP_ERR_INTERNAL_ERROR, "cannot schedule the preparation: %s",
			     strerror(-r));
	}
}

int up_session_begin(struct up_session *s, const struct up_session_observer *obs, void *starter)
{
	int r;

	s->obs = obs;
	s->starter = starter;
	s->t_start = uv_hrtime();
	s->state = UP_SESSION_PREPARING;
	s->record = up_record_new(s->id, s->o.agent, s->o.mode ? s->o.mode : "", s->o.cwd,
				  s->o.asked.deploy_context ? s->o.asked.deploy_context : "",
				  session_now(), s->o.ttl_s, s->o.idle_s);
	if (!s->record || up_record_set_quiet(s->record, s->o.quiet) < 0 ||
	    up_record_set_ask(s->record, s->o.asked.ask) < 0) {
		s->starter = NULL;
		return -ENOMEM;
	}
	session_progress(s, "prepare", 0, 1, "preparing session %s", s->id);
	if (s->o.asked.dry_run) {
		on_record_saved(0, NULL, NULL, s);
		return 0;
	}
	/* Invariant: the record is on disk before any cluster object exists. */
	r = up_store_save_async(s->all->loop, s->all->store, s->record, on_record_saved, s);
	if (r < 0)
		s->starter = NULL;
	return r;
}
