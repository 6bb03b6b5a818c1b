/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ~/.gemini/settings.json for the pod. The file holds no login, but it may hold secrets:
 * an MCP server's headers (Authorization) and env (GITHUB_TOKEN), an OAuth client secret.
 * Every string whose key looks like a credential (up_agent_secret_name()) is dropped, with a
 * warning naming its path; numbers and flags under such names (sessionTokenLimit) stay. Then
 * the mode's auth type is selected, an enforced one dropped (it would ask to log in again),
 * and the self-update switched off (the image is rebuilt instead). The CLI allows comments
 * in the file: they are blanked before it is parsed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agents/gemini/gemini.h"
#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"

/* How deep the walk goes: settings are a few levels deep; deeper ones are kept as they are. */
#define SETTINGS_MAX_DEPTH 16

struct walk {
	const char *what;
	struct up_agent_prepared *p;
	char path[512];
	int r;
};

static void drop_secrets(struct walk *w, json_t *v, int depth);

/* Walks `v`, a member of an object at w->path (its own name in `k`). */
static void walk_member(struct walk *w, json_t *obj, const char *k, json_t *v, int depth)
{
	size_t at = strlen(w->path);

	if (json_is_string(v) && up_agent_secret_name(k)) {
		if (up_agent_warn(w->p,
				  "%s: dropped %s%s%s from the pod's copy: it looks like a secret "
				  "(put it in the keyring and inject it with a rule instead)",
				  w->what, w->path, at ? "." : "", k) < 0)
			w->r = -ENOMEM;
		(void)json_object_del(obj, k);
		return;
	}
	(void)snprintf(w->path + at, sizeof(w->path) - at, "%s%s", at ? "." : "", k);
	drop_secrets(w, v, depth + 1);
	w->path[at] = '\0';
}

static void drop_secrets(struct walk *w, json_t *v, int depth)
{
	const char *k;
	json_t *m;
	void *tmp;
	size_t i;

	if (depth > SETTINGS_MAX_DEPTH)
		return;
	if (json_is_object(v))
		json_object_foreach_safe(v, tmp, k, m) walk_member(w, v, k, m, depth);
	else if (json_is_array(v))
		json_array_foreach (v, i, m)
			drop_secrets(w, m, depth + 1);
}

/* doc.<a>.<b>, made an object when missing or something else. */
static json_t *object_at(json_t *doc, const char *a, const char *b)
{
	json_t *o = doc;
	const char *names[] = {a, b};

	for (size_t i = 0; o && i < ELEMENTSOF(names) && names[i]; i++) {
		json_t *next = json_object_get(o, names[i]);
		if (!json_is_object(next)) {
			next = json_object();
			if (!next || json_object_set_new(o, names[i], next) < 0)
				return NULL;
		}
		o = next;
	}
	return o;
}

static int force(json_t *doc, enum gemini_mode mode)
{
	json_t *auth = object_at(doc, "security", "auth");
	json_t *general = json_is_object(auth) ? object_at(doc, "general", NULL) : NULL;
	const char *type = mode == GEMINI_API_KEY ? GEMINI_AUTH_API_KEY : GEMINI_AUTH_GOOGLE;

	if (!general)
		return -ENOMEM;
	/* the old flat layout's name for the same choice, which the CLI migrates */
	(void)json_object_del(doc, "selectedAuthType");
	(void)json_object_del(auth, "enforcedType");
	(void)json_object_del(auth, "useExternal");
	if (json_object_set_new(auth, "selectedType", json_string(type)) < 0 ||
	    json_object_set_new(general, "enableAutoUpdate", json_false()) < 0 ||
	    json_object_set_new(general, "enableAutoUpdateNotification", json_false()) < 0)
		return -ENOMEM;
	return 0;
}

json_t *gemini_settings_transform(const json_t *host, enum gemini_mode mode, const char *what,
				  struct up_agent_prepared *p)
{
	json_t *doc = host ? json_deep_copy(host) : json_object();
	struct walk w = {.what = what, .p = p};

	if (!doc)
		return NULL;
	drop_secrets(&w, doc, 0);
	if (w.r < 0 || force(doc, mode) < 0) {
		up_json_wipe_decref(doc);
		return NULL;
	}
	return doc;
}

/* ---------------------------------------------------------------- reading */

/* Where the comment starting at s[i] ("//" or a block) ends: its newline stays. */
static size_t comment_end(const char *s, size_t len, size_t i)
{
	if (s[i + 1] == '/') {
		while (i < len && s[i] != '\n')
			i++;
		return i;
	}
	for (i += 2; i + 1 < len; i++)
		if (s[i] == '*' && s[i + 1] == '/')
			return i + 2;
	return len;
}

/* Blanks comments outside strings (newlines kept: errors name the same line). */
static void blank_comments(char *s, size_t len)
{
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		if (in_str) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				in_str = false;
		} else if (s[i] == '"') {
			in_str = true;
		} else if (s[i] == '/' && i + 1 < len && (s[i + 1] == '/' || s[i + 1] == '*')) {
			size_t end = comment_end(s, len, i);
			for (size_t k = i; k < end; k++)
				if (s[k] != '\n')
					s[k] = ' ';
			i = end - 1;
		}
	}
}

int gemini_read_settings(const char *path, const char *what, json_t **doc, char *err,
			 size_t err_len)
{
	json_error_t jerr;
	char *text = NULL;
	size_t len = 0;
	int r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &text, &len);

	*doc = NULL;
	if (r == -ENOENT)
		return r;
	if (r == -EFBIG)
		return up_agent_failf(err, err_len, -EINVAL, "%s is larger than %d bytes", what,
				      UP_AGENT_MAX_HOST_FILE);
	if (r < 0)
		return up_agent_failf(err, err_len, r, "cannot read %s: %s", what, strerror(-r));
	blank_comments(text, len);
	/* jerr.text may quote the file, which may hold a secret: only its position is used */
	*doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	up_free_secret(text, len);
	if (!*doc)
		return up_agent_failf(err, err_len, -EINVAL,
				      "%s is not valid JSON (line %d, column %d): fix it, or move "
				      "it aside",
				      what, jerr.line, jerr.column);
	if (!json_is_object(*doc)) {
		up_json_wipe_decref(*doc);
		*doc = NULL;
		return up_agent_failf(err, err_len, -EINVAL, "%s does not hold a JSON object",
				      what);
	}
	return 0;
}
