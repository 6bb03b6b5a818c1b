/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "bounds.h"
#include "store.h"
#include "knobs.h"
#include "store-fixture.h"

static void test_round_trip(void **state)
{
	struct fixture *f = *state;
	json_t *a = record(ID), *b = record(ID2), *records, *problems;
	char path[256], text[64];

	assert_int_equal(up_record_set_state(b, UP_SESSION_STOPPED, "stopped by the user", NOW), 0);
	assert_int_equal(up_record_set_exit_code(b, 3, NOW), 0);
	save(f, a);
	save(f, b);
	assert_int_equal(mode_of(f->base), 0700);
	assert_int_equal(mode_of(f->sessions), 0700);
	path_of(f, ID ".json", path, sizeof(path));
	assert_int_equal(mode_of(path), 0600);
	/* Indented JSON, one newline at the end. */
	const char *on_disk = read_text(path);
	assert_true(strncmp(on_disk, "{\n  \"version\": 1,\n  \"id\": \"" ID "\",", 28) == 0);
	assert_int_equal(on_disk[strlen(on_disk) - 1], '\n');
	assert_int_equal(on_disk[strlen(on_disk) - 2], '}');
	assert_int_equal(hidden_files(f), 0);

	load(f, &records, &problems);
	assert_int_equal(json_array_size(problems), 0);
	assert_int_equal(json_object_size(records), 2);
	assert_true(json_equal(json_object_get(records, ID), a));
	assert_true(json_equal(json_object_get(records, ID2), b));

	/* A second save replaces the first. */
	assert_int_equal(up_record_set_state(a, UP_SESSION_DEPLOYING, NULL, NOW + 1), 0);
	save(f, a);
	json_decref(records);
	json_decref(problems);
	load(f, &records, &problems);
	assert_int_equal(up_record_state(json_object_get(records, ID)), UP_SESSION_DEPLOYING);
	assert_int_equal(up_store_session_dir(f->store, ID, path, sizeof(path)), 0);
	(void)snprintf(text, sizeof(text), "/sessions/%s", ID);
	assert_non_null(strstr(path, text));
	assert_int_equal(up_store_session_dir(f->store, "../x", path, sizeof(path)), -EINVAL);
	json_decref(records);
	json_decref(problems);
	json_decref(a);
	json_decref(b);
}

static void test_save_refuses(void **state)
{
	struct fixture *f = *state;
	json_t *rec = broken_record(0);
	char err[512], big[UP_MAX_RECORD_SIZE], path[256];

	assert_int_equal(up_store_save(f->store, rec, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "refusing to save a session record: it lacks the key 'cwd'");
	json_decref(rec);

	rec = record(ID);
	memset(big, 'x', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(json_object_set_new(rec, "cwd", json_string(big)), 0);
	assert_int_equal(up_store_save(f->store, rec, err, sizeof(err)), -EFBIG);
	assert_string_equal(err, "refusing to save the session record " ID ": it is larger than "
				 "65536 bytes");
	path_of(f, ID ".json", path, sizeof(path));
	assert_false(exists(path));
	json_decref(rec);
}

/* A crash before the rename leaves a temp file and the old record; the load keeps the old. */
static void test_crash_before_rename(void **state)
{
	struct fixture *f = *state;
	json_t *rec = record(ID), *newer, *records, *problems;
	char path[256], *text;

	assert_int_equal(up_record_set_state(rec, UP_SESSION_BUILDING, NULL, NOW), 0);
	save(f, rec);
	newer = json_deep_copy(rec);
	assert_int_equal(up_record_set_state(newer, UP_SESSION_FAILED, "half written", NOW), 0);
	text = json_dumps(newer, 0);
	path_of(f, "." ID ".json.Xy12Zq", path, sizeof(path));
	write_file(path, text);
	free(text);
	/* A torn write of a brand-new record: only a temp file, no record. */
	path_of(f, "." ID2 ".json.AAAAAA", path, sizeof(path));
	write_file(path, "{\"version\": 1, \"id\": \"");
	assert_int_equal(hidden_files(f), 2);

	load(f, &records, &problems);
	assert_int_equal(json_array_size(problems), 0);
	assert_int_equal(json_object_size(records), 1);
	assert_true(json_equal(json_object_get(records, ID), rec));
	assert_int_equal(hidden_files(f), 0);
	json_decref(records);
	json_decref(problems);
	json_decref(newer);
	json_decref(rec);
}

static void expect_problem(json_t *problems, size_t i, const char *path, const char *why,
			   const char *moved)
{
	json_t *p = json_array_get(problems, i);
	char want[1024];

	assert_non_null(p);
	assert_string_equal(json_string_value(json_object_get(p, "file")), path);
	if (moved) {
		assert_string_equal(json_string_value(json_object_get(p, "moved_to")), moved);
		(void)snprintf(want, sizeof(want), "%s: %s; it was moved to %s", path, why, moved);
	} else {
		assert_true(json_is_null(json_object_get(p, "moved_to")));
		(void)snprintf(want, sizeof(want), "%s: %s", path, why);
	}
	assert_string_equal(json_string_value(json_object_get(p, "problem")), want);
}

static void test_corrupt_moved_aside(void **state)
{
	struct fixture *f = *state;
	json_t *records, *problems, *good = record(ID2);
	char path[256], moved[256], big[UP_MAX_RECORD_SIZE + 2];
	char *text = json_dumps(good, 0);
	static const struct {
		const char *name, *text, *why;
	} cases[] = {
		/* In the order the load sees them: sorted by name. */
		{"000000000001.json", "{\"version\": 1, \"id\":",
		 "it is not valid JSON: "
		 "unexpected token near end of file at line 1, column 20"},
		{"000000000002.json", "[]", "it is not a JSON object"},
		{"000000000003.json", NULL,
		 "it holds id '" ID2 "', but its file is named "
		 "'000000000003.json'"},
		{"000000000004.json", "",
		 "it is not valid JSON: '[' or '{' expected near end of file "
		 "at line 1, column 0"},
		{"Session.json", "{}",
		 "its name is not a session id (12 lowercase hex digits) "
		 "followed by .json"},
	};

	assert_int_equal(up_store_load(f->store, NOW, &records, &problems, big, 64), 0);
	json_decref(records);
	json_decref(problems);
	save(f, good);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		path_of(f, cases[i].name, path, sizeof(path));
		write_file(path, cases[i].text ? cases[i].text : text);
	}
	load(f, &records, &problems);
	assert_int_equal(json_object_size(records), 1);
	assert_true(json_equal(json_object_get(records, ID2), good));
	assert_int_equal(json_array_size(problems), sizeof(cases) / sizeof(cases[0]));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		path_of(f, cases[i].name, path, sizeof(path));
		(void)snprintf(moved, sizeof(moved), "%s/corrupt/%s." STAMP, f->sessions,
			       cases[i].name);
		expect_problem(problems, i, path, cases[i].why, moved);
		assert_false(exists(path));
		assert_string_equal(read_text(moved), cases[i].text ? cases[i].text : text);
	}
	assert_int_equal(mode_of(f->sessions), 0700);
	(void)snprintf(moved, sizeof(moved), "%s/corrupt", f->sessions);
	assert_int_equal(mode_of(moved), 0700);
	json_decref(records);
	json_decref(problems);

	/* The same name broken again, in the same second: a second file beside the first. */
	path_of(f, "000000000002.json", path, sizeof(path));
	write_file(path, "42");
	load(f, &records, &problems);
	(void)snprintf(moved, sizeof(moved), "%s/corrupt/000000000002.json." STAMP ".1",
		       f->sessions);
	expect_problem(problems, 0, path,
		       "it is not valid JSON: '[' or '{' expected near '42' at "
		       "line 1, column 2",
		       moved);
	json_decref(records);
	json_decref(problems);

	/* Too large, a link, a folder. */
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	path_of(f, "00000000000a.json", path, sizeof(path));
	write_file(path, big);
	path_of(f, "00000000000b.json", path, sizeof(path));
	assert_int_equal(symlink("/etc/passwd", path), 0);
	path_of(f, "00000000000c.json", path, sizeof(path));
	assert_int_equal(mkdir(path, 0700), 0);
	load(f, &records, &problems);
	assert_int_equal(json_object_size(records), 1);
	assert_int_equal(json_array_size(problems), 3);
	static const char *const why[] = {"it is larger than 65536 bytes", "it is a symbolic link",
					  "it is not a regular file"};
	for (size_t i = 0; i < 3; i++) {
		char name[32];
		(void)snprintf(name, sizeof(name), "00000000000%c.json", (int)('a' + i));
		path_of(f, name, path, sizeof(path));
		(void)snprintf(moved, sizeof(moved), "%s/corrupt/%s." STAMP, f->sessions, name);
		expect_problem(problems, i, path, why[i], moved);
		assert_true(exists(moved));
	}
	json_decref(records);
	json_decref(problems);
	free(text);
	json_decref(good);
}

static void test_corrupt_fields(void **state)
{
	struct fixture *f = *state;
	json_t *records, *problems;
	char path[256], moved[256];

	load(f, &records, &problems);
	json_decref(records);
	json_decref(problems);
	path_of(f, ID ".json", path, sizeof(path));
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		json_t *rec = broken_record(i);
		char *text = json_dumps(rec, 0);

		write_file(path, text);
		load(f, &records, &problems);
		assert_int_equal(json_object_size(records), 0);
		/* Same name, same second: .1, .2, ... after the first. */
		if (i == 0)
			(void)snprintf(moved, sizeof(moved), "%s/corrupt/" ID ".json." STAMP,
				       f->sessions);
		else
			(void)snprintf(moved, sizeof(moved), "%s/corrupt/" ID ".json." STAMP ".%zu",
				       f->sessions, i);
		expect_problem(problems, 0, path, broken[i].why, moved);
		assert_string_equal(read_text(moved), text);
		json_decref(records);
		json_decref(problems);
		free(text);
		json_decref(rec);
	}
}

/* A newer uplinkd's record is reported and left alone, not moved. */
static void test_newer_version_stays(void **state)
{
	struct fixture *f = *state;
	json_t *records, *problems;
	char path[256];

	load(f, &records, &problems);
	json_decref(records);
	json_decref(problems);
	path_of(f, ID ".json", path, sizeof(path));
	write_file(path, "{\"version\": 2, \"id\": \"" ID "\", \"shape\": \"new\"}");
	load(f, &records, &problems);
	assert_int_equal(json_object_size(records), 0);
	expect_problem(problems, 0, path,
		       "its version 2 is newer than this uplinkd reads (1); it "
		       "was left in place",
		       NULL);
	assert_true(exists(path));
	json_decref(records);
	json_decref(problems);
}

static void test_permissions(void **state)
{
	struct fixture *f = *state;
	json_t *records, *problems, *rec = record(ID);
	char err[512], want[512], path[256];

	save(f, rec);
	assert_int_equal(chmod(f->base, 0755), 0);
	assert_int_equal(chmod(f->sessions, 0750), 0);
	load(f, &records, &problems);
	assert_int_equal(json_object_size(records), 1);
	assert_int_equal(json_array_size(problems), 2);
	expect_problem(problems, 0, f->base,
		       "it was mode 0755, open to other users; it is now 0700", NULL);
	expect_problem(problems, 1, f->sessions,
		       "it was mode 0750, open to other users; it is now 0700", NULL);
	assert_int_equal(mode_of(f->base), 0700);
	assert_int_equal(mode_of(f->sessions), 0700);
	json_decref(records);
	json_decref(problems);

	/* A folder of another user's: refused, whole. */
	if (geteuid() == 0) {
		assert_int_equal(chown(f->sessions, 65534, 65534), 0);
		assert_int_equal(
			up_store_load(f->store, NOW, &records, &problems, err, sizeof(err)),
			-EPERM);
		(void)snprintf(want, sizeof(want),
			       "the folder %s belongs to uid 65534, not to uid 0 "
			       "that uplinkd runs as; fix it with: chown 0 %s",
			       f->sessions, f->sessions);
		assert_string_equal(err, want);
		assert_int_equal(up_store_save(f->store, rec, err, sizeof(err)), -EPERM);
		assert_string_equal(err, want);
		assert_int_equal(chown(f->sessions, 0, 0), 0);
	} else {
		/* Unreadable record: moved aside (root reads it anyway, so only as a user). */
		path_of(f, ID ".json", path, sizeof(path));
		assert_int_equal(chmod(path, 0), 0);
		load(f, &records, &problems);
		assert_int_equal(json_object_size(records), 0);
		(void)snprintf(want, sizeof(want), "%s/corrupt/" ID ".json." STAMP, f->sessions);
		expect_problem(problems, 0, path, "it cannot be read: Permission denied", want);
		json_decref(records);
		json_decref(problems);
	}

	/* The sessions "folder" is a file. */
	assert_int_equal(rename(f->sessions, "/tmp/test-store-moved-away"), 0);
	write_file(f->sessions, "");
	assert_int_equal(up_store_load(f->store, NOW, &records, &problems, err, sizeof(err)),
			 -ENOTDIR);
	(void)snprintf(want, sizeof(want), "%s is not a folder; move it away", f->sessions);
	assert_string_equal(err, want);
	assert_int_equal(up_store_save(f->store, rec, err, sizeof(err)), -ENOTDIR);
	assert_int_equal(unlink(f->sessions), 0);
	assert_int_equal(rename("/tmp/test-store-moved-away", f->sessions), 0);
	json_decref(rec);
}

static void test_max_records(void **state)
{
	struct fixture *f = *state;
	json_t *records, *problems, *rec = record(ID);
	char path[256], id[16], want[256];

	load(f, &records, &problems);
	json_decref(records);
	json_decref(problems);
	for (int i = 0; i <= UP_MAX_RECORDS; i++) {
		(void)snprintf(id, sizeof(id), "%012x", i);
		json_object_set_new(rec, "id", json_string(id));
		(void)snprintf(path, sizeof(path), "agent-uplink-%s", id);
		json_object_set_new(rec, "namespace", json_string(path));
		char *text = json_dumps(rec, 0);
		(void)snprintf(path, sizeof(path), "%s/%s.json", f->sessions, id);
		write_file(path, text);
		free(text);
	}
	load(f, &records, &problems);
	assert_int_equal(json_object_size(records), UP_MAX_RECORDS);
	assert_int_equal(json_array_size(problems), 1);
	(void)snprintf(want, sizeof(want),
		       "there are more than %d session records; it was not "
		       "loaded",
		       UP_MAX_RECORDS);
	expect_problem(problems, 0, path, want, NULL);
	assert_true(exists(path));
	json_decref(records);
	json_decref(problems);
	json_decref(rec);
}

static void test_delete(void **state)
{
	struct fixture *f = *state;
	json_t *rec = record(ID);
	char err[512], want[512], path[300], dir[256];

	save(f, rec);
	assert_int_equal(up_store_session_dir(f->store, ID, dir, sizeof(dir)), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	(void)snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	write_file(path, "{}\n");
	assert_int_equal(up_store_delete(f->store, ID, 0, err, sizeof(err)), 0);
	path_of(f, ID ".json", path, sizeof(path));
	assert_false(exists(path));
	assert_true(exists(dir));
	assert_int_equal(up_store_delete(f->store, ID, 0, err, sizeof(err)), -ENOENT);
	(void)snprintf(want, sizeof(want),
		       "cannot remove the session record %s: No such file or "
		       "directory",
		       path);
	assert_string_equal(err, want);
	save(f, rec);
	assert_int_equal(up_store_delete(f->store, ID, UP_STORE_DELETE_FILES, err, sizeof(err)), 0);
	assert_false(exists(path));
	assert_false(exists(dir));
	assert_int_equal(up_store_delete(f->store, "../../x", 0, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'../../x' is not a session id");
	json_decref(rec);
}

static void make_old(const char *path, int64_t when)
{
	struct timespec ts[2] = {{.tv_sec = when}, {.tv_sec = when}};

	assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static void session_folder(struct fixture *f, const char *id, int64_t when)
{
	char dir[256], path[300];

	assert_int_equal(up_store_session_dir(f->store, id, dir, sizeof(dir)), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	(void)snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	write_file(path, "{\"decision\": \"allow\"}\n");
	make_old(dir, when);
}

static void test_prune(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *id;
		enum up_session_state state;
		int64_t updated_at;
		bool pruned;
	} recs[] = {
		{"00000000000a", UP_SESSION_GONE, NOW - 8 * 86400, true},
		{"00000000000b", UP_SESSION_FAILED, NOW - 7 * 86400, true}, /* exactly the age */
		{"00000000000c", UP_SESSION_GONE, NOW - 7 * 86400 + 1, false},
		{"00000000000d", UP_SESSION_RUNNING, NOW - 30 * 86400, false},
		{"00000000000e", UP_SESSION_STARTING, NOW - 30 * 86400, false},
	};
	json_t *removed, *records, *problems;
	char err[512], path[256];

	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		json_t *rec = record(recs[i].id);
		json_object_set_new(rec, "state",
				    json_string(up_session_state_to_name(recs[i].state)));
		json_object_set_new(rec, "updated_at", json_integer(recs[i].updated_at));
		save(f, rec);
		session_folder(f, recs[i].id, NOW - 60 * 86400);
		json_decref(rec);
	}
	session_folder(f, "0000000000f1", NOW - 8 * 86400); /* no record, old: goes */
	session_folder(f, "0000000000f2", NOW - 86400);	    /* no record, recent: stays */
	path_of(f, "corrupt", path, sizeof(path));
	assert_int_equal(mkdir(path, 0700), 0);
	path_of(f, "corrupt/old.json.x", path, sizeof(path));
	write_file(path, "{");
	make_old(path, NOW - 8 * 86400);
	path_of(f, "corrupt/new.json.x", path, sizeof(path));
	write_file(path, "{");
	make_old(path, NOW - 3600);
	path_of(f, "notes.txt", path, sizeof(path));
	write_file(path, "the user's own file");
	make_old(path, NOW - 80 * 86400);

	assert_int_equal(up_store_prune(f->store, NOW, 7 * 86400, &removed, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(removed), 2);
	assert_string_equal(json_string_value(json_array_get(removed, 0)), "00000000000a");
	assert_string_equal(json_string_value(json_array_get(removed, 1)), "00000000000b");
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		char name[32];
		(void)snprintf(name, sizeof(name), "%s.json", recs[i].id);
		path_of(f, name, path, sizeof(path));
		assert_int_equal(exists(path), !recs[i].pruned);
		path_of(f, recs[i].id, path, sizeof(path));
		assert_int_equal(exists(path), !recs[i].pruned);
	}
	path_of(f, "0000000000f1", path, sizeof(path));
	assert_false(exists(path));
	path_of(f, "0000000000f2", path, sizeof(path));
	assert_true(exists(path));
	path_of(f, "corrupt/old.json.x", path, sizeof(path));
	assert_false(exists(path));
	path_of(f, "corrupt/new.json.x", path, sizeof(path));
	assert_true(exists(path));
	path_of(f, "notes.txt", path, sizeof(path));
	assert_true(exists(path));
	json_decref(removed);

	load(f, &records, &problems);
	assert_int_equal(json_object_size(records), 3);
	assert_int_equal(json_array_size(problems), 0);
	json_decref(records);
	json_decref(problems);
}

static void test_prune_nothing_there(void **state)
{
	struct fixture *f = *state;
	json_t *removed;
	char err[256];

	assert_int_equal(up_store_prune(f->store, NOW, 86400, &removed, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(removed), 0);
	json_decref(removed);
}

static void test_default_base(void **state)
{
	struct up_store *s;

	(void)state;
	setenv("XDG_STATE_HOME", "/x/state", 1);
	up_knobs_load();
	assert_int_equal(up_store_new(NULL, &s), 0);
	assert_string_equal(up_store_base(s), "/x/state/uplink");
	assert_string_equal(up_store_sessions_dir(s), "/x/state/uplink/sessions");
	s = up_store_free(s);
	setenv("XDG_STATE_HOME", "relative", 1);
	setenv("HOME", "/home/someone", 1);
	up_knobs_load();
	assert_int_equal(up_store_new(NULL, &s), 0);
	assert_string_equal(up_store_base(s), "/home/someone/.local/state/uplink");
	s = up_store_free(s);
	unsetenv("XDG_STATE_HOME");
	up_knobs_load();
	assert_int_equal(up_store_new(NULL, &s), 0);
	assert_string_equal(up_store_base(s), "/home/someone/.local/state/uplink");
	s = up_store_free(s);
	assert_int_equal(up_store_new("relative/base", &s), -EINVAL);
	assert_null(up_store_free(NULL));
}

struct async {
	uv_loop_t *loop;
	struct up_store *store;
	int calls;
	char log[16][256];
	json_t *loaded;
};

static void note(struct async *a, int r, const char *err, const char *what)
{
	assert_true(a->calls < 16);
	(void)snprintf(a->log[a->calls++], sizeof(a->log[0]), "%s %d %s", what, r, err ? err : "-");
}

static void on_saved(int r, const char *err, json_t *result, void *ud)
{
	assert_null(result);
	note(ud, r, err, "save");
}

static void on_loaded(int r, const char *err, json_t *result, void *ud)
{
	struct async *a = ud;

	note(a, r, err, "load");
	a->loaded = json_incref(result);
}

static void on_deleted(int r, const char *err, json_t *result, void *ud)
{
	note(ud, r, err, "delete");
}

static void on_pruned(int r, const char *err, json_t *result, void *ud)
{
	note(ud, r, err, "prune");
	assert_int_equal(json_array_size(result), 1);
	assert_string_equal(json_string_value(json_array_get(result, 0)), ID);
}

/* The last save's callback queues a load from inside the callback. */
static void on_saved_then_load(int r, const char *err, json_t *result, void *ud)
{
	struct async *a = ud;

	note(a, r, err, "save");
	assert_int_equal(up_store_load_async(a->loop, a->store, NOW, on_loaded, a), 0);
}

static void test_async(void **state)
{
	struct fixture *f = *state;
	struct async a = {0};
	uv_loop_t loop;
	json_t *rec = record(ID), *bad = broken_record(0), *got;
	char path[256];

	assert_int_equal(uv_loop_init(&loop), 0);
	a.loop = &loop;
	a.store = f->store;
	/* Three saves of one record, changed between calls: the last one wins on disk. */
	assert_int_equal(up_store_save_async(&loop, f->store, rec, on_saved, &a), 0);
	assert_int_equal(up_record_set_state(rec, UP_SESSION_BUILDING, NULL, NOW + 1), 0);
	assert_int_equal(up_store_save_async(&loop, f->store, rec, on_saved, &a), 0);
	assert_int_equal(up_record_set_state(rec, UP_SESSION_DEPLOYING, NULL, NOW + 2), 0);
	assert_int_equal(up_store_save_async(&loop, f->store, rec, on_saved_then_load, &a), 0);
	assert_int_equal(up_store_save_async(&loop, f->store, bad, on_saved, &a), 0);
	assert_int_equal(up_store_pending(f->store), 4);
	assert_int_equal(up_store_delete_async(&loop, f->store, "nope", 0, on_deleted, &a),
			 -EINVAL);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(up_store_pending(f->store), 0);
	assert_int_equal(a.calls, 5);
	assert_string_equal(a.log[0], "save 0 -");
	assert_string_equal(a.log[1], "save 0 -");
	assert_string_equal(a.log[2], "save 0 -");
	assert_string_equal(a.log[3], "save -22 refusing to save a session record: it lacks the "
				      "key 'cwd'");
	assert_string_equal(a.log[4], "load 0 -");
	got = json_object_get(json_object_get(a.loaded, "records"), ID);
	assert_true(json_equal(got, rec));
	assert_int_equal(json_array_size(json_object_get(a.loaded, "problems")), 0);
	json_decref(a.loaded);

	/* Prune, delete, delete again: in order, each with its own answer. */
	assert_int_equal(up_record_set_state(rec, UP_SESSION_STOPPED, NULL, NOW - 100), 0);
	assert_int_equal(up_record_set_state(rec, UP_SESSION_TEARDOWN, NULL, NOW - 100), 0);
	assert_int_equal(up_store_save_async(&loop, f->store, rec, on_saved, &a), 0);
	assert_int_equal(up_store_prune_async(&loop, f->store, NOW, 60, on_pruned, &a), 0);
	assert_int_equal(
		up_store_delete_async(&loop, f->store, ID, UP_STORE_DELETE_FILES, on_deleted, &a),
		0);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(a.calls, 8);
	assert_string_equal(a.log[5], "save 0 -");
	assert_string_equal(a.log[6], "prune 0 -");
	path_of(f, ID ".json", path, sizeof(path));
	assert_false(exists(path));
	char want[512];
	(void)snprintf(want, sizeof(want),
		       "delete -2 cannot remove the session record %s: No such "
		       "file or directory",
		       path);
	assert_string_equal(a.log[7], want);
	assert_int_equal(uv_loop_close(&loop), 0);
	json_decref(bad);
	json_decref(rec);
}

/* Many records saved concurrently from the loop: all land, none torn, no temp left. */
static void test_async_many(void **state)
{
	struct fixture *f = *state;
	struct async a = {0};
	json_t *records, *problems;
	uv_loop_t loop;

	assert_int_equal(uv_loop_init(&loop), 0);
	for (int round = 0; round < 3; round++) {
		a.calls = 0;
		for (int i = 0; i < 16; i++) {
			char id[16];
			(void)snprintf(id, sizeof(id), "%012x", i);
			json_t *rec = record(id);
			assert_int_equal(up_store_save_async(&loop, f->store, rec, on_saved, &a),
					 0);
			json_decref(rec);
		}
		assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
		assert_int_equal(a.calls, 16);
		for (int i = 0; i < 16; i++)
			assert_string_equal(a.log[i], "save 0 -");
	}
	assert_int_equal(uv_loop_close(&loop), 0);
	load(f, &records, &problems);
	assert_int_equal(json_object_size(records), 16);
	assert_int_equal(json_array_size(problems), 0);
	assert_int_equal(hidden_files(f), 0);
	json_decref(records);
	json_decref(problems);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_before_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_moved_aside, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_version_stays, setup, teardown),
		cmocka_unit_test_setup_teardown(test_permissions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_nothing_there, setup, teardown),
		cmocka_unit_test_setup_teardown(test_async, setup, teardown),
		cmocka_unit_test_setup_teardown(test_async_many, setup, teardown),
		cmocka_unit_test(test_default_base),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
