/* SPDX-License-Identifier: Apache-2.0 */
/* zsh's header and engine (completion-bash.c prints its script as bash's) and the fish
 * completion script, from the same model. */
#include <errno.h>
#include <string.h>

#include "completion.h"
#include "config.h"

/* ------------------------------------------------------------------------------ zsh */

const char comp_zsh_engine[] =
	"_uplink_kind_of() {\n"
	"\tlocal v\n"
	"\tfor v in $u_vals; do\n"
	"\t\t[[ ${v%%=*} == \"$1\" ]] && { REPLY=${v#*=}; return 0 }\n"
	"\tdone\n"
	"\treturn 1\n"
	"}\n\n"
	"_uplink_value() {\n"
	"\tlocal -a w kc\n"
	"\tlocal i\n"
	"\tcase $1 in\n"
	"\t(none | '') ;;\n"
	"\t(file) _files ;;\n"
	"\t(dir) _files -/ ;;\n"
	"\t(session | agent)\n"
	"\t\tw=(${(f)\"$(command timeout 3 $words[1] completion --words ${1}s 2>/dev/null)\"})\n"
	"\t\tcompadd -a w ;;\n"
	"\t(context)\n"
	"\t\tfor ((i = 2; i < $#words; i++)); do\n"
	"\t\t\t[[ $words[i] == --kubeconfig ]] && kc=(--kubeconfig $words[i+1])\n"
	"\t\tdone\n"
	"\t\tw=(${(f)\"$(command timeout 3 kubectl $kc config get-contexts -o name "
	"2>/dev/null)\"})\n"
	"\t\tcompadd -a w ;;\n"
	"\t(*) compadd -- ${(s:,:)1} ;;\n"
	"\tesac\n"
	"}\n\n"
	"_uplink_args() {\n"
	"\tlocal -a u_opts u_vals u_pos\n"
	"\tlocal u_rep i=$2 n=0 w kind REPLY\n"
	"\t_uplink_spec \"$1\" || return 0\n"
	"\tfor ((; i < CURRENT; i++)); do\n"
	"\t\tw=$words[i]\n"
	"\t\tcase $w in\n"
	"\t\t(--) return 0 ;;\n"
	"\t\t(-*) _uplink_kind_of \"$w\" && ((i++)) ;;\n"
	"\t\t(*) ((n++)) ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"\tif ((i > CURRENT)); then\n"
	"\t\t_uplink_kind_of \"$words[CURRENT-1]\"\n"
	"\t\t_uplink_value \"$REPLY\"\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tif [[ $PREFIX == -* ]]; then\n"
	"\t\tcompadd -a u_opts\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tif ((n < $#u_pos)); then\n"
	"\t\tkind=$u_pos[n+1]\n"
	"\telif [[ -n $u_rep ]] && (($#u_pos)); then\n"
	"\t\tkind=$u_pos[-1]\n"
	"\tfi\n"
	"\t_uplink_value \"$kind\"\n"
	"}\n\n"
	"_uplink() {\n"
	"\tlocal -a reply\n"
	"\tif ((CURRENT == 2)); then\n"
	"\t\tcompadd -- $_uplink_commands -h --help -V --version\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\t_uplink_subs \"$words[2]\"\n"
	"\t((CURRENT == 3 && $#reply)) && compadd -a reply\n"
	"\tif (($#reply && CURRENT > 3 && ${reply[(Ie)$words[3]]})); then\n"
	"\t\t_uplink_args \"$words[2] $words[3]\" 4\n"
	"\telse\n"
	"\t\t_uplink_args \"$words[2]\" 3\n"
	"\tfi\n"
	"}\n\n"
	"if [[ $funcstack[1] == _uplink ]]; then\n"
	"\t_uplink \"$@\"\n"
	"else\n"
	"\tcompdef _uplink uplink\n"
	"fi\n";

const char comp_zsh_head[] =
	"#compdef uplink\n"
	"# zsh completion for uplink " UPLINK_VERSION ", printed by `uplink completion zsh` from "
	"its command\n"
	"# table. Install it as _uplink in a folder of $fpath (install.sh uses\n"
	"# PREFIX/share/zsh/site-functions), or for this shell only (after compinit):\n"
	"#   source <(uplink completion zsh)\n\n";

/* ----------------------------------------------------------------------------- fish */

/* s in single quotes, as fish reads them (\\ and \' are the only escapes). */
static void fish_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

/* What fish offers for a value: its -r/-x/-F flags and the -a candidates. */
static void print_fish_value(FILE *f, const struct comp_value *v)
{
	switch (v->kind) {
	case COMP_FILE: fprintf(f, " -r -F"); break;
	case COMP_DIR: fprintf(f, " -x -a '(__fish_complete_directories)'"); break;
	case COMP_SESSION: fprintf(f, " -x -a '(__uplink_sessions)'"); break;
	case COMP_AGENT: fprintf(f, " -x -a '(__uplink_agents)'"); break;
	case COMP_CONTEXT: fprintf(f, " -x -a '(__uplink_contexts)'"); break;
	case COMP_CHOICE:
		fprintf(f, " -x -a '");
		for (const char *c = v->choices; *c; c++)
			fputc(*c == ',' ? ' ' : *c, f);
		fputc('\'', f);
		break;
	case COMP_NONE: fprintf(f, " -x"); break;
	}
}

static void print_fish_cmd(FILE *f, const struct comp_cmd *c)
{
	char cond[3 * UP_MAX_COMPLETION_WORD];

	(void)snprintf(cond, sizeof(cond), "__uplink_using %s%s%s", c->first, *c->sub ? " " : "",
		       c->sub);
	for (size_t i = 0; i < c->n_opts; i++) {
		const struct comp_opt *o = &c->opts[i];
		fprintf(f, "complete -c uplink -n '%s' %s %s", cond,
			o->name[1] == '-' ? "-l" : "-s", o->name + (o->name[1] == '-' ? 2 : 1));
		if (o->takes_value)
			print_fish_value(f, &o->value);
		fputc('\n', f);
	}
	if (c->n_pos && c->pos[0].kind != COMP_NONE) {
		fprintf(f, "complete -c uplink -n '%s'", cond);
		print_fish_value(f, &c->pos[0]);
		fputc('\n', f);
	}
}

/* The command's word where it is typed: a first word, or the second after its first. */
static void print_fish_word(FILE *f, const struct comp_cmd *cmds, size_t i)
{
	const struct comp_cmd *c = &cmds[i];
	bool seen = false;

	for (size_t j = 0; j < i; j++)
		seen |= streq(cmds[j].first, c->first);
	if (!*c->sub) {
		fprintf(f, "complete -c uplink -n __uplink_at_command -a %s -d ", c->first);
		fish_quote(f, c->cmd->summary);
		fputc('\n', f);
		return;
	}
	if (!seen)
		fprintf(f, "complete -c uplink -n __uplink_at_command -a %s\n", c->first);
	fprintf(f, "complete -c uplink -n '__uplink_at_sub %s' -a %s -d ", c->first, c->sub);
	fish_quote(f, c->cmd->summary);
	fputc('\n', f);
}

static const char fish_engine[] =
	"# At the command FIRST [SUB] (the words typed before the cursor say so).\n"
	"function __uplink_using\n"
	"    set -l w (commandline -opc)\n"
	"    test (count $w) -ge 2; and test \"$w[2]\" = $argv[1]; or return 1\n"
	"    test (count $argv) -lt 2; and return 0\n"
	"    test (count $w) -ge 3; and test \"$w[3]\" = $argv[2]\n"
	"end\n\n"
	"function __uplink_at_command\n"
	"    test (count (commandline -opc)) -eq 1\n"
	"end\n\n"
	"function __uplink_at_sub\n"
	"    set -l w (commandline -opc)\n"
	"    test (count $w) -eq 2; and test \"$w[2]\" = $argv[1]\n"
	"end\n\n"
	"function __uplink_sessions\n"
	"    command timeout 3 uplink completion --words sessions 2>/dev/null\n"
	"end\n\n"
	"function __uplink_agents\n"
	"    command timeout 3 uplink completion --words agents 2>/dev/null\n"
	"end\n\n"
	"function __uplink_contexts\n"
	"    set -l w (commandline -opc)\n"
	"    set -l kc\n"
	"    for i in (seq (count $w))\n"
	"        if test \"$w[$i]\" = --kubeconfig; and test $i -lt (count $w)\n"
	"            set kc --kubeconfig $w[(math $i + 1)]\n"
	"        end\n"
	"    end\n"
	"    command timeout 3 kubectl $kc config get-contexts -o name 2>/dev/null\n"
	"end\n\n"
	"complete -c uplink -f\n"
	"complete -c uplink -n __uplink_at_command -s h -l help -d 'show the help'\n"
	"complete -c uplink -n __uplink_at_command -s V -l version -d \"show the client's "
	"version\"\n";

int comp_print_fish(FILE *f, const struct comp_cmd *cmds, size_t n)
{
	fprintf(f,
		"# fish completion for uplink %s, printed by `uplink completion fish` from its\n"
		"# command table. Install it where fish looks:\n"
		"#   uplink completion fish > ~/.config/fish/completions/uplink.fish\n\n%s",
		UPLINK_VERSION, fish_engine);
	for (size_t i = 0; i < n; i++)
		print_fish_word(f, cmds, i);
	for (size_t i = 0; i < n; i++)
		print_fish_cmd(f, &cmds[i]);
	return ferror(f) ? -EIO : 0;
}
