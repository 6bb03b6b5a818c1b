/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The one table of a session's options: each row is an option of `uplink run`, a
 * session.start parameter, a config file key, or all three. It generates the client's
 * option table and its help lines (client/cmd-session.c), the daemon's parameter struct
 * and table (daemon/rpc-session.c) and the config keys (daemon/config-file.c). Adding an
 * option is one row here, then the code where it takes effect.
 *
 * XX(flag, short, key, type, where, value, help, label)
 *   flag   the long flag of `uplink run`, without "--" (a string; "" for none)
 *   short  its one-letter flag, or 0
 *   key    the session.start parameter and config key (an identifier); "_" for none
 *   type   how it is read: BOOL, STRING, DURATION (a string on the wire), PATH (one host
 *          path, made absolute), PATHS (repeatable host paths), WORDS (repeatable, as
 *          given), SPLIT (repeatable, each value split on spaces and commas), MODE (the
 *          flag sets "mode" to its key), LOCAL (the client's own: no parameter)
 *   where  UP_OPT_FLAG (a flag), UP_OPT_PARAM (a parameter), UP_OPT_CONFIG (a config key),
 *          OR-ed; UP_OPT_ALL for all three
 *   value  the value's name in the help, or NULL for a flag that takes none
 *   help   the help line (continuation lines after "\n"), or NULL: not listed
 *   label  what the help shows instead of "--flag VALUE", or NULL
 */
enum {
	UP_OPT_FLAG = 1,
	UP_OPT_PARAM = 2,
	UP_OPT_CONFIG = 4,
	UP_OPT_ALL = 7,
};

/* clang-format off */
#define UP_SESSION_OPTIONS(XX)                                                                  \
	XX("anthropic", 0, anthropic, MODE, UP_OPT_FLAG | UP_OPT_CONFIG, NULL,                  \
	   "how the agent authenticates (default: anthropic)", "--anthropic, --bedrock")         \
	XX("bedrock", 0, bedrock, MODE, UP_OPT_FLAG | UP_OPT_CONFIG, NULL, NULL, NULL)          \
	XX("mode", 0, mode, STRING, UP_OPT_ALL, "MODE", NULL, NULL)                             \
	XX("rules", 0, rules, PATHS, UP_OPT_ALL, "FILE",                                        \
	   "add a rules file (repeatable; user layer)", NULL)                                   \
	XX("no-default-rules", 0, no_default_rules, BOOL, UP_OPT_ALL, NULL,                     \
	   "keep only kube and user rules", NULL)                                               \
	XX("allow-exec", 0, allow_exec, BOOL, UP_OPT_ALL, NULL,                                 \
	   "allow {{exec:CMD}} placeholders in rules", NULL)                                    \
	XX("force-rebuild", 0, force_rebuild, BOOL, UP_OPT_FLAG | UP_OPT_PARAM, NULL,           \
	   "rebuild the agent image even if it exists", NULL)                                   \
	XX("deploy-context", 0, deploy_context, STRING, UP_OPT_ALL, "NAME",                     \
	   "kubeconfig context to deploy to (default local-k8s-admin)", NULL)                   \
	XX("agent-runtime-class", 0, agent_runtime_class, STRING, UP_OPT_ALL, "NAME",           \
	   "RuntimeClass of the agent pod (default kata-clh)", NULL)                            \
	XX("mitm-runtime-class", 0, mitm_runtime_class, STRING, UP_OPT_ALL, "NAME",             \
	   "RuntimeClass of the mitm pod (default none)", NULL)                                 \
	XX("mitmproxy-image", 0, mitmproxy_image, STRING, UP_OPT_ALL, "REF",                    \
	   "the mitm pod's image (default mitmproxy/mitmproxy:12)", NULL)                       \
	XX("registry-image", 0, registry_image, STRING, UP_OPT_ALL, "REF",                      \
	   "the in-cluster registry's image (default registry:2)", NULL)                        \
	XX("image", 0, image, STRING, UP_OPT_ALL, "REF",                                        \
	   "run this agent image; build nothing", NULL)                                         \
	XX("registry", 0, registry, STRING, UP_OPT_ALL, "HOST:PORT",                            \
	   "push the agent image there (default localhost:5000)", NULL)                         \
	XX("ttl", 0, ttl, DURATION, UP_OPT_ALL, "DURATION",                                     \
	   "stop the session after this long (default 24h)", NULL)                              \
	XX("idle-timeout", 0, idle_timeout, DURATION, UP_OPT_ALL, "DURATION",                   \
	   "stop it after this long without a client (default 4h)", NULL)                       \
	XX("allow-dns", 0, allow_dns, BOOL, UP_OPT_ALL, NULL,                                   \
	   "let the agent resolve names (reopens a channel the\n"                               \
	   "allow-list cannot see; off by default)", NULL)                                      \
	XX("", 0, notifications, BOOL, UP_OPT_CONFIG, NULL, NULL, NULL)                         \
	XX("", 0, args, WORDS, UP_OPT_PARAM | UP_OPT_CONFIG, NULL, NULL, NULL)                  \
	XX("debug", 0, debug, BOOL, UP_OPT_FLAG | UP_OPT_PARAM, NULL,                           \
	   "keep the agent's debug output", NULL)                                               \
	XX("add-dir", 0, add_dir, PATHS, UP_OPT_ALL, "DIR",                                     \
	   "mount a folder under home read-write (repeatable)", NULL)                           \
	XX("mount-rw", 0, mount_rw, PATHS, UP_OPT_ALL, "PATH",                                  \
	   "mount a file or folder under home read-write (repeatable)", NULL)                   \
	XX("mount-ro", 0, mount_ro, PATHS, UP_OPT_ALL, "PATH",                                  \
	   "mount a file or folder under home read-only (repeatable)", NULL)                    \
	XX("ssh-cidr", 0, ssh_cidr, WORDS, UP_OPT_ALL, "CIDR",                                  \
	   "open TCP 22 to this network; an IP is a /32 or /128\n(repeatable)", NULL)          \
	XX("ssh-key-dir", 0, ssh_key_dir, PATH, UP_OPT_ALL, "DIR",                              \
	   "SSH keys for the agent: the private keys stay in an\n"                              \
	   "ssh-agent pod; ~/.ssh gets the public halves, certificates\nand config", NULL)      \
	XX("git-https-rewrite", 0, git_https_rewrite, WORDS, UP_OPT_ALL, "HOST",                \
	   "rewrite git@HOST: and ssh://git@HOST/ URLs to HTTPS\n"                              \
	   "(repeatable; github.com, gitlab.com and bitbucket.org\nalways are)", NULL)          \
	XX("no-git-identity", 0, no_git_identity, BOOL, UP_OPT_ALL, NULL,                       \
	   "do not give the agent your git user.name and user.email", NULL)                     \
	XX("mitm-ca-cert", 0, mitm_ca_cert, PATHS, UP_OPT_ALL, "FILE",                          \
	   "PEM CAs the proxy trusts upstream, next to the public\nroots (repeatable)", NULL)   \
	XX("mitm-insecure", 0, mitm_insecure, BOOL, UP_OPT_ALL, NULL,                           \
	   "the proxy verifies no upstream TLS certificate", NULL)                              \
	XX("mitm-debug", 0, mitm_debug, BOOL, UP_OPT_ALL, NULL,                                 \
	   "the proxy logs headers and bodies (may log secrets)", NULL)                         \
	XX("kube-context", 0, kube_context, WORDS, UP_OPT_ALL, "CTX",                           \
	   "give the agent this kubeconfig context; the proxy adds its\n"                       \
	   "token or client certificate (repeatable; static\n"                                  \
	   "credentials and a cluster CA only)", NULL)                                          \
	XX("kubeconfig", 0, kubeconfig, PATH, UP_OPT_ALL, "PATH",                               \
	   "where --kube-context contexts come from (default\n"                                 \
	   "$KUBECONFIG, else ~/.kube/config)", NULL)                                           \
	XX("expose-deploy-cluster", 0, expose_deploy_cluster, BOOL, UP_OPT_FLAG | UP_OPT_PARAM, \
	   NULL,                                                                                \
	   "let --kube-context name the cluster the session runs in\n"                          \
	   "(the agent can then read what that context can read\n"                              \
	   "there, its own session's Secrets included)", NULL)                                  \
	XX("aws-profiles", 'a', aws_profiles, SPLIT, UP_OPT_ALL, "PROFILE",                     \
	   "give the agent this AWS profile through dummy keys the\n"                           \
	   "proxy re-signs with the real ones (repeatable; a value\n"                           \
	   "may list several, separated by spaces or commas)", NULL)                            \
	XX("detach", 'd', _, LOCAL, UP_OPT_FLAG, NULL,                                          \
	   "print the session id once it runs, and exit", NULL)                                 \
	XX("json", 0, _, LOCAL, UP_OPT_FLAG, NULL,                                              \
	   "with --detach: print the session as JSON", NULL)                                    \
	XX("dry-run", 0, dry_run, BOOL, UP_OPT_FLAG | UP_OPT_PARAM, NULL,                       \
	   "print the objects a run applies as a Kubernetes List and,\n"                        \
	   "on stderr, what it would do; only reads the cluster", NULL)                         \
	XX("output", 'o', _, LOCAL, UP_OPT_FLAG, "json|yaml",                                   \
	   "the --dry-run format (default json)", "-o json|yaml")                               \
	XX("show-secrets", 0, show_secrets, BOOL, UP_OPT_FLAG | UP_OPT_PARAM, NULL,             \
	   "with --dry-run: show Secret data instead of sizes", NULL)
/* clang-format on */
