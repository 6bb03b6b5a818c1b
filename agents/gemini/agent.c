/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gemini CLI. --google (the default): the host's Google login (~/.gemini/oauth_creds.json),
 * refreshed on the host, a fake login in the pod and the real token injected by the mitm on
 * Code Assist (cloudcode-pa.googleapis.com). --api-key: the keyring entry gemini/key injected
 * as x-goog-api-key on generativelanguage.googleapis.com, a placeholder GEMINI_API_KEY in the
 * pod. Either way: ~/.gemini/settings.json minus its secrets, GEMINI.md with a sandbox note,
 * the cwd mounted at the same path, and `gemini --yolo` run under tmux as the host user. The
 * CLI honours HTTPS_PROXY (its fetch dispatcher and its OAuth and GenAI clients all take it)
 * and trusts NODE_EXTRA_CA_CERTS, both of which the pod sets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/gemini/gemini.h"
#include "bounds.h"
#include "fileio.h"

#define SETTINGS "~/.gemini/settings.json"

static const struct up_agent_mode modes[] = {
	{.name = "google",
	 .flag = "--google",
	 .summary = "your Google account: the Gemini CLI's login in ~/.gemini/oauth_creds.json"},
	{.name = "api_key",
	 .flag = "--api-key",
	 .summary = "the Gemini API: a key from the keyring entry gemini/key"},
	{.name = NULL},
};

static const char *const attach_argv[] = {UP_AGENT_ENTRYPOINT, "--attach", NULL};

/* Folders of ~/.gemini shared read-only with the pod when they exist. */
static const struct {
	const char *name, *volume;
} shared[] = {
	{"commands", "gemini-commands"},
	{"extensions", "gemini-extensions"},
};

struct ctx {
	const struct up_agent_input *in;
	struct up_agent_prepared *p;
	enum gemini_mode mode;
	char *gemini_dir; /* <home>/.gemini, owned by p */
	char *err;
	size_t err_len;
};

static int settings(struct ctx *c)
{
	char *path = up_agent_printf(c->p, "%s/settings.json", c->gemini_dir);
	json_t *host = NULL;
	const char *text;
	size_t len;
	int r;

	if (!path)
		return -ENOMEM;
	r = gemini_read_settings(path, SETTINGS, &host, c->err, c->err_len);
	if (r < 0 && r != -ENOENT)
		return r;
	text = up_agent_dump_json(c->p, gemini_settings_transform(host, c->mode, SETTINGS, c->p),
				  &len);
	up_json_wipe_decref(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "gemini-settings",
					"settings.json", text, len, path);
}

static int gemini_md(struct ctx *c)
{
	char *path = up_agent_printf(c->p, "%s/GEMINI.md", c->gemini_dir);
	char *host = NULL;
	size_t len = 0;
	const char *text;
	int r;

	if (!path)
		return -ENOMEM;
	r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &host, &len);
	if (r < 0 && r != -ENOENT)
		return up_agent_failf(c->err, c->err_len, r, "cannot read ~/.gemini/GEMINI.md: %s",
				      strerror(-r));
	text = up_agent_instructions(host, len, c->p);
	free(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_CONFIGMAP, "gemini-md", "GEMINI.md",
					text, strlen(text), path);
}

static int folders(struct ctx *c)
{
	int r = up_agent_add_host_path(c->p, "workdir", c->in->cwd, "Directory", c->in->cwd, true);

	for (size_t i = 0; r == 0 && i < ELEMENTSOF(shared); i++) {
		char *p = up_agent_printf(c->p, "%s/%s", c->gemini_dir, shared[i].name);
		struct stat st;
		if (!p)
			return -ENOMEM;
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			r = up_agent_add_host_path(c->p, shared[i].volume, p, "Directory", p,
						   false);
	}
	return r;
}

/* bash -lc 'exec gemini [--debug] --yolo ARGS...', quoted: --yolo approves every tool call
 * (the sandbox is the pod; the proxy decides what leaves it). */
static int command(struct ctx *c)
{
	const char *const with_debug[] = {"gemini", "--debug", "--yolo", NULL};
	const char *const plain[] = {"gemini", "--yolo", NULL};

	return up_agent_set_command(c->p, c->in->debug ? with_debug : plain, c->in->args, c->err,
				    c->err_len);
}

/* GEMINI_CLI_TRUST_WORKSPACE: the CLI trusts no folder by default, and in an untrusted one it
 * ignores --yolo and refuses -p; the pod is the sandbox, as --yolo says. */
static int env(struct ctx *c)
{
	int r = up_agent_add_env(c->p, "UPLINK_AGENT_DIRS", ".gemini");

	if (r == 0)
		r = up_agent_add_env(c->p, "GEMINI_CLI_TRUST_WORKSPACE", "true");

	if (r == 0 && c->mode == GEMINI_API_KEY)
		r = up_agent_add_env(c->p, "GEMINI_API_KEY", GEMINI_KEY_PLACEHOLDER);
	if (r == 0 && c->mode == GEMINI_GOOGLE)
		r = up_agent_add_env(c->p, "GOOGLE_GENAI_USE_GCA", "true");
	return r;
}

static int contribution(struct ctx *c, const char *fake, size_t fake_len)
{
	char *creds = up_agent_printf(c->p, "%s/oauth_creds.json", c->gemini_dir);
	int r;

	if (!creds)
		return -ENOMEM;
	if ((r = settings(c)) < 0)
		return r;
	if (fake && (r = up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "gemini-fake-creds",
						  "oauth_creds.json", fake, fake_len, creds)) < 0)
		return r;
	if ((r = gemini_md(c)) < 0 || (r = folders(c)) < 0)
		return r;
	if ((r = up_agent_add_empty_dir(c->p, "docker-lib", "/var/lib/docker", "2Gi")) < 0 ||
	    (r = up_agent_add_empty_dir(c->p, "run", "/run", "64Mi")) < 0 || (r = env(c)) < 0)
		return r;
	return command(c);
}

static int prepare(const struct up_agent_impl *impl, const struct up_agent_input *in,
		   struct up_agent_prepared **ret, char *err, size_t err_len)
{
	_cleanup_(up_agent_prepared_freep) struct up_agent_prepared *p = up_agent_prepared_new();
	struct ctx c = {.in = in, .p = p, .err = err, .err_len = err_len};
	const char *fake = NULL;
	size_t fake_len = 0;
	int r;

	if (!p)
		return -ENOMEM;
	err[0] = '\0';
	c.mode = in->mode && streq(in->mode, "api_key") ? GEMINI_API_KEY : GEMINI_GOOGLE;
	if (!(c.gemini_dir = up_agent_printf(p, "%s/.gemini", in->home)))
		return -ENOMEM;
	if (c.mode == GEMINI_API_KEY)
		r = gemini_api_key_auth(p);
	else
		r = gemini_google_auth(in, p, in->rules_only ? NULL : &fake, &fake_len, err,
				       err_len);
	if (r == 0 && !in->rules_only)
		r = contribution(&c, fake, fake_len);
	if (r == -ENOMEM && !*err)
		(void)snprintf(err, err_len, "out of memory preparing agent %s", impl->name);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

const struct up_agent_impl up_agent_gemini = {
	.name = "gemini",
	.context_dir = "gemini",
	.modes = modes,
	.default_mode = "google",
	.default_rules = "default-rules.yaml",
	.attach_argv = attach_argv,
	.prepare = prepare,
	.doctor = gemini_doctor,
};
