/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The list of agents, where their build contexts live, the storage a prepared result
 * owns (every allocation wiped when it is freed: some hold credentials), and POSIX
 * shell quoting for the command an agent runs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/agent.h"
#include "agents/agents-config.h"
#include "config.h"
#include "fileio.h"

const struct up_agent_impl *const up_agents[] = {
	&up_agent_claude, &up_agent_codex, &up_agent_gemini, &up_agent_opencode, NULL,
};

struct up_agent_blob {
	void *ptr;
	size_t len;
};

const struct up_agent_impl *up_agent_find(const char *name)
{
	for (size_t i = 0; name && up_agents[i]; i++)
		if (streq(up_agents[i]->name, name))
			return up_agents[i];
	return NULL;
}

const struct up_agent_mode *up_agent_find_mode(const struct up_agent_impl *a, const char *name)
{
	if (!name)
		name = a->default_mode;
	for (const struct up_agent_mode *m = a->modes; m->name; m++)
		if (streq(m->name, name))
			return m;
	return NULL;
}

static int describe(const struct up_agent_impl *a, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "%s (modes ", a->name);

	for (const struct up_agent_mode *m = a->modes; m->name && used < len; m++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", m == a->modes ? "" : ", ",
					 m->name);
	if (used < len)
		used += (size_t)snprintf(buf + used, len - used, ")");
	return used < len ? (int)used : -ENAMETOOLONG;
}

int up_agent_describe_all(char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; up_agents[i]; i++) {
		if (i && used + 2 < len)
			used += (size_t)snprintf(buf + used, len - used, "; ");
		int n = describe(up_agents[i], buf + used, len - used);
		if (n < 0)
			return n;
		used += (size_t)n;
	}
	return 0;
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int up_agent_data_dir(const char *data_dir, char *buf, size_t len)
{
	int n;

	if (data_dir && *data_dir)
		n = snprintf(buf, len, "%s/agents", data_dir);
	else if ((n = snprintf(buf, len, "%s/agents", UP_PKGDATADIR)) > 0 && (size_t)n < len &&
		 !is_dir(buf))
		n = snprintf(buf, len, "%s", UP_AGENTS_SOURCE_DIR);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int up_agent_context_path(const struct up_agent_impl *a, const char *data_dir, char *buf,
			  size_t len)
{
	char dir[4096];
	int r = up_agent_data_dir(data_dir, dir, sizeof(dir));

	if (r < 0)
		return r;
	r = snprintf(buf, len, "%s/%s", dir, a->context_dir);
	return r > 0 && (size_t)r < len ? 0 : -ENAMETOOLONG;
}

int up_agent_rules_path(const struct up_agent_impl *a, const char *data_dir, char *buf, size_t len)
{
	char dir[4096];
	int r = up_agent_context_path(a, data_dir, dir, sizeof(dir));

	if (r < 0)
		return r;
	r = snprintf(buf, len, "%s/%s", dir, a->default_rules);
	return r > 0 && (size_t)r < len ? 0 : -ENAMETOOLONG;
}

int up_agent_prepare(const struct up_agent_impl *a, const struct up_agent_input *in,
		     struct up_agent_prepared **ret, char *err, size_t err_len)
{
	char modes[256];

	*ret = NULL;
	if (!up_agent_find_mode(a, in->mode)) {
		(void)up_agent_describe_all(modes, sizeof(modes));
		(void)snprintf(err, err_len, "agent %s has no mode '%s'; known: %s", a->name,
			       in->mode, modes);
		return -EINVAL;
	}
	if (!in->home || in->home[0] != '/' || !in->user || !*in->user ||
	    (!in->rules_only && (!in->cwd || in->cwd[0] != '/'))) {
		(void)snprintf(err, err_len,
			       "agent %s needs the host user, an absolute home and an "
			       "absolute working directory",
			       a->name);
		return -EINVAL;
	}
	return a->prepare(a, in, ret, err, err_len);
}

/* ---------------------------------------------------------------- owned storage */

struct up_agent_prepared *up_agent_prepared_new(void)
{
	return calloc(1, sizeof(struct up_agent_prepared));
}

struct up_agent_prepared *up_agent_prepared_free(struct up_agent_prepared *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_blobs; i++)
		up_free_secret(p->blobs[i].ptr, p->blobs[i].len);
	free(p->blobs);
	explicit_bzero(p, sizeof(*p));
	free(p);
	return NULL;
}

void up_agent_prepared_freep(struct up_agent_prepared **p)
{
	*p = up_agent_prepared_free(*p);
}

void *up_agent_keep(struct up_agent_prepared *p, void *ptr, size_t len)
{
	if (!ptr)
		return NULL;
	if (p->n_blobs == p->cap_blobs) {
		size_t cap = p->cap_blobs ? p->cap_blobs * 2 : 32;
		struct up_agent_blob *b = realloc(p->blobs, cap * sizeof(*b));
		if (!b) {
			up_free_secret(ptr, len);
			return NULL;
		}
		p->blobs = b;
		p->cap_blobs = cap;
	}
	p->blobs[p->n_blobs++] = (struct up_agent_blob){ptr, len};
	return ptr;
}

char *up_agent_memdup(struct up_agent_prepared *p, const void *data, size_t len)
{
	char *s = malloc(len + 1);

	if (!s)
		return NULL;
	memcpy(s, data, len);
	s[len] = '\0';
	return up_agent_keep(p, s, len + 1);
}

char *up_agent_strdup(struct up_agent_prepared *p, const char *s)
{
	return s ? up_agent_memdup(p, s, strlen(s)) : NULL;
}

static char *keep_vprintf(struct up_agent_prepared *p, const char *fmt, va_list ap) _printf_(2, 0);
static char *keep_vprintf(struct up_agent_prepared *p, const char *fmt, va_list ap)
{
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);

	return n < 0 ? NULL : up_agent_keep(p, s, (size_t)n + 1);
}

char *up_agent_printf(struct up_agent_prepared *p, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = keep_vprintf(p, fmt, ap);
	va_end(ap);
	return s;
}

int up_agent_warn(struct up_agent_prepared *p, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (p->n_warnings == UP_AGENT_MAX_WARNINGS)
		return 0; /* enough said */
	va_start(ap, fmt);
	s = keep_vprintf(p, fmt, ap);
	va_end(ap);
	if (!s)
		return -ENOMEM;
	p->warnings[p->n_warnings++] = s;
	return 0;
}

int up_agent_add_aws_profile(struct up_agent_prepared *p, const char *name)
{
	for (size_t i = 0; i < p->n_aws_profiles; i++)
		if (streq(p->aws_profiles[i], name))
			return 0;
	if (p->n_aws_profiles == UP_AGENT_MAX_PROFILES)
		return -E2BIG;
	if (!(p->aws_profiles[p->n_aws_profiles] = up_agent_strdup(p, name)))
		return -ENOMEM;
	p->n_aws_profiles++;
	return 0;
}

int up_agent_add_env(struct up_agent_prepared *p, const char *name, const char *value)
{
	struct up_env *e;

	if (p->contrib.n_env == UP_AGENT_MAX_ENV)
		return -E2BIG;
	e = &p->env_store[p->contrib.n_env];
	e->name = up_agent_strdup(p, name);
	e->value = up_agent_strdup(p, value);
	if (!e->name || !e->value)
		return -ENOMEM;
	p->contrib.env = p->env_store;
	p->contrib.n_env++;
	return 0;
}

struct up_agent_volume *up_agent_add_volume(struct up_agent_prepared *p,
					    enum up_agent_volume_kind kind, const char *name,
					    const char *mount_path, bool read_only)
{
	struct up_agent_volume *v;

	if (p->contrib.n_volumes == UP_AGENT_MAX_VOLUMES)
		return NULL;
	v = &p->vol_store[p->contrib.n_volumes];
	*v = (struct up_agent_volume){.kind = kind, .read_only = read_only};
	v->name = up_agent_strdup(p, name);
	v->mount_path = mount_path ? up_agent_strdup(p, mount_path) : NULL;
	if (!v->name || (mount_path && !v->mount_path))
		return NULL;
	p->contrib.volumes = p->vol_store;
	p->contrib.n_volumes++;
	return v;
}

int up_agent_add_file(struct up_agent_prepared *p, struct up_agent_volume *v, const char *key,
		      const char *data, size_t len, const char *mount_path)
{
	struct up_agent_file *f;

	if (p->n_files == UP_AGENT_MAX_FILES)
		return -E2BIG;
	if (v != &p->vol_store[p->contrib.n_volumes - 1] ||
	    (v->n_files && v->files + v->n_files != &p->file_store[p->n_files]))
		return -EINVAL; /* files belong to the volume added last */
	f = &p->file_store[p->n_files];
	f->key = up_agent_strdup(p, key);
	f->data = up_agent_memdup(p, data, len);
	f->len = len;
	f->mount_path = mount_path ? up_agent_strdup(p, mount_path) : NULL;
	if (!f->key || !f->data || (mount_path && !f->mount_path))
		return -ENOMEM;
	if (!v->n_files)
		v->files = f;
	v->n_files++;
	p->n_files++;
	return 0;
}

const char *const *up_agent_copy_argv(struct up_agent_prepared *p, const char *const *argv)
{
	size_t n = 0;
	const char **out;

	while (argv[n])
		n++;
	out = up_agent_keep(p, calloc(n + 1, sizeof(*out)), (n + 1) * sizeof(*out));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = up_agent_strdup(p, argv[i])))
			return NULL;
	return out;
}

/* ---------------------------------------------------------------- shell quoting */

static bool shell_safe(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
			    "-_./=:,+@%^",
			    *s))
			return false;
	return true;
}

static size_t quoted_len(const char *s)
{
	size_t n = 2;

	if (shell_safe(s))
		return strlen(s);
	for (; *s; s++)
		n += *s == '\'' ? 4 : 1;
	return n;
}

static char *quote_one(char *out, const char *s)
{
	if (shell_safe(s))
		return stpcpy(out, s);
	*out++ = '\'';
	for (; *s; s++)
		if (*s == '\'')
			out = stpcpy(out, "'\\''");
		else
			*out++ = *s;
	*out++ = '\'';
	return out;
}

int up_shell_quote_argv(const char *const *argv, char **ret)
{
	size_t len = 1, n = 0;
	char *s, *w;

	for (; argv && argv[n]; n++) {
		if (n == UP_AGENT_MAX_ARGS)
			return -E2BIG;
		len += quoted_len(argv[n]) + 1;
		if (len > UP_AGENT_MAX_ARGS_LEN)
			return -E2BIG;
	}
	w = s = malloc(len);
	if (!s)
		return -ENOMEM;
	*w = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i)
			*w++ = ' ';
		w = quote_one(w, argv[i]);
	}
	*w = '\0';
	*ret = s;
	return 0;
}

void up_agent_check_set(struct up_agent_check *c, const char *name, const char *status,
			const char *fix, const char *fmt, ...)
{
	va_list ap;

	(void)snprintf(c->name, sizeof(c->name), "%s", name);
	c->status = status;
	(void)snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	(void)vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
}
