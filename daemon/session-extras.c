/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uplink run's host-side extras: --ssh-cidr and --git-https-rewrite, checked on the loop;
 * --add-dir, --mount-rw, --mount-ro and --mitm-ca-cert, which need the file system,
 * resolved on the threadpool before anything reaches the cluster.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bounds.h"
#include "fileio.h"
#include "kube-expose.h"
#include "manifests.h"
#include "paths.h"
#include "rules.h"
#include "session-git.h"
#include "session-private.h"
#include "ssh-keys.h"

struct up_session_extra *up_session_extra_free(struct up_session_extra *x)
{
	if (!x)
		return NULL;
	free(x->kubeconfig);
	up_kube_exposed_free(x->kube);
	json_decref(x->aws_profiles);
	if (x->out.aws_creds_json)
		up_free_secret(x->out.aws_creds_json, strlen(x->out.aws_creds_json));
	json_decref(x->out.mounts);
	json_decref(x->out.ssh_cidrs);
	up_ssh_keys_done(&x->out.ssh);
	up_free_all(x->out.aws_ini, x->out.gitconfig, x->out.mitm_ca_pem, x->ssh_key_dir, x);
	return NULL;
}

/* ---------------------------------------------------------------- --ssh-cidr */

/* "10.1.2.3/24" -> "10.1.2.0/24", "10.1.2.3" -> "10.1.2.3/32" (non-strict, as 0.4.1). */
static int cidr_normalise(const char *raw, char *out, size_t len, const char **reason)
{
	char addr[INET6_ADDRSTRLEN + 8], *slash, *end;
	unsigned char bin[16];
	int family, max;
	long bits;

	if ((size_t)snprintf(addr, sizeof(addr), "%s", raw) >= sizeof(addr))
		return *reason = "too long for an address", -EINVAL;
	slash = strchr(addr, '/');
	if (slash)
		*slash = '\0';
	family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	max = family == AF_INET6 ? 128 : 32;
	if (inet_pton(family, addr, bin) != 1)
		return *reason = "not an IPv4 or IPv6 address", -EINVAL;
	bits = max;
	if (slash) {
		errno = 0;
		bits = strtol(slash + 1, &end, 10);
		if (slash[1] < '0' || slash[1] > '9' || *end || errno || bits < 0 || bits > max)
			return *reason = family == AF_INET6 ? "the prefix length must be 0 to 128"
							    : "the prefix length must be 0 to 32",
			       -EINVAL;
	}
	for (int i = 0; i < max / 8; i++) {
		int keep = (int)bits - i * 8;
		bin[i] &= keep >= 8 ? 0xff : keep <= 0 ? 0 : (unsigned char)(0xff << (8 - keep));
	}
	if (!inet_ntop(family, bin, addr, sizeof(addr)))
		return *reason = "not an IPv4 or IPv6 address", -EINVAL;
	return snprintf(out, len, "%s/%ld", addr, bits) < (int)len ? 0 : -ENAMETOOLONG;
}

static int check_cidrs(struct up_session_extra *x, const json_t *given, char *why, size_t len)
{
	char cidr[INET6_ADDRSTRLEN + 8];
	const char *reason = "";
	json_t *v;
	size_t i;

	if (json_array_size(given) > UP_MAX_SSH_CIDRS)
		return snprintf(why, len, "--ssh-cidr: at most %d networks", UP_MAX_SSH_CIDRS),
		       -EINVAL;
	json_array_foreach (given, i, v) {
		const char *raw = json_string_value(v);
		if (cidr_normalise(raw, cidr, sizeof(cidr), &reason) < 0)
			return snprintf(why, len, "--ssh-cidr '%s' is not a valid CIDR: %s", raw,
					reason),
			       -EINVAL;
		if (json_array_append_new(x->out.ssh_cidrs, json_string(cidr)) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* ---------------------------------------------------------------- checks on the loop */

/* How many items a list of session.start may hold (bounds.h), checked before its items. */
static const struct {
	const char *flag, *items;
	size_t field; /* in struct up_session_asked */
	size_t max;
} list_limits[] = {
	{"--git-https-rewrite", "hosts", offsetof(struct up_session_asked, git_https_rewrite),
	 UP_MAX_GIT_REWRITES},
	{"--mitm-ca-cert", "files", offsetof(struct up_session_asked, mitm_ca_cert),
	 UP_MAX_MITM_CA_FILES},
	{"--kube-context", "contexts", offsetof(struct up_session_asked, kube_context),
	 UP_MAX_KUBE_CONTEXTS},
};

static int check_list_limits(const struct up_session_asked *a, char *why, size_t len)
{
	for (size_t l = 0; l < ELEMENTSOF(list_limits); l++)
		if (json_array_size(*(json_t *const *)((const char *)a + list_limits[l].field)) >
		    list_limits[l].max)
			return snprintf(why, len, "%s: at most %zu %s", list_limits[l].flag,
					list_limits[l].max, list_limits[l].items),
			       -EINVAL;
	return 0;
}

int up_session_extra_check(struct up_session_extra *x, const struct up_session_asked *a, char *why,
			   size_t len)
{
	json_t *v;
	size_t i;
	int r;

	/* The CIDRs as given are in `a`; `out` keeps them normalised. */
	x->out.ssh_cidrs = json_array();
	r = x->out.ssh_cidrs ? check_cidrs(x, a->ssh_cidr, why, len) : -ENOMEM;
	if (r < 0 || (r = check_list_limits(a, why, len)) < 0)
		return r;
	json_array_foreach (a->git_https_rewrite, i, v)
		if (!session_git_host_ok(json_string_value(v)))
			return snprintf(why, len, "invalid --git-https-rewrite host: '%s'",
					json_string_value(v)),
			       -EINVAL;
	json_array_foreach (a->kube_context, i, v)
		if (!*json_string_value(v) || strlen(json_string_value(v)) > 253)
			return snprintf(why, len, "--kube-context '%s' is not a context name",
					json_string_value(v)),
			       -EINVAL;
	if (json_array_size(a->add_dir) + json_array_size(a->mount_rw) +
		    json_array_size(a->mount_ro) >
	    UP_MAX_SESSION_MOUNTS)
		return snprintf(why, len,
				"--add-dir, --mount-rw and --mount-ro: at most %d paths "
				"together",
				UP_MAX_SESSION_MOUNTS),
		       -EINVAL;
	return 0;
}

/* ---------------------------------------------------------------- mounts (threadpool) */

struct mount {
	const char *flag;
	char path[PATH_MAX];
	bool dir, ro;
};

struct mounts {
	const char *cwd, *home;
	char real_home[PATH_MAX];
	struct mount m[UP_MAX_SESSION_MOUNTS];
	size_t n;
};

/* One value of one flag: resolved, checked, added unless it is there already. */
static int mount_add(struct mounts *ms, const char *flag, const char *raw, bool ro, bool dir_only,
		     char *why, size_t len)
{
	struct mount *m = &ms->m[ms->n];
	struct stat st;

	if (!realpath(raw, m->path) || stat(m->path, &st) < 0 || (dir_only && !S_ISDIR(st.st_mode)))
		return dir_only ? snprintf(why, len, "%s %s does not exist or is not a directory",
					   flag, raw)
				: snprintf(why, len, "%s %s does not exist", flag, raw),
		       -EINVAL;
	if (!up_path_under(m->path, ms->home) &&
	    !(ms->real_home[0] && up_path_under(m->path, ms->real_home)))
		return snprintf(why, len, "%s %s must be under %s", flag, m->path, ms->home),
		       -EINVAL;
	if (streq(m->path, ms->cwd))
		return snprintf(why, len, "%s %s is the working directory, already mounted", flag,
				m->path),
		       -EINVAL;
	for (size_t i = 0; i < ms->n; i++) {
		if (!streq(ms->m[i].path, m->path))
			continue;
		if (ms->m[i].ro != ro)
			return snprintf(why, len,
					"%s is requested both read-write and read-only; pick one",
					m->path),
			       -EINVAL;
		return 0; /* given twice: once is enough */
	}
	m->flag = flag;
	m->dir = S_ISDIR(st.st_mode);
	m->ro = ro;
	ms->n++;
	return 0;
}

/* Writable folders (and the working folder) must not nest; read-only mounts and files may. */
static int mounts_overlap(const struct mounts *ms, char *why, size_t len)
{
	const char *paths[UP_MAX_SESSION_MOUNTS + 1];
	bool add_dir[UP_MAX_SESSION_MOUNTS + 1];
	size_t n = 0;

	paths[n] = ms->cwd;
	add_dir[n++] = true;
	for (size_t i = 0; i < ms->n; i++)
		if (ms->m[i].dir && !ms->m[i].ro) {
			paths[n] = ms->m[i].path;
			add_dir[n++] = streq(ms->m[i].flag, "--add-dir");
		}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (up_path_under(paths[i], paths[j]) || up_path_under(paths[j], paths[i]))
				return snprintf(why, len,
						"%s overlap: %s and %s are nested; mount "
						"non-overlapping folders only",
						add_dir[i] && add_dir[j] ? "--add-dir paths"
									 : "writable mounts",
						paths[i], paths[j]),
				       -EINVAL;
	return 0;
}

static int resolve_mounts(struct up_session_extra *x, const struct up_session_asked *a,
			  const char *cwd, const char *home, char *why, size_t len)
{
	static const struct {
		const char *flag;
		size_t field;
		bool ro, dir_only;
	} flags[] = {
		{"--add-dir", offsetof(struct up_session_asked, add_dir), false, true},
		{"--mount-rw", offsetof(struct up_session_asked, mount_rw), false, false},
		{"--mount-ro", offsetof(struct up_session_asked, mount_ro), true, false},
	};
	_cleanup_(freep) struct mounts *ms = calloc(1, sizeof(*ms));
	json_t *v;
	size_t i;
	int r;

	if (!ms || !(x->out.mounts = json_array()))
		return -ENOMEM;
	ms->cwd = cwd;
	ms->home = home;
	if (!realpath(home, ms->real_home))
		ms->real_home[0] = '\0';
	for (size_t f = 0; f < ELEMENTSOF(flags); f++)
		json_array_foreach (*(json_t *const *)((const char *)a + flags[f].field), i, v)
			if ((r = mount_add(ms, flags[f].flag, json_string_value(v), flags[f].ro,
					   flags[f].dir_only, why, len)) < 0)
				return r;
	if ((r = mounts_overlap(ms, why, len)) < 0)
		return r;
	for (i = 0; i < ms->n; i++)
		if (json_array_append_new(x->out.mounts,
					  json_pack("{s:s, s:b, s:b}", "path", ms->m[i].path, "dir",
						    ms->m[i].dir, "read_only", ms->m[i].ro)) < 0)
			return -ENOMEM;
	return 0;
}

/* ---------------------------------------------------------------- --mitm-ca-cert (threadpool) */

static int read_ca_files(struct up_session_extra *x, const json_t *files, char *why, size_t len)
{
	char *all = NULL, *text = NULL;
	size_t n_all = 0, n;
	json_t *v;
	size_t i;
	int r = 0;

	json_array_foreach (files, i, v) {
		const char *path = json_string_value(v);
		r = up_read_file(path, UP_MAX_MITM_CA_FILE_SIZE, &text, &n);
		if (r == -ENOENT)
			(void)snprintf(why, len, "--mitm-ca-cert %s: file not found", path);
		else if (r < 0)
			(void)snprintf(why, len, "--mitm-ca-cert %s: %s", path,
				       r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		else if (!memmem(text, n, "-----BEGIN CERTIFICATE-----", 27)) {
			(void)snprintf(why, len, "--mitm-ca-cert %s: no PEM certificate found",
				       path);
			r = -EINVAL;
		}
		if (r < 0)
			break;
		/* Verbatim, one after another; a newline where a file lacks its last one. */
		char *grown = realloc(all, n_all + n + 2);
		if (!grown) {
			r = -ENOMEM;
			break;
		}
		all = grown;
		memcpy(all + n_all, text, n);
		n_all += n;
		if (n == 0 || text[n - 1] != '\n')
			all[n_all++] = '\n';
		all[n_all] = '\0';
		free(text);
		text = NULL;
	}
	free(text);
	if (r < 0) {
		free(all);
		return r == -ENOMEM ? r : -EINVAL;
	}
	x->out.mitm_ca_pem = all;
	return 0;
}

/* ---------------------------------------------------------------- --kube-context (threadpool) */

/* Two PEM texts alike but for trailing white space. */
static bool same_pem(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);

	while (n && isspace((unsigned char)a[n - 1]))
		n--;
	while (m && isspace((unsigned char)b[m - 1]))
		m--;
	return n == m && n > 0 && memcmp(a, b, n) == 0;
}

/*
 * A context of the cluster the session runs in lets the agent read its own session's Secrets
 * (the credentials the mitm injects, the CA key, SSH keys): refused unless asked for.
 */
static int check_deploy_cluster(struct up_session *s, char *why, size_t len)
{
	const struct up_session_extra *x = s->o.extra;
	char host[256] = "", path[1024], err[256];
	bool https = false;
	int port;

	if (!s->server[0] || up_url_split(s->server, &https, host, sizeof(host), path, sizeof(path),
					  err, sizeof(err)) < 0)
		host[0] =
			'\0'; /* not known yet (its own step fails later): the CA may still tell */
	port = https ? up_kube_server_port(s->server) : 80;
	for (size_t i = 0; i < x->kube->n; i++) {
		const struct up_kube_exposed_ctx *c = &x->kube->ctx[i];
		/* The same server, or another name of it: the same cluster CA. */
		if ((!streq(c->host, host) || (int)c->port != port) &&
		    !(s->server_ca && same_pem(s->server_ca, c->ca_pem)))
			continue;
		if (!s->o.asked.expose_deploy_cluster)
			return snprintf(why, len,
					"--kube-context %s: this is the cluster uplink runs the "
					"session in (%s:%d); with it the agent could read its own "
					"session's "
					"Secrets, the credentials the proxy injects among them. "
					"Expose another "
					"cluster, or pass --expose-deploy-cluster if this context "
					"cannot read "
					"Secrets in agent-uplink-* namespaces",
					c->name, c->host, (int)c->port),
			       -EINVAL;
		if (json_array_append_new(s->warnings,
					  json_sprintf("--expose-deploy-cluster: --kube-context %s "
						       "reaches the cluster this session runs "
						       "in; whatever it may read there (Secrets of "
						       "agent-uplink-%s included), the agent "
						       "may read too",
						       c->name, s->id)) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int read_kube(struct up_session *s, char *why, size_t len)
{
	struct up_session_extra *x = s->o.extra;
	int r;

	if (json_array_size(s->o.asked.kube_context) == 0)
		return 0;
	r = up_kube_expose_load(x->kubeconfig, s->o.asked.kube_context, &x->kube, why, len);
	if (r < 0)
		return r;
	if ((r = check_deploy_cluster(s, why, len)) < 0)
		return r;
	x->out.kube = x->kube;
	if ((r = up_kube_expose_ca_bundle(x->kube, &x->out.mitm_ca_pem)) < 0 ||
	    (r = up_kube_expose_rules(x->kube, s->rs)) < 0)
		return r;
	const char *no_proxy = s->all->tpl ? up_manifests_agent_no_proxy(s->all->tpl) : NULL;
	for (size_t i = 0; i < x->kube->n; i++)
		if (up_kube_host_no_proxy(x->kube->ctx[i].host, no_proxy)) {
			if (json_array_append_new(s->warnings,
						  json_sprintf("--kube-context %s: the API server "
							       "%s is in the agent's NO_PROXY "
							       "(%s), so the agent's kubectl goes "
							       "around the proxy and reaches "
							       "nothing",
							       x->kube->ctx[i].name,
							       x->kube->ctx[i].host, no_proxy)) < 0)
				return -ENOMEM;
			break;
		}
	return 0;
}

/* --ssh-key-dir: the holder's keys and the agent's ~/.ssh files (daemon/ssh-keys.h). */
static int read_ssh_keys(struct up_session_extra *x, json_t *warnings, char *why, size_t len)
{
	bool no_keys = false;
	uid_t uid;
	gid_t gid;
	int r;

	if (!x->ssh_key_dir)
		return 0;
	session_host_ids(&uid, &gid);
	r = up_ssh_keys_load(x->ssh_key_dir, uid, &x->out.ssh, &no_keys, why, len);
	if (r == 0 && no_keys &&
	    json_array_append_new(warnings,
				  json_sprintf("--ssh-key-dir %s holds no private keys: no "
					       "ssh-agent relay started, and nothing of it "
					       "is mounted",
					       x->ssh_key_dir)) < 0)
		return -ENOMEM;
	return r;
}

/*
 * --ssh-key-dir mounts the public files one by one at <home>/.ssh/<name> (manifests.c
 * agent_ssh). Home itself is never the working folder, but --mount-ro of home, or any mount (or
 * the working folder) of ~/.ssh, puts ~/.ssh inside a hostPath: the container runtime would then
 * create those mount points in the host's own ~/.ssh, the agent image's entrypoint would chmod
 * it, and the agent would see whatever private keys live there. A mount onto one of those files
 * would clash with uplink's. Both are refused.
 */
static int ssh_clash(const char *what, const char *path, const char *home, const char *real_home,
		     const struct up_ssh_keys *k, char *why, size_t len)
{
	const char *homes[] = {home, real_home};
	char dot_ssh[PATH_MAX + 8], file[2 * PATH_MAX];

	for (size_t h = 0; h < ELEMENTSOF(homes); h++) {
		if (!homes[h][0])
			continue;
		(void)snprintf(dot_ssh, sizeof(dot_ssh), "%s/.ssh", homes[h]);
		if (up_path_under(dot_ssh, path))
			return snprintf(why, len,
					"--ssh-key-dir cannot be used with %s %s: it holds %.300s, "
					"where the public keys are mounted file by file, and the "
					"container "
					"runtime would create them in your own ~/.ssh (and show "
					"the agent "
					"any private key in it); mount a folder that does not hold "
					"~/.ssh",
					what, path, dot_ssh),
			       -EINVAL;
		for (size_t i = 0; i < k->n_pub; i++) {
			(void)snprintf(file, sizeof(file), "%s/%s", dot_ssh, k->pub[i].name);
			if (up_path_under(path, file))
				return snprintf(why, len,
						"--ssh-key-dir cannot be used with %s %s: "
						"uplink mounts %s from the key folder there",
						what, path, k->pub[i].name),
				       -EINVAL;
		}
	}
	return 0;
}

/* The key folder seen through the working folder or a mount: its private keys would be in the
 * agent pod after all. Refused whichever holds the other. */
static int ssh_keys_seen(const char *what, const char *path, const char *dir, const char *real_dir,
			 char *why, size_t len)
{
	const char *dirs[] = {dir, real_dir};

	for (size_t d = 0; d < ELEMENTSOF(dirs); d++)
		if (dirs[d][0] && (up_path_under(dirs[d], path) || up_path_under(path, dirs[d])))
			return snprintf(why, len,
					"--ssh-key-dir %s is seen through %s %s: its private keys "
					"would reach the agent pod there, which the ssh-agent "
					"holder exists to "
					"prevent; keep the key folder outside the working folder "
					"and the mounts",
					dir, what, path),
			       -EINVAL;
	return 0;
}

static int check_ssh_home(struct up_session_extra *x, const char *cwd, const char *home, char *why,
			  size_t len)
{
	char real_home[PATH_MAX] = "", real_dir[PATH_MAX] = "";
	json_t *m;
	size_t i;
	int r;

	if (x->out.ssh.n_keys == 0)
		return 0; /* nothing of the folder is mounted */
	if (!realpath(home, real_home))
		real_home[0] = '\0';
	if (!realpath(x->ssh_key_dir, real_dir))
		real_dir[0] = '\0';
	if ((r = ssh_clash("the working folder", cwd, home, real_home, &x->out.ssh, why, len)) <
		    0 ||
	    (r = ssh_keys_seen("the working folder", cwd, x->ssh_key_dir, real_dir, why, len)) < 0)
		return r;
	json_array_foreach (x->out.mounts, i, m) {
		const char *path = json_string_value(json_object_get(m, "path"));
		if ((r = ssh_clash("a mount of", path, home, real_home, &x->out.ssh, why, len)) <
			    0 ||
		    (r = ssh_keys_seen("a mount of", path, x->ssh_key_dir, real_dir, why, len)) < 0)
			return r;
	}
	return 0;
}

int session_extras_prepare(struct up_session *s)
{
	struct up_session_extra *x = s->o.extra;
	char why[1024] = "";
	int r;

	if (!x)
		return 0;
	r = resolve_mounts(x, &s->o.asked, s->o.cwd, s->o.home, why, sizeof(why));
	if (r >= 0)
		r = read_ca_files(x, s->o.asked.mitm_ca_cert, why, sizeof(why));
	if (r >= 0)
		r = read_kube(s, why,
			      sizeof(why)); /* after the CA files: its CAs go after theirs */
	if (r >= 0)
		r = read_ssh_keys(x, s->warnings, why, sizeof(why));
	if (r >= 0)
		r = check_ssh_home(x, s->o.cwd, s->o.home, why, sizeof(why));
	if (r >= 0)
		r = session_git_overlay(s->o.asked.git_https_rewrite, !s->o.asked.no_git_identity,
					&x->out.gitconfig, s->warnings);
	if (r < 0) {
		s->prep_e = r == -EINVAL ? UP_ERR_INVALID_PARAMS : UP_ERR_INTERNAL_ERROR;
		if (!why[0])
			(void)snprintf(why, sizeof(why),
				       "cannot prepare the session's mounts, keys and "
				       "credentials: %s",
				       strerror(-r));
		s->prep_error = strdup(why);
	}
	return r;
}
