/* SPDX-License-Identifier: Apache-2.0 */
/* --ssh-key-dir: classifying the folder and deriving the public halves (daemon/ssh-keys.h). */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bounds.h"
#include "fileio.h"
#include "proc.h"
#include "ssh-keys.h"

extern char **environ;

/* Where ssh-keygen reads the key: the memory file derive_pub() hands it as fd 3. */
#define KEYGEN_KEY_PATH "/dev/fd/3"

static void _printf_(3, 4) say_why(char *why, size_t len, const char *fmt, ...)
{
	up_vformat(why, len, fmt);
}

/* Says why and fails; -EINVAL in sight of the caller (and of the static analyzer, which does
 * not follow variadic calls and would otherwise take any value as refuse()'s). */
#define refuse(why, len, ...) (say_why(why, len, __VA_ARGS__), -EINVAL)

enum up_ssh_class up_ssh_classify(const char *name, const char *data, size_t len)
{
	static const char marker[] = "PRIVATE KEY-----";
	bool cert = endswith(name, "-cert.pub");

	if (endswith(name, ".pub") && !cert)
		return UP_SSH_IGNORE; /* stays home: the public halves are derived again */
	/* Content before name for every file bound for the agent: a private key is the holder's,
	 * whatever it is called. */
	if (data && memmem(data, len, marker, sizeof(marker) - 1))
		return UP_SSH_PRIVATE;
	if (cert)
		return UP_SSH_CERT;
	if (streq(name, "config"))
		return UP_SSH_CONFIG;
	return UP_SSH_IGNORE;
}

bool up_ssh_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	/* 253 is the longest Secret key; "<name>.pub" must still fit. */
	if (n == 0 || n > 249 || streq(name, ".") || streq(name, ".."))
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") ==
	       n;
}

void up_ssh_keygen_reason(const char *out, char *buf, size_t len)
{
	static const char prompt[] = "Enter passphrase: ";
	const char *p = out, *end;

	buf[0] = '\0';
	for (; p && *p; p = *end ? end + 1 : end) {
		const char *stop;
		end = p + strcspn(p, "\n");
		while (!strncmp(p, prompt, sizeof(prompt) - 1))
			p += sizeof(prompt) - 1;
		for (stop = end; stop > p && (stop[-1] == '\r' || stop[-1] == ' '); stop--)
			;
		if (p >= stop ||
		    *p == '@') /* an empty line, or the UNPROTECTED PRIVATE KEY banner */
			continue;
		(void)snprintf(buf, len, "%.*s", (int)(stop - p), p);
		return;
	}
	(void)snprintf(buf, len, "ssh-keygen failed without saying why");
}

static void file_free(struct up_ssh_file *f, bool secret)
{
	if (secret && f->data)
		up_free_secret(f->data, f->len);
	else
		free(f->data);
	free(f->name);
	*f = (struct up_ssh_file){0};
}

void up_ssh_keys_done(struct up_ssh_keys *k)
{
	for (size_t i = 0; i < k->n_keys; i++)
		file_free(&k->keys[i], true);
	for (size_t i = 0; i < k->n_pub; i++)
		file_free(&k->pub[i], false);
	free(k->keys);
	free(k->pub);
	*k = (struct up_ssh_keys){0};
}

/* ---------------------------------------------------------------- reading the folder */

struct scan {
	const char *dir;
	int dfd;
	char **names;
	size_t n_names;
	struct up_ssh_file files[UP_MAX_SSH_FILES]; /* what is taken, in name order */
	enum up_ssh_class cls[UP_MAX_SSH_FILES];
	size_t n;
	char *why;
	size_t len;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_names(struct scan *sc)
{
	int fd = dup(sc->dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL; /* the DIR owns fd from here */
	struct dirent *e;
	int r = 0;

	if (!d) {
		r = negative_errno();
		if (fd >= 0)
			(void)close(fd);
		return r;
	}
	sc->names = calloc(UP_MAX_SSH_DIR_ENTRIES, sizeof(*sc->names));
	while (sc->names && (e = readdir(d))) {
		if (streq(e->d_name, ".") || streq(e->d_name, ".."))
			continue;
		if (sc->n_names == UP_MAX_SSH_DIR_ENTRIES) {
			r = refuse(sc->why, sc->len,
				   "--ssh-key-dir %s holds more than %d entries; point "
				   "it at a folder of SSH keys",
				   sc->dir, UP_MAX_SSH_DIR_ENTRIES);
			break;
		}
		if (!(sc->names[sc->n_names] = strdup(e->d_name))) {
			r = -ENOMEM;
			break;
		}
		sc->n_names++;
	}
	(void)closedir(d);
	if (!sc->names)
		return -ENOMEM;
	qsort(sc->names, sc->n_names, sizeof(*sc->names), cmp_names);
	return r;
}

static int read_whole(int fd, size_t size, char **ret)
{
	char *buf = malloc(size + 1);
	size_t used = 0;

	if (!buf)
		return -ENOMEM;
	while (used < size) {
		ssize_t n = read(fd, buf + used, size - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int r = n < 0 ? -errno : -EIO;
			up_free_secret(buf, used);
			return r;
		}
		used += (size_t)n;
	}
	buf[used] = '\0';
	*ret = buf;
	return 0;
}

/* One entry: skipped, taken into sc->files, or a refusal. */
static int scan_one(struct scan *sc, const char *name)
{
	_cleanup_(closep) int fd = -1;
	enum up_ssh_class cls;
	struct stat st;
	char *data = NULL;
	int r;

	/* Regular files only; symbolic links are followed, as `ls -L` would. */
	if (fstatat(sc->dfd, name, &st, 0) < 0 || !S_ISREG(st.st_mode))
		return 0;
	if ((size_t)st.st_size > UP_MAX_SSH_FILE_SIZE) {
		if (up_ssh_classify(name, NULL, 0) == UP_SSH_IGNORE)
			return 0; /* no key is that large */
		return refuse(sc->why, sc->len, "--ssh-key-dir: %s is larger than %d KiB", name,
			      UP_MAX_SSH_FILE_SIZE / 1024);
	}
	fd = openat(sc->dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size > UP_MAX_SSH_FILE_SIZE)
		return refuse(sc->why, sc->len, "--ssh-key-dir: cannot read %s/%s: %s", sc->dir,
			      name, fd < 0 ? strerror(errno) : "it changed while being read");
	if ((r = read_whole(fd, (size_t)st.st_size, &data)) < 0)
		return r == -ENOMEM
			       ? r
			       : (refuse(sc->why, sc->len, "--ssh-key-dir: cannot read %s/%s: %s",
					 sc->dir, name, strerror(-r)));
	cls = up_ssh_classify(name, data, (size_t)st.st_size);
	if (cls == UP_SSH_IGNORE) {
		up_free_secret(data, (size_t)st.st_size);
		return 0;
	}
	if (cls == UP_SSH_PRIVATE && name[0] == '.')
		r = refuse(sc->why, sc->len,
			   "--ssh-key-dir: the private key %s starts with '.', and the "
			   "ssh-agent holder skips hidden files; rename it",
			   name);
	else if (!up_ssh_name_ok(name))
		r = refuse(
			sc->why, sc->len,
			"--ssh-key-dir: the file name '%s' cannot be used; name "
			"keys, certificates and the config with letters, digits, '-', '_' and '.'",
			name);
	else if (sc->n == UP_MAX_SSH_FILES)
		r = refuse(sc->why, sc->len,
			   "--ssh-key-dir %s holds more than %d keys, certificates "
			   "and configs",
			   sc->dir, UP_MAX_SSH_FILES);
	else if (!(sc->files[sc->n].name = strdup(name)))
		r = -ENOMEM;
	if (r < 0) {
		up_free_secret(data, (size_t)st.st_size);
		return r;
	}
	sc->files[sc->n].data = data;
	sc->files[sc->n].len = (size_t)st.st_size;
	sc->cls[sc->n++] = cls;
	return 0;
}

/* ---------------------------------------------------------------- ssh-keygen -y */

/* The daemon's environment without a display or an askpass, and with askpass refused. */
static char **keygen_env(void)
{
	size_t n = 0, j = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!startswith(environ[i], "DISPLAY=") &&
		    !startswith(environ[i], "SSH_ASKPASS=") &&
		    !startswith(environ[i], "SSH_ASKPASS_REQUIRE="))
			env[j++] = environ[i];
	env[j] = (char *)"SSH_ASKPASS_REQUIRE=never";
	return env;
}

/* The key's bytes, as read, in an anonymous memory file of mode 0600 (ssh-keygen refuses a key
 * others may read): nothing of it is written to disk, and the folder is not read again. */
static int key_memfd(const struct up_ssh_file *key)
{
	_cleanup_(closep) int fd = memfd_create("ssh-key", MFD_CLOEXEC);
	size_t done = 0;

	if (fd < 0 || fchmod(fd, 0600) < 0)
		return -errno;
	while (done < key->len) {
		ssize_t n = write(fd, key->data + done, key->len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return TAKE_FD(fd);
}

/* ssh-keygen names the key by the path it was given: put the key's own path back. */
static void name_key(char *reason, size_t len, const char *path)
{
	static const char given[] = "\"" KEYGEN_KEY_PATH "\"";
	char *at = strstr(reason, given), rest[512];

	if (!at)
		return;
	(void)snprintf(rest, sizeof(rest), "%s", at + sizeof(given) - 1);
	(void)snprintf(at, len - (size_t)(at - reason), "\"%s\"%s", path, rest);
}

static int derive_pub(struct scan *sc, char **envp, const struct up_ssh_file *key,
		      struct up_ssh_file *pub)
{
	char out[16384], err[4096], reason[512], path[4352];
	char *argv[] = {(char *)"ssh-keygen", (char *)"-y", (char *)"-f", (char *)KEYGEN_KEY_PATH,
			NULL};
	_cleanup_(closep) int fd = key_memfd(key);
	struct up_run run = {.argv = argv,
			     .envp = envp,
			     .new_session = true,
			     .timeout_ms = UP_SSH_KEYGEN_TIMEOUT_MS,
			     .fd3 = fd,
			     .out = out,
			     .out_len = sizeof(out),
			     .err = err,
			     .err_len = sizeof(err)};
	int r;

	if (fd < 0)
		return fd == -ENOMEM ? fd
				     : (refuse(sc->why, sc->len,
					       "--ssh-key-dir: cannot hand %s to "
					       "ssh-keygen: %s",
					       key->name, strerror(-fd)));
	r = up_run(&run);
	if (r == -ENOENT)
		return refuse(sc->why, sc->len,
			      "--ssh-key-dir needs ssh-keygen on this machine to "
			      "derive the public keys; install openssh-client");
	if (r == -ETIMEDOUT)
		(void)snprintf(reason, sizeof(reason), "ssh-keygen did not answer within %d s",
			       UP_SSH_KEYGEN_TIMEOUT_MS / 1000);
	else if (r < 0)
		(void)snprintf(reason, sizeof(reason), "cannot run ssh-keygen: %s", strerror(-r));
	else if (!WIFEXITED(run.status) || WEXITSTATUS(run.status) != 0 || !strchr(out, ' ')) {
		/* stderr alone says why; stdout is only ever the key */
		up_ssh_keygen_reason(err, reason, sizeof(reason));
		(void)snprintf(path, sizeof(path), "%s/%s", sc->dir, key->name);
		name_key(reason, sizeof(reason), path);
	} else {
		size_t n = strcspn(out, "\n");
		if (asprintf(&pub->name, "%s.pub", key->name) < 0) {
			pub->name = NULL;
			return -ENOMEM;
		}
		if (!(pub->data = malloc(n + 2)))
			return -ENOMEM;
		memcpy(pub->data, out, n);
		pub->data[n] = '\n';
		pub->data[n + 1] = '\0';
		pub->len = n + 1;
		return 0;
	}
	return refuse(
		sc->why, sc->len,
		"could not load SSH key %s: %s. The key must be a valid, "
		"passphraseless private key (the ssh-agent holder cannot ask for a passphrase)",
		key->name, reason);
}

static int find_pub(const struct up_ssh_keys *k, const char *name)
{
	for (size_t i = 0; i < k->n_pub; i++)
		if (streq(k->pub[i].name, name))
			return (int)i;
	return -1;
}

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct up_ssh_file *)a)->name, ((const struct up_ssh_file *)b)->name);
}

/* Private keys to k->keys with their derived halves to k->pub; certificates and config too. */
static int split(struct scan *sc, struct up_ssh_keys *k)
{
	_cleanup_(freep) char **envp = keygen_env();
	int r;

	assert(k->n_pub == 0 && k->n_keys == 0); /* split fills an empty k */
	k->keys = calloc(sc->n, sizeof(*k->keys));
	k->pub = calloc(sc->n, sizeof(*k->pub));
	if (!envp || !k->keys || !k->pub)
		return -ENOMEM;
	for (size_t i = 0; i < sc->n; i++)
		if (sc->cls[i] != UP_SSH_PRIVATE) {
			k->pub[k->n_pub++] = sc->files[i];
			sc->files[i] = (struct up_ssh_file){0};
		}
	for (size_t i = 0; i < sc->n; i++) {
		if (sc->cls[i] != UP_SSH_PRIVATE)
			continue;
		struct up_ssh_file pub = {0};
		r = derive_pub(sc, envp, &sc->files[i], &pub);
		if (r == 0 && find_pub(k, pub.name) >= 0)
			r = refuse(sc->why, sc->len,
				   "--ssh-key-dir: the public half of %s would be %s, "
				   "which is already there as a certificate or the config",
				   sc->files[i].name, pub.name);
		if (r < 0) {
			file_free(&pub, false);
			return r;
		}
		k->pub[k->n_pub++] = pub;
		k->keys[k->n_keys++] = sc->files[i];
		sc->files[i] = (struct up_ssh_file){0};
	}
	qsort(k->pub, k->n_pub, sizeof(*k->pub), cmp_files);
	return 0;
}

int up_ssh_keys_load(const char *dir, uid_t uid, struct up_ssh_keys *k, bool *no_keys, char *why,
		     size_t len)
{
	struct scan sc = {.dir = dir, .why = why, .len = len};
	size_t n_private = 0;
	int r;

	*k = (struct up_ssh_keys){0};
	*no_keys = false;
	sc.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sc.dfd < 0)
		return refuse(why, len, "--ssh-key-dir %s does not exist or is not a directory",
			      dir);
	r = list_names(&sc);
	for (size_t i = 0; r == 0 && i < sc.n_names; i++)
		r = scan_one(&sc, sc.names[i]);
	for (size_t i = 0; i < sc.n; i++)
		n_private += sc.cls[i] == UP_SSH_PRIVATE;
	if (r == 0 && n_private == 0)
		*no_keys = true;
	else if (r == 0 && uid == 0)
		r = refuse(
			why, len,
			"--ssh-key-dir is unsupported when running uplinkd as root: the "
			"ssh-agent holder pod runs as your uid and must not be root; run uplinkd "
			"as your own user");
	else if (r == 0)
		r = split(&sc, k);
	for (size_t i = 0; i < sc.n; i++)
		file_free(&sc.files[i], sc.cls[i] == UP_SSH_PRIVATE);
	for (size_t i = 0; i < sc.n_names; i++)
		free(sc.names[i]);
	free(sc.names);
	(void)close(sc.dfd);
	if (r < 0)
		up_ssh_keys_done(k);
	return r;
}
