/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Config files (config-file.h) and the trust store (trust.h): the rules files a project's
 * file names, read once with it (so what is hashed is what is parsed), and whether the store
 * trusts what each project's file asks for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bounds.h"
#include "config-file.h"
#include "fileio.h"
#include "placeholders.h"
#include "rules.h"
#include "trust.h"

/*
 * An ask as the terminal will show it: a project's file may write control characters (an
 * escape sequence could hide or rewrite the refusal), so each becomes '?'. Takes `what`.
 */
static void printable(char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static json_t *ask_of(const char *at, json_t *what)
{
	_cleanup_(freep) char *text = what ? strdup(json_string_value(what)) : NULL;
	_cleanup_(freep) char *where = strdup(at);

	json_decref(what);
	if (!text || !where)
		return NULL;
	printable(text);
	printable(where); /* a rules file's path is the project's to choose */
	return json_pack("{s:s, s:s}", "at", where, "what", text);
}

/* One header's placeholders, as asks. */
static int header_asks(const struct up_rule *r, const struct up_rule_header *h, json_t *asks)
{
	struct up_ph_template t = {0};
	char why[256];
	int k = 0;

	if (h->literal || up_ph_parse(h->value, &t, why, sizeof(why)) < 0)
		return 0; /* a malformed one fails the rules' own check */
	for (size_t i = 0; i < t.n && k >= 0; i++) {
		const struct up_ph_segment *s = &t.segs[i];
		json_t *what =
			s->kind == UP_PH_KEYRING
				? json_sprintf("the keyring entry service='%s' "
					       "username='%s', sent in header %s by rule '%s'",
					       s->a, s->b, h->name, r->name)
			: s->kind == UP_PH_EXEC
				? json_sprintf(
					  "runs '%s' on this machine (an {{exec:...}} "
					  "placeholder), its output sent in header %s by rule '%s'",
					  s->a, h->name, r->name)
				: NULL;
		if (what)
			k = json_array_append_new(asks, ask_of(r->source, what));
	}
	up_ph_template_done(&t);
	return k < 0 ? -ENOMEM : 0;
}

/* What re-signing under R gives: requests signed with the real keys of --aws-profiles. */
static json_t *aws_ask(const struct up_rule *r)
{
	_cleanup_(freep) char *actions = NULL;
	size_t len = 0;
	FILE *f;

	if (r->n_aws_actions == 0)
		return json_sprintf(
			"rule '%s' has the proxy re-sign the agent's AWS requests to its "
			"hosts with your real AWS keys (--aws-profiles)",
			r->name);
	f = open_memstream(&actions, &len);
	if (!f)
		return NULL;
	for (size_t i = 0; i < r->n_aws_actions; i++)
		fprintf(f, "%s%s", i ? ", " : "", r->aws_actions[i]);
	if (fclose(f) != 0)
		return NULL;
	return json_sprintf("rule '%s' has the proxy re-sign with your real AWS keys "
			    "(--aws-profiles) requests that hand the agent AWS credentials: %s",
			    r->name, actions);
}

int up_config_rules_asks(const struct up_ruleset *rs, json_t *asks)
{
	for (size_t i = 0; i < up_ruleset_count(rs); i++) {
		const struct up_rule *r = up_ruleset_get(rs, i);

		json_t *what =
			r->l4 ? json_sprintf("l4_forward rule '%s': raw TCP the rules' methods and "
					     "paths never see",
					     r->name)
			      : NULL;

		if (what && json_array_append_new(asks, ask_of(r->source, what)) < 0)
			return -ENOMEM;
		if (up_rule_aws_sign(r) &&
		    json_array_append_new(asks, ask_of(r->source, aws_ask(r))) < 0)
			return -ENOMEM;
		for (size_t j = 0; j < r->n_headers; j++)
			if (header_asks(r, &r->headers[j], asks) < 0)
				return -ENOMEM;
	}
	return 0;
}

/* The item for the rules file `path`: its text and hash, or why it cannot be read. */
static json_t *rules_file_item(const char *path, json_t *source, json_t *entry)
{
	_cleanup_(freep) char *text = NULL;
	struct up_ruleset *rs;
	char sha[UP_SHA256_HEX_LEN + 1];
	size_t len = 0;
	int r = up_read_file(path, UP_MAX_RULES_FILE_SIZE, &text, &len);
	json_t *asks = json_object_get(entry, "asks"), *item;

	if (r >= 0 && strlen(text) != len)
		r = -EILSEQ;
	if (r < 0)
		return json_pack("{s:s, s:s, s:O, s:o}", "file", path, "path", path, "source",
				 source, "error",
				 json_sprintf("%s: cannot read the rules file %s: %s",
					      json_string_value(source), path,
					      r == -EFBIG    ? "larger than 1 MiB"
					      : r == -EILSEQ ? "it holds a NUL byte"
							     : strerror(-r)));
	up_sha256_hex(text, len, sha);
	if (json_array_append_new(json_object_get(entry, "rules_files"),
				  json_pack("{s:s, s:s}", "file", path, "sha256", sha)) < 0)
		return NULL;
	rs = up_ruleset_new();
	if (!rs)
		return NULL;
	/* Problems are the session's to report, from these same bytes. */
	json_t *ignored = json_array();
	r = ignored ? up_ruleset_load_string(rs, UP_LAYER_USER, path, text, len, ignored) : -ENOMEM;
	json_decref(ignored);
	if (r >= 0 && up_config_rules_asks(rs, asks) < 0)
		r = -ENOMEM;
	up_ruleset_free(rs);
	item = r == -ENOMEM ? NULL
			    : json_pack("{s:s, s:s, s:O, s:s}", "file", path, "path", path,
					"source", source, "text", text);
	return item;
}

int up_config_read_rules_files(struct up_config *c, size_t first)
{
	json_t *entry = json_array_get(c->trust, json_array_size(c->trust) - 1);
	json_t *origins = json_object_get(c->origins, "rules");

	if (!json_is_true(json_object_get(entry, "project")))
		return 0;
	for (size_t i = first; i < json_array_size(c->rules); i++) {
		json_t *v = json_array_get(c->rules, i), *item;

		if (!json_is_string(v))
			continue;
		item = rules_file_item(json_string_value(v), json_array_get(origins, i), entry);
		if (!item || json_array_set_new(c->rules, i, item) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* "trusted", "changed" (the store knows the file or a rules file at another hash) or "untrusted".
 */
static const char *state_of(const json_t *e, const json_t *store)
{
	const json_t *rf;
	bool trusted, known;
	size_t i;

	trusted = up_trust_has(store, json_string_value(json_object_get(e, "file")),
			       json_string_value(json_object_get(e, "sha256")));
	known = json_object_get(store, json_string_value(json_object_get(e, "file"))) != NULL;
	json_array_foreach (json_object_get(e, "rules_files"), i, rf) {
		const char *file = json_string_value(json_object_get(rf, "file"));
		trusted = trusted && up_trust_has(store, file,
						  json_string_value(json_object_get(rf, "sha256")));
	}
	return trusted ? "trusted" : known ? "changed" : "untrusted";
}

int up_config_check_trust(struct up_config *c, const json_t *store)
{
	json_t *e;
	size_t i;

	json_array_foreach (c->trust, i, e) {
		const char *file = json_string_value(json_object_get(e, "file"));
		const char *state = !json_is_true(json_object_get(e, "project")) ? "yours"
				    : json_array_size(json_object_get(e, "asks")) == 0
					    ? "not needed"
					    : state_of(e, store);
		json_t *at = json_object_get(json_object_get(store, file), "trusted_at");

		if (json_object_set_new(e, "state", json_string(state)) < 0 ||
		    (at && json_object_set(e, "trusted_at", at) < 0))
			return -ENOMEM;
	}
	return 0;
}

bool up_config_needs_trust(const json_t *entry)
{
	const char *state = json_string_value(json_object_get(entry, "state"));

	return state && (streq(state, "untrusted") || streq(state, "changed"));
}

static void describe(FILE *f, const json_t *e)
{
	const char *file = json_string_value(json_object_get(e, "file"));
	const json_t *a;
	char when[64] = "";
	time_t t = (time_t)json_integer_value(json_object_get(e, "trusted_at"));
	struct tm tm;
	size_t i;

	if (t > 0 && gmtime_r(&t, &tm))
		(void)strftime(when, sizeof(when), " on %Y-%m-%d at %H:%M UTC", &tm);
	if (streq(json_string_value(json_object_get(e, "state")), "changed"))
		fprintf(f,
			"%s has changed since you trusted it%s (it, or a rules file it names); "
			"it asks for:\n",
			file, when);
	else
		fprintf(f, "%s is a project's config file you have not trusted; it asks for:\n",
			file);
	json_array_foreach (json_object_get(e, "asks"), i, a)
		fprintf(f, "  %s: %s\n", json_string_value(json_object_get(a, "at")),
			json_string_value(json_object_get(a, "what")));
}

char *up_config_untrusted_message(const struct up_config *c)
{
	char *buf = NULL;
	size_t len = 0;
	const json_t *e;
	FILE *f = open_memstream(&buf, &len);
	size_t i;

	if (!f)
		return NULL;
	fprintf(f,
		"a project's config file (a cloned repository can bring one) asks for credentials "
		"or reach that only a file you trust may have:\n");
	json_array_foreach (c->trust, i, e)
		if (up_config_needs_trust(e))
			describe(f, e);
	fprintf(f,
		"Nothing was started. Read the file and the rules files it names; if you want what "
		"it asks for, trust it (as it is now) with:\n");
	json_array_foreach (c->trust, i, e)
		if (up_config_needs_trust(e))
			fprintf(f, "  uplink trust %s\n",
				json_string_value(json_object_get(e, "file")));
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	if (len > 0 && buf[len - 1] == '\n')
		buf[len - 1] = '\0';
	return buf;
}
