/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OpenCode (npm opencode-ai). --anthropic: its Anthropic provider's login (an API key or
 * an OAuth login in auth.json); --openai: its OpenAI provider's (an API key or the ChatGPT
 * login). Either way the host's login stays home, the pod gets a fake auth.json with
 * placeholders and the mitm injects the real credential; the host's config without its
 * secrets and an AGENTS.md with the sandbox note reach the pod, the cwd is mounted at the
 * same path, and `opencode` runs under tmux as the host user.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/opencode/opencode.h"
#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"

static const struct up_agent_mode modes[] = {
	{.name = "anthropic",
	 .flag = "--anthropic",
	 .summary = "opencode: its Anthropic login (API key or OAuth) in "
		    "~/.local/share/opencode/auth.json"},
	{.name = "openai",
	 .flag = "--openai",
	 .summary = "opencode: its OpenAI login (API key or ChatGPT) in "
		    "~/.local/share/opencode/auth.json"},
	{.name = NULL},
};

/* The folders opencode writes under the home (made the user's by the entrypoint). */
#define OC_DIRS ".config/opencode .local/share/opencode .local/state/opencode .cache/opencode"

/* Parts of ~/.config/opencode shared read-only with the pod when they exist. */
static const struct up_agent_shared shared[] = {
	{"agent", "opencode-agent", true, false},
	{"agents", "opencode-agents", true, false},
	{"command", "opencode-command", true, false},
	{"commands", "opencode-commands", true, false},
	{"mode", "opencode-mode", true, false},
	{"modes", "opencode-modes", true, false},
	{"skill", "opencode-skill", true, false},
	{"skills", "opencode-skills", true, false},
	{"themes", "opencode-themes", true, false},
	{.name = NULL},
};

/* What opencode must not do in the pod: fetch models.opencode.ai (its bundled model list
 * is used), update itself, download language servers, share sessions. */
static const struct up_env pod_env[] = {
	{"OPENCODE_DISABLE_MODELS_FETCH", "1"}, {"OPENCODE_DISABLE_AUTOUPDATE", "1"},
	{"OPENCODE_DISABLE_LSP_DOWNLOAD", "1"}, {"OPENCODE_DISABLE_SHARE", "1"},
	{"UPLINK_AGENT_DIRS", OC_DIRS},		{NULL, NULL},
};
/* bash -lc 'exec opencode [--print-logs --log-level DEBUG] ARGS...', quoted. */
static const char *const tool[] = {"opencode", NULL};
static const char *const debug_tool[] = {"opencode", "--print-logs", "--log-level", "DEBUG", NULL};
static const struct up_agent_pod pod = {.env = pod_env, .tool = tool, .debug_tool = debug_tool};

struct ctx {
	struct up_agent_ctx *c;
	const struct oc_login *login;
	char *host_config; /* the host's config folder, owned by p */
	char *pod_config;  /* <home>/.config/opencode: the pod's, owned by p */
};

static int config_file(const struct ctx *o)
{
	struct up_agent_ctx *c = o->c;
	const char *what = "~/.config/opencode/opencode.json";
	const char *at = up_agent_printf(c->p, "%s/opencode.json", o->pod_config), *text;
	json_t *host = NULL;
	size_t len;
	int r;

	if (!at)
		return -ENOMEM;
	r = oc_config_read(o->host_config, &host, c->err, c->err_len);
	if (r < 0)
		return r;
	text = up_agent_dump_json(c->p, oc_config_transform(host, o->login, what, c->p), &len);
	up_json_wipe_decref(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "opencode-config",
					"opencode.json", text, len, at);
}

static int contribution(struct up_agent_ctx *c)
{
	char *dir = oc_config_dir(c->in->home);
	struct ctx o = {.c = c, .login = c->state, .host_config = up_agent_strdup(c->p, dir)};
	const char *auth = up_agent_printf(c->p, "%s/.local/share/opencode/auth.json", c->in->home);
	const char *md, *at;
	int r;

	free(dir);
	o.pod_config = up_agent_printf(c->p, "%s/.config/opencode", c->in->home);
	if (!o.host_config || !o.pod_config || !auth)
		return -ENOMEM;
	md = up_agent_printf(c->p, "%s/AGENTS.md", o.host_config);
	at = up_agent_printf(c->p, "%s/AGENTS.md", o.pod_config);
	if (!md || !at)
		return -ENOMEM;
	if ((r = up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "opencode-fake-auth",
					  "auth.json", o.login->fake, o.login->fake_len, auth)) <
		    0 ||
	    (r = config_file(&o)) < 0 ||
	    (r = up_agent_add_instructions(c->p, md, "~/.config/opencode/AGENTS.md",
					   "opencode-agents-md", "AGENTS.md", at, c->err,
					   c->err_len)) < 0 ||
	    (r = up_agent_add_workdir(c->p, c->in)) < 0 ||
	    (r = up_agent_add_shared(c->p, o.host_config, o.pod_config, shared)) < 0)
		return r;
	return up_agent_finish_pod(c->p, c->in, &pod, c->err, c->err_len);
}

/* Both modes: the mode's provider entry of auth.json; c->state is what it says of it. */
static int auth(struct up_agent_ctx *c)
{
	struct oc_login *login = up_agent_keep(c->p, calloc(1, sizeof(*login)), sizeof(*login));

	if (!(c->state = login))
		return -ENOMEM;
	return oc_auth(c->in, (enum oc_mode)c->mode, c->p, login, c->err, c->err_len);
}

static const struct up_agent_parts parts = {
	.auth = {[OC_ANTHROPIC] = auth, [OC_OPENAI] = auth},
	.contribution = contribution,
};

const struct up_agent_impl up_agent_opencode = {
	.name = "opencode",
	.context_dir = "opencode",
	.modes = modes,
	.default_mode = "anthropic",
	.default_rules = "default-rules.yaml",
	.attach_argv = up_agent_attach_argv,
	.prepare = up_agent_prepare_parts,
	.parts = &parts,
	.doctor = oc_doctor,
};
