/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The one table of a session's options: each row is an option of `uplink run`, a
 * session.start parameter, a config file key, or all three. It generates the client's
 * option table and its help lines (client/cmd-session.c), the daemon's parameter struct
 * and table (daemon/rpc-session.c), the session's copy of what was asked, which the
 * renderer reads too (daemon/session-asked.h), and the config keys, the struct they fill
 * and what a project's file needs trust for (daemon/config-file.c, config-file.h). Adding
 * an option is one row here, then the code where it takes effect (docs/architecture.md,
 * "Where to add things").
 *
 * XX(flag, short, key, type, where, value, help, label, trust)
 *   flag   the long flag of `uplink run`, without "--" ("" when it is no flag)
 *   short  its one-letter flag, or 0
 *   key    the session.start parameter and config key, an identifier ("_": neither)
 *   type   BOOL; STRING; DURATION (a string the daemon parses); PATH (one host path, made
 *          absolute); PATHS (repeatable host paths); RULES (PATHS, or inline rules in a
 *          config file); WORDS (repeatable, as given); ARGS (the agent's arguments);
 *          SPLIT (WORDS, a flag's value split on spaces and commas); MODE (sets "mode" to
 *          its key); LOCAL (the client's own, no parameter)
 *   where  which of flag, parameter and config key it is: FLAG, CONFIG, FLAG_PARAM,
 *          FLAG_CONFIG, PARAM_CONFIG or ALL
 *   value  the value's name in the help, or NULL for a flag that takes none
 *   help   the help line ("\n" continues it under itself), or NULL: not listed
 *   label  what the help shows instead of "--flag VALUE", or NULL
 *   trust  why a project's file may set it only once trusted (it widens the agent's reach
 *          or picks what runs), or NULL
 */
enum {
	UP_OPT_FLAG = 1,
	UP_OPT_PARAM = 2,
	UP_OPT_CONFIG = 4,
	UP_OPT_FLAG_PARAM = UP_OPT_FLAG | UP_OPT_PARAM,
	UP_OPT_FLAG_CONFIG = UP_OPT_FLAG | UP_OPT_CONFIG,
	UP_OPT_PARAM_CONFIG = UP_OPT_PARAM | UP_OPT_CONFIG,
	UP_OPT_ALL = UP_OPT_FLAG | UP_OPT_PARAM | UP_OPT_CONFIG,
};

/* UP_IF_PARAM_##where(x) is x for a parameter, else nothing; UP_IF_CONFIG_##where(x) so for a
 * config key. */
#define UP_IF_PARAM_FLAG(...)
#define UP_IF_PARAM_CONFIG(...)
#define UP_IF_PARAM_FLAG_CONFIG(...)
#define UP_IF_PARAM_FLAG_PARAM(...)   __VA_ARGS__
#define UP_IF_PARAM_PARAM_CONFIG(...) __VA_ARGS__
#define UP_IF_PARAM_ALL(...)	      __VA_ARGS__
#define UP_IF_CONFIG_FLAG(...)
#define UP_IF_CONFIG_FLAG_PARAM(...)
#define UP_IF_CONFIG_CONFIG(...)       __VA_ARGS__
#define UP_IF_CONFIG_FLAG_CONFIG(...)  __VA_ARGS__
#define UP_IF_CONFIG_PARAM_CONFIG(...) __VA_ARGS__
#define UP_IF_CONFIG_ALL(...)	       __VA_ARGS__

/* clang-format off */
#define UP_SESSION_OPTIONS(XX) \
	XX("mode", 0, mode, STRING, ALL, "MODE", \
	   NULL, \
	   NULL, NULL) \
	XX("anthropic", 0, anthropic, MODE, FLAG_CONFIG, NULL, \
	   "claude, opencode: the Anthropic login (their default)", \
	   NULL, NULL) \
	XX("bedrock", 0, bedrock, MODE, FLAG_CONFIG, NULL, \
	   "claude: Amazon Bedrock, a key from keyring bedrock/key", \
	   NULL, NULL) \
	XX("chatgpt", 0, chatgpt, MODE, FLAG_CONFIG, NULL, \
	   "codex: the ChatGPT login in ~/.codex (its default)", \
	   NULL, NULL) \
	XX("api-key", 0, api_key, MODE, FLAG_CONFIG, NULL, \
	   "codex, gemini: a key from keyring openai/key, gemini/key", \
	   NULL, NULL) \
	XX("google", 0, google, MODE, FLAG_CONFIG, NULL, \
	   "gemini: the Google login in ~/.gemini (its default)", \
	   NULL, NULL) \
	XX("openai", 0, openai, MODE, FLAG_CONFIG, NULL, \
	   "opencode: its OpenAI login", \
	   NULL, NULL) \
	XX("rules", 0, rules, RULES, ALL, "FILE", \
	   "add a rules file (repeatable; user layer)", \
	   NULL, NULL) \
	XX("no-default-rules", 0, no_default_rules, BOOL, ALL, NULL, \
	   "keep only kube and user rules", \
	   NULL, NULL) \
	XX("allow-exec", 0, allow_exec, BOOL, ALL, NULL, \
	   "allow {{exec:CMD}} placeholders in rules", \
	   NULL, NULL) \
	XX("force-rebuild", 0, force_rebuild, BOOL, FLAG_PARAM, NULL, \
	   "rebuild the agent image even if it exists", \
	   NULL, NULL) \
	XX("deploy-context", 0, deploy_context, STRING, ALL, "NAME", \
	   "kubeconfig context to deploy to (default local-k8s-admin)", \
	   NULL, "picks the cluster that holds the session's credentials") \
	XX("agent-runtime-class", 0, agent_runtime_class, STRING, ALL, "NAME", \
	   "RuntimeClass of the agent pod (default kata-clh)", \
	   NULL, "picks the agent pod's sandbox") \
	XX("mitm-runtime-class", 0, mitm_runtime_class, STRING, ALL, "NAME", \
	   "RuntimeClass of the mitm pod (default none)", \
	   NULL, NULL) \
	XX("mitmproxy-image", 0, mitmproxy_image, STRING, ALL, "REF", \
	   "the mitm pod's image (default mitmproxy/mitmproxy:12)", \
	   NULL, "picks the proxy image, which holds every credential") \
	XX("registry-image", 0, registry_image, STRING, ALL, "REF", \
	   "the in-cluster registry's image (default registry:2)", \
	   NULL, "picks the in-cluster registry's image") \
	XX("image", 0, image, STRING, ALL, "REF", \
	   "run this agent image; build nothing", \
	   NULL, "picks the agent's image") \
	XX("registry", 0, registry, STRING, ALL, "HOST:PORT", \
	   "push the agent image there (default localhost:5000)", \
	   NULL, "picks where the agent image is pushed and pulled") \
	XX("ttl", 0, ttl, DURATION, ALL, "DURATION", \
	   "stop the session after this long (default 24h)", \
	   NULL, NULL) \
	XX("idle-timeout", 0, idle_timeout, DURATION, ALL, "DURATION", \
	   "stop it after this long without a client (default 4h)", \
	   NULL, NULL) \
	XX("allow-dns", 0, allow_dns, BOOL, ALL, NULL, \
	   "let the agent resolve names (reopens a channel the\n" "allow-list cannot see; off by default)", \
	   NULL, "lets the agent resolve names (a channel the rules cannot see)") \
	XX("ask", 0, ask, BOOL, ALL, NULL, \
	   "hold a request no rule allows and ask the user (uplink\n" "approvals; off by default)", \
	   NULL, NULL) \
	XX("", 0, notifications, BOOL, CONFIG, NULL, \
	   NULL, \
	   NULL, NULL) \
	XX("", 0, args, ARGS, PARAM_CONFIG, NULL, \
	   NULL, \
	   NULL, NULL) \
	XX("debug", 0, debug, BOOL, FLAG_PARAM, NULL, \
	   "keep the agent's debug output", \
	   NULL, NULL) \
	XX("add-dir", 0, add_dir, PATHS, ALL, "DIR", \
	   "mount a folder under home read-write (repeatable)", \
	   NULL, "mounts a host folder into the agent, read-write") \
	XX("mount-rw", 0, mount_rw, PATHS, ALL, "PATH", \
	   "mount a file or folder under home read-write (repeatable)", \
	   NULL, "mounts a host path into the agent, read-write") \
	XX("mount-ro", 0, mount_ro, PATHS, ALL, "PATH", \
	   "mount a file or folder under home read-only (repeatable)", \
	   NULL, "mounts a host path into the agent") \
	XX("ssh-cidr", 0, ssh_cidr, WORDS, ALL, "CIDR", \
	   "open TCP 22 to this network; an IP is a /32 or /128\n" "(repeatable)", \
	   NULL, "opens SSH from the agent to a network") \
	XX("ssh-key-dir", 0, ssh_key_dir, PATH, ALL, "DIR", \
	   "SSH keys for the agent: the private keys stay in an\n" "ssh-agent pod; ~/.ssh gets the public halves, certificates\n" "and config", \
	   NULL, "lets the agent sign with SSH keys") \
	XX("git-https-rewrite", 0, git_https_rewrite, WORDS, ALL, "HOST", \
	   "rewrite git@HOST: and ssh://git@HOST/ URLs to HTTPS\n" "(repeatable; github.com, gitlab.com and bitbucket.org\n" "always are)", \
	   NULL, NULL) \
	XX("no-git-identity", 0, no_git_identity, BOOL, ALL, NULL, \
	   "do not give the agent your git user.name and user.email", \
	   NULL, NULL) \
	XX("mitm-ca-cert", 0, mitm_ca_cert, PATHS, ALL, "FILE", \
	   "PEM CAs the proxy trusts upstream, next to the public\n" "roots (repeatable)", \
	   NULL, "makes the proxy trust another CA for the hosts it sends credentials to") \
	XX("mitm-insecure", 0, mitm_insecure, BOOL, ALL, NULL, \
	   "the proxy verifies no upstream TLS certificate", \
	   NULL, "turns off the proxy's upstream TLS checks (credentials to anyone)") \
	XX("mitm-debug", 0, mitm_debug, BOOL, ALL, NULL, \
	   "the proxy logs headers and bodies (may log secrets)", \
	   NULL, "makes the proxy log headers and bodies, credentials included") \
	XX("kube-context", 0, kube_context, WORDS, ALL, "CTX", \
	   "give the agent this kubeconfig context; the proxy adds its\n" "token or client certificate (repeatable; static\n" "credentials and a cluster CA only)", \
	   NULL, "gives the agent a Kubernetes context and its credential") \
	XX("kubeconfig", 0, kubeconfig, PATH, ALL, "PATH", \
	   "where --kube-context contexts come from (default\n" "$KUBECONFIG, else ~/.kube/config)", \
	   NULL, "picks the kubeconfig whose contexts (and credentials) the agent gets") \
	XX("expose-deploy-cluster", 0, expose_deploy_cluster, BOOL, FLAG_PARAM, NULL, \
	   "let --kube-context name the cluster the session runs in\n" "(the agent can then read what that context can read\n" "there, its own session's Secrets included)", \
	   NULL, NULL) \
	XX("aws-profiles", 'a', aws_profiles, SPLIT, ALL, "PROFILE", \
	   "give the agent this AWS profile through dummy keys the\n" "proxy re-signs with the real ones (repeatable; a value\n" "may list several, separated by spaces or commas)", \
	   NULL, "gives the agent an AWS profile's permissions") \
	XX("detach", 'd', _, LOCAL, FLAG, NULL, \
	   "print the session id once it runs, and exit", \
	   NULL, NULL) \
	XX("json", 0, _, LOCAL, FLAG, NULL, \
	   "with --detach: print the session as JSON", \
	   NULL, NULL) \
	XX("dry-run", 0, dry_run, BOOL, FLAG_PARAM, NULL, \
	   "print the objects a run applies as a Kubernetes List and,\n" "on stderr, what it would do; only reads the cluster", \
	   NULL, NULL) \
	XX("output", 'o', _, LOCAL, FLAG, "json|yaml", \
	   "the --dry-run format (default json)", \
	   "-o json|yaml", NULL) \
	XX("show-secrets", 0, show_secrets, BOOL, FLAG_PARAM, NULL, \
	   "with --dry-run: show Secret data instead of sizes", \
	   NULL, NULL)
/* clang-format on */
