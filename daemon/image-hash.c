/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure parts of agent images: the build-context hash (blocking file I/O, run on
 * the threadpool by image.c), the tag, the registry path, and reading docker's lines.
 */
#include "image.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "bounds.h"
#include "fileio.h"

struct entry {
	char type; /* 'F' file, 'L' symlink, 'D' folder */
	bool exec;
	size_t size;
	char *path;   /* relative, '/'-separated */
	char *target; /* symlinks */
};

struct walk {
	struct entry *v;
	size_t n, cap;
	size_t bytes;
	size_t max_files, max_bytes;
	char *err;
	size_t err_len;
	char *ignore; /* .dockerignore's text, patterns NUL-separated */
	size_t n_ignore;
	const char *dockerfile;	 /* relative to the root */
	const char *const *only; /* top-level entries walked; NULL: all */
};

static int fail(struct walk *w, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(struct walk *w, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(w->err, w->err_len, fmt, ap);
	va_end(ap);
	return r;
}

static void walk_free(struct walk *w)
{
	free(w->ignore);
	for (size_t i = 0; i < w->n; i++) {
		free(w->v[i].path);
		free(w->v[i].target);
	}
	free(w->v);
}

static int add(struct walk *w, const struct entry *e)
{
	if (w->n >= w->max_files)
		return fail(w, -EFBIG, "it holds more than %zu files and folders", w->max_files);
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct entry *v = realloc(w->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n] = *e;
	w->v[w->n].path = strdup(e->path);
	w->v[w->n].target = e->target ? strdup(e->target) : NULL;
	if (!w->v[w->n].path || (e->target && !w->v[w->n].target)) {
		free(w->v[w->n].path);
		free(w->v[w->n].target);
		return -ENOMEM;
	}
	w->n++;
	return 0;
}

/* Whether a relative symlink target, read from folder `depth` levels below the root, stays in. */
static bool target_stays_in(const char *target, unsigned depth)
{
	long level = depth;
	const char *p = target;

	if (*p == '/' || !*p)
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--level < 0)
				return false;
		} else if (n > 0 && !(n == 1 && p[0] == '.')) {
			level++;
		}
		p += n;
		p += strspn(p, "/");
	}
	return true;
}

static const char *kind_of(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "a special file";
}

/*
 * .dockerignore, as docker reads it: one pattern a line (# comments), matched against
 * the path relative to the context (a match on a folder takes what is under it), "!"
 * takes a path back, the last matching line decides. "**" is not supported. Docker
 * always sends the Dockerfile and .dockerignore, whatever the file says. So the hash
 * covers exactly what docker sees.
 */
static int load_ignore(struct walk *w, int root)
{
	char *text = NULL, *line, *save = NULL, *out;
	size_t len = 0;
	int fd = openat(root, ".dockerignore", O_RDONLY | O_NOFOLLOW | O_CLOEXEC), r;

	if (fd < 0)
		return errno == ENOENT ? 0
				       : fail(w, negative_errno(), "cannot read .dockerignore: %s",
					      strerror(errno));
	(void)close(fd);
	r = up_read_file_at(root, ".dockerignore", UP_IMAGE_DOCKERIGNORE_MAX, &text, &len);
	if (r < 0)
		return fail(w, r, "cannot read .dockerignore: %s", strerror(-r));
	w->ignore = out = calloc(1, len + 2);
	if (!out) {
		free(text);
		return -ENOMEM;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		line += strspn(line, " \t");
		size_t n = strcspn(line, "\r");
		while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
			n--;
		if (n == 0 || line[0] == '#')
			continue;
		if (line[0] == '/' || (line[0] == '!' && line[1] == '/')) {
			/* a leading "/" means the context's root, which every pattern is relative
			 * to */
			memmove(line + (line[0] == '!'), line + (line[0] == '!') + 1,
				n - 1 - (line[0] == '!'));
			n--;
		}
		memcpy(out, line, n);
		out += n + 1;
		w->n_ignore++;
	}
	free(text);
	return 0;
}

static bool ignored(const struct walk *w, const char *path)
{
	const char *p = w->ignore;
	bool out = false;

	if (streq(path, w->dockerfile) || streq(path, ".dockerignore"))
		return false;
	for (size_t i = 0; i < w->n_ignore; i++, p += strlen(p) + 1) {
		bool negate = p[0] == '!';
		const char *pat = p + negate;
		size_t plen = strlen(pat);
		/* the path itself, or a folder above it */
		bool match = fnmatch(pat, path, FNM_PATHNAME) == 0 ||
			     (!strncmp(path, pat, plen) && path[plen] == '/');
		for (const char *slash = strchr(path, '/'); !match && slash;
		     slash = strchr(slash + 1, '/')) {
			char head[PATH_MAX];
			(void)snprintf(head, sizeof(head), "%.*s", (int)(slash - path), path);
			match = fnmatch(pat, head, FNM_PATHNAME) == 0;
		}
		if (match)
			out = !negate;
	}
	return out;
}

/* Whether a "!" pattern could take back something under the folder `path`. */
static bool exception_under(const struct walk *w, const char *path)
{
	const char *p = w->ignore;
	size_t n = strlen(path);

	for (size_t i = 0; i < w->n_ignore; i++, p += strlen(p) + 1)
		if (p[0] == '!' && !strncmp(p + 1, path, n) && p[1 + n] == '/')
			return true;
	return false;
}

static int walk_dir(struct walk *w, int dfd, const char *prefix, unsigned depth);

/* Whether a top-level entry is outside the scope. */
static bool out_of_scope(const struct walk *w, const char *name, unsigned depth)
{
	if (depth > 0 || !w->only || streq(name, ".dockerignore"))
		return false;
	for (const char *const *o = w->only; *o; o++)
		if (streq(*o, name))
			return false;
	return true;
}

static int walk_one(struct walk *w, int dfd, const char *name, const char *path, unsigned depth)
{
	struct entry e = {.path = (char *)path};
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd, r;

	if (out_of_scope(w, name, depth) || (ignored(w, path) && !exception_under(w, path)))
		return 0;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(w, negative_errno(), "cannot stat '%s': %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		e.type = 'D';
		r = add(w, &e);
		if (r < 0)
			return r;
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail(w, negative_errno(), "cannot open '%s': %s", path,
				    strerror(errno));
		return walk_dir(w, fd, path, depth + 1);
	}
	if (S_ISREG(st.st_mode)) {
		e.type = 'F';
		e.exec = (st.st_mode & 0111) != 0;
		e.size = (size_t)st.st_size;
		if (e.size > w->max_bytes - w->bytes)
			return fail(w, -EFBIG, "it holds more than %zu bytes (at '%s')",
				    w->max_bytes, path);
		w->bytes += e.size;
		return add(w, &e);
	}
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return fail(w, negative_errno(), "cannot read the symlink '%s': %s", path,
				    strerror(errno));
		target[n] = '\0';
		if (!target_stays_in(target, depth))
			return fail(w, -ELOOP,
				    "the symlink '%s' points outside the folder (to '%s')", path,
				    target);
		e.type = 'L';
		e.target = target;
		return add(w, &e);
	}
	return fail(w, -EINVAL, "'%s' is %s; only files, folders and symlinks may be in it", path,
		    kind_of(st.st_mode));
}

/* Takes dfd. */
static int walk_dir(struct walk *w, int dfd, const char *prefix, unsigned depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (depth > UP_IMAGE_CONTEXT_MAX_DEPTH) {
		(void)close(dfd);
		return fail(w, -ELOOP, "it nests folders more than %d deep (at '%s')",
			    UP_IMAGE_CONTEXT_MAX_DEPTH, prefix);
	}
	d = fdopendir(dfd);
	if (!d) {
		r = negative_errno();
		(void)close(dfd);
		return fail(w, r, "cannot read '%s': %s", *prefix ? prefix : ".", strerror(-r));
	}
	while (r >= 0 && (errno = 0, de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "",
			     de->d_name) >= (int)sizeof(path))
			r = fail(w, -ENAMETOOLONG, "a path under '%s' is too long", prefix);
		else
			r = walk_one(w, dirfd(d), de->d_name, path, depth);
	}
	if (r >= 0 && errno)
		r = fail(w, negative_errno(), "cannot read '%s': %s", *prefix ? prefix : ".",
			 strerror(errno));
	(void)closedir(d);
	return r;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

/* Opens a file of the context without following any symlink, nor leaving the root. */
static int open_beneath(int root, const char *path)
{
	struct open_how how = {.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
	long fd = syscall(SYS_openat2, root, path, &how, sizeof(how));

	if (fd < 0 && (errno == ENOSYS || errno == EPERM))
		fd = openat(root, path, (int)how.flags);
	return (int)fd;
}

static int hash_file(struct walk *w, EVP_MD_CTX *md, int root, const struct entry *e)
{
	static _Thread_local char buf[65536];
	size_t total = 0;
	struct stat st;
	ssize_t n;
	int fd = open_beneath(root, e->path), r = 0;

	if (fd < 0)
		return fail(w, negative_errno(), "cannot open '%s': %s", e->path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		(void)close(fd);
		return fail(w, -EBUSY, "'%s' changed while it was read; try again", e->path);
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		total += (size_t)n;
		if (total > e->size)
			break;
		if (EVP_DigestUpdate(md, buf, (size_t)n) != 1) {
			r = -ENOMEM;
			break;
		}
	}
	if (n < 0)
		r = fail(w, negative_errno(), "cannot read '%s': %s", e->path, strerror(errno));
	else if (r == 0 && total != e->size)
		r = fail(w, -EBUSY, "'%s' changed while it was read; try again", e->path);
	(void)close(fd);
	return r;
}

static int hash_entries(struct walk *w, EVP_MD_CTX *md, int root, const char *const *args)
{
	static const char magic[] = "uplink-context-v1";
	char head[64];
	int r = 0;

	if (EVP_DigestUpdate(md, magic, sizeof(magic)) != 1)
		return -ENOMEM;
	for (size_t i = 0; args && args[i]; i++)
		if (EVP_DigestUpdate(md, "A", 1) != 1 ||
		    EVP_DigestUpdate(md, args[i], strlen(args[i]) + 1) != 1)
			return -ENOMEM;
	for (size_t i = 0; i < w->n && r >= 0; i++) {
		const struct entry *e = &w->v[i];
		int hn = snprintf(head, sizeof(head), "%c%c%zu", e->type, e->exec ? 'x' : '-',
				  e->size);

		if (EVP_DigestUpdate(md, head, (size_t)hn + 1) != 1 ||
		    EVP_DigestUpdate(md, e->path, strlen(e->path) + 1) != 1)
			return -ENOMEM;
		if (e->type == 'L' && EVP_DigestUpdate(md, e->target, strlen(e->target) + 1) != 1)
			return -ENOMEM;
		if (e->type == 'F')
			r = hash_file(w, md, root, e);
	}
	return r;
}

int up_image_context_hash(const char *dir, const struct up_image_scope *scope,
			  const char *const *build_args, const struct up_image_limits *lim,
			  char hex[65], char *err, size_t err_len)
{
	struct walk w = {.err = err,
			 .err_len = err_len,
			 .max_files = UP_IMAGE_CONTEXT_MAX_FILES,
			 .max_bytes = UP_IMAGE_CONTEXT_MAX_BYTES,
			 .dockerfile =
				 scope && scope->dockerfile ? scope->dockerfile : "Dockerfile",
			 .only = scope ? scope->only : NULL};
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_MD_CTX *md = NULL;
	struct stat st;
	int root, fd, r;

	if (lim && lim->max_files)
		w.max_files = lim->max_files;
	if (lim && lim->max_bytes)
		w.max_bytes = lim->max_bytes;
	*err = '\0';
	root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return fail(&w, negative_errno(), "cannot open it: %s", strerror(errno));
	r = load_ignore(&w, root);
	fd = r < 0 ? -1 : dup(root);
	if (r >= 0)
		r = fd < 0 ? negative_errno() : walk_dir(&w, fd, "", 0);
	if (r < 0)
		goto out;
	if (fstatat(root, w.dockerfile, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
		r = fail(&w, -ENOENT, "it has no %s", w.dockerfile);
		goto out;
	}
	if (w.n > 1) /* qsort() wants a non-NULL array even for none */
		qsort(w.v, w.n, sizeof(*w.v), cmp_entry);
	md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		r = -ENOMEM;
		goto out;
	}
	r = hash_entries(&w, md, root, build_args);
	if (r >= 0 && EVP_DigestFinal_ex(md, digest, &len) != 1)
		r = -ENOMEM;
	for (unsigned i = 0; r >= 0 && i < 32 && i < len; i++)
		(void)snprintf(hex + 2 * i, 3, "%02x", digest[i]);
out:
	if (r == -ENOMEM && !*err)
		(void)snprintf(err, err_len, "out of memory");
	EVP_MD_CTX_free(md);
	walk_free(&w);
	(void)close(root);
	return r;
}

void up_image_tag(const char *hex, char tag[21])
{
	(void)snprintf(tag, 21, "ctx-%.16s", hex);
}

const char *up_image_repo_path(const char *repository)
{
	const char *slash = strchr(repository, '/');
	size_t n = slash ? (size_t)(slash - repository) : 0;

	/* Like docker: the first component names a registry if it has a '.' or a ':' or is
	 * localhost. */
	if (slash && (memchr(repository, '.', n) || memchr(repository, ':', n) ||
		      (n == 9 && !strncmp(repository, "localhost", 9))))
		return slash + 1;
	return repository;
}

static void set_message(struct up_image_line *out, const char *s, size_t n)
{
	if (n >= sizeof(out->message))
		n = sizeof(out->message) - 1;
	memcpy(out->message, s, n);
	out->message[n] = '\0';
	while (n > 0 && (out->message[n - 1] == ' ' || out->message[n - 1] == '\r'))
		out->message[--n] = '\0';
}

/* BuildKit's plain progress: "#7 [stage-1 2/5] RUN make" */
static enum up_image_line_kind parse_buildkit(const char *line, struct up_image_line *out)
{
	const char *open = strchr(line, '['), *close = open ? strchr(open, ']') : NULL;
	const char *nums;
	unsigned a, b;
	int used = 0;

	if (!close || line[1] < '0' || line[1] > '9')
		return UP_IMAGE_LINE_OTHER;
	nums = memrchr(open, ' ', (size_t)(close - open));
	nums = nums ? nums + 1 : open + 1;
	if (sscanf(nums, "%u/%u]%n", &a, &b, &used) != 2 || nums + used != close + 1 || !b || a > b)
		return UP_IMAGE_LINE_OTHER;
	out->step = a;
	out->total = b;
	close += strspn(close + 1, " ") + 1;
	set_message(out, close, strlen(close));
	return UP_IMAGE_LINE_STEP;
}

static enum up_image_line_kind parse_build(const char *line, struct up_image_line *out)
{
	unsigned a, b;
	int used = 0;

	if (line[0] == '#')
		return parse_buildkit(line, out);
	if (sscanf(line, "Step %u/%u :%n", &a, &b, &used) != 2 || !used || !b || a > b)
		return UP_IMAGE_LINE_OTHER;
	out->step = a;
	out->total = b;
	line += used;
	line += strspn(line, " ");
	set_message(out, line, strlen(line));
	return UP_IMAGE_LINE_STEP;
}

static enum up_image_line_kind parse_push(const char *line, struct up_image_line *out)
{
	static const char *const done[] = {"Pushed", "Layer already exists", "Mounted from "};
	const char *colon = strstr(line, ": ");
	size_t idn = colon ? (size_t)(colon - line) : 0;

	if (!colon || !idn || idn > 64)
		return UP_IMAGE_LINE_OTHER;
	if (startswith(colon + 2, "digest: sha256:")) {
		set_message(out, line, strlen(line));
		return UP_IMAGE_LINE_DIGEST;
	}
	if (strspn(line, "0123456789abcdef") != idn)
		return UP_IMAGE_LINE_OTHER;
	set_message(out, line, idn);
	for (size_t i = 0; i < ELEMENTSOF(done); i++)
		if (startswith(colon + 2, done[i]))
			return UP_IMAGE_LINE_LAYER_DONE;
	if (startswith(colon + 2, "Preparing") || startswith(colon + 2, "Waiting") ||
	    startswith(colon + 2, "Pushing"))
		return UP_IMAGE_LINE_LAYER;
	return UP_IMAGE_LINE_OTHER;
}

enum up_image_line_kind up_image_parse_line(bool push, const char *line, struct up_image_line *out)
{
	*out = (struct up_image_line){0};
	return push ? parse_push(line, out) : parse_build(line, out);
}

static const char *const builder_names[_UP_IMAGE_BUILDER_MAX] = {
	[UP_IMAGE_BUILDER_AUTO] = "auto",
	[UP_IMAGE_BUILDER_LEGACY] = "legacy",
	[UP_IMAGE_BUILDER_BUILDKIT] = "buildkit",
};

const char *up_image_builder_to_string(enum up_image_builder b)
{
	return b >= 0 && b < _UP_IMAGE_BUILDER_MAX ? builder_names[b] : NULL;
}

enum up_image_builder up_image_builder_from_string(const char *s)
{
	for (int i = 0; i < _UP_IMAGE_BUILDER_MAX; i++)
		if (s && streq(s, builder_names[i]))
			return (enum up_image_builder)i;
	return _UP_IMAGE_BUILDER_INVALID;
}
