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

static const char *const attach_argv[] = {UP_AGENT_ENTRYPOINT, "--attach", NULL};

/* Parts of ~/.codex shared with the pod when they exist: read-only but the sessions. */
static const struct {
	const char *name, *volume;
	bool dir, rw;
} shared[] = {
	{"prompts", "codex-prompts", true, false},
	{"skills", "codex-skills", true, false},
	{"history.jsonl", "codex-history-jsonl", false, true},
};

struct ctx {
	const struct up_agent_input *in;
	struct up_agent_prepared *p;
	enum codex_mode mode;
	char *codex_dir; /* <home>/.codex, owned by p */
	char *err;
	size_t err_len;
};

static int config_toml(struct ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	char *host = NULL;
	size_t len = 0;
	const char *text;
	int r;

	if (asprintf(&path, "%s/config.toml", c->codex_dir) < 0)
		return -ENOMEM;
	r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &host, &len);
	if (r == -EFBIG)
		return up_agent_failf(c->err, c->err_len, -EINVAL,
				      "~/.codex/config.toml is larger than %d bytes",
				      UP_AGENT_MAX_HOST_FILE);
	if (r < 0 && r != -ENOENT)
		return up_agent_failf(c->err, c->err_len, r, "cannot read ~/.codex/config.toml: %s",
				      strerror(-r));
	text = codex_config_toml(host, len, c->mode, c->in->cwd, "~/.codex/config.toml", c->p);
	if (host)
		up_free_secret(host, len);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "codex-config", "config.toml",
					text, strlen(text), path);
}

static int agents_md(struct ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	char *host = NULL;
	size_t len = 0;
	const char *text;
	int r;

	if (asprintf(&path, "%s/AGENTS.md", c->codex_dir) < 0)
		return -ENOMEM;
	r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &host, &len);
	if (r < 0 && r != -ENOENT)
		return up_agent_failf(c->err, c->err_len, r, "cannot read ~/.codex/AGENTS.md: %s",
				      strerror(-r));
	text = up_agent_instructions(host, len, c->p);
	free(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_CONFIGMAP, "codex-agents-md",
					"AGENTS.md", text, strlen(text), path);
}

/* The cwd, ~/.codex/sessions (made here so that it is the user's; not for a dry run, nor
 * without a state_dir) and the shared parts of ~/.codex that exist. */
static int folders(struct ctx *c)
{
	const struct up_agent_input *in = c->in;
	char *sessions = up_agent_printf(c->p, "%s/sessions", c->codex_dir);
	int r;

	if (!sessions)
		return -ENOMEM;
	if ((r = up_agent_add_host_path(c->p, "workdir", in->cwd, "Directory", in->cwd, true)) <
		    0 ||
	    (in->state_dir && !in->dry_run &&
	     (r = up_agent_make_dir(sessions, c->err, c->err_len)) < 0) ||
	    (r = up_agent_add_host_path(c->p, "codex-sessions", sessions, "DirectoryOrCreate",
					sessions, true)) < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(shared); i++) {
		char *path = up_agent_printf(c->p, "%s/%s", c->codex_dir, shared[i].name);
		struct stat st;
		if (!path)
			return -ENOMEM;
		if (stat(path, &st) < 0 ||
		    (shared[i].dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))
			continue;
		r = up_agent_add_host_path(c->p, shared[i].volume, path,
					   shared[i].dir ? "Directory" : "File", path,
					   shared[i].rw);
		if (r < 0)
			return r;
	}
	return 0;
}

/* What the pod's codex needs besides uplink's own: its home made the user's, the session
 * CA named the way codex reads it first, no update check. */
static const struct up_env pod_env[] = {
	{"UPLINK_AGENT_DIRS", ".codex"},
	{"CODEX_CA_CERTIFICATE", CODEX_POD_CA},
};

static int contribution(struct ctx *c, const char *fake, size_t fake_len)
{
	const char *auth = up_agent_printf(c->p, "%s/auth.json", c->codex_dir);
	const char *const tool[] = {"codex", "--dangerously-bypass-approvals-and-sandbox", NULL};
	int r;

	if (!auth)
		return -ENOMEM;
	if ((r = up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "codex-fake-auth", "auth.json",
					  fake, fake_len, auth)) < 0 ||
	    (r = config_toml(c)) < 0 || (r = agents_md(c)) < 0 || (r = folders(c)) < 0)
		return r;
	if ((r = up_agent_add_empty_dir(c->p, "docker-lib", "/var/lib/docker", "2Gi")) < 0 ||
	    (r = up_agent_add_empty_dir(c->p, "run", "/run", "64Mi")) < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(pod_env); i++)
		if ((r = up_agent_add_env(c->p, pod_env[i].name, pod_env[i].value)) < 0)
			return r;
	return up_agent_set_command(c->p, tool, c->in->args, c->err, c->err_len);
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
	c.mode = in->mode && streq(in->mode, "api_key") ? CODEX_API_KEY : CODEX_CHATGPT;
	c.codex_dir = up_agent_printf(p, "%s/.codex", in->home);
	if (!c.codex_dir)
		return -ENOMEM;
	if (c.mode == CODEX_API_KEY)
		r = codex_api_key_auth(in, p, in->rules_only ? NULL : &fake, &fake_len, err,
				       err_len);
	else
		r = codex_chatgpt_auth(in, p, in->rules_only ? NULL : &fake, &fake_len, err,
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

const struct up_agent_impl up_agent_codex = {
	.name = "codex",
	.context_dir = "codex",
	.modes = modes,
	.default_mode = "chatgpt",
	.default_rules = "default-rules.yaml",
	.attach_argv = attach_argv,
	.prepare = prepare,
	.doctor = codex_doctor,
};
