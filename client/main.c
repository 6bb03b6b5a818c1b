/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "protocol.h"

const struct up_command up_commands[] = {
	{"run", up_cmd_run,
	 "Start an agent in a microVM pod behind the allow-listing proxy, and attach.",
	 "AGENT [--anthropic|--bedrock] [OPTIONS] [-- AGENT-ARGS...]",
	 "Options:\n"
	 "  --anthropic, --bedrock       how the agent authenticates (default: anthropic)\n"
	 "  --rules FILE                 add a rules file (repeatable; user layer)\n"
	 "  --no-default-rules           keep only kube and user rules\n"
	 "  --allow-exec                 allow {{exec:CMD}} placeholders in rules\n"
	 "  --force-rebuild              rebuild the agent image even if it exists\n"
	 "  --deploy-context NAME        kubeconfig context to deploy to (default "
	 "local-k8s-admin)\n"
	 "  --agent-runtime-class NAME   RuntimeClass of the agent pod (default kata-clh)\n"
	 "  --mitm-runtime-class NAME    RuntimeClass of the mitm pod (default none)\n"
	 "  --mitmproxy-image REF        the mitm pod's image (default mitmproxy/mitmproxy:12)\n"
	 "  --registry-image REF         the in-cluster registry's image (default registry:2)\n"
	 "  --image REF                  run this agent image; build nothing\n"
	 "  --registry HOST:PORT         push the agent image there (default localhost:5000)\n"
	 "  --ttl DURATION               stop the session after this long (default 24h)\n"
	 "  --idle-timeout DURATION      stop it after this long without a client (default 4h)\n"
	 "  --allow-dns                  let the agent resolve names (reopens a channel the\n"
	 "                               allow-list cannot see; off by default)\n"
	 "  --debug                      keep the agent's debug output\n"
	 "  --add-dir DIR                mount a folder under home read-write (repeatable)\n"
	 "  --mount-rw PATH              mount a file or folder under home read-write "
	 "(repeatable)\n"
	 "  --mount-ro PATH              mount a file or folder under home read-only (repeatable)\n"
	 "  --ssh-cidr CIDR              open TCP 22 to this network; an IP is a /32 or /128\n"
	 "                               (repeatable)\n"
	 "  --ssh-key-dir DIR            SSH keys for the agent: the private keys stay in an\n"
	 "                               ssh-agent pod; ~/.ssh gets the public halves, "
	 "certificates\n"
	 "                               and config\n"
	 "  --git-https-rewrite HOST     rewrite git@HOST: and ssh://git@HOST/ URLs to HTTPS\n"
	 "                               (repeatable; github.com, gitlab.com and bitbucket.org\n"
	 "                               always are)\n"
	 "  --no-git-identity            do not give the agent your git user.name and user.email\n"
	 "  --mitm-ca-cert FILE          PEM CAs the proxy trusts upstream, next to the public\n"
	 "                               roots (repeatable)\n"
	 "  --mitm-insecure              the proxy verifies no upstream TLS certificate\n"
	 "  --mitm-debug                 the proxy logs headers and bodies (may log secrets)\n"
	 "  --kube-context CTX           give the agent this kubeconfig context; the proxy adds "
	 "its\n"
	 "                               token or client certificate (repeatable; static\n"
	 "                               credentials and a cluster CA only)\n"
	 "  --kubeconfig PATH            where --kube-context contexts come from (default\n"
	 "                               $KUBECONFIG, else ~/.kube/config)\n"
	 "  --expose-deploy-cluster      let --kube-context name the cluster the session runs in\n"
	 "                               (the agent can then read what that context can read\n"
	 "                               there, its own session's Secrets included)\n"
	 "  -a, --aws-profiles PROFILE   give the agent this AWS profile through dummy keys the\n"
	 "                               proxy re-signs with the real ones (repeatable; a value\n"
	 "                               may list several, separated by spaces or commas)\n"
	 "  -d, --detach                 print the session id once it runs, and exit\n"
	 "  --json                       with --detach: print the session as JSON\n"
	 "  --dry-run                    print the objects a run applies as a Kubernetes List "
	 "and,\n"
	 "                               on stderr, what it would do; only reads the cluster\n"
	 "  -o json|yaml                 the --dry-run format (default json)\n"
	 "  --show-secrets               with --dry-run: show Secret data instead of sizes\n"
	 "\nDurations: 90s, 30m, 2h, 1d. Ctrl-C before the session runs cancels it (exit 130).\n"
	 "--dry-run: <mitm-cluster-ip> and <ssh-agent-cluster-ip> mark the Services' IPs.\n"
	 "Exit status: the agent's own exit code once attached; 0 when detached.\n"},
	{"attach", up_cmd_attach, "Attach this terminal to a running session (several may attach).",
	 "SESSION", "SESSION is the 12-hex id or the namespace name (uplink list shows them).\n"},
	{"list", up_cmd_list, "List sessions.", "[--all] [--json]",
	 "This uplinkd's sessions, and the live ones of the deploy cluster that are not its own\n"
	 "(agent-uplink 0.4.1's, another user's), marked FOREIGN; AGENT or CWD a session lacks\n"
	 "shows as -. Right after uplinkd starts, the list waits up to 5 s for the cluster's "
	 "first\n"
	 "answer; without one it shows this uplinkd's sessions as recorded, with a warning on\n"
	 "stderr that says why.\n\n"
	 "Options:\n  --all   also sessions that have ended, and foreign namespaces being deleted\n"
	 "  --json  print the same sessions as JSON (foreign ones have \"foreign\": true)\n"},
	{"stop", up_cmd_stop, "Stop sessions and delete their namespaces.", "SESSION... [--wait]",
	 "Options:\n  --wait  return once each namespace is gone\n"},
	{"extend", up_cmd_extend, "Push a session's deadline (--ttl) further out.",
	 "SESSION DURATION",
	 "DURATION is added to the deadline (or to now, if that is later): 90s, 30m, 2h, 1d.\n"},
	{"clean", up_cmd_clean, "Delete session namespaces, foreign ones too (0.4.1's clean).",
	 "[SESSION...] [--all] [--older-than DURATION] [-y|--yes] [--wait] [--deploy-context NAME]",
	 "Give exactly one selector: SESSION ids or namespace names, --all, or --older-than.\n"
	 "The Python tool's and other users' sessions (foreign) are included when selected.\n\n"
	 "Options:\n"
	 "  --all                    every agent-uplink session namespace\n"
	 "  --older-than DURATION    sessions at least this old (90s, 30m, 2h, 1d)\n"
	 "  -y, --yes                do not ask before deleting\n"
	 "  --wait                   return once the namespaces are gone\n"
	 "  --deploy-context NAME    the cluster to clean (default: the daemon's)\n"
	 "\nLists what it will delete and asks on stdin (EOF is no). agent-uplink-system is\n"
	 "never a target. Exit status: 0 done or nothing to delete, 1 aborted or failed,\n"
	 "2 bad selector or duration.\n"},
	{"logs", up_cmd_logs, "Show a session's audit log: every request the proxy decided.",
	 "SESSION [-f|--follow] [--denied] [--json]",
	 "Options:\n"
	 "  -f, --follow  keep printing new requests until the session ends\n"
	 "  --denied      only refused requests\n"
	 "  --json        the raw audit lines\n"
	 "\nOne request per line: time (UTC), decision, method, host, path, rule.\n"
	 "Works after the session ended too (the log is kept on the host).\n"},
	{"status", up_cmd_status, "Show whether uplinkd runs, its version and its load.",
	 "[--json]",
	 "Options:\n"
	 "  --json    print the daemon's answer as JSON\n"},
	{"config show", up_cmd_config_show,
	 "Show the merged config files and where each value came from.", "[--json]",
	 "Reads ~/.config/uplink/config.yaml ($XDG_CONFIG_HOME) and the .uplink.yaml (or\n"
	 ".agent-uplink.yaml) files from the current folder up to home, as uplink run does:\n"
	 "a value comes from the nearest file that sets it, lists (rules, args, kube_context)\n"
	 "add up, and flags given to uplink run beat every file. Each value is shown with\n"
	 "FILE:LINE, or 'default'.\n\n"
	 "Keys: mode (or 0.4.1's auth_mode, anthropic: true, bedrock: true), rules (paths or\n"
	 "inline rules), no_default_rules, allow_exec, deploy_context, agent_runtime_class,\n"
	 "mitm_runtime_class, mitmproxy_image, registry_image, image, registry, ttl,\n"
	 "idle_timeout, allow_dns, notifications, args (or claude_args), add_dir, mount_rw,\n"
	 "mount_ro, ssh_cidr, ssh_key_dir, git_https_rewrite, no_git_identity, mitm_ca_cert,\n"
	 "mitm_insecure, mitm_debug, kube_context, kubeconfig. Lists add to the flag's items;\n"
	 "relative paths are relative to the config file's folder. A project's file (between the\n"
	 "cwd and home: a repository can bring one) cannot set allow_exec; its placeholders and\n"
	 "the keys that widen the agent's reach apply only once you trust it (uplink trust):\n"
	 "each such file is listed with what it asks for and whether it is trusted.\n\n"
	 "Options:\n"
	 "  --json    print the daemon's answer as JSON\n"
	 "\nExit status: 5 when a project's file needs trusting before uplink run takes it.\n"},
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
	 "literal headers) and the other keys apply untrusted.\n\n"
	 "uplink trust records each FILE (default: the project files that apply to the current\n"
	 "folder), and the rules files it names, by path and SHA-256 of its content, and prints\n"
	 "what it may now have. A changed file needs trusting again. Your own\n"
	 "~/.config/uplink/config.yaml and --rules files need no trust. The store is\n"
	 "$XDG_STATE_HOME/uplink/trusted.json (default ~/.local/state/uplink).\n\n"
	 "Options:\n"
	 "  --list    show the trusted files, each trusted, changed or missing now\n"
	 "  --json    print the daemon's answer as JSON\n\n"
	 "To stop trusting a file: uplink untrust FILE.\n"},
	{"untrust", up_cmd_untrust, "Stop trusting a project's config file (see uplink trust).",
	 "FILE... [--json]",
	 "Removes each FILE from the trust store; uplink run refuses it again while it asks for\n"
	 "what needs trust. Exit status 1 if a FILE was not trusted.\n"},
	{"doctor", up_cmd_doctor, "Check what a session needs, and say how to fix what is missing.",
	 "[--deploy-context NAME] [--kubeconfig PATHS] [--agent-runtime-class NAME] [--json]",
	 "Options:\n"
	 "  --deploy-context NAME       the kubeconfig context to deploy to (default "
	 "local-k8s-admin;\n"
	 "                              '' for the current-context)\n"
	 "  --kubeconfig PATHS          kubeconfig files, ':'-separated (default $KUBECONFIG or\n"
	 "                              ~/.kube/config)\n"
	 "  --agent-runtime-class NAME  the RuntimeClass agent pods use (default kata-clh)\n"
	 "  --json                      print the checks as JSON\n"
	 "\nEach check is ok, warn, fail or skip; warn and fail say how to fix them.\n"
	 "Exit status: 0 when nothing failed, 1 when a check failed, 3 when uplinkd is not "
	 "running.\n"},
	{"rules check", up_cmd_rules_check, "Show which rule allows a request, or that none does.",
	 "[--rules FILE]... [--no-default-rules] [--allow-exec] [--kube-context NAME]...\n"
	 "       [--kubeconfig PATHS] [--json] [AGENT [MODE]] METHOD URL",
	 "Loads the rules a run would get (agent auth rules, the kube rules of --kube-context,\n"
	 "your --rules files in order, the agent's defaults, the read-only catch-all), resolves\n"
	 "their placeholders in uplinkd, and prints the decision the proxy makes for METHOD URL\n"
	 "(its port included), the rule, its layer and FILE:LINE, the names (never the values)\n"
	 "of the headers it would inject, and whether it re-signs AWS requests.\n\n"
	 "Options:\n"
	 "  --rules FILE          a rules file; repeat for more (earlier files win)\n"
	 "  --no-default-rules    keep only kube and user rules\n"
	 "  --allow-exec          allow {{exec:CMD}} placeholders to run\n"
	 "  --kube-context NAME   add the kube rule of this kubeconfig context, as uplink run\n"
	 "                        --kube-context does; repeat for more\n"
	 "  --kubeconfig PATHS    kubeconfig files, ':'-separated (default $KUBECONFIG or\n"
	 "                        ~/.kube/config)\n"
	 "  --json                print the daemon's answer as JSON\n\n"
	 "Exit status: 0 allowed, 1 denied, 2 bad input (including invalid rules).\n"},
	{"rules lint", up_cmd_rules_lint, "Validate rules files and print every problem.",
	 "[--json] FILE...",
	 "Each problem reads FILE:LINE:COL: rule 'NAME': what is wrong. Exit status 1 if any.\n"},
	{"rules render", up_cmd_rules_render, "Print the JSON the proxy would get.",
	 "[--rules FILE]... [--no-default-rules] [--allow-exec] [--show-secrets] [AGENT [MODE]]",
	 "Header values are shown as <redacted> unless --show-secrets.\n"},
	{"completion", up_cmd_completion, "Print a shell completion script (bash, zsh or fish).",
	 "bash|zsh|fish",
	 "Commands, their options, agent names, session ids (asked from uplinkd when you press\n"
	 "TAB, for at most 3 s) and kubeconfig contexts (kubectl config get-contexts) complete.\n"
	 "install.sh installs the three; by hand:\n"
	 "  bash  uplink completion bash > "
	 "${XDG_DATA_HOME:-~/.local/share}/bash-completion/completions/uplink\n"
	 "  zsh   uplink completion zsh > DIR/_uplink   (DIR in $fpath, before compinit runs)\n"
	 "  fish  uplink completion fish > ~/.config/fish/completions/uplink.fish\n"
	 "or for the current shell only: source <(uplink completion bash)\n\n"
	 "Options:\n"
	 "  --words sessions|agents   print the words the scripts offer, one a line\n"},
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
	/* The command sees its own last word as argv[0]. */
	r = cmd->fn(&cli, cmd, argc - consumed, argv + consumed);
	cli.rpc = up_rpc_client_free(cli.rpc);
	fflush(stdout);
	return r;
}
