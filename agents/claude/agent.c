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

static const char *const attach_argv[] = {UP_AGENT_ENTRYPOINT, "--attach", NULL};

/* Parts of ~/.claude shared with the pod when they exist: read-only but history. */
static const struct {
	const char *name, *volume;
	bool dir, rw;
} shared[] = {
	{"commands", "claude-commands", true, false},
	{"skills", "claude-skills", true, false},
	{"plugins", "claude-plugins", true, false},
	{"history.jsonl", "claude-history-jsonl", false, true},
};

struct ctx {
	const struct up_agent_input *in;
	struct up_agent_prepared *p;
	enum claude_mode mode;
	char *claude_dir; /* <home>/.claude, owned by p */
	char *err;
	size_t err_len;
};

static int failf(struct ctx *c, int r, const char *fmt, ...) _printf_(3, 4);
static int failf(struct ctx *c, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(c->err, c->err_len, fmt, ap);
	va_end(ap);
	return r;
}

static int secret_file(struct ctx *c, enum up_agent_volume_kind kind, const char *volume,
		       const char *key, const char *data, size_t len, const char *mount_path)
{
	return up_agent_add_file_volume(c->p, kind, volume, key, data, len, mount_path);
}

static int host_path(struct ctx *c, const char *volume, const char *path, const char *type,
		     const char *mount_path, bool rw)
{
	return up_agent_add_host_path(c->p, volume, path, type, mount_path, rw);
}

static const char *dump(struct ctx *c, json_t *doc, size_t *len)
{
	return up_agent_dump_json(c->p, doc, len);
}

/* ---------------------------------------------------------------- settings */

static int settings(struct ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	json_t *host = NULL;
	const char *text;
	size_t len;
	int r;

	if (asprintf(&path, "%s/settings.json", c->claude_dir) < 0)
		return -ENOMEM;
	r = up_agent_read_json(path, "~/.claude/settings.json", "claude",
			       "run `claude` once on this machine "
			       "so that it writes one (a file holding {} will do)",
			       &host, c->err, c->err_len);
	if (r < 0)
		return r;
	text = dump(c, claude_settings_transform(host, c->mode, "~/.claude/settings.json", c->p),
		    &len);
	up_json_wipe(host);
	json_decref(host);
	if (!text)
		return -ENOMEM;
	return secret_file(c, UP_AGENT_VOL_SECRET, "claude-settings", "settings.json", text, len,
			   path);
}

/* /etc/claude-code/managed-settings.json, when it is a file: transformed the same way. */
static int managed_settings(struct ctx *c)
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
	json_t *s = claude_settings_transform(host, c->mode, MANAGED_SETTINGS, c->p);
	if (s)
		(void)claude_redact_mcp(s);
	text = dump(c, s, &len);
	up_json_wipe(host);
	json_decref(host);
	if (!text)
		return -ENOMEM;
	return secret_file(c, UP_AGENT_VOL_SECRET, "claude-managed-settings",
			   "managed-settings.json", text, len, MANAGED_SETTINGS);
}

static int claude_md_file(struct ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	char *host = NULL;
	size_t len = 0;
	const char *text;
	int r;

	if (asprintf(&path, "%s/CLAUDE.md", c->claude_dir) < 0)
		return -ENOMEM;
	r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &host, &len);
	if (r < 0 && r != -ENOENT)
		return failf(c, r, "cannot read ~/.claude/CLAUDE.md: %s", strerror(-r));
	text = claude_md(host, len, c->p);
	free(host);
	if (!text)
		return -ENOMEM;
	return secret_file(c, UP_AGENT_VOL_CONFIGMAP, "claude-md", "CLAUDE.md", text, strlen(text),
			   path);
}

/* ~/.claude.json, sanitized, in the session's folder: Claude Code writes to it. A dry run
 * names the copy a run would write, and writes nothing. */
static int claude_json(struct ctx *c)
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
	if (!(text = dump(c, doc, &len)))
		return -ENOMEM;
	if (!c->in->dry_run && (r = up_agent_write_private(copy, text, len)) < 0)
		return failf(c, r, "cannot write %s: %s", copy, strerror(-r));
	return host_path(c, "claude-json", copy, "File", path, true);
}

/* ---------------------------------------------------------------- host folders */

/* Claude Code's project folder name: every byte but [A-Za-z0-9] becomes '-'. */
static char *project_id(struct ctx *c)
{
	char *id = up_agent_strdup(c->p, c->in->cwd);

	for (char *s = id; s && *s; s++)
		if (!isalnum((unsigned char)*s))
			*s = '-';
	return id;
}

static int make_dir(struct ctx *c, const char *path)
{
	return up_agent_make_dir(path, c->err, c->err_len);
}

static int folders(struct ctx *c)
{
	const struct up_agent_input *in = c->in;
	char *proj = up_agent_printf(c->p, "%s/projects/%s", c->claude_dir, project_id(c));
	int r;

	if (!proj)
		return -ENOMEM;
	/* made here so that it is the user's; not for a dry run, nor without a state_dir */
	if ((r = host_path(c, "workdir", in->cwd, "Directory", in->cwd, true)) < 0 ||
	    (in->state_dir && !in->dry_run && (r = make_dir(c, proj)) < 0) ||
	    (r = host_path(c, "claude-project", proj, "DirectoryOrCreate", proj, true)) < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(shared); i++) {
		char *p = up_agent_printf(c->p, "%s/%s", c->claude_dir, shared[i].name);
		struct stat st;
		if (!p)
			return -ENOMEM;
		if (stat(p, &st) < 0 ||
		    (shared[i].dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
			continue;
		r = host_path(c, shared[i].volume, p, shared[i].dir ? "Directory" : "File", p,
			      shared[i].rw);
		if (r < 0)
			return r;
	}
	if (in->debug && in->session_id) {
		char *dbg = up_agent_printf(c->p, DEBUG_ROOT "/%s", in->session_id);
		char *at = up_agent_printf(c->p, "%s/debug", c->claude_dir);
		if (!dbg || !at)
			return -ENOMEM;
		if ((in->state_dir && !in->dry_run && (r = make_dir(c, dbg)) < 0) ||
		    (r = host_path(c, "claude-debug", dbg, "DirectoryOrCreate", at, true)) < 0)
			return r;
	}
	return 0;
}

/* ---------------------------------------------------------------- the command */

/* bash -lc 'exec claude [-d] --allow-dangerously-skip-permissions ARGS...', quoted. */
static int command(struct ctx *c)
{
	const char *const with_debug[] = {"claude", "-d", "--allow-dangerously-skip-permissions",
					  NULL};
	const char *const plain[] = {"claude", "--allow-dangerously-skip-permissions", NULL};

	return up_agent_set_command(c->p, c->in->debug ? with_debug : plain, c->in->args, c->err,
				    c->err_len);
}

/* ---------------------------------------------------------------- prepare */

static int contribution(struct ctx *c, const char *fake, size_t fake_len)
{
	const char *creds = up_agent_printf(c->p, "%s/.credentials.json", c->claude_dir);
	int r;

	if (!creds)
		return -ENOMEM;
	if ((r = settings(c)) < 0)
		return r;
	if (fake && (r = secret_file(c, UP_AGENT_VOL_SECRET, "claude-fake-creds",
				     "credentials.json", fake, fake_len, creds)) < 0)
		return r;
	if ((r = managed_settings(c)) < 0 || (r = claude_md_file(c)) < 0 || (r = folders(c)) < 0 ||
	    (r = claude_json(c)) < 0)
		return r;
	if ((r = up_agent_add_empty_dir(c->p, "docker-lib", "/var/lib/docker", "2Gi")) < 0 ||
	    (r = up_agent_add_empty_dir(c->p, "run", "/run", "64Mi")) < 0)
		return r;
	if ((r = up_agent_add_env(c->p, "DISABLE_AUTOUPDATER", "1")) < 0 ||
	    (r = up_agent_add_env(c->p, "UPLINK_AGENT_DIRS", ".claude")) < 0)
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
	c.mode = in->mode && streq(in->mode, "bedrock") ? CLAUDE_BEDROCK : CLAUDE_ANTHROPIC;
	c.claude_dir = up_agent_printf(p, "%s/.claude", in->home);
	if (!c.claude_dir)
		return -ENOMEM;
	if (c.mode == CLAUDE_BEDROCK)
		r = claude_bedrock_auth(p);
	else
		r = claude_anthropic_auth(in, p, in->rules_only ? NULL : &fake, &fake_len, err,
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

const struct up_agent_impl up_agent_claude = {
	.name = "claude",
	.context_dir = "claude",
	.modes = modes,
	.default_mode = "anthropic",
	.default_rules = "default-rules.yaml",
	.attach_argv = attach_argv,
	.prepare = prepare,
	.doctor = claude_doctor,
};
