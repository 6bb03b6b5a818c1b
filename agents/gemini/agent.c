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

/* Folders of ~/.gemini shared read-only with the pod when they exist. */
static const struct up_agent_shared shared[] = {
	{"commands", "gemini-commands", true, false},
	{"extensions", "gemini-extensions", true, false},
	{.name = NULL},
};

static int settings(struct up_agent_ctx *c)
{
	char *path = up_agent_printf(c->p, "%s/settings.json", c->dir);
	json_t *host = NULL;
	const char *text;
	size_t len;
	int r;

	if (!path)
		return -ENOMEM;
	r = gemini_read_settings(path, SETTINGS, &host, c->err, c->err_len);
	if (r < 0 && r != -ENOENT)
		return r;
	text = up_agent_dump_json(
		c->p, gemini_settings_transform(host, (enum gemini_mode)c->mode, SETTINGS, c->p),
		&len);
	up_json_wipe_decref(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "gemini-settings",
					"settings.json", text, len, path);
}

/*
 * bash -lc 'exec gemini [--debug] --yolo ARGS...', quoted: --yolo approves every tool call
 * (the sandbox is the pod; the proxy decides what leaves it). GEMINI_CLI_TRUST_WORKSPACE: the
 * CLI trusts no folder by default, and in an untrusted one it ignores --yolo and refuses -p;
 * the pod is the sandbox, as --yolo says.
 */
static const char *const tool[] = {"gemini", "--yolo", NULL};
static const char *const debug_tool[] = {"gemini", "--debug", "--yolo", NULL};
static const struct up_env google_env[] = {
	{"UPLINK_AGENT_DIRS", ".gemini"},
	{"GEMINI_CLI_TRUST_WORKSPACE", "true"},
	{"GOOGLE_GENAI_USE_GCA", "true"},
	{NULL, NULL},
};
static const struct up_env api_key_env[] = {
	{"UPLINK_AGENT_DIRS", ".gemini"},
	{"GEMINI_CLI_TRUST_WORKSPACE", "true"},
	{"GEMINI_API_KEY", GEMINI_KEY_PLACEHOLDER},
	{NULL, NULL},
};
static const struct up_agent_pod pods[] = {
	[GEMINI_GOOGLE] = {.env = google_env, .tool = tool, .debug_tool = debug_tool},
	[GEMINI_API_KEY] = {.env = api_key_env, .tool = tool, .debug_tool = debug_tool},
};

static int contribution(struct up_agent_ctx *c)
{
	char *creds = up_agent_printf(c->p, "%s/oauth_creds.json", c->dir);
	char *md = up_agent_printf(c->p, "%s/GEMINI.md", c->dir);
	int r;

	if (!creds || !md)
		return -ENOMEM;
	if ((r = settings(c)) < 0)
		return r;
	if (c->fake &&
	    (r = up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "gemini-fake-creds",
					  "oauth_creds.json", c->fake, c->fake_len, creds)) < 0)
		return r;
	if ((r = up_agent_add_instructions(c->p, md, "~/.gemini/GEMINI.md", "gemini-md",
					   "GEMINI.md", NULL, c->err, c->err_len)) < 0 ||
	    (r = up_agent_add_workdir(c->p, c->in)) < 0 ||
	    (r = up_agent_add_shared(c->p, c->dir, NULL, shared)) < 0)
		return r;
	return up_agent_finish_pod(c->p, c->in, &pods[c->mode], c->err, c->err_len);
}

static const struct up_agent_parts parts = {
	.home_dir = ".gemini",
	.auth = {[GEMINI_GOOGLE] = gemini_google_auth, [GEMINI_API_KEY] = gemini_api_key_auth},
	.contribution = contribution,
};

const struct up_agent_impl up_agent_gemini = {
	.name = "gemini",
	.context_dir = "gemini",
	.modes = modes,
	.default_mode = "google",
	.default_rules = "default-rules.yaml",
	.attach_argv = up_agent_attach_argv,
	.prepare = up_agent_prepare_parts,
	.parts = &parts,
	.doctor = gemini_doctor,
};
