/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "protocol.h"

/* Each command's options, in help order (every command also takes -h, --help). Rows and
 * lists several commands share come first. */
/* clang-format off */
#define OPT_JSON_ANSWER {"json", 0, NULL, "print the daemon's answer as JSON", NULL}
#define OPT_KUBECONFIG \
	{"kubeconfig", 0, "PATHS", \
	 "kubeconfig files, ':'-separated (default $KUBECONFIG or\n" "~/.kube/config)", NULL}
/* clang-format on */
/* status, config show */
static const struct up_option json_options[] = {OPT_JSON_ANSWER, {0}};
/* untrust, rules lint: --json, not in the help */
static const struct up_option json_unlisted_options[] = {{"json", 0, NULL, NULL, NULL}, {0}};
static const struct up_option list_options[] = {
	{"all", 'a', NULL, "also sessions that have ended, and foreign namespaces being deleted",
	 "--all"},
	{"json", 0, NULL, "print the same sessions as JSON (foreign ones have \"foreign\": true)",
	 NULL},
	{0},
};
static const struct up_option stop_options[] = {
	{"wait", 0, NULL, "return once each namespace is gone", NULL},
	{0},
};
static const struct up_option clean_options[] = {
	{"all", 0, NULL, "every agent-uplink session namespace", NULL},
	{"older-than", 0, "DURATION", "sessions at least this old (90s, 30m, 2h, 1d)", NULL},
	{"yes", 'y', NULL, "do not ask before deleting", NULL},
	{"wait", 0, NULL, "return once the namespaces are gone", NULL},
	{"deploy-context", 0, "NAME", "the cluster to clean (default: the daemon's)", NULL},
	{0},
};
static const struct up_option logs_options[] = {
	{"follow", 'f', NULL, "keep printing new requests until the session ends", NULL},
	{"denied", 0, NULL, "only refused requests", NULL},
	{"json", 0, NULL, "the raw audit lines", NULL},
	{0},
};
static const struct up_option approve_options[] = {
	{"session", 0, NULL, "also allow what is like it for the rest of the session", NULL},
	{"save", 0, NULL,
	 "as --session, and save the rule to your own rules file\n"
	 "(~/.config/uplink/rules.yaml, which every session loads)",
	 NULL},
	{"save-to", 0, "FILE", "as --save, to FILE (a project's file only once it is trusted)",
	 NULL},
	OPT_JSON_ANSWER,
	{0},
};
static const struct up_option trust_options[] = {
	{"list", 0, NULL, "show the trusted files, each trusted, changed or missing now", NULL},
	OPT_JSON_ANSWER,
	{0},
};
static const struct up_option doctor_options[] = {
	{"deploy-context", 0, "NAME",
	 "the kubeconfig context to deploy to (default local-k8s-admin;\n"
	 "'' for the current-context)",
	 NULL},
	OPT_KUBECONFIG,
	{"agent-runtime-class", 0, "NAME", "the RuntimeClass agent pods use (default kata-clh)",
	 NULL},
	{"json", 0, NULL, "print the checks as JSON", NULL},
	{0},
};
static const struct up_option rules_check_options[] = {
	{"rules", 0, "FILE", "a rules file; repeat for more (earlier files win)", NULL},
	{"no-default-rules", 0, NULL, "keep only kube and user rules", NULL},
	{"allow-exec", 0, NULL, "allow {{exec:CMD}} placeholders to run", NULL},
	{"kube-context", 0, "NAME",
	 "add the kube rule of this kubeconfig context, as uplink run\n"
	 "--kube-context does; repeat for more",
	 NULL},
	OPT_KUBECONFIG,
	OPT_JSON_ANSWER,
	{0},
};
static const struct up_option rules_render_options[] = {
	{"rules", 0, "FILE", NULL, NULL},
	{"no-default-rules", 0, NULL, NULL, NULL},
	{"allow-exec", 0, NULL, NULL, NULL},
	{"show-secrets", 0, NULL, NULL, NULL},
	{0},
};
static const struct up_option rules_suggest_options[] = {
	{"json", 0, NULL, "print the rules, the warnings and what is not covered as JSON", NULL},
	{0},
};
static const struct up_option completion_options[] = {
	{"words", 0, "sessions|agents", "print the words the scripts offer, one a line", NULL},
	{0},
};

const struct up_command up_commands[] = {
	{"run", up_cmd_run,
	 "Start an agent in a microVM pod behind the allow-listing proxy, and attach.",
	 "AGENT [--MODE] [OPTIONS] [-- AGENT-ARGS...]", "",
	 "\n"
	 "Durations: 90s, 30m, 2h, 1d. Ctrl-C before the session runs cancels it (exit 130).\n"
	 "--dry-run: <mitm-cluster-ip> and <ssh-agent-cluster-ip> mark the Services' IPs.\n"
	 "Exit status: the agent's own exit code once attached; 0 when detached.\n",
	 up_run_options, 29},
	{"attach", up_cmd_attach, "Attach this terminal to a running session (several may attach).",
	 "SESSION", "SESSION is the 12-hex id or the namespace name (uplink list shows them).\n",
	 "", NULL, 0},
	{"list", up_cmd_list, "List sessions.", "[--all] [--json]",
	 "This uplinkd's sessions, and the live ones of the deploy cluster that are not its own\n"
	 "(agent-uplink 0.4.1's, another user's), marked FOREIGN; AGENT or CWD a session lacks\n"
	 "shows as -. Right after uplinkd starts, the list waits up to 5 s for the cluster's "
	 "first\n"
	 "answer; without one it shows this uplinkd's sessions as recorded, with a warning on\n"
	 "stderr that says why.\n"
	 "\n",
	 "", list_options, 8},
	{"stop", up_cmd_stop, "Stop sessions and delete their namespaces.", "SESSION... [--wait]",
	 "", "", stop_options, 8},
	{"extend", up_cmd_extend, "Push a session's deadline (--ttl) further out.",
	 "SESSION DURATION",
	 "DURATION is added to the deadline (or to now, if that is later): 90s, 30m, 2h, 1d.\n", "",
	 NULL, 0},
	{"clean", up_cmd_clean, "Delete session namespaces, foreign ones too (0.4.1's clean).",
	 "[SESSION...] [--all] [--older-than DURATION] [-y|--yes] [--wait] [--deploy-context NAME]",
	 "Give exactly one selector: SESSION ids or namespace names, --all, or --older-than.\n"
	 "The Python tool's and other users' sessions (foreign) are included when selected.\n"
	 "\n",
	 "\n"
	 "Lists what it will delete and asks on stdin (EOF is no). agent-uplink-system is\n"
	 "never a target. Exit status: 0 done or nothing to delete, 1 aborted or failed,\n"
	 "2 bad selector or duration.\n",
	 clean_options, 25},
	{"logs", up_cmd_logs, "Show a session's audit log: every request the proxy decided.",
	 "SESSION [-f|--follow] [--denied] [--json]", "",
	 "\n"
	 "One request per line: time (UTC), decision, method, host, path, rule.\n"
	 "Works after the session ended too (the log is kept on the host).\n",
	 logs_options, 14},
	{"approvals", up_cmd_approvals, "List the requests waiting for your approval.", "[--json]",
	 "A session started with --ask holds each request no rule allows (the agent waits, up\n"
	 "to 60 s) until you decide; identical requests share one line. IDs are SESSION-N.\n\n",
	 "", json_options, 10},
	{"approve", up_cmd_approve, "Let a waiting request through.",
	 "ID [--session | --save | --save-to FILE] [--json]",
	 "Without --session only the request (and identical ones waiting with it) goes, as the\n"
	 "agent sent it: no credential is added. --session adds the rule shown first to the\n"
	 "session's own layer: the exact host, the method and the path's stable prefix (up to\n"
	 "two leading segments, stopping before one that looks like an id), any query.\n"
	 "--save also appends that rule, commented with the date and session, to the end of\n"
	 "the rules: list of your own rules file (or of FILE with --save-to); the request\n"
	 "waits on if the file cannot take it. A file inside a project (a folder above it\n"
	 "holds .git or .uplink.yaml) is written only if uplink trust holds it as it is.\n\n",
	 "", approve_options, 16},
	{"deny", up_cmd_deny, "Refuse a waiting request.", "ID [--json]",
	 "The agent gets the 403 JSON with \"asked\": true, \"answer\": \"denied\".\n\n", "",
	 json_options, 10},
	{"status", up_cmd_status, "Show whether uplinkd runs, its version and its load.",
	 "[--json]", "", "", json_options, 10},
	{"config show", up_cmd_config_show,
	 "Show the merged config files and where each value came from.", "[--json]",
	 "Reads ~/.config/uplink/config.yaml ($XDG_CONFIG_HOME) and the .uplink.yaml (or\n"
	 ".agent-uplink.yaml) files from the current folder up to home, as uplink run does:\n"
	 "a value comes from the nearest file that sets it, lists (rules, args, kube_context)\n"
	 "add up, and flags given to uplink run beat every file. Each value is shown with\n"
	 "FILE:LINE, or 'default'.\n"
	 "\n"
	 "Keys: mode (or 0.4.1's auth_mode; or a mode's own key set to true: anthropic,\n"
	 "bedrock, chatgpt, api_key, google, openai), rules (paths or inline rules),\n"
	 "no_default_rules, allow_exec, deploy_context, agent_runtime_class,\n"
	 "mitm_runtime_class, mitmproxy_image, registry_image, image, registry, ttl,\n"
	 "idle_timeout, allow_dns, ask, notifications, args (or claude_args), add_dir, mount_rw,\n"
	 "mount_ro, ssh_cidr, ssh_key_dir, git_https_rewrite, no_git_identity, mitm_ca_cert,\n"
	 "mitm_insecure, mitm_debug, kube_context, kubeconfig, aws_profiles. Lists add to the\n"
	 "flag's items; relative paths are relative to the config file's folder. A project's\n"
	 "file (between the cwd and home: a repository can bring one) cannot set allow_exec; its\n"
	 "placeholders and the keys that widen the agent's reach apply only once you trust it\n"
	 "(uplink trust): each such file is listed with what it asks for and whether it is\n"
	 "trusted.\n"
	 "\n",
	 "\n"
	 "Exit status: 5 when a project's file needs trusting before uplink run takes it.\n",
	 json_options, 10},
	{"trust", up_cmd_trust,
	 "Trust a project's config file: its credentials and reach may then apply.",
	 "[FILE...] [--list] [--json]",
	 "A project's config file (.uplink.yaml or .agent-uplink.yaml between the current folder\n"
	 "and home: a cloned repository can bring one) is taken only in part until you trust\n"
	 "it: its keyring and exec placeholders ({{keyring:...}}, {{exec:...}}, in inline rules\n"
	 "or in rules files it names), its l4_forward rules, its rules naming only AWS hosts\n"
	 "(the proxy re-signs under them with your real AWS keys), and its keys that widen the\n"
	 "agent's reach or pick what runs (add_dir, mount_rw, mount_ro, kube_context, kubeconfig,\n"
	 "ssh_key_dir, ssh_cidr, aws_profiles, mitm_ca_cert, mitm_insecure, mitm_debug,\n"
	 "allow_dns, deploy_context, agent_runtime_class, mitmproxy_image, registry_image, image,\n"
	 "registry) make uplink run refuse until then. Plain rules (hosts, methods, paths,\n"
	 "literal headers) and the other keys apply untrusted.\n"
	 "\n"
	 "uplink trust records each FILE (default: the project files that apply to the current\n"
	 "folder), and the rules files it names, by path and SHA-256 of its content, and prints\n"
	 "what it may now have. A changed file needs trusting again. Your own\n"
	 "~/.config/uplink/config.yaml and --rules files need no trust. The store is\n"
	 "$XDG_STATE_HOME/uplink/trusted.json (default ~/.local/state/uplink).\n"
	 "\n",
	 "\n"
	 "To stop trusting a file: uplink untrust FILE.\n",
	 trust_options, 10},
	{"untrust", up_cmd_untrust, "Stop trusting a project's config file (see uplink trust).",
	 "FILE... [--json]",
	 "Removes each FILE from the trust store; uplink run refuses it again while it asks for\n"
	 "what needs trust. Exit status 1 if a FILE was not trusted.\n",
	 "", json_unlisted_options, 0},
	{"doctor", up_cmd_doctor, "Check what a session needs, and say how to fix what is missing.",
	 "[--deploy-context NAME] [--kubeconfig PATHS] [--agent-runtime-class NAME] [--json]", "",
	 "\n"
	 "Each check is ok, warn, fail or skip; warn and fail say how to fix them.\n"
	 "Exit status: 0 when nothing failed, 1 when a check failed, 3 when uplinkd is not "
	 "running.\n",
	 doctor_options, 28},
	{"rules check", up_cmd_rules_check, "Show which rule allows a request, or that none does.",
	 "[--rules FILE]... [--no-default-rules] [--allow-exec] [--kube-context NAME]...\n"
	 "       [--kubeconfig PATHS] [--json] [AGENT [MODE]] METHOD URL",
	 "Loads the rules a run would get (agent auth rules, the kube rules of --kube-context,\n"
	 "your --rules files in order, the agent's defaults, the read-only catch-all), resolves\n"
	 "their placeholders in uplinkd, and prints the decision the proxy makes for METHOD URL\n"
	 "(its port included), the rule, its layer and FILE:LINE, the names (never the values)\n"
	 "of the headers it would inject, and whether it re-signs AWS requests.\n"
	 "\n",
	 "\n"
	 "Exit status: 0 allowed, 1 denied, 2 bad input (including invalid rules).\n",
	 rules_check_options, 22},
	{"rules lint", up_cmd_rules_lint, "Validate rules files and print every problem.",
	 "[--json] FILE...",
	 "Each problem reads FILE:LINE:COL: rule 'NAME': what is wrong. Exit status 1 if any.\n",
	 "", json_unlisted_options, 0},
	{"rules render", up_cmd_rules_render, "Print the JSON the proxy would get.",
	 "[--rules FILE]... [--no-default-rules] [--allow-exec] [--show-secrets] [AGENT [MODE]]",
	 "Header values are shown as <redacted> unless --show-secrets.\n", "", rules_render_options,
	 0},
	{"rules suggest", up_cmd_rules_suggest,
	 "Print rules that would have allowed a session's denied requests.", "SESSION [--json]",
	 "Reads the session's audit log (also after it ended) and prints a rules file for\n"
	 "--rules: per host, a rule for each set of methods seen, the host exactly as seen,\n"
	 "and each path cut at its first id (a number, hex, a UUID, a long random token):\n"
	 "the id and what follows match one or more segments, and a query any query. Each\n"
	 "rule says how many requests it covers, with examples (ids and queries masked).\n"
	 "A refused CONNECT gets a read-only rule for its host. Warnings (IP addresses,\n"
	 "random-looking names, many names under one domain) and the requests no rule\n"
	 "could allow go to stderr. Review it, then check it: uplink rules lint FILE.\n"
	 "\n",
	 "", rules_suggest_options, 8},
	{"completion", up_cmd_completion, "Print a shell completion script (bash, zsh or fish).",
	 "bash|zsh|fish",
	 "Commands, their options, agent names, session ids (asked from uplinkd when you press\n"
	 "TAB, for at most 3 s) and kubeconfig contexts (kubectl config get-contexts) complete.\n"
	 "install.sh installs the three; by hand:\n"
	 "  bash  uplink completion bash > "
	 "${XDG_DATA_HOME:-~/.local/share}/bash-completion/completions/uplink\n"
	 "  zsh   uplink completion zsh > DIR/_uplink   (DIR in $fpath, before compinit runs)\n"
	 "  fish  uplink completion fish > ~/.config/fish/completions/uplink.fish\n"
	 "or for the current shell only: source <(uplink completion bash)\n"
	 "\n",
	 "", completion_options, 26},
	{0},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: uplink COMMAND [OPTIONS]\n\n"
		   "Runs coding agents in microVM pods whose every request goes through an\n"
		   "allow-listing proxy. The work is done by uplinkd; this is its command line.\n\n"
		   "Commands:\n");
	for (const struct up_command *c = up_commands; c->pattern; c++)
		fprintf(f, "  %-14s %s\n", c->pattern, c->summary);
	fprintf(f, "\nOptions:\n"
		   "  -h, --help     show this help (uplink COMMAND --help for a command's)\n"
		   "  -V, --version  show the client's version\n"
		   "\nEnvironment:\n"
		   "  " UP_SOCKET_ENV
		   "  the daemon's socket (default $XDG_RUNTIME_DIR/uplink/uplinkd.sock)\n"
		   "\nExit status:\n"
		   "  0  success\n"
		   "  1  the operation failed (the message says why)\n"
		   "  2  bad command line\n"
		   "  3  uplinkd cannot be reached (start it: " UP_START_HINT ")\n"
		   "  4  uplink and uplinkd speak different protocol versions\n"
		   "  5  a project's config file needs trusting first (uplink trust; nothing "
		   "started)\n");
}

/* The command whose words are the longest prefix of argv. */
static const struct up_command *lookup(int argc, char **argv, int *consumed)
{
	const struct up_command *best = NULL;
	int best_n = 0;

	for (const struct up_command *c = up_commands; c->pattern; c++) {
		char words[128], *save = NULL;
		int n = 0, ok = 1;

		snprintf(words, sizeof(words), "%s", c->pattern);
		for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save), n++)
			if (n >= argc || strcmp(argv[n], w) != 0) {
				ok = 0;
				break;
			}
		if (ok && n > best_n) {
			best = c;
			best_n = n;
		}
	}
	*consumed = best_n;
	return best;
}

int main(int argc, char **argv)
{
	struct up_cli cli = {.argv0 = argv[0]};
	struct up_args args;
	const struct up_command *cmd;
	int consumed, r;

	if (argc < 2) {
		usage(stderr);
		return UP_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return UP_EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("uplink %s (protocol %d)\n", UPLINK_VERSION, UP_PROTOCOL_VERSION);
		return UP_EXIT_OK;
	}
	cmd = lookup(argc - 1, argv + 1, &consumed);
	if (!cmd) {
		fprintf(stderr, "uplink: unknown command '%s'; see uplink --help\n", argv[1]);
		return UP_EXIT_USAGE;
	}
	/* getopt takes argv[0] for the program: the command's last word. */
	r = up_args_parse(cmd, argc - consumed, argv + consumed, &args);
	if (r == 0)
		r = cmd->fn(&cli, cmd, &args);
	else if (r < 0)
		r = UP_EXIT_OK;
	up_args_done(&args);
	cli.rpc = up_rpc_client_free(cli.rpc);
	fflush(stdout);
	return r;
}
