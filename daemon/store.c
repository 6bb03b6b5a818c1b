/* SPDX-License-Identifier: Apache-2.0 */
#include "store.h"
#include "store-private.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "knobs.h"
#include "paths.h"
#include "fileio.h"

/* "<doing> <what>: <strerror>" into err; returns r. */
static int fail(int r, char *err, size_t err_len, const char *doing, const char *what)
{
	(void)snprintf(err, err_len, "%s %s: %s", doing, what, strerror(-r));
	return r;
}

int up_store_default_base(char *buf, size_t len)
{
	const char *xdg = up_knobs()->xdg_state_home, *home = up_knobs()->home;
	int n;

	if (xdg && *xdg == '/')
		n = snprintf(buf, len, "%s/uplink", xdg);
	else {
		if (!home || *home != '/') {
			struct passwd *pw = getpwuid(getuid());
			home = pw ? pw->pw_dir : NULL;
		}
		if (!home || *home != '/')
			return -ENOENT;
		n = snprintf(buf, len, "%s/.local/state/uplink", home);
	}
	return n >= 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int up_store_new(const char *base, struct up_store **ret)
{
	char buf[PATH_MAX], sessions[PATH_MAX];
	struct up_store *s;
	int n, r;

	if (!base) {
		r = up_store_default_base(buf, sizeof(buf));
		if (r < 0)
			return r;
		base = buf;
	}
	if (*base != '/')
		return -EINVAL;
	n = snprintf(sessions, sizeof(sessions), "%s/sessions", base);
	/* Leave room below it for "corrupt/<id>.json.<time>.<n>" and temp names. */
	if (n < 0 || (size_t)n + 64 >= sizeof(sessions))
		return -ENAMETOOLONG;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base = strdup(base);
	s->sessions = strdup(sessions);
	if (!s->base || !s->sessions) {
		up_store_free(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

struct up_store *up_store_free(struct up_store *s)
{
	if (!s)
		return NULL;
	assert(s->pending == 0);
	free(s->base);
	free(s->sessions);
	free(s);
	return NULL;
}

const char *up_store_base(const struct up_store *s)
{
	return s->base;
}

const char *up_store_sessions_dir(const struct up_store *s)
{
	return s->sessions;
}

int up_store_session_dir(const struct up_store *s, const char *id, char *buf, size_t len)
{
	int n;

	if (!up_session_id_valid(id))
		return -EINVAL;
	n = snprintf(buf, len, "%s/%s", s->sessions, id);
	return n >= 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* ---- files ---- */

static int fsync_path(const char *path)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

/* Creates a missing folder 0700; a present one must be a folder of ours. */
static int make_dir(const char *path, json_t *problems, char *err, size_t err_len)
{
	struct stat st;

	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return fail(-errno, err, err_len, "cannot create the folder", path);
	if (stat(path, &st) < 0)
		return fail(-errno, err, err_len, "cannot inspect the folder", path);
	if (!S_ISDIR(st.st_mode)) {
		(void)snprintf(err, err_len, "%s is not a folder; move it away", path);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		(void)snprintf(err, err_len,
			       "the folder %s belongs to uid %u, not to uid %u that "
			       "uplinkd runs as; fix it with: chown %u %s",
			       path, (unsigned)st.st_uid, (unsigned)geteuid(), (unsigned)geteuid(),
			       path);
		return -EPERM;
	}
	if ((st.st_mode & 077) && problems) {
		char msg[PATH_MAX + 128];

		if (chmod(path, 0700) < 0)
			return fail(-errno, err, err_len, "cannot set to mode 0700 the folder",
				    path);
		(void)snprintf(msg, sizeof(msg),
			       "%s: it was mode %04o, open to other users; it is now 0700", path,
			       (unsigned)(st.st_mode & 07777));
		(void)json_array_append_new(problems, json_pack("{s:s, s:s, s:n}", "file", path,
								"problem", msg, "moved_to"));
	}
	return 0;
}

static int make_dirs(struct up_store *s, json_t *problems, char *err, size_t err_len)
{
	int r = up_mkdir_parents(s->base, 0700);

	if (r < 0)
		return fail(r, err, err_len, "cannot create the folders above", s->base);
	r = make_dir(s->base, problems, err, err_len);
	return r < 0 ? r : make_dir(s->sessions, problems, err, err_len);
}

/* tmp + write + fsync + rename + fsync of the folder (up_write_file_atomic()). */
int up_store_save_bytes(struct up_store *s, const char *id, const char *buf, size_t len, char *err,
			size_t err_len)
{
	char name[64], path[PATH_MAX];
	const char *step = NULL;
	int r;

	r = make_dirs(s, NULL, err, err_len);
	if (r < 0)
		return r;
	(void)snprintf(name, sizeof(name), "%s.json", id);
	(void)snprintf(path, sizeof(path), "%s/%s", s->sessions, name);
	r = up_write_file_atomic(s->sessions, name, buf, len, &step);
	if (r < 0 && streq(step, "create"))
		return fail(r, err, err_len, "cannot create a file in", s->sessions);
	if (r < 0 && streq(step, "sync"))
		return fail(r, err, err_len, "cannot sync the folder", s->sessions);
	if (r < 0)
		return fail(r, err, err_len, "cannot write the session record", path);
	return 0;
}

/* The record as it goes to disk, checked and bounded. */
int up_store_serialise(const json_t *rec, char **ret, size_t *len, char *err, size_t err_len)
{
	char why[256];
	char *text;
	int r;

	r = up_record_check(rec, NULL, why, sizeof(why));
	if (r < 0) {
		(void)snprintf(err, err_len, "refusing to save a session record: %s", why);
		return r;
	}
	text = json_dumps(rec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text)
		return -ENOMEM;
	*len = strlen(text);
	if (*len + 1 > UP_MAX_RECORD_SIZE) {
		(void)snprintf(err, err_len,
			       "refusing to save the session record %s: it is larger "
			       "than %d bytes",
			       up_record_id(rec), UP_MAX_RECORD_SIZE);
		free(text);
		return -EFBIG;
	}
	text[(*len)++] = '\n'; /* the NUL becomes the newline; the length says where it ends */
	*ret = text;
	return 0;
}

int up_store_save(struct up_store *s, const json_t *rec, char *err, size_t err_len)
{
	_cleanup_(freep) char *text = NULL;
	size_t len;
	int r;

	r = up_store_serialise(rec, &text, &len, err, err_len);
	if (r < 0)
		return r;
	return up_store_save_bytes(s, up_record_id(rec), text, len, err, err_len);
}

/* Reads a regular file of at most UP_MAX_RECORD_SIZE bytes without following links. */
static int read_at(int dfd, const char *name, char **ret, size_t *len)
{
	_cleanup_(closep) int fd =
		openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	_cleanup_(freep) char *buf = NULL;
	struct stat st;
	size_t used = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADF;
	if (st.st_size > UP_MAX_RECORD_SIZE)
		return -EFBIG;
	buf = malloc(UP_MAX_RECORD_SIZE + 2);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + used, UP_MAX_RECORD_SIZE + 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		used += (size_t)n;
		if (used > UP_MAX_RECORD_SIZE)
			return -EFBIG;
	}
	buf[used] = '\0';
	*len = used;
	*ret = TAKE_PTR(buf);
	return 0;
}

static void read_problem(int r, char *why, size_t len)
{
	if (r == -ELOOP)
		(void)snprintf(why, len, "it is a symbolic link");
	else if (r == -EBADF)
		(void)snprintf(why, len, "it is not a regular file");
	else if (r == -EFBIG)
		(void)snprintf(why, len, "it is larger than %d bytes", UP_MAX_RECORD_SIZE);
	else
		(void)snprintf(why, len, "it cannot be read: %s", strerror(-r));
}

/* Reads and checks one record; on failure `why` says what is wrong with it. */
static int read_record(int dfd, const char *name, const char *id, json_t **ret, char *why,
		       size_t why_len)
{
	_cleanup_(freep) char *text = NULL;
	json_error_t jerr;
	json_t *rec;
	size_t len = 0;
	int r;

	r = read_at(dfd, name, &text, &len);
	if (r < 0) {
		read_problem(r, why, why_len);
		return r;
	}
	rec = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!rec) {
		(void)snprintf(why, why_len, "it is not valid JSON: %s at line %d, column %d",
			       jerr.text, jerr.line, jerr.column);
		return -EBADMSG;
	}
	if (json_integer_value(json_object_get(rec, "version")) > UP_RECORD_VERSION) {
		(void)snprintf(why, why_len,
			       "its version %" JSON_INTEGER_FORMAT " is newer than "
			       "this uplinkd reads (%d); it was left in place",
			       json_integer_value(json_object_get(rec, "version")),
			       UP_RECORD_VERSION);
		json_decref(rec);
		return -EPROTONOSUPPORT;
	}
	r = up_record_check(rec, id, why, why_len);
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	*ret = rec;
	return 0;
}

static void add_problem(json_t *problems, const char *file, const char *msg, const char *moved_to)
{
	(void)json_array_append_new(problems, json_pack("{s:s, s:s, s:s?}", "file", file, "problem",
							msg, "moved_to", moved_to));
}

static bool exists_at(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Moves sessions/<name> to sessions/corrupt/<name>.<UTC time>[.<n>]; `to` gets the path. */
static int move_aside(const struct up_store *s, int dfd, const char *name, int64_t now, char *to,
		      size_t to_len)
{
	_cleanup_(closep) int cfd = -1;
	char stamp[32] = "", target[NAME_MAX + 1];
	time_t t = (time_t)now;
	struct tm tm;

	if (mkdirat(dfd, "corrupt", 0700) < 0 && errno != EEXIST)
		return -errno;
	cfd = openat(dfd, "corrupt", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (cfd < 0)
		return -errno;
	if (gmtime_r(&t, &tm))
		(void)strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	for (int i = 0; i < 100; i++) {
		if (i == 0)
			(void)snprintf(target, sizeof(target), "%.200s.%s", name, stamp);
		else
			(void)snprintf(target, sizeof(target), "%.200s.%s.%d", name, stamp, i);
		if (exists_at(cfd, target))
			continue;
		if (renameat(dfd, name, cfd, target) < 0)
			return -errno;
		(void)fsync(cfd);
		(void)fsync(dfd);
		(void)snprintf(to, to_len, "%s/corrupt/%s", s->sessions, target);
		return 0;
	}
	return -EEXIST;
}

struct load {
	const struct up_store *s;
	int dfd;
	int64_t now;
	size_t count;
	json_t *records, *problems;
};

static void load_one(struct load *l, const char *name)
{
	char id[NAME_MAX + 1], why[512], moved[PATH_MAX], path[PATH_MAX], msg[PATH_MAX * 2 + 600];
	size_t n = strlen(name) - strlen(".json");
	json_t *rec = NULL;
	int r;

	memcpy(id, name, n);
	id[n] = '\0';
	(void)snprintf(path, sizeof(path), "%s/%s", l->s->sessions, name);
	if (!up_session_id_valid(id)) {
		(void)snprintf(why, sizeof(why),
			       "its name is not a session id (12 lowercase hex "
			       "digits) followed by .json");
		r = -EINVAL;
	} else if (l->count >= UP_MAX_RECORDS) {
		(void)snprintf(msg, sizeof(msg),
			       "%s: there are more than %d session records; it was "
			       "not loaded",
			       path, UP_MAX_RECORDS);
		add_problem(l->problems, path, msg, NULL);
		return;
	} else {
		r = read_record(l->dfd, name, id, &rec, why, sizeof(why));
	}
	if (r == 0) {
		(void)json_object_set_new(l->records, id, rec);
		l->count++;
		return;
	}
	if (r == -EPROTONOSUPPORT) {
		(void)snprintf(msg, sizeof(msg), "%s: %s", path, why);
		add_problem(l->problems, path, msg, NULL);
		return;
	}
	r = move_aside(l->s, l->dfd, name, l->now, moved, sizeof(moved));
	if (r < 0) {
		(void)snprintf(msg, sizeof(msg), "%s: %s; moving it aside failed: %s", path, why,
			       strerror(-r));
		add_problem(l->problems, path, msg, NULL);
	} else {
		(void)snprintf(msg, sizeof(msg), "%s: %s; it was moved to %s", path, why, moved);
		add_problem(l->problems, path, msg, moved);
	}
}

static void free_entries(struct dirent **list, int n)
{
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

static int load_dir(struct load *l, char *err, size_t err_len)
{
	struct dirent **list = NULL;
	int n = scandir(l->s->sessions, &list, NULL, alphasort);

	if (n < 0)
		return fail(-errno, err, err_len, "cannot read the folder", l->s->sessions);
	for (int i = 0; i < n; i++) {
		const char *name = list[i]->d_name;
		struct stat st;

		if (name[0] == '.') {
			/* A save that never reached its rename: the record it meant to replace
			 * stands. */
			if (strstr(name, ".json.") &&
			    fstatat(l->dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode))
				(void)unlinkat(l->dfd, name, 0);
			continue;
		}
		if (endswith(name, ".json"))
			load_one(l, name);
	}
	free_entries(list, n);
	return 0;
}

int up_store_load(struct up_store *s, int64_t now, json_t **records, json_t **problems, char *err,
		  size_t err_len)
{
	struct load l = {.s = s, .now = now, .records = json_object(), .problems = json_array()};
	int r;

	if (!l.records || !l.problems) {
		r = -ENOMEM;
		goto fail;
	}
	r = make_dirs(s, l.problems, err, err_len);
	if (r < 0)
		goto fail;
	l.dfd = open(s->sessions, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l.dfd < 0) {
		r = fail(-errno, err, err_len, "cannot open the folder", s->sessions);
		goto fail;
	}
	r = load_dir(&l, err, err_len);
	(void)close(l.dfd);
	if (r < 0)
		goto fail;
	*records = l.records;
	*problems = l.problems;
	return 0;
fail:
	json_decref(l.records);
	json_decref(l.problems);
	return r;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Removes a session's folder and all below it, never following a link. */
static int remove_tree(const char *path)
{
	if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int up_store_delete(struct up_store *s, const char *id, unsigned flags, char *err, size_t err_len)
{
	char path[PATH_MAX], dir[PATH_MAX];
	int r = 0, k;

	if (!up_session_id_valid(id)) {
		(void)snprintf(err, err_len, "'%.64s' is not a session id", id);
		return -EINVAL;
	}
	(void)snprintf(path, sizeof(path), "%s/%s.json", s->sessions, id);
	(void)snprintf(dir, sizeof(dir), "%s/%s", s->sessions, id);
	if (unlink(path) < 0)
		r = fail(-errno, err, err_len, "cannot remove the session record", path);
	if (flags & UP_STORE_DELETE_FILES) {
		k = remove_tree(dir);
		if (k < 0 && r == 0)
			r = fail(k, err, err_len, "cannot remove the folder", dir);
	}
	k = fsync_path(s->sessions);
	if (k < 0 && r == 0)
		r = fail(k, err, err_len, "cannot sync the folder", s->sessions);
	return r;
}

static bool older(const struct stat *st, int64_t cutoff)
{
	return (int64_t)st->st_mtime <= cutoff;
}

struct prune {
	const struct up_store *s;
	int dfd;
	int64_t cutoff;
	json_t *removed;
	int r;
	char *err;
	size_t err_len;
};

static void prune_error(struct prune *p, int r, const char *doing, const char *what)
{
	if (p->r == 0)
		p->r = fail(r, p->err, p->err_len, doing, what);
}

/* A terminal record at least max_age old goes, with its folder. */
static void prune_record(struct prune *p, const char *name)
{
	char id[NAME_MAX + 1], why[512], dir[PATH_MAX];
	size_t n = strlen(name) - strlen(".json");
	json_t *rec = NULL;
	bool old;

	memcpy(id, name, n);
	id[n] = '\0';
	if (!up_session_id_valid(id) || read_record(p->dfd, name, id, &rec, why, sizeof(why)) < 0)
		return;
	old = up_session_state_is_terminal(up_record_state(rec)) &&
	      up_record_updated_at(rec) <= p->cutoff;
	json_decref(rec);
	if (!old)
		return;
	(void)snprintf(dir, sizeof(dir), "%s/%s", p->s->sessions, id);
	if (unlinkat(p->dfd, name, 0) < 0 && errno != ENOENT) {
		prune_error(p, -errno, "cannot remove the session record", name);
		return;
	}
	if (remove_tree(dir) < 0)
		prune_error(p, -errno, "cannot remove the folder", dir);
	(void)json_array_append_new(p->removed, json_string(id));
}

/* A session folder whose record is gone goes once it is max_age old. */
static void prune_folder(struct prune *p, const char *name)
{
	char record[NAME_MAX + 8], dir[PATH_MAX];
	struct stat st;

	(void)snprintf(record, sizeof(record), "%s.json", name);
	if (!up_session_id_valid(name) || exists_at(p->dfd, record) ||
	    fstatat(p->dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    !older(&st, p->cutoff))
		return;
	(void)snprintf(dir, sizeof(dir), "%s/%s", p->s->sessions, name);
	if (remove_tree(dir) < 0)
		prune_error(p, -errno, "cannot remove the folder", dir);
}

static void prune_corrupt(struct prune *p)
{
	_cleanup_(closep) int cfd =
		openat(p->dfd, "corrupt", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d;
	struct dirent *e;
	struct stat st;

	if (cfd < 0)
		return;
	d = fdopendir(TAKE_FD(cfd));
	if (!d)
		return;
	while ((e = readdir(d)))
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && older(&st, p->cutoff))
			(void)unlinkat(dirfd(d), e->d_name, 0);
	(void)closedir(d);
}

int up_store_prune(struct up_store *s, int64_t now, uint64_t max_age, json_t **removed, char *err,
		   size_t err_len)
{
	struct prune p = {.s = s, .err = err, .err_len = err_len, .removed = json_array()};
	struct dirent **list = NULL;
	int n;

	if (!p.removed)
		return -ENOMEM;
	if (max_age > UP_MAX_DURATION_S)
		max_age = UP_MAX_DURATION_S;
	p.cutoff = now - (int64_t)max_age;
	p.dfd = open(s->sessions, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p.dfd < 0 && errno == ENOENT) {
		*removed = p.removed;
		return 0;
	}
	if (p.dfd < 0) {
		json_decref(p.removed);
		return fail(-errno, err, err_len, "cannot open the folder", s->sessions);
	}
	n = scandir(s->sessions, &list, NULL, alphasort);
	for (int i = 0; i < n; i++)
		if (list[i]->d_name[0] != '.' && endswith(list[i]->d_name, ".json"))
			prune_record(&p, list[i]->d_name);
	for (int i = 0; i < n; i++)
		prune_folder(&p, list[i]->d_name);
	if (n >= 0)
		free_entries(list, n);
	else
		prune_error(&p, -errno, "cannot read the folder", s->sessions);
	prune_corrupt(&p);
	(void)fsync(p.dfd);
	(void)close(p.dfd);
	if (p.r < 0) {
		json_decref(p.removed);
		return p.r;
	}
	*removed = p.removed;
	return 0;
}
