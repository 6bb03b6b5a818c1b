/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Claude Code. --anthropic: the host's OAuth login, refreshed on the host, a fake login
 * in the pod and the real token injected by the mitm. --bedrock: a bearer token from the
 * keyring entry bedrock/key, injected on bedrock-runtime.<region>.amazonaws.com. Either
 * way: the host's settings.json transformed and ~/.claude.json sanitized (settings.c),
 * CLAUDE.md with a sandbox note, the cwd mounted at the same path, and `claude` run under
 * tmux as the host user.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/claude/claude.h"
#include "bounds.h"
#include "fileio.h"
#include "paths.h"

#define MANAGED_SETTINGS "/etc/claude-code/managed-settings.json"
#define DEBUG_ROOT	 "/tmp/agent-uplink-debug"

static const struct up_agent_mode modes[] = {
	{.name = "anthropic",
	 .flag = "--anthropic",
	 .summary = "your Claude subscription: the OAuth login in ~/.claude/.credentials.json"},
	{.name = "bedrock",
	 .flag = "--bedrock",
	 .summary = "Amazon Bedrock: a bearer token from the keyring entry bedrock/key"},
	{.name = NULL},
};

/* Parts of ~/.claude shared with the pod when they exist: read-only but history. */
static const struct up_agent_shared shared[] = {
	{"commands", "claude-commands", true, false},
	{"skills", "claude-skills", true, false},
	{"plugins", "claude-plugins", true, false},
	{"history.jsonl", "claude-history-jsonl", false, true},
	{.name = NULL},
};

/* ---------------------------------------------------------------- settings */

static int settings(struct up_agent_ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	json_t *host = NULL;
	const char *text;
	size_t len;
	int r;

	if (asprintf(&path, "%s/settings.json", c->dir) < 0)
		return -ENOMEM;
	r = up_agent_read_json(path, "~/.claude/settings.json", "claude",
			       "run `claude` once on this machine "
			       "so that it writes one (a file holding {} will do)",
			       &host, c->err, c->err_len);
	if (r < 0)
		return r;
	text = up_agent_dump_json(c->p,
				  claude_settings_transform(host, (enum claude_mode)c->mode,
							    "~/.claude/settings.json", c->p),
				  &len);
	up_json_wipe(host);
	json_decref(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "claude-settings",
					"settings.json", text, len, path);
}

/* /etc/claude-code/managed-settings.json, when it is a file: transformed the same way. */
static int managed_settings(struct up_agent_ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	json_t *host = NULL;
	struct stat st;
	const char *text;
	size_t len;
	int r;

	if (asprintf(&path, "%s" MANAGED_SETTINGS, c->in->base_dir ? c->in->base_dir : "") < 0)
		return -ENOMEM;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	r = up_agent_read_json(path, MANAGED_SETTINGS, "claude", "", &host, c->err, c->err_len);
	if (r < 0)
		return r;
	json_t *s =
		claude_settings_transform(host, (enum claude_mode)c->mode, MANAGED_SETTINGS, c->p);
	if (s)
		(void)claude_redact_mcp(s);
	text = up_agent_dump_json(c->p, s, &len);
	up_json_wipe(host);
	json_decref(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "claude-managed-settings",
					"managed-settings.json", text, len, MANAGED_SETTINGS);
}

/* ~/.claude.json, sanitized, in the session's folder: Claude Code writes to it. A dry run
 * names the copy a run would write, and writes nothing. */
static int claude_json(struct up_agent_ctx *c)
{
	_cleanup_(freep) char *path = NULL, *copy = NULL;
	json_t *doc = NULL;
	const char *text;
	size_t len;
	int r;

	if (!c->in->state_dir)
		return 0;
	if (asprintf(&path, "%s/.claude.json", c->in->home) < 0 ||
	    asprintf(&copy, "%s/claude.json", c->in->state_dir) < 0)
		return -ENOMEM;
	r = up_agent_read_json(path, "~/.claude.json", "claude", "", &doc, c->err, c->err_len);
	if (r == -ENOENT)
		doc = json_object();
	else if (r < 0)
		return r;
	if (!doc || claude_sanitize_claude_json(doc, c->p) < 0)
		return json_decref(doc), -ENOMEM;
	if (!(text = up_agent_dump_json(c->p, doc, &len)))
		return -ENOMEM;
	if (!c->in->dry_run && (r = up_agent_write_private(copy, text, len)) < 0)
		return up_agent_failf(c->err, c->err_len, r, "cannot write %s: %s", copy,
				      strerror(-r));
	return up_agent_add_host_path(c->p, "claude-json", copy, "File", path, true);
}

/* ---------------------------------------------------------------- host folders */

/* Claude Code's project folder name: every byte but [A-Za-z0-9] becomes '-'. */
static char *project_id(struct up_agent_ctx *c)
{
	char *id = up_agent_strdup(c->p, c->in->cwd);

	for (char *s = id; s && *s; s++)
		if (!isalnum((unsigned char)*s))
			*s = '-';
	return id;
}

/* Made here so that they are the user's; not for a dry run, nor without a state_dir. */
static int make_dir(struct up_agent_ctx *c, const char *path)
{
	if (!c->in->state_dir || c->in->dry_run)
		return 0;
	return up_agent_make_dir(path, c->err, c->err_len);
}

static int folders(struct up_agent_ctx *c)
{
	const struct up_agent_input *in = c->in;
	char *proj = up_agent_printf(c->p, "%s/projects/%s", c->dir, project_id(c));
	int r;

	if (!proj)
		return -ENOMEM;
	if ((r = up_agent_add_workdir(c->p, in)) < 0 || (r = make_dir(c, proj)) < 0 ||
	    (r = up_agent_add_host_path(c->p, "claude-project", proj, "DirectoryOrCreate", proj,
					true)) < 0 ||
	    (r = up_agent_add_shared(c->p, c->dir, NULL, shared)) < 0)
		return r;
	if (in->debug && in->session_id) {
		char *dbg = up_agent_printf(c->p, DEBUG_ROOT "/%s", in->session_id);
		char *at = up_agent_printf(c->p, "%s/debug", c->dir);
		if (!dbg || !at)
			return -ENOMEM;
		if ((r = make_dir(c, dbg)) < 0 ||
		    (r = up_agent_add_host_path(c->p, "claude-debug", dbg, "DirectoryOrCreate", at,
						true)) < 0)
			return r;
	}
	return 0;
}

/* ---------------------------------------------------------------- prepare */

/* bash -lc 'exec claude [-d] --allow-dangerously-skip-permissions ARGS...', quoted. */
static const char *const tool[] = {"claude", "--allow-dangerously-skip-permissions", NULL};
static const char *const debug_tool[] = {"claude", "-d", "--allow-dangerously-skip-permissions",
					 NULL};
static const struct up_env pod_env[] = {
	{"DISABLE_AUTOUPDATER", "1"},
	{"UPLINK_AGENT_DIRS", ".claude"},
	{NULL, NULL},
};
static const struct up_agent_pod pod = {.env = pod_env, .tool = tool, .debug_tool = debug_tool};

static int contribution(struct up_agent_ctx *c)
{
	const char *creds = up_agent_printf(c->p, "%s/.credentials.json", c->dir);
	const char *md = up_agent_printf(c->p, "%s/CLAUDE.md", c->dir);
	int r;

	if (!creds || !md)
		return -ENOMEM;
	if ((r = settings(c)) < 0)
		return r;
	if (c->fake &&
	    (r = up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "claude-fake-creds",
					  "credentials.json", c->fake, c->fake_len, creds)) < 0)
		return r;
	if ((r = managed_settings(c)) < 0 ||
	    (r = up_agent_add_instructions(c->p, md, "~/.claude/CLAUDE.md", "claude-md",
					   "CLAUDE.md", NULL, c->err, c->err_len)) < 0 ||
	    (r = folders(c)) < 0 || (r = claude_json(c)) < 0)
		return r;
	return up_agent_finish_pod(c->p, c->in, &pod, c->err, c->err_len);
}

static const struct up_agent_parts parts = {
	.home_dir = ".claude",
	.auth = {[CLAUDE_ANTHROPIC] = claude_anthropic_auth,
		 [CLAUDE_BEDROCK] = claude_bedrock_auth},
	.contribution = contribution,
};

const struct up_agent_impl up_agent_claude = {
	.name = "claude",
	.context_dir = "claude",
	.modes = modes,
	.default_mode = "anthropic",
	.default_rules = "default-rules.yaml",
	.attach_argv = up_agent_attach_argv,
	.prepare = up_agent_prepare_parts,
	.parts = &parts,
	.doctor = claude_doctor,
};
