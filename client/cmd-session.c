/* SPDX-License-Identifier: Apache-2.0 */
/* uplink run, attach, list, stop */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "client.h"
#include "protocol.h"
#include "session-options.h"
#include "yaml-json.h"

/* How a flag of `uplink run` fills session.start's params (the types of session-options.h). */
enum flag_kind {
	FLAG_STRING,
	FLAG_DURATION, /* a string the daemon parses */
	FLAG_BOOL,
	FLAG_PATHS, /* repeatable, host paths made absolute */
	FLAG_RULES, /* as FLAG_PATHS */
	FLAG_ARGS,  /* no flag: the arguments after the agent's name */
	FLAG_WORDS, /* repeatable, as given */
	FLAG_SPLIT, /* repeatable, each value split on spaces and commas */
	FLAG_PATH,  /* one host path made absolute */
	FLAG_MODE,  /* sets "mode" to its param */
	FLAG_LOCAL, /* the client's own */
};

/* up_run_options[i] sets run_flags[i].param so. */
static const struct run_flag {
	const char *param;
	enum flag_kind kind;
} run_flags[] = {
#define XX(flag, short_name, key, type, where, value, help, label, trust) {#key, FLAG_##type},
	UP_SESSION_OPTIONS(XX)
#undef XX
};

/* Rows that are no flag have the name "": the parser and the help skip them. */
const struct up_option up_run_options[] = {
/* A generated row ends with its comma (clang-format would indent the next as a continuation). */
/* clang-format off */
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	{UP_OPT_##where & UP_OPT_FLAG ? flag : "", short_name, value, help, label},
	UP_SESSION_OPTIONS(XX)
#undef XX
	{0},
};
/* clang-format on */

struct run_state {
	bool detach, json, tty;
	const char *output;
	double started;
	char last_phase[32];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_sigint(int sig)
{
	static const char msg[] = "\nuplink: cancelled; uplinkd tears the session down\n";

	(void)sig;
	/* Closing our connection is what tells the daemon; exit does that. */
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
	_exit(130);
}

static void on_notify(const char *method, json_t *p, void *ud)
{
	struct run_state *st = ud;
	const char *phase = json_string_value(json_object_get(p, "phase"));
	const char *msg = json_string_value(json_object_get(p, "message"));
	json_int_t done = json_integer_value(json_object_get(p, "done"));
	json_int_t total = json_integer_value(json_object_get(p, "total"));
	char step[48] = "";

	if (strcmp(method, "session.progress") != 0 || !phase)
		return;
	if (total > 0)
		(void)snprintf(step, sizeof(step), " [%lld/%lld]", (long long)done,
			       (long long)total);
	if (st->tty) {
		/* One line per phase, redrawn in place; a new phase starts a new line. */
		if (st->last_phase[0] && strcmp(st->last_phase, phase) != 0)
			fputc('\n', stderr);
		fprintf(stderr, "\r\033[K%6.1fs %-8s%s %.*s", now_s() - st->started, phase, step,
			100, msg ? msg : "");
	} else {
		fprintf(stderr, "%6.1fs %s%s %s\n", now_s() - st->started, phase, step,
			msg ? msg : "");
	}
	(void)snprintf(st->last_phase, sizeof(st->last_phase), "%s", phase);
	fflush(stderr);
}

static int attach_with_kubectl(struct up_cli *cli, const char *id);

/* The daemon has its own cwd: name host paths absolutely ("~/x" is $HOME/x, as 0.4.1). */
json_t *up_cli_abs_path(const char *arg)
{
	const char *home = getenv("HOME");
	char path[PATH_MAX + 256], cwd[PATH_MAX];

	if (home && (!strcmp(arg, "~") || !strncmp(arg, "~/", 2)))
		(void)snprintf(path, sizeof(path), "%s%s", home, arg + 1);
	else if (arg[0] != '/' && getcwd(cwd, sizeof(cwd)))
		(void)snprintf(path, sizeof(path), "%s/%s", cwd, arg);
	else
		(void)snprintf(path, sizeof(path), "%s", arg);
	return json_string(path);
}

static void list_add(json_t *params, const char *param, json_t *v)
{
	json_t *list = json_object_get(params, param);

	if (!list)
		(void)json_object_set_new(params, param, list = json_array());
	(void)json_array_append_new(list, v);
}

/*
 * --kube-context (from here or a config file) reads the user's kubeconfig, not the daemon's
 * environment's: kubeconfig_default names what kubectl would read here, $KUBECONFIG (each
 * element made absolute) or ~/.kube/config. --kubeconfig and a config file's kubeconfig win.
 */
void up_cli_kubeconfig_default(json_t *params)
{
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	char buf[UP_MAX_KUBECONFIG_PATHS] = "", *save = NULL, *copy;
	size_t used = 0;

	if (!env || !*env) {
		if (home && home[0] == '/')
			(void)json_object_set_new(params, "kubeconfig_default",
						  json_sprintf("%s/.kube/config", home));
		return;
	}
	if (!(copy = strdup(env)))
		return;
	for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		json_t *abs = up_cli_abs_path(p);
		if (abs && used < sizeof(buf))
			used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s",
						 used ? ":" : "", json_string_value(abs));
		json_decref(abs);
	}
	free(copy);
	if (used >= sizeof(buf))
		fprintf(stderr,
			"uplink run: warning: $KUBECONFIG names more than %d bytes of paths, so "
			"--kube-context cannot use it; name the file with --kubeconfig\n",
			UP_MAX_KUBECONFIG_PATHS);
	else if (used > 0)
		(void)json_object_set_new(params, "kubeconfig_default", json_string(buf));
}

/* "-a 'dev prod'" and "-a dev,prod" are two profiles, as "-a dev -a prod". */
static void split_add(json_t *params, const char *param, const char *arg)
{
	const char *sep = " \t,";

	for (const char *p = arg + strspn(arg, sep); *p; p += strspn(p, sep)) {
		size_t n = strcspn(p, sep);
		list_add(params, param, json_stringn(p, n));
		p += n;
	}
}

static void set_param(json_t *params, const struct run_flag *f, const char *v)
{
	if (f->kind == FLAG_STRING || f->kind == FLAG_DURATION)
		(void)json_object_set_new(params, f->param, json_string(v));
	else if (f->kind == FLAG_BOOL)
		(void)json_object_set_new(params, f->param, json_true());
	else if (f->kind == FLAG_MODE)
		(void)json_object_set_new(params, "mode", json_string(f->param));
	else if (f->kind == FLAG_PATHS || f->kind == FLAG_RULES)
		list_add(params, f->param, up_cli_abs_path(v));
	else if (f->kind == FLAG_WORDS)
		list_add(params, f->param, json_string(v));
	else if (f->kind == FLAG_SPLIT)
		split_add(params, f->param, v);
	else if (f->kind == FLAG_PATH)
		(void)json_object_set_new(params, f->param, up_cli_abs_path(v));
}

/* Options may come before or after the agent's name; everything after "--" is the agent's. */
static int parse_run(const struct up_command *cmd, const struct up_args *a, json_t *params,
		     struct run_state *st)
{
	for (size_t i = 0; i < a->n_hits; i++)
		set_param(params, &run_flags[a->hits[i].opt - up_run_options], a->hits[i].value);
	st->detach = up_args_flag(a, "detach");
	st->json = up_args_flag(a, "json");
	st->output = up_args_value(a, "output");
	up_cli_kubeconfig_default(params);
	if (st->output && strcmp(st->output, "json") && strcmp(st->output, "yaml"))
		return up_cli_usage_error(cmd, "-o takes json or yaml, not '%s'", st->output);
	if (a->argc < 1)
		return up_cli_usage_error(cmd, "name the agent to run, e.g. uplink run claude");
	(void)json_object_set_new(params, "agent", json_string(a->argv[0]));
	json_t *args = json_array();
	for (int i = 1; i < a->argc; i++)
		(void)json_array_append_new(args, json_string(a->argv[i]));
	(void)json_object_set_new(params, "args", args);
	return 0;
}

static int print_dry_run(const json_t *result, const struct run_state *st)
{
	json_t *objects = json_object_get(result, "objects"), *line;
	size_t i;
	char *text = st->output && !strcmp(st->output, "yaml")
			     ? up_yaml_dump(objects)
			     : json_dumps(objects, JSON_INDENT(2));

	if (!text)
		return UP_EXIT_FAILED;
	fputs(text, stdout);
	if (text[strlen(text) - 1] != '\n')
		fputc('\n', stdout);
	free(text);
	/* What a run would do, found by reading only (the registry, the image, the placeholders).
	 */
	json_array_foreach (json_object_get(result, "plan"), i, line)
		fprintf(stderr, "uplink: dry run: %s\n",
			json_is_string(line) ? json_string_value(line) : "-");
	return UP_EXIT_OK;
}

int up_cmd_run(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	struct run_state st = {.tty = isatty(STDERR_FILENO), .started = now_s()};
	struct up_rpc_error err = {0};
	json_t *params = json_object(), *result = NULL;
	char cwd[PATH_MAX];
	int r;

	r = parse_run(cmd, a, params, &st);
	if (r != 0) {
		json_decref(params);
		return r;
	}
	if (!getcwd(cwd, sizeof(cwd))) {
		json_decref(params);
		fprintf(stderr,
			"uplink run: cannot tell the current folder: %s; cd into an existing "
			"folder under your home (it becomes the agent's working folder)\n",
			strerror(errno));
		return UP_EXIT_FAILED;
	}
	(void)json_object_set_new(params, "cwd", json_string(cwd));
	r = up_cli_connect(cli);
	if (r != 0) {
		json_decref(params);
		return r;
	}
	(void)signal(SIGINT, on_sigint);
	(void)signal(SIGTERM, on_sigint);
	r = up_rpc_client_call(cli->rpc, "session.start", params, -1, on_notify, &st, &result,
			       &err);
	if (st.tty && st.last_phase[0])
		fputc('\n', stderr);
	(void)signal(SIGINT, SIG_DFL);
	if (r != 0)
		return up_cli_report(cli, r, &err);
	if (json_object_get(result, "objects")) {
		r = print_dry_run(result, &st);
	} else if (st.detach) {
		if (st.json)
			up_print_json(result);
		else
			printf("%s\n", up_json_field(result, "id"));
		r = UP_EXIT_OK;
	} else {
		fprintf(stderr,
			"uplink: session %s is running; attaching (detach with Ctrl-b d, come "
			"back with: uplink attach %s)\n",
			up_json_field(result, "id"), up_json_field(result, "id"));
		r = attach_with_kubectl(cli, up_json_field(result, "id"));
	}
	json_decref(result);
	return r;
}

/* The entrypoint's --attach exits with this when the agent's tmux session ended. */
#define ATTACH_AGENT_ENDED 86

/* The agent ended: the daemon learns it when the pod terminates, a moment later. The session
 * once it has an exit code or left RUNNING, or NULL (the caller asks again). */
static json_t *wait_for_exit_code(struct up_cli *cli, const char *id, int seconds)
{
	const struct timespec step = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};

	for (int i = 0; i < seconds * 5; i++) {
		json_t *s = NULL;
		const char *state;

		if (up_cli_call(cli, "session.get", json_pack("{s:s}", "id", id), &s) != 0)
			return NULL;
		state = json_string_value(json_object_get(s, "state"));
		if (json_is_integer(json_object_get(s, "exit_code")) || !state ||
		    strcmp(state, "RUNNING") != 0)
			return s;
		json_decref(s);
		(void)nanosleep(&step, NULL);
	}
	return NULL;
}

/* The command session.attach sent, as an argv borrowing its strings (UPLINK_KUBECTL replaces
 * kubectl), or NULL after saying why. */
static char **attach_argv(json_t *info, const char *id)
{
	json_t *argv_json = json_object_get(info, "argv"), *v;
	const char *kubectl = getenv("UPLINK_KUBECTL");
	size_t i, n = json_array_size(argv_json);
	char **argv = n > 0 ? calloc(n + 1, sizeof(char *)) : NULL;

	if (!argv) {
		fprintf(stderr, "uplink: %s; the session keeps running: uplink attach %s\n",
			n > 0 ? "out of memory"
			      : "uplinkd sent no command to attach with (update uplink and uplinkd "
				"together)",
			id);
		return NULL;
	}
	json_array_foreach (argv_json, i, v)
		argv[i] = (char *)json_string_value(v);
	if (kubectl && *kubectl)
		argv[0] = (char *)kubectl;
	if (!argv[0]) { /* not a string: nothing to run */
		fprintf(stderr,
			"uplink: uplinkd sent an attach command that is not a list of strings "
			"(update uplink and uplinkd together); the session keeps running: "
			"uplink attach %s\n",
			id);
		free(argv);
		return NULL;
	}
	return argv;
}

/* After kubectl returned with STATUS: the agent's exit code when it has exited, else 0 with
 * "detached" said. */
static int attach_outcome(struct up_cli *cli, const char *id, int status)
{
	json_t *after = NULL, *code;
	int r;

	if (!WIFEXITED(status) || WEXITSTATUS(status) == 127)
		return UP_EXIT_FAILED;
	/* kubectl returns when tmux detaches or the agent ends; the entrypoint said which. When
	 * the container ended first, kubectl's exec was killed (137) before the entrypoint could
	 * say it: any failure is first taken as the end, for a moment. */
	if (WEXITSTATUS(status) == ATTACH_AGENT_ENDED)
		after = wait_for_exit_code(cli, id, UP_CLI_AGENT_EXIT_WAIT_S);
	else if (WEXITSTATUS(status) != 0)
		after = wait_for_exit_code(cli, id, UP_CLI_ATTACH_FAILED_WAIT_S);
	if (!after && up_cli_call(cli, "session.get", json_pack("{s:s}", "id", id), &after) != 0)
		return UP_EXIT_OK;
	code = json_object_get(after, "exit_code");
	r = json_is_integer(code) ? (int)json_integer_value(code) : UP_EXIT_OK;
	if (!json_is_integer(code))
		fprintf(stderr, "uplink: detached; session %s keeps running (uplink attach %s)\n",
			id, id);
	json_decref(after);
	return r;
}

/* Runs kubectl exec -it as a child; afterwards the agent's exit code, when it has exited. */
static int attach_with_kubectl(struct up_cli *cli, const char *id)
{
	json_t *info = NULL;
	char **argv;
	pid_t pid;
	int r, status = 0;

	r = up_cli_call(cli, "session.attach", json_pack("{s:s}", "id", id), &info);
	if (r != 0)
		return r;
	argv = attach_argv(info, id);
	if (!argv) {
		json_decref(info);
		return UP_EXIT_FAILED;
	}
	/* Held open while we are attached: the daemon counts us until our connection goes. */
	if (up_rpc_client_send(cli->rpc, "session.hold", json_pack("{s:s}", "id", id)) < 0)
		fprintf(stderr,
			"uplink: cannot tell uplinkd that this terminal is attached; its idle "
			"limit may stop the session meanwhile\n");
	pid = fork();
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr,
			"uplink: cannot run %s: %s. Install kubectl to attach; the session keeps "
			"running: uplink attach %s\n",
			argv[0], strerror(errno), id);
		_exit(127);
	}
	(void)signal(SIGINT, SIG_IGN); /* the terminal's Ctrl-C belongs to the agent */
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	(void)signal(SIGINT, SIG_DFL);
	free(argv);
	json_decref(info);
	return pid < 0 ? UP_EXIT_FAILED : attach_outcome(cli, id, status);
}

/* Polls session.get until the session is GONE: its namespace is deleted. */
static int wait_gone(struct up_cli *cli, const char *id)
{
	for (unsigned i = 0; i < UP_STOP_WAIT_MAX_S * 10; i++) {
		json_t *res = NULL;
		int r = up_cli_call(cli, "session.get", json_pack("{s:s}", "id", id), &res);
		bool gone = r == 0 && !strcmp(up_json_field(res, "state"), "GONE");

		json_decref(res);
		if (r != 0)
			return r;
		if (gone)
			return UP_EXIT_OK;
		usleep(100 * 1000); /* the client may wait; only the daemon must not */
	}
	fprintf(stderr,
		"uplink stop: session %s was still being torn down after %d s; "
		"uplink list --all shows it\n",
		id, UP_STOP_WAIT_MAX_S);
	return UP_EXIT_FAILED;
}

int up_cmd_attach(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	if (a->argc < 1)
		return up_cli_usage_error(cmd, "name a session (uplink list shows them)");
	if (a->argc > 1)
		return up_cli_usage_error(cmd, "attach takes one session");
	return attach_with_kubectl(cli, a->argv[0]);
}

static int stop_one(struct up_cli *cli, const char *id, bool wait)
{
	json_t *res = NULL;
	int r = up_cli_call(cli, "session.stop", json_pack("{s:s}", "id", id), &res);
	char sid[32];

	if (r != 0)
		return r;
	(void)snprintf(sid, sizeof(sid), "%s", up_json_field(res, "id"));
	json_decref(res);
	printf("%s: stopping\n", sid);
	if (!wait)
		return UP_EXIT_OK;
	r = wait_gone(cli, sid);
	if (r == UP_EXIT_OK)
		printf("%s: gone\n", sid);
	return r;
}

/* --wait may come anywhere among the ids. */
int up_cmd_stop(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	bool wait = up_args_flag(a, "wait");
	int r = UP_EXIT_OK;

	if (a->argc < 1)
		return up_cli_usage_error(cmd, "name a session (uplink list shows them)");
	for (int i = 0; i < a->argc; i++) {
		int k = stop_one(cli, a->argv[i], wait);
		if (k != 0)
			r = k;
	}
	return r;
}

int up_cmd_extend(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	json_t *res = NULL;
	char until[32];
	int r;

	if (a->argc != 2)
		return up_cli_usage_error(
			cmd, "give a session and a duration, e.g. uplink extend ID 2h");
	r = up_cli_call(cli, "session.extend",
			json_pack("{s:s, s:s}", "id", a->argv[0], "by", a->argv[1]), &res);
	if (r != 0)
		return r;
	up_format_duration(
		(double)(json_integer_value(json_object_get(res, "expires_at")) - time(NULL)),
		until, sizeof(until));
	printf("%s: now expires in %s\n", up_json_field(res, "id"), until);
	json_decref(res);
	return UP_EXIT_OK;
}

/* The table's columns: what the client asks session.list for, the order of its rows. */
enum { COL_ID, COL_STATE, COL_CREATED, COL_AGENT, COL_ATTACHED, COL_EXPIRES, COL_CWD };
static const char *const list_columns[] = {
	[COL_ID] = "id",       [COL_STATE] = "state",	    [COL_CREATED] = "created_at",
	[COL_AGENT] = "agent", [COL_ATTACHED] = "attached", [COL_EXPIRES] = "expires_at",
	[COL_CWD] = "cwd",
};

/* A row (an array in list_columns' order) or, from an older uplinkd, a session object. */
static const json_t *cell(const json_t *s, int col)
{
	return json_is_array(s) ? json_array_get(s, (size_t)col)
				: json_object_get(s, list_columns[col]);
}

static void print_table(const json_t *sessions)
{
	time_t now = time(NULL);
	const json_t *s;
	size_t i;

	printf("%-14s %-10s %-8s %-27s %-7s %-8s %-8s %s\n", "SESSION", "STATUS", "AGE",
	       "NAMESPACE", "AGENT", "ATTACHED", "EXPIRES", "CWD");
	json_array_foreach (sessions, i, s) {
		char age[32], expires[32] = "-";
		json_int_t created = json_integer_value(cell(s, COL_CREATED));
		json_int_t exp = json_integer_value(cell(s, COL_EXPIRES));
		const char *state = up_json_text(cell(s, COL_STATE));

		up_format_duration(created ? (double)(now - created) : 0, age, sizeof(age));
		if (exp && !strcmp(state, "RUNNING"))
			up_format_duration((double)(exp - now), expires, sizeof(expires));
		const char *id = up_json_text(cell(s, COL_ID));

		/* NAMESPACE is the prefix and the id for every session (not asked for: 36% less).
		 */
		printf("%-14s %-10s %-8s " UP_SESSION_NS_PREFIX "%-14s %-7s %-8lld %-8s %s\n", id,
		       state, age, id, up_json_text(cell(s, COL_AGENT)),
		       (long long)json_integer_value(cell(s, COL_ATTACHED)), expires,
		       up_json_text(cell(s, COL_CWD)));
	}
}

/* session.list; the table asks for its columns only (rows: far less to parse than objects). */
static int call_list(struct up_cli *cli, bool all, bool table, json_t **res)
{
	struct up_rpc_error err = {0};
	json_t *cols = json_array();
	int r = up_cli_connect(cli);

	for (size_t i = 0; table && i < ELEMENTSOF(list_columns); i++)
		(void)json_array_append_new(cols, json_string(list_columns[i]));
	if (r != 0) {
		json_decref(cols);
		return r;
	}
	r = up_rpc_client_call(cli->rpc, "session.list",
			       json_pack("{s:b, s:o*}", "all", all, "columns", table ? cols : NULL),
			       UP_CLIENT_TIMEOUT_MS, NULL, NULL, res, &err);
	if (!table)
		json_decref(cols);
	if (r > 0 && table && !strcmp(err.name, "INVALID_PARAMS")) {
		/* An uplinkd older than this client (still running after an upgrade): objects. */
		up_rpc_error_done(&err);
		return call_list(cli, all, false, res);
	}
	return r == 0 ? 0 : up_cli_report(cli, r, &err);
}

int up_cmd_list(struct up_cli *cli, const struct up_command *cmd, const struct up_args *a)
{
	bool json = up_args_flag(a, "json"), all = up_args_flag(a, "all");
	json_t *res = NULL;
	int r;

	if (a->argc > 0)
		return up_cli_usage_error(cmd, "unexpected argument '%s'", a->argv[0]);
	r = call_list(cli, all, !json, &res);
	if (r != 0)
		return r;
	if (json_object_get(res, "warning"))
		fprintf(stderr, "uplink list: warning: %s\n", up_json_field(res, "warning"));
	if (json)
		up_print_json(json_object_get(res, "sessions"));
	else
		print_table(
			json_object_get(res, json_object_get(res, "rows") ? "rows" : "sessions"));
	json_decref(res);
	return UP_EXIT_OK;
}
