/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Codex (@openai/codex). --chatgpt: the host's ChatGPT login in ~/.codex/auth.json,
 * refreshed on the host, a fake login in the pod and the real access token and account id
 * injected by the mitm on chatgpt.com. --api-key: an OpenAI API key (auth.json's, else the
 * keyring entry openai/key) injected on api.openai.com. Either way: config.toml less what
 * may hold a credential, AGENTS.md with a sandbox note, the cwd mounted at the same path,
 * and `codex --dangerously-bypass-approvals-and-sandbox` run under tmux as the host user
 * (the pod is the sandbox; codex's own would need user namespaces the pod has not).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/codex/codex.h"
#include "bounds.h"
#include "fileio.h"

static const struct up_agent_mode modes[] = {
	{.name = "chatgpt",
	 .flag = "--chatgpt",
	 .summary = "your ChatGPT plan: the login in ~/.codex/auth.json (codex login)"},
	{.name = "api_key",
	 .flag = "--api-key",
	 .summary = "an OpenAI API key: auth.json's OPENAI_API_KEY, else keyring openai/key"},
	{.name = NULL},
};

/* Parts of ~/.codex shared with the pod when they exist: read-only but the sessions. */
static const struct up_agent_shared shared[] = {
	{"prompts", "codex-prompts", true, false},
	{"skills", "codex-skills", true, false},
	{"history.jsonl", "codex-history-jsonl", false, true},
	{.name = NULL},
};

static int config_toml(struct up_agent_ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	char *host = NULL;
	size_t len = 0;
	const char *text;
	int r;

	if (asprintf(&path, "%s/config.toml", c->dir) < 0)
		return -ENOMEM;
	r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &host, &len);
	if (r == -EFBIG)
		return up_agent_failf(c->err, c->err_len, -EINVAL,
				      "~/.codex/config.toml is larger than %d bytes",
				      UP_AGENT_MAX_HOST_FILE);
	if (r < 0 && r != -ENOENT)
		return up_agent_failf(c->err, c->err_len, r, "cannot read ~/.codex/config.toml: %s",
				      strerror(-r));
	text = codex_config_toml(host, len, (enum codex_mode)c->mode, c->in->cwd,
				 "~/.codex/config.toml", c->p);
	if (host)
		up_free_secret(host, len);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "codex-config", "config.toml",
					text, strlen(text), path);
}

/* The cwd, ~/.codex/sessions (made here so that it is the user's; not for a dry run, nor
 * without a state_dir) and the shared parts of ~/.codex that exist. */
static int folders(struct up_agent_ctx *c)
{
	const struct up_agent_input *in = c->in;
	char *sessions = up_agent_printf(c->p, "%s/sessions", c->dir);
	int r;

	if (!sessions)
		return -ENOMEM;
	if ((r = up_agent_add_workdir(c->p, in)) < 0 ||
	    (in->state_dir && !in->dry_run &&
	     (r = up_agent_make_dir(sessions, c->err, c->err_len)) < 0) ||
	    (r = up_agent_add_host_path(c->p, "codex-sessions", sessions, "DirectoryOrCreate",
					sessions, true)) < 0)
		return r;
	return up_agent_add_shared(c->p, c->dir, NULL, shared);
}

/* What the pod's codex needs besides uplink's own: its home made the user's, the session
 * CA named the way codex reads it first, no update check. */
static const struct up_env pod_env[] = {
	{"UPLINK_AGENT_DIRS", ".codex"},
	{"CODEX_CA_CERTIFICATE", CODEX_POD_CA},
	{NULL, NULL},
};
static const char *const tool[] = {"codex", "--dangerously-bypass-approvals-and-sandbox", NULL};
static const struct up_agent_pod pod = {.env = pod_env, .tool = tool};

static int contribution(struct up_agent_ctx *c)
{
	const char *auth = up_agent_printf(c->p, "%s/auth.json", c->dir);
	const char *md = up_agent_printf(c->p, "%s/AGENTS.md", c->dir);
	int r;

	if (!auth || !md)
		return -ENOMEM;
	if ((r = up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "codex-fake-auth", "auth.json",
					  c->fake, c->fake_len, auth)) < 0 ||
	    (r = config_toml(c)) < 0 ||
	    (r = up_agent_add_instructions(c->p, md, "~/.codex/AGENTS.md", "codex-agents-md",
					   "AGENTS.md", NULL, c->err, c->err_len)) < 0 ||
	    (r = folders(c)) < 0)
		return r;
	return up_agent_finish_pod(c->p, c->in, &pod, c->err, c->err_len);
}

static const struct up_agent_parts parts = {
	.home_dir = ".codex",
	.auth = {[CODEX_CHATGPT] = codex_chatgpt_auth, [CODEX_API_KEY] = codex_api_key_auth},
	.contribution = contribution,
};

const struct up_agent_impl up_agent_codex = {
	.name = "codex",
	.context_dir = "codex",
	.modes = modes,
	.default_mode = "chatgpt",
	.default_rules = "default-rules.yaml",
	.attach_argv = up_agent_attach_argv,
	.prepare = up_agent_prepare_parts,
	.parts = &parts,
	.doctor = codex_doctor,
};
