/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OpenCode's config as the pod sees it: the host's global config files merged into one
 * opencode.json, every secret-looking key left out (a warning names each), and the
 * settings that let it run in the sandbox without asking.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/opencode/opencode.h"
#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"

/* The global config files opencode reads, merged in this order (a later one wins). */
static const char *const config_files[] = {"config.json", "opencode.json", "opencode.jsonc"};

/* ---------------------------------------------------------------- JSONC */

static size_t skip_string(const char *t, size_t i, size_t len)
{
	for (i++; i < len && t[i] != '"'; i++)
		if (t[i] == '\\' && i + 1 < len)
			i++;
	return i;
}

/* Blanks the comment at t[i] ("//" or a block); returns where it ends. */
static size_t blank_comment(char *t, size_t i, size_t len)
{
	bool block = t[i + 1] == '*';
	size_t j = i + 2;

	while (j < len && (block ? !(t[j] == '*' && j + 1 < len && t[j + 1] == '/') : t[j] != '\n'))
		j++;
	if (block)
		j = j + 2 > len ? len : j + 2;
	for (size_t k = i; k < j; k++)
		if (t[k] != '\n')
			t[k] = ' ';
	return j;
}

/* Blanks the comma at t[i] when only white space stands between it and a ']' or '}'. */
static void blank_trailing_comma(char *t, size_t i, size_t len)
{
	size_t j = i + 1;

	while (j < len && strchr(" \t\r\n", t[j]))
		j++;
	if (j < len && (t[j] == ']' || t[j] == '}'))
		t[i] = ' ';
}

void oc_jsonc_strip(char *t, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (t[i] == '"')
			i = skip_string(t, i, len);
		else if (t[i] == '/' && i + 1 < len && (t[i + 1] == '/' || t[i + 1] == '*'))
			i = blank_comment(t, i, len) - 1;
	}
	/* a second pass: a comment may have stood between the comma and the bracket */
	for (size_t i = 0; i < len; i++) {
		if (t[i] == '"')
			i = skip_string(t, i, len);
		else if (t[i] == ',')
			blank_trailing_comma(t, i, len);
	}
}

/* ---------------------------------------------------------------- reading */

static int read_one(const char *path, const char *name, json_t **doc, char *err, size_t err_len)
{
	json_error_t jerr;
	char *text = NULL;
	size_t len = 0;
	int r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &text, &len);

	*doc = NULL;
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return up_agent_failf(err, err_len, r == -EFBIG ? -EINVAL : r,
				      "cannot read ~/.config/opencode/%s: %s", name,
				      r == -EFBIG ? "it is too large" : strerror(-r));
	oc_jsonc_strip(text, len);
	/* jerr.text may quote the file, which may hold a secret: only its position is used */
	*doc = json_loadb(text, len, 0, &jerr);
	up_free_secret(text, len);
	if (!json_is_object(*doc)) {
		up_json_wipe_decref(*doc);
		*doc = NULL;
		return up_agent_failf(err, err_len, -EINVAL,
				      "~/.config/opencode/%s is not a JSON object (line %d, column "
				      "%d): fix it, or move it aside",
				      name, jerr.line, jerr.column);
	}
	return 0;
}

int oc_config_read(const char *dir, json_t **doc, char *err, size_t err_len)
{
	json_t *all = json_object(), *one;
	int r = all ? 0 : -ENOMEM;

	for (size_t i = 0; r == 0 && i < ELEMENTSOF(config_files); i++) {
		char *path = NULL;
		if (asprintf(&path, "%s/%s", dir, config_files[i]) < 0)
			r = -ENOMEM;
		if (r == 0)
			r = read_one(path, config_files[i], &one, err, err_len);
		free(path);
		/* a copy goes in: `one` is wiped, and the merge shares its values */
		json_t *copy = r == 0 && one ? json_deep_copy(one) : NULL;
		if (r == 0 && one && (!copy || json_object_update_recursive(all, copy) < 0))
			r = -ENOMEM;
		json_decref(copy);
		up_json_wipe_decref(one);
		one = NULL;
	}
	if (r < 0) {
		up_json_wipe_decref(all);
		return r;
	}
	*doc = all;
	return 0;
}

/* ---------------------------------------------------------------- the pod's copy */

/* Drops every secret-looking key holding a string or a number, anywhere; warns each. */
static int drop_secrets(json_t *o, const char *at, const char *what, struct up_agent_prepared *p)
{
	const char *k;
	json_t *v;
	void *tmp;
	int r = 0;

	json_object_foreach_safe(o, tmp, k, v)
	{
		char path[512];
		(void)snprintf(path, sizeof(path), "%s%s%s", at, *at ? "." : "", k);
		if ((json_is_string(v) || json_is_number(v)) && up_agent_secret_name(k)) {
			up_json_wipe(v);
			(void)json_object_del(o, k);
			r = up_agent_warn(p,
					  "%s: %s looks like a credential; it is left out of the "
					  "pod's copy (inject it with a rule instead)",
					  what, path);
		} else if (json_is_object(v)) {
			r = drop_secrets(v, path, what, p);
		} else if (json_is_array(v)) {
			size_t i;
			json_t *e;
			json_array_foreach (v, i, e)
				if (r == 0 && json_is_object(e))
					r = drop_secrets(e, path, what, p);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* "ask" becomes "allow" anywhere under a permission value; "deny" stays. */
static void allow_asks(json_t *parent, const char *key, json_t *v)
{
	const char *k;
	json_t *e;

	if (json_is_string(v) && streq(json_string_value(v), "ask"))
		(void)json_object_set_new(parent, key, json_string("allow"));
	else if (json_is_object(v))
		json_object_foreach (v, k, e)
			allow_asks(v, k, e);
}

/*
 * Run without asking, as claude's permissions are: everything allowed (even outside the
 * project, and a repeated call), except what the host's config denies.
 */
static int permissions(json_t *s)
{
	json_t *host = json_object_get(s, "permission"), *perm, *v;
	const char *k;

	perm = json_pack("{s:s, s:s, s:s}", "*", "allow", "external_directory", "allow",
			 "doom_loop", "allow");
	if (!perm)
		return -ENOMEM;
	if (json_is_string(host) && streq(json_string_value(host), "deny"))
		(void)json_object_set_new(perm, "*", json_string("deny"));
	json_object_foreach (host, k, v)
		if (!streq(k, "*") || !json_is_string(v) || streq(json_string_value(v), "deny"))
			(void)json_object_set(perm, k, v);
	json_object_foreach (perm, k, v)
		allow_asks(perm, k, v);
	return json_object_set_new(s, "permission", perm) < 0 ? -ENOMEM : 0;
}

/* provider.<id>.options.authToken = the fake access token (an Anthropic OAuth login). */
static int auth_token(json_t *s, const char *provider, const char *token)
{
	json_t *prov = json_object_get(s, "provider"), *one, *opts;

	if (!json_is_object(prov) && json_object_set_new(s, "provider", json_object()) < 0)
		return -ENOMEM;
	prov = json_object_get(s, "provider");
	one = json_object_get(prov, provider);
	if (!json_is_object(one) && json_object_set_new(prov, provider, json_object()) < 0)
		return -ENOMEM;
	one = json_object_get(prov, provider);
	opts = json_object_get(one, "options");
	if (!json_is_object(opts) && json_object_set_new(one, "options", json_object()) < 0)
		return -ENOMEM;
	opts = json_object_get(one, "options");
	return json_object_set_new(opts, "authToken", json_string(token)) < 0 ? -ENOMEM : 0;
}

json_t *oc_config_transform(const json_t *host, const struct oc_login *login, const char *what,
			    struct up_agent_prepared *p)
{
	json_t *s = json_deep_copy(host);
	int r = s ? 0 : -ENOMEM;

	if (r == 0)
		r = drop_secrets(s, "", what, p);
	if (r == 0)
		r = permissions(s);
	if (r == 0 && (json_object_set_new(s, "autoupdate", json_false()) < 0 ||
		       json_object_set_new(s, "share", json_string("disabled")) < 0))
		r = -ENOMEM;
	if (r == 0 && login->oauth && login->mode == OC_ANTHROPIC && login->fake_access)
		r = auth_token(s, oc_provider(login->mode), login->fake_access);
	if (r < 0) {
		up_json_wipe_decref(s);
		return NULL;
	}
	return s;
}
