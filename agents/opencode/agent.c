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

static const char *const attach_argv[] = {UP_AGENT_ENTRYPOINT, "--attach", NULL};

/* The folders opencode writes under the home (made the user's by the entrypoint). */
#define OC_DIRS ".config/opencode .local/share/opencode .local/state/opencode .cache/opencode"

/* Parts of ~/.config/opencode shared read-only with the pod when they exist. */
static const struct {
	const char *name, *volume;
} shared[] = {
	{"agent", "opencode-agent"},	 {"agents", "opencode-agents"},
	{"command", "opencode-command"}, {"commands", "opencode-commands"},
	{"mode", "opencode-mode"},	 {"modes", "opencode-modes"},
	{"skill", "opencode-skill"},	 {"skills", "opencode-skills"},
	{"themes", "opencode-themes"},
};

/* What opencode must not do in the pod: fetch models.opencode.ai (its bundled model list
 * is used), update itself, download language servers, share sessions. */
static const struct up_env pod_env[] = {
	{"OPENCODE_DISABLE_MODELS_FETCH", "1"}, {"OPENCODE_DISABLE_AUTOUPDATE", "1"},
	{"OPENCODE_DISABLE_LSP_DOWNLOAD", "1"}, {"OPENCODE_DISABLE_SHARE", "1"},
	{"UPLINK_AGENT_DIRS", OC_DIRS},
};

struct ctx {
	const struct up_agent_input *in;
	struct up_agent_prepared *p;
	const struct oc_login *login;
	char *host_config; /* the host's config folder, owned by p */
	char *pod_config;  /* <home>/.config/opencode: the pod's, owned by p */
	char *err;
	size_t err_len;
};

static int config_file(struct ctx *c)
{
	const char *what = "~/.config/opencode/opencode.json";
	const char *at = up_agent_printf(c->p, "%s/opencode.json", c->pod_config), *text;
	json_t *host = NULL;
	size_t len;
	int r;

	if (!at)
		return -ENOMEM;
	r = oc_config_read(c->host_config, &host, c->err, c->err_len);
	if (r < 0)
		return r;
	text = up_agent_dump_json(c->p, oc_config_transform(host, c->login, what, c->p), &len);
	up_json_wipe_decref(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "opencode-config",
					"opencode.json", text, len, at);
}

static int agents_md(struct ctx *c)
{
	_cleanup_(freep) char *path = NULL;
	const char *at = up_agent_printf(c->p, "%s/AGENTS.md", c->pod_config), *text;
	char *host = NULL;
	size_t len = 0;
	int r;

	if (!at || asprintf(&path, "%s/AGENTS.md", c->host_config) < 0)
		return -ENOMEM;
	r = up_read_file(path, UP_AGENT_MAX_HOST_FILE, &host, &len);
	if (r < 0 && r != -ENOENT)
		return up_agent_failf(c->err, c->err_len, r,
				      "cannot read ~/.config/opencode/AGENTS.md: %s", strerror(-r));
	text = up_agent_instructions(host, len, c->p);
	free(host);
	if (!text)
		return -ENOMEM;
	return up_agent_add_file_volume(c->p, UP_AGENT_VOL_CONFIGMAP, "opencode-agents-md",
					"AGENTS.md", text, strlen(text), at);
}

static int folders(struct ctx *c)
{
	int r = up_agent_add_host_path(c->p, "workdir", c->in->cwd, "Directory", c->in->cwd, true);

	for (size_t i = 0; r == 0 && i < ELEMENTSOF(shared); i++) {
		char *host = up_agent_printf(c->p, "%s/%s", c->host_config, shared[i].name);
		char *at = up_agent_printf(c->p, "%s/%s", c->pod_config, shared[i].name);
		struct stat st;
		if (!host || !at)
			return -ENOMEM;
		if (stat(host, &st) == 0 && S_ISDIR(st.st_mode))
			r = up_agent_add_host_path(c->p, shared[i].volume, host, "Directory", at,
						   false);
	}
	return r;
}

/* bash -lc 'exec opencode [--print-logs --log-level DEBUG] ARGS...', quoted. */
static int command(struct ctx *c)
{
	const char *const with_debug[] = {"opencode", "--print-logs", "--log-level", "DEBUG", NULL};
	const char *const plain[] = {"opencode", NULL};

	return up_agent_set_command(c->p, c->in->debug ? with_debug : plain, c->in->args, c->err,
				    c->err_len);
}

static int contribution(struct ctx *c)
{
	const char *auth = up_agent_printf(c->p, "%s/.local/share/opencode/auth.json", c->in->home);
	int r;

	if (!auth)
		return -ENOMEM;
	if ((r = up_agent_add_file_volume(c->p, UP_AGENT_VOL_SECRET, "opencode-fake-auth",
					  "auth.json", c->login->fake, c->login->fake_len, auth)) <
		    0 ||
	    (r = config_file(c)) < 0 || (r = agents_md(c)) < 0 || (r = folders(c)) < 0)
		return r;
	if ((r = up_agent_add_empty_dir(c->p, "docker-lib", "/var/lib/docker", "2Gi")) < 0 ||
	    (r = up_agent_add_empty_dir(c->p, "run", "/run", "64Mi")) < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(pod_env); i++)
		if ((r = up_agent_add_env(c->p, pod_env[i].name, pod_env[i].value)) < 0)
			return r;
	return command(c);
}

static int prepare(const struct up_agent_impl *impl, const struct up_agent_input *in,
		   struct up_agent_prepared **ret, char *err, size_t err_len)
{
	_cleanup_(up_agent_prepared_freep) struct up_agent_prepared *p = up_agent_prepared_new();
	struct oc_login login;
	struct ctx c = {.in = in, .p = p, .login = &login, .err = err, .err_len = err_len};
	enum oc_mode mode = in->mode && streq(in->mode, "openai") ? OC_OPENAI : OC_ANTHROPIC;
	int r;

	if (!p)
		return -ENOMEM;
	err[0] = '\0';
	r = oc_auth(in, mode, p, &login, err, err_len);
	if (r == 0 && !in->rules_only) {
		char *dir = oc_config_dir(in->home);
		c.host_config = up_agent_strdup(p, dir);
		free(dir);
		c.pod_config = up_agent_printf(p, "%s/.config/opencode", in->home);
		r = c.host_config && c.pod_config ? contribution(&c) : -ENOMEM;
	}
	if (r == -ENOMEM && !*err)
		(void)snprintf(err, err_len, "out of memory preparing agent %s", impl->name);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

const struct up_agent_impl up_agent_opencode = {
	.name = "opencode",
	.context_dir = "opencode",
	.modes = modes,
	.default_mode = "anthropic",
	.default_rules = "default-rules.yaml",
	.attach_argv = attach_argv,
	.prepare = prepare,
	.doctor = oc_doctor,
};
