/* SPDX-License-Identifier: Apache-2.0 */
/* The trust store (trust.h): one JSON file, changed under a lock and written atomically. */
#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hex.h"
#include "bounds.h"
#include "fileio.h"
#include "paths.h"
#include "store.h"

#define TRUST_VERSION 1

/* A sentence into err; returns r. */
_printf_(4, 5) static int fail(int r, char *err, size_t err_len, const char *fmt, ...)
{
	up_vformat(err, err_len, fmt);
	return r;
}

void up_sha256_hex(const void *buf, size_t len, char out[UP_SHA256_HEX_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;

	if (!EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL) || n != UP_SHA256_HEX_LEN / 2) {
		/* never equal to a real digest: nothing is trusted by mistake */
		memset(out, 'x', UP_SHA256_HEX_LEN);
		out[UP_SHA256_HEX_LEN] = '\0';
		return;
	}
	up_hex(md, n, out);
}

int up_trust_default_dir(char *buf, size_t len)
{
	return up_store_default_base(buf, len);
}

static bool hex64(const char *s)
{
	if (!s || strlen(s) != UP_SHA256_HEX_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* The store's "files", checked entry by entry; NULL with why. */
static json_t *files_of(json_t *doc, char *why, size_t why_len)
{
	json_t *files = json_object_get(doc, "files"), *v;
	const char *path;

	if (json_integer_value(json_object_get(doc, "version")) != TRUST_VERSION ||
	    !json_is_object(files)) {
		(void)snprintf(why, why_len, "it lacks \"version\": %d and a \"files\" object",
			       TRUST_VERSION);
		return NULL;
	}
	if (json_object_size(files) > UP_MAX_TRUSTED_FILES) {
		(void)snprintf(why, why_len, "it holds more than %d files", UP_MAX_TRUSTED_FILES);
		return NULL;
	}
	json_object_foreach (files, path, v)
		if (path[0] != '/' || !hex64(json_string_value(json_object_get(v, "sha256")))) {
			(void)snprintf(why, why_len,
				       "its entry '%.200s' is not an absolute path with a "
				       "\"sha256\" of 64 hex digits",
				       path);
			return NULL;
		}
	return json_incref(files);
}

/* Reads and checks an open store; *files is a new reference. */
static int read_store(int fd, const char *path, json_t **files, char *err, size_t err_len)
{
	_cleanup_(freep) char *text = NULL;
	json_error_t je;
	struct stat st;
	char why[512];
	json_t *doc;
	size_t len;
	int r;

	if (fstat(fd, &st) < 0)
		return fail(-errno, err, err_len, "cannot inspect %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return fail(
			-EPERM, err, err_len,
			"the trust store %s is not a file of yours that only "
			"you may write (mode %04o, uid %u); nothing in it is trusted until you fix "
			"that (chmod 600 %s), or move it away and trust your files again",
			path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, path);
	r = up_read_file_fd(fd, UP_MAX_TRUST_STORE_SIZE, &text, &len);
	if (r < 0)
		return fail(r, err, err_len, "cannot read the trust store %s: %s", path,
			    r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
	doc = len ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &je) : NULL;
	if (!doc)
		(void)snprintf(why, sizeof(why), "it is not JSON: %s",
			       len ? je.text : "it is empty");
	*files = doc ? files_of(doc, why, sizeof(why)) : NULL;
	json_decref(doc);
	if (!*files)
		return fail(-EINVAL, err, err_len,
			    "the trust store %s is broken (%s); move it away and "
			    "trust your project files again (uplink trust)",
			    path, why);
	return 0;
}

static int store_path(const char *dir, const char *name, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n >= 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int up_trust_load(const char *dir, json_t **files, char *err, size_t err_len)
{
	char path[PATH_MAX];
	int fd, r;

	if (store_path(dir, UP_TRUST_FILE, path, sizeof(path)) < 0)
		return fail(-ENAMETOOLONG, err, err_len,
			    "the state folder's path %.200s is too long", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		*files = json_object();
		return *files ? 0 : -ENOMEM;
	}
	if (fd < 0)
		return fail(-errno, err, err_len, "cannot open the trust store %s: %s", path,
			    strerror(errno));
	r = read_store(fd, path, files, err, err_len);
	(void)close(fd);
	return r;
}

bool up_trust_has(const json_t *files, const char *path, const char *sha256)
{
	const char *have =
		json_string_value(json_object_get(json_object_get(files, path), "sha256"));

	return have && sha256 && streq(have, sha256);
}

/* Makes the folder (0700), takes the lock, reads the store: the start of every change. */
static int begin(const char *dir, int *lock, json_t **files, char *err, size_t err_len)
{
	char path[PATH_MAX];
	int r;

	if (store_path(dir, ".trusted.json.lock", path, sizeof(path)) < 0)
		return fail(-ENAMETOOLONG, err, err_len,
			    "the state folder's path %.200s is too long", dir);
	r = up_mkdir_parents(path, 0700);
	if (r < 0)
		return fail(r, err, err_len, "cannot create the folder %s: %s", dir, strerror(-r));
	*lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*lock < 0 || flock(*lock, LOCK_EX) < 0)
		return fail(-errno, err, err_len, "cannot lock %s: %s", path, strerror(errno));
	return up_trust_load(dir, files, err, err_len);
}

static int commit(const char *dir, json_t *files, char *err, size_t err_len)
{
	json_t *doc = json_pack("{s:i, s:O}", "version", TRUST_VERSION, "files", files);
	_cleanup_(freep) char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	const char *step = NULL;
	size_t len;
	int r;

	json_decref(doc);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	if (len + 1 > UP_MAX_TRUST_STORE_SIZE)
		return fail(-E2BIG, err, err_len,
			    "the trust store would be larger than 1 MiB; remove "
			    "files you no longer use with: uplink untrust FILE");
	text[len++] = '\n'; /* the NUL becomes the newline; `len` says where it ends */
	r = up_write_file_atomic(dir, UP_TRUST_FILE, text, len, &step);
	return r < 0 ? fail(r, err, err_len, "cannot write the trust store in %s (%s): %s", dir,
			    step, strerror(-r))
		     : 0;
}

int up_trust_add(const char *dir, const json_t *entries, int64_t now, char *err, size_t err_len)
{
	_cleanup_(closep) int lock = -1;
	json_t *files = NULL, *e;
	size_t i;
	int r;

	r = begin(dir, &lock, &files, err, err_len);
	if (r < 0)
		return r;
	json_array_foreach (entries, i, e) {
		const char *file = json_string_value(json_object_get(e, "file"));
		const char *sha = json_string_value(json_object_get(e, "sha256"));

		if (!file || file[0] != '/' || !hex64(sha)) {
			r = fail(-EINVAL, err, err_len,
				 "cannot trust '%.200s': not an absolute path with "
				 "a content hash",
				 file ? file : "?");
			break;
		}
		if (json_object_set_new(files, file,
					json_pack("{s:s, s:I}", "sha256", sha, "trusted_at",
						  (json_int_t)now)) < 0) {
			r = -ENOMEM;
			break;
		}
	}
	if (r >= 0 && json_object_size(files) > UP_MAX_TRUSTED_FILES)
		r = fail(-E2BIG, err, err_len,
			 "the trust store would hold more than %d files; remove "
			 "those you no longer use (uplink trust --list, uplink untrust FILE)",
			 UP_MAX_TRUSTED_FILES);
	if (r >= 0)
		r = commit(dir, files, err, err_len);
	json_decref(files);
	return r;
}

int up_trust_remove(const char *dir, const json_t *paths, json_t **removed, char *err,
		    size_t err_len)
{
	_cleanup_(closep) int lock = -1;
	json_t *files = NULL, *p, *out = json_array();
	size_t i;
	int r;

	if (!out)
		return -ENOMEM;
	r = begin(dir, &lock, &files, err, err_len);
	json_array_foreach (paths, i, p)
		if (r >= 0 &&
		    json_object_get(files, json_string_value(p) ? json_string_value(p) : "")) {
			(void)json_object_del(files, json_string_value(p));
			if (json_array_append(out, p) < 0)
				r = -ENOMEM;
		}
	if (r >= 0 && json_array_size(out) > 0)
		r = commit(dir, files, err, err_len);
	json_decref(files);
	if (r < 0) {
		json_decref(out);
		return r;
	}
	*removed = out;
	return 0;
}
