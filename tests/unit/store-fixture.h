/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the store's unit tests share: a store in a fresh folder below /tmp, a valid record,
 * files read and written by hand, and the broken records up_record_check() refuses.
 * Include after <cmocka.h>.
 */
#pragma once

#include <dirent.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bounds.h"
#include "store.h"

#define NOW   1700000000 /* 2023-11-14T22:13:20Z */
#define STAMP "20231114T221320Z"
#define ID    "0123456789ab"
#define ID2   "ba9876543210"

struct fixture {
	char base[64];
	char sessions[128];
	struct up_store *store;
};

static inline int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

static inline int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char tmp[] = "/tmp/test-store-XXXXXX";

	assert_non_null(f);
	assert_non_null(mkdtemp(tmp));
	/* Below a folder that does not exist yet: the store makes it. */
	(void)snprintf(f->base, sizeof(f->base), "%s/state/uplink", tmp);
	(void)snprintf(f->sessions, sizeof(f->sessions), "%s/sessions", f->base);
	assert_int_equal(up_store_new(f->base, &f->store), 0);
	*state = f;
	return 0;
}

static inline int teardown(void **state)
{
	struct fixture *f = *state;
	char top[64];

	(void)snprintf(top, sizeof(top), "%.22s", f->base);
	(void)nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	up_store_free(f->store);
	free(f);
	return 0;
}

static inline json_t *record(const char *id)
{
	json_t *rec = up_record_new(id, "claude", "anthropic", "/home/u/project", "local-k8s-admin",
				    NOW, 24 * 3600, 4 * 3600);

	assert_non_null(rec);
	return rec;
}

static inline void path_of(const struct fixture *f, const char *name, char *buf, size_t len)
{
	(void)snprintf(buf, len, "%s/%s", f->sessions, name);
}

static inline void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_true(fputs(text, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
}

static inline char *read_text(const char *path)
{
	static char buf[UP_MAX_RECORD_SIZE * 2];
	FILE *fp = fopen(path, "r");
	size_t n;

	assert_non_null(fp);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	(void)fclose(fp);
	return buf;
}

static inline int mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return (int)(st.st_mode & 07777);
}

static inline bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Names in the sessions folder that start with '.', other than . and .. */
static inline int hidden_files(const struct fixture *f)
{
	DIR *d = opendir(f->sessions);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	(void)closedir(d);
	return n;
}

static inline void load(struct fixture *f, json_t **records, json_t **problems)
{
	char err[512] = "";

	assert_int_equal(up_store_load(f->store, NOW, records, problems, err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

static inline void save(struct fixture *f, const json_t *rec)
{
	char err[512] = "";

	assert_int_equal(up_store_save(f->store, rec, err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

/* Each broken record and the sentence up_record_check() gives for it. */
static const struct {
	const char *key;
	const char *json; /* the value set, or NULL: the key removed */
	const char *why;
} broken[] = {
	{"cwd", NULL, "it lacks the key 'cwd'"},
	{"exit_code", NULL, "it lacks the key 'exit_code'"},
	{"created_at", "\"yesterday\"", "its 'created_at' is not an integer"},
	{"exit_code", "\"3\"", "its 'exit_code' is not an integer or null"},
	{"agent", "\"\"", "its 'agent' is empty"},
	{"state", "\"SLEEPING\"", "its state 'SLEEPING' is not a session state"},
	{"state", "\"running\"", "its state 'running' is not a session state"},
	{"version", "0", "its version 0 is not 1"},
	{"id", "\"ZZZ\"", "its id 'ZZZ' is not 12 lowercase hex digits"},
	{"namespace", "\"default\"", "its namespace 'default' is not 'agent-uplink-" ID "'"},
	{"idle_timeout", "-1", "its idle_timeout is negative"},
	{"exit_code", "4294967296", "its exit_code 4294967296 is out of range"},
	{"mode", "null", "its 'mode' is not a string"},
	/* The optional keys of a running session's renewals: checked only when present. */
	{"aws_profiles", "\"dev\"", "its 'aws_profiles' is not an array of at most 32 names"},
	{"aws_profiles", "[\"dev\", \"\"]", "its 'aws_profiles' holds something not a name"},
	{"aws_profiles", "[3]", "its 'aws_profiles' holds something not a name"},
	{"aws_expires_at", "-5", "its 'aws_expires_at' is not a non-negative integer"},
	{"login_expires_at", "\"soon\"", "its 'login_expires_at' is not a non-negative integer"},
	{"exec_refresh_s", "1.5", "its 'exec_refresh_s' is not a non-negative integer"},
};

static inline json_t *broken_record(size_t i)
{
	json_t *rec = record(ID);

	if (broken[i].json)
		assert_int_equal(
			json_object_set_new(rec, broken[i].key,
					    json_loads(broken[i].json, JSON_DECODE_ANY, NULL)),
			0);
	else
		assert_int_equal(json_object_del(rec, broken[i].key), 0);
	return rec;
}
